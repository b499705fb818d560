"""The fp32 arithmetic of SMAUG's SMV kernels, in their order of operations (spec §4).

fp16 × fp16 products are exact in fp32, so the only rounding inside a convolution or an
inner product is in the sums, and their order decides the last bit of an fp16 result.
Both kernels reduce the same way: per 32-channel block, the four 8-wide vectors of
products are added lane by lane (``((0 + p0) + p1) + p2) + p3``), the 8 lanes are added
in order, and the block's sum is added to the output-stationary fp32 partial sum; blocks
go in channel order within a channel tile, tiles in order (the partial sums stay in the
fp32 output scratchpad between invocations). A convolution visits, per channel tile,
kernel row, kernel column, then the channel blocks. Reproducing that order makes the
simulated outputs bit-identical to the real SMV runtime's.
"""

from __future__ import annotations

import numpy as np

VECTOR = 8  # lanes per vector
BLOCK = 32  # channels per PE step (4 vectors)
#: output elements × kernels handled at once (bounds the temporaries to ~16 MB)
CHUNK = 1 << 21


def add_blocks(acc: np.ndarray, x: np.ndarray, w: np.ndarray) -> None:
    """acc[p, k] += each 32-channel block of x[p, :]·w[k, :], in SMV's order (x, w: fp32 holding
    fp16 values; the last block is zero-extended, as the kernel reads zeros past the channels)."""
    channels = x.shape[1]
    rows = max(1, CHUNK // max(1, w.shape[0] * VECTOR))
    for start in range(0, channels, BLOCK):
        stop = min(start + BLOCK, channels)
        vectors = -(-(stop - start) // VECTOR)
        xs = _lanes(x[:, start:stop], vectors)  # [vectors, 8, P]
        ws = _lanes(w[:, start:stop], vectors)  # [vectors, 8, K]
        for r in range(0, x.shape[0], rows):
            xr = xs[:, :, r:r + rows, None]
            # [8, P, K]: ((0 + p0) + p1) + …, lane by lane. The kernel's "0 +" only turns a −0 into
            # +0, which the partial sum (+0 at its start) does anyway, so it is left out here.
            lanes = xr[0] * ws[0][:, None, :]
            product = np.empty_like(lanes)
            for m in range(1, vectors):
                np.multiply(xr[m], ws[m][:, None, :], out=product)
                lanes += product
            total = lanes[0]  # then the 8 lanes in order
            for lane in range(1, VECTOR):
                total += lanes[lane]
            acc[r:r + rows] += total


def _lanes(a: np.ndarray, vectors: int) -> np.ndarray:
    """[n, c] → [vectors, 8, n], zero-extended to whole vectors."""
    width = vectors * VECTOR
    if a.shape[1] != width:
        a = np.concatenate([a, np.zeros((a.shape[0], width - a.shape[1]), np.float32)], axis=1)
    return np.ascontiguousarray(a.T.reshape(vectors, VECTOR, a.shape[0]))


def matmul(x: np.ndarray, w: np.ndarray, segments: tuple[int, ...]) -> np.ndarray:
    """SMV inner product: x [N, C] · w [K, C]ᵀ, C cut into the weight tiles' channel ``segments``."""
    acc = np.zeros((x.shape[0], w.shape[0]), np.float32)
    start = 0
    for size in segments:
        add_blocks(acc, x[:, start:start + size], w[:, start:start + size])
        start += size
    return acc


def conv(x: np.ndarray, w: np.ndarray, out_hw: tuple[int, int], stride: tuple[int, int],
         segments: tuple[int, ...]) -> np.ndarray:
    """SMV convolution of an NHWC ``x`` already zero-padded (the halo) with ``w`` [K, kH, kW, C]:
    returns [N, Ho, Wo, K] fp32 partial sums in the kernel's order."""
    n = x.shape[0]
    k, kh, kw, _ = w.shape
    ho, wo = out_hw
    sh, sw = stride
    acc = np.zeros((n * ho * wo, k), np.float32)
    start = 0
    for size in segments:
        for r in range(kh):
            for c in range(kw):
                window = x[:, r:r + sh * (ho - 1) + 1:sh, c:c + sw * (wo - 1) + 1:sw, start:start + size]
                add_blocks(acc, window.reshape(n * ho * wo, size), w[:, r, c, start:start + size])
        start += size
    return acc.reshape(n, ho, wo, k)
