"""MaxPool with its Indices output as one pass over the input, and MaxPool's and AveragePool's
window maxima and sums (numba).

A training step asks for MaxPool's Indices every step (the backward scatters the gradient to the
positions they name), and the numpy path builds them with one whole-tensor compare-and-blend per
kernel tap. Here each window is scanned once, keeping the first greatest value and its flat
position, exactly as ``np.argmax`` over the window's taps in row-major order does — NaN included:
the first NaN of a window wins and is the window's maximum.
"""

from __future__ import annotations

import numpy as np
from numba import prange

from ..parallel import split
from ._core import block_bounds, jit, jit_parallel

_U = np.uint64


@jit
def _planes(x, y, indices, first, last, kh, kw, sh, sw, dh, dw):
    """Planes ``first``..``last`` of the (N·C, H, W) input into (N·C, OH, OW) maxima and indices.
    Taps in row-major order and a strict ``>`` keep the first greatest; a window's first NaN wins
    (once the best is NaN no comparison replaces it). Selects, not branches: on real data each
    comparison is a coin toss, and a mispredicted branch cost twice the whole loop."""
    height, width = x.shape[1], x.shape[2]
    for q in range(first, last):
        base = q * height * width
        for oh in range(y.shape[1]):
            for ow in range(y.shape[2]):
                r0, c0 = oh * sh, ow * sw
                best = x[q, r0, c0]
                at = r0 * width + c0
                for i in range(kh):
                    r = r0 + i * dh
                    for j in range(kw):
                        c = c0 + j * dw
                        v = x[q, r, c]
                        take = (v > best) | ((v != v) & (best == best))
                        best = v if take else best
                        at = r * width + c if take else at
                y[q, oh, ow] = best
                indices[q, oh, ow] = base + at


@jit
def _planes_2x2(x, y, indices, first, last):
    """``_planes`` for the common 2×2 window of stride 2 (a known trip count: a third faster)."""
    height, width = x.shape[1], x.shape[2]
    for q in range(first, last):
        base = q * height * width
        for oh in range(y.shape[1]):
            for ow in range(y.shape[2]):
                r0, c0 = 2 * oh, 2 * ow
                best = x[q, r0, c0]
                at = r0 * width + c0
                for i in range(2):
                    for j in range(2):
                        v = x[q, r0 + i, c0 + j]
                        take = (v > best) | ((v != v) & (best == best))
                        best = v if take else best
                        at = (r0 + i) * width + c0 + j if take else at
                y[q, oh, ow] = best
                indices[q, oh, ow] = base + at


def max_pool_2d_with_indices(x, y, indices, kernel, strides, dilations) -> None:
    """Fill ``y`` and ``indices`` (both (N·C, OH, OW)) from the unpadded (N·C, H, W) input ``x``,
    the planes split over the kernel threads."""
    (kh, kw), (sh, sw), (dh, dw) = kernel, strides, dilations
    per_plane = y.shape[1] * y.shape[2] * kh * kw
    if (kh, kw, sh, sw, dh, dw) == (2, 2, 2, 2, 1, 1):
        split(x.shape[0], per_plane, lambda lo, hi: _planes_2x2(x, y, indices, lo, hi), _planes_2x2_split, x, y,
              indices)
    else:
        split(x.shape[0], per_plane, lambda lo, hi: _planes(x, y, indices, lo, hi, kh, kw, sh, sw, dh, dw),
              _planes_split, x, y, indices, kh, kw, sh, sw, dh, dw)


@jit_parallel
def _planes_2x2_split(x, y, indices, count, step, parts):
    for p in prange(parts):
        first, last = block_bounds(count, step, parts, p)
        _planes_2x2(x, y, indices, first, last)


@jit_parallel
def _planes_split(x, y, indices, kh, kw, sh, sw, dh, dw, count, step, parts):
    for p in prange(parts):
        first, last = block_bounds(count, step, parts, p)
        _planes(x, y, indices, first, last, kh, kw, sh, sw, dh, dw)


@jit
def _combine(acc, src, off, n, maximum):
    """``acc[t] op= src[off + t]`` for t < n: np.maximum (NaN wins, a tie keeps ``src``'s value, so
    -0 and +0 come out as numpy's) or a float32 sum."""
    o = _U(off)  # flat unsigned indices, no views: numba counts references to each view
    if maximum:
        for t in range(_U(n)):
            m, v = acc[t], src[o + t]
            acc[t] = m if m > v or m != m else v
    else:
        for t in range(_U(n)):
            acc[t] += src[o + t]


@jit
def _pool_planes(x, count, y, first, last, kh, kw, sh, sw, dh, dw, top, left, maximum, from_zero):
    """Planes ``[first, last)`` of a pool of ``x (N·C, H, W)`` (``top`` rows and ``left`` columns
    of padding before, as much after as the windows reach) into ``y (N·C, OH, OW)``, as numpy's
    kernel computes it over its padded copy: the taps in row-major order, the first assigned
    (a sum started from +0 when ``from_zero``, as numpy's ``add.reduce`` of stacked taps is) and
    each next one combined (``_combine``), padding -inf for a max and +0 for a sum (which turns a
    -0 sum into +0 there, as numpy's does), an average then divided by ``count (OH, OW)``. Each
    plane is padded into one scratch plane whose padding is written once (the inside is the same
    positions for every plane); at stride 1 every tap is then one long contiguous run over the
    output rows, each ``Wp`` wide (``Wp - OW`` columns computed and dropped), else one contiguous
    run per output row over every column, of which each ``sw``-th is kept (a strided read ran one
    value at a time: a 3×3 stride-2 max pool was slower than numpy's)."""
    height, width = x.shape[1], x.shape[2]
    oh, ow = y.shape[1], y.shape[2]
    hp, wp = (oh - 1) * sh + (kh - 1) * dh + 1, (ow - 1) * sw + (kw - 1) * dw + 1
    scratch = np.full(hp * wp, np.float32(-np.inf) if maximum else np.float32(0), np.float32)
    rows, cols = min(height, hp - top), min(width, wp - left)
    start = np.float32(0) if from_zero else np.float32(-0.0)  # -0 + v is v, -0 too
    wide = sh == 1 and sw == 1
    span = (oh - 1) * wp + ow if wide else (ow - 1) * sw + 1
    acc = np.empty(span, np.float32)
    xf, yf, cf = x.reshape(x.size), y.reshape(y.size), count.reshape(count.size)
    for q in range(first, last):
        for i in range(rows):
            src, dest = _U((q * height + i) * width), _U((top + i) * wp + left)
            for j in range(_U(cols)):
                scratch[dest + j] = xf[src + j]
        for i in range(1 if wide else oh):
            row = _U(i * sh * wp)
            for t in range(_U(span)):
                acc[t] = scratch[row + t] if maximum else start + scratch[row + t]
            for a in range(kh):
                for b in range(kw):
                    if a or b:
                        _combine(acc, scratch, row + a * dh * wp + b * dw, span, maximum)
            for r in range(oh if wide else 1):
                out, o, step = _U((q * oh + i + r) * ow), _U(r * wp), _U(sw)
                for j in range(_U(ow)):
                    yf[out + j] = acc[o + j * step] if maximum else acc[o + j * step] / cf[(i + r) * ow + j]


_NO_COUNT = np.ones((1, 1), np.float32)


def pool_2d(x, count, kernel, strides, dilations, begin, out, from_zero: bool = False) -> np.ndarray:
    """The max pool (``count`` None) or average pool (``count (OH, OW)``, the float32 divisors; its
    sums started from +0 with ``from_zero``) of float32 ``x (N·C, H, W)`` (C-contiguous) padded by
    ``begin`` before (and to the windows' reach after), as ``(N·C, OH, OW)``, the planes shared
    over the kernel threads."""
    (kh, kw), (sh, sw), (dh, dw), (top, left) = kernel, strides, dilations, begin
    y = np.empty((x.shape[0], *out), np.float32)
    maximum, divisors = count is None, _NO_COUNT if count is None else count
    split(x.shape[0], out[0] * out[1] * kh * kw,
          lambda lo, hi: _pool_planes(x, divisors, y, lo, hi, kh, kw, sh, sw, dh, dw, top, left, maximum, from_zero),
          _pool_planes_split, x, divisors, y, kh, kw, sh, sw, dh, dw, top, left, maximum, from_zero)
    return y


@jit_parallel
def _pool_planes_split(x, count_, y, kh, kw, sh, sw, dh, dw, top, left, maximum, from_zero, count, step, parts):
    for p in prange(parts):
        first, last = block_bounds(count, step, parts, p)
        _pool_planes(x, count_, y, first, last, kh, kw, sh, sw, dh, dw, top, left, maximum, from_zero)
