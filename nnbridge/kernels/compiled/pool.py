"""MaxPool with its Indices output as one pass over the input (numba).

A training step asks for MaxPool's Indices every step (the backward scatters the gradient to the
positions they name), and the numpy path builds them with one whole-tensor compare-and-blend per
kernel tap. Here each window is scanned once, keeping the first greatest value and its flat
position, exactly as ``np.argmax`` over the window's taps in row-major order does — NaN included:
the first NaN of a window wins and is the window's maximum.
"""

from __future__ import annotations

from ..parallel import grain, run_blocks
from ._core import jit


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
        run_blocks(x.shape[0], lambda lo, hi: _planes_2x2(x, y, indices, lo, hi), grain(per_plane))
    else:
        run_blocks(x.shape[0], lambda lo, hi: _planes(x, y, indices, lo, hi, kh, kw, sh, sw, dh, dw),
                   grain(per_plane))
