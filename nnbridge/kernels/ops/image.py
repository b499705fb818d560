"""Image rearrangement and sampling: DepthToSpace, SpaceToDepth, Col2Im, GridSample, AffineGrid, CenterCropPad.

Rearrangements are reshape/transpose; Col2Im is a scatter-add per kernel tap;
GridSample gathers every interpolation tap (2^r linear, 4^r cubic) for all
output points at once with fancy indexing.
"""

from __future__ import annotations

import itertools

import numpy as np

from ...ir import DType, Node
from ..registry import kernel
from ._windows import FLOATS, WITH_BF16, compute_dtype, pad_spatial, prod, window_extent

ANY_NUMERIC = WITH_BF16 | {DType.INT8, DType.UINT8, DType.INT16, DType.UINT16, DType.INT32, DType.INT64,
                           DType.UINT32, DType.UINT64, DType.BOOL}


def _check_depth_to_space(node: Node, *, mode="DCR") -> str | None:
    return None if mode in ("DCR", "CRD") else f"mode={mode} is not implemented"


@kernel("DepthToSpace", dtypes=ANY_NUMERIC, check=_check_depth_to_space)
def depth_to_space(ctx, x, *, blocksize, mode="DCR"):
    b = int(blocksize)
    n, c, h, w = x.shape
    if mode == "DCR":
        y = x.reshape(n, b, b, c // (b * b), h, w).transpose(0, 3, 4, 1, 5, 2)
    else:
        y = x.reshape(n, c // (b * b), b, b, h, w).transpose(0, 1, 4, 2, 5, 3)
    return y.reshape(n, c // (b * b), h * b, w * b)


@kernel("SpaceToDepth", dtypes=ANY_NUMERIC)
def space_to_depth(ctx, x, *, blocksize):
    b = int(blocksize)
    n, c, h, w = x.shape
    y = x.reshape(n, c, h // b, b, w // b, b).transpose(0, 3, 5, 1, 2, 4)
    return y.reshape(n, c * b * b, h // b, w // b)


@kernel("Col2Im", dtypes=FLOATS)
def col2im(ctx, x, image_shape, block_shape, *, dilations=None, pads=None, strides=None):
    """Sum the columns ``(N, C*prod(block), L)`` back into ``(N, C, *image)`` (the adjoint of im2col)."""
    image = [int(v) for v in image_shape]
    block = [int(v) for v in block_shape]
    rank = len(image)
    strides = list(strides or [1] * rank)
    dilations = list(dilations or [1] * rank)
    pads = list(pads or [0] * (2 * rank))
    padded = [i + pads[a] + pads[rank + a] for a, i in enumerate(image)]
    out = [(p - window_extent(k, d)) // s + 1 for p, k, d, s in zip(padded, block, dilations, strides)]
    n = x.shape[0]
    c = x.shape[1] // prod(block)
    cols = x.reshape(n, c, *block, *out)
    acc = np.zeros((n, c, *padded), dtype=x.dtype)
    for tap in itertools.product(*(range(k) for k in block)):
        region = tuple(slice(t * d, t * d + s * (o - 1) + 1, s) for t, d, s, o in zip(tap, dilations, strides, out))
        acc[(slice(None), slice(None)) + region] += cols[(slice(None), slice(None)) + tap]
    return np.ascontiguousarray(pad_spatial(acc, [-p for p in pads[:rank]], [-p for p in pads[rank:]]))


_GRID_MODES = {"linear": "linear", "bilinear": "linear", "nearest": "nearest", "cubic": "cubic", "bicubic": "cubic"}


def _check_grid_sample(node: Node, *, mode="linear", padding_mode="zeros") -> str | None:
    if mode not in _GRID_MODES:
        return f"mode={mode} is not implemented"
    if padding_mode not in ("zeros", "border", "reflection"):
        return f"padding_mode={padding_mode} is not implemented"
    return None


def _reflect(x: np.ndarray, lo: float, hi: float) -> np.ndarray:
    """Fold x into [lo, hi] by reflecting at the borders (repeatedly)."""
    span = hi - lo
    if span <= 0:
        return np.full_like(x, lo)
    below, above = x < lo, x > hi
    dist = np.where(below, lo - x, x - hi)
    folds = np.floor(dist / span)
    rest = dist - folds * span
    even = folds % 2 == 0
    low_side = np.where(even, lo + rest, hi - rest)
    high_side = np.where(even, hi - rest, lo + rest)
    return np.where(below, low_side, np.where(above, high_side, x))


def _cubic_weights(t: np.ndarray) -> list[np.ndarray]:
    a = -0.75

    def near(u):
        return ((a + 2) * u - (a + 3)) * u * u + 1

    def far(u):
        return ((a * u - 5 * a) * u + 8 * a) * u - 4 * a

    return [far(t + 1), near(t), near(1 - t), far(2 - t)]


@kernel("GridSample", dtypes=FLOATS, check=_check_grid_sample)
def grid_sample(ctx, x, grid, *, align_corners=0, mode="linear", padding_mode="zeros"):
    mode = _GRID_MODES[mode]
    padding = padding_mode
    align = bool(align_corners)
    dims = x.shape[2:]
    rank = len(dims)
    dt = compute_dtype(grid.dtype)
    g = grid.astype(dt, copy=False)
    # taps per spatial axis: ((index, valid), weight); the grid's last axis holds (x, y, z), i.e. reversed
    taps_per_axis = []
    for axis, size in enumerate(dims):
        v = g[..., rank - 1 - axis]
        coord = (v + 1) / 2 * (size - 1) if align else ((v + 1) * size - 1) / 2
        lo, hi = (0.0, size - 1.0) if align else (-0.5, size - 0.5)
        if mode == "nearest":
            coord = np.rint(coord)
        if padding == "border":  # only points beyond the border band [lo, hi] move (matters for cubic taps)
            coord = np.where((coord < lo) | (coord > hi), np.clip(coord, 0, size - 1), coord)
        elif padding == "reflection":
            coord = _reflect(coord, lo, hi)
        if mode == "nearest":
            taps = [(coord.astype(np.int64), None)]
        else:
            base = np.floor(coord)
            t = coord - base
            base = base.astype(np.int64)
            weights = [1 - t, t] if mode == "linear" else _cubic_weights(t)
            first = 0 if mode == "linear" else -1
            taps = [(base + first + k, w) for k, w in enumerate(weights)]
        taps_per_axis.append([(_pixel_index(i, size, padding, lo, hi), w) for i, w in taps])
    xc = x.astype(dt, copy=False)
    n_index = np.arange(x.shape[0]).reshape((-1,) + (1,) * (grid.ndim - 2))
    out = np.zeros(grid.shape[:-1] + (x.shape[1],), dtype=dt)
    for combo in itertools.product(*taps_per_axis):
        valid = np.logical_and.reduce([ok for (_, ok), _ in combo])
        weight = valid.astype(dt)
        for _, w in combo:
            if w is not None:
                weight = weight * w
        # advanced indices around a slice put the indexed axes first: (N, *out, C)
        picked = xc[(n_index, slice(None)) + tuple(i for (i, _), _ in combo)]
        out += picked * weight[..., None]
    return np.moveaxis(out, -1, 1).astype(x.dtype, copy=False)


def _pixel_index(index: np.ndarray, size: int, padding: str, lo: float, hi: float):
    """(index clamped into range, validity mask): zeros padding reads 0 outside the image."""
    if padding == "border":
        return np.clip(index, 0, size - 1), np.ones(index.shape, bool)
    if padding == "reflection":
        folded = np.trunc(_reflect(index.astype(np.float64), lo, hi)).astype(np.int64)
        return np.clip(folded, 0, size - 1), np.ones(index.shape, bool)
    valid = (index >= 0) & (index < size)
    return np.clip(index, 0, size - 1), valid


@kernel("AffineGrid", dtypes=FLOATS)
def affine_grid(ctx, theta, size, *, align_corners=0):
    """Sampling grid ``(N, *spatial, r)`` of normalized coordinates transformed by ``theta``."""
    dims = [int(v) for v in np.asarray(size).reshape(-1)[2:]]
    align = bool(align_corners)
    dt = compute_dtype(theta.dtype)

    def axis_coords(n: int) -> np.ndarray:
        if align:
            return np.linspace(-1, 1, n) if n > 1 else np.zeros(1)
        return (np.arange(n) * 2 + 1) / n - 1

    axes = [axis_coords(n) for n in dims]
    mesh = np.meshgrid(*axes, indexing="ij")
    # homogeneous (x, y, [z], 1): x runs along the last spatial axis
    base = np.stack([m for m in reversed(mesh)] + [np.ones(dims)], axis=-1).astype(dt)
    out = np.einsum("...k,njk->n...j", base, theta.astype(dt, copy=False))
    return out.astype(theta.dtype, copy=False)


@kernel("CenterCropPad", dtypes=ANY_NUMERIC)
def center_crop_pad(ctx, x, shape, *, axes=None):
    axes = [a % x.ndim for a in (axes or range(x.ndim))]
    target = list(x.shape)
    for a, v in zip(axes, np.asarray(shape).reshape(-1)):
        target[a] = int(v)
    out = np.zeros(target, dtype=x.dtype)
    src, dst = [], []
    for size, want in zip(x.shape, target):
        if want <= size:
            start = (size - want) // 2
            src.append(slice(start, start + want))
            dst.append(slice(None))
        else:
            start = (want - size) // 2
            src.append(slice(None))
            dst.append(slice(start, start + size))
    out[tuple(dst)] = x[tuple(src)]
    return out
