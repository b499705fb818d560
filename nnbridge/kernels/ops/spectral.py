"""DFT with numpy's FFT: complex values travel as a trailing [real, imag] axis,
as ONNX represents them; float64 inputs transform in double precision, the
others in single (numpy's FFT keeps float32 precision, like other runtimes)."""

from __future__ import annotations

import numpy as np

from ...base.errors import Unsupported, UnsupportedOpError
from ..registry import kernel
from ._common import FLOATS, axis_of


def _complex(x: np.ndarray) -> np.ndarray:
    real = np.float64 if x.dtype == np.float64 else np.float32
    z = np.empty(x.shape[:-1], dtype=np.complex128 if real is np.float64 else np.complex64)
    z.real = x[..., 0]
    z.imag = x[..., 1] if x.shape[-1] == 2 else 0
    return z


def _pair(z: np.ndarray, dtype: np.dtype) -> np.ndarray:
    return np.stack([z.real, z.imag], axis=-1).astype(dtype)


def _check_dft(node, *, inverse=0, onesided=0):
    shape = node.inputs[0].type.shape
    if onesided and not inverse and shape and shape[-1] == 2:
        return "a one-sided forward DFT of a complex input is not defined"
    return None


@kernel("DFT", dtypes=FLOATS, check=_check_dft)
def dft(ctx, x, dft_length=None, axis=None, *, inverse=0, onesided=0):
    """Full DFT / inverse; RFFT (onesided forward, real input); IRFFT (onesided inverse)."""
    signal_rank = x.ndim - 1
    axis = axis_of(int(np.asarray(axis).reshape(-1)[0]) if axis is not None else -2, x.ndim)
    if axis >= signal_rank:
        raise ValueError("the last axis holds [real, imag] and cannot be transformed")
    n = None if dft_length is None else int(np.asarray(dft_length).reshape(-1)[0])
    z = _complex(x)
    if onesided and inverse:  # IRFFT: one-sided spectrum in, real signal out
        if n is not None and n != 2 * (z.shape[axis] - 1):
            node = ctx.node
            raise UnsupportedOpError("the reference backend", [Unsupported(
                node.op, node.name, "an inverse one-sided DFT with a non-default dft_length is ambiguous")])
        return np.fft.irfft(z, n=2 * (z.shape[axis] - 1), axis=axis)[..., None].astype(x.dtype)
    if onesided:
        if x.shape[-1] != 1:
            raise ValueError("a one-sided forward DFT takes a real input")
        return _pair(np.fft.rfft(z.real, n=n, axis=axis), x.dtype)
    transform = np.fft.ifft if inverse else np.fft.fft
    return _pair(transform(z, n=n, axis=axis), x.dtype)


def _check_stft(node, *, onesided=1):
    shape = node.inputs[0].type.shape
    if onesided and shape and shape[-1] == 2:
        return "a one-sided STFT of a complex signal is not defined"
    return None


@kernel("STFT", dtypes=FLOATS, check=_check_stft)
def stft(ctx, signal, frame_step, window=None, frame_length=None, *, onesided=1):
    """DFT of every windowed frame; frames are strided views of the signal (no copies)."""
    step = int(np.asarray(frame_step).reshape(-1)[0])
    if frame_length is not None:
        length = int(np.asarray(frame_length).reshape(-1)[0])
    else:
        length = window.shape[0] if window is not None else signal.shape[1]
    if window is not None and window.shape[0] != length:
        raise ValueError(f"window of length {window.shape[0]} for frames of {length}")
    z = _complex(signal)  # [batch, signal_length]
    frames = np.lib.stride_tricks.sliding_window_view(z, length, axis=1)[:, ::step]  # [batch, frames, length]
    if window is not None:
        frames = frames * window.astype(z.real.dtype)
    if onesided:
        return _pair(np.fft.rfft(frames.real, axis=-1), signal.dtype)
    return _pair(np.fft.fft(frames, axis=-1), signal.dtype)
