"""Softmax, LogSoftmax and Hardmax along one axis (opset >= 13 semantics), numerically stable."""

from __future__ import annotations

import numpy as np

from .. import compiled
from ..parallel import run_blocks
from ..registry import kernel
from ._windows import FLOATS, WITH_BF16, compute_dtype
from .fastmath import CHUNK


def _shift(peak: np.ndarray) -> np.ndarray:
    """What to subtract so that exp never overflows: the max, or 0 where the max is ±inf or NaN."""
    return np.where(np.isfinite(peak), peak, 0)


def _shifted(x: np.ndarray, axis: int) -> np.ndarray:
    """x minus its max along ``axis``."""
    return x - _shift(np.max(x, axis=axis, keepdims=True))


@kernel("Softmax", dtypes=WITH_BF16)
def softmax(ctx, x, *, axis=-1):
    if x.size == 0:
        return x.copy()
    if x.dtype == np.float32 and axis in (-1, x.ndim - 1):
        return _softmax_rows(x)
    # fp16 stays in fp16 (rounded per step, as ONNX's own definition computes it); bf16 goes through fp32
    work = x if x.dtype == np.float16 else x.astype(compute_dtype(x.dtype), copy=False)
    if axis in (-1, x.ndim - 1):
        return _softmax_rows(work).astype(x.dtype, copy=False)
    e = np.exp(_shifted(work, axis))
    e /= e.sum(axis=axis, keepdims=True)
    return e.astype(x.dtype, copy=False)


def _softmax_rows(x: np.ndarray) -> np.ndarray:
    """Softmax along the last axis, a block of rows at a time: each block's shift, exp, sum and
    division run while it is in cache (a quarter-million elements, as fastmath.CHUNK), where the
    whole-tensor form streams every step through memory (Whisper's 6×1500×1500 attention: 18.6
    against 24.6 ms). The same operations in the same order, so the same values; blocks are shared
    out over the kernel threads."""
    width = x.shape[-1]
    rows = x.reshape(-1, width)
    out = np.empty(rows.shape, x.dtype)
    fast = compiled.loaded("reduce") if x.dtype == np.float32 and rows.size <= CHUNK else None
    if fast is not None and width <= fast.TWO_BLOCKS:  # the shift and the sums compiled (the same operations)
        fast.softmax_rows(np.ascontiguousarray(rows), out)
        return out.reshape(x.shape)
    step = max(1, CHUNK // width)

    def blocks(first: int, last: int) -> None:
        for start in range(first, last, step):
            block, into = rows[start:min(start + step, last)], out[start:min(start + step, last)]
            np.subtract(block, _shift(block.max(axis=1, keepdims=True)), out=into)
            np.exp(into, out=into)
            into /= into.sum(axis=1, keepdims=True)

    run_blocks(rows.shape[0], blocks, step=step)
    return out.reshape(x.shape)


def log_softmax_along(x: np.ndarray, axis: int) -> np.ndarray:
    """log(softmax(x)) without forming the softmax (no log of an underflowed 0)."""
    if x.size == 0:
        return x.copy()
    s = _shifted(x, axis)
    return s - np.log(np.exp(s).sum(axis=axis, keepdims=True))


@kernel("LogSoftmax", dtypes=WITH_BF16)
def log_softmax(ctx, x, *, axis=-1):
    return log_softmax_along(x.astype(compute_dtype(x.dtype), copy=False), axis).astype(x.dtype)


@kernel("Hardmax", dtypes=FLOATS)
def hardmax(ctx, x, *, axis=-1):
    y = np.zeros_like(x)
    if x.size:
        np.put_along_axis(y, np.expand_dims(np.argmax(x, axis=axis), axis), 1, axis=axis)
    return y
