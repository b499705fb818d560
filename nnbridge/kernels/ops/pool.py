"""Pooling: MaxPool (with Indices), AveragePool, LpPool, their Global* forms, MaxUnpool.

Windows are strided views of the padded input (``_windows.windows``); the
reduction loops over kernel taps only, each step a whole-tensor numpy op.
AveragePool divides by a per-window count obtained by pooling a 0/1 mask of
the spatial grid the same way, which handles count_include_pad and ceil_mode
uniformly.
"""

from __future__ import annotations

import functools
import itertools
import math

import numpy as np

from ...ir import DType, Node
from .. import compiled
from ..registry import KernelFn, kernel
from ._common import static_shape
from ._windows import (
    FLOATS,
    check_auto_pad,
    compute_dtype,
    frozen,
    gather,
    pad_spatial,
    padded_positions,
    window_extent,
    window_geometry,
    windows,
)
from .reduce import trailing_mean

MAX_TYPES = FLOATS | {DType.INT8, DType.UINT8}
#: a pool whose taps hold at most this many elements gathers them with one take through an index
#: kept per input shape and window, then sums them over the taps in the same order (measured:
#: PoolFormer's 3×3 pool of a 16×8×8 map 44 µs tap by tap over a padded copy, 13 µs gathered)
SMALL_TAPS = 1 << 15
#: a float32 2-D max or average pool of at least this many tap reads runs the compiled loops
#: (PoolFormer's 3×3 average pools over 64×56×56: 541 → 204 µs; DenseNet's 3×3 stride-2 max pool)
COMPILED_TAPS = 1 << 12


class PoolGeometry:
    """Padding, output size and ceil-mode extension of one pooling node applied to one input shape."""

    def __init__(self, sizes, kernel_shape, auto_pad: str, ceil_mode: int, dilations, pads, strides):
        self.kernel = list(kernel_shape)
        self.strides, self.dilations, self.begin, self.end, self.out = window_geometry(
            sizes, self.kernel, auto_pad, dilations, pads, strides, bool(ceil_mode))
        # ceil mode may need more trailing padding than the declared pads
        self.extra = [max(0, (o - 1) * s + window_extent(k, d) - (n + b + e))
                      for o, s, k, d, n, b, e in zip(self.out, self.strides, self.kernel, self.dilations, sizes,
                                                     self.begin, self.end)]
        self.padded_end = [e + x_ for e, x_ in zip(self.end, self.extra)]

    def padded(self, x: np.ndarray, value) -> np.ndarray:
        return pad_spatial(x, self.begin, self.padded_end, value)

    def taps(self, xp: np.ndarray):
        """Yield one strided (N, C, *out) view per kernel tap."""
        view = windows(xp, self.out, self.kernel, self.strides, self.dilations)
        lead = (slice(None),) * (xp.ndim - len(self.kernel) + len(self.out))
        for tap in itertools.product(*(range(k) for k in self.kernel)):
            yield view[lead + tap]


def _check_pool(node: Node, *, auto_pad="NOTSET", kernel_shape) -> str | None:
    return check_auto_pad(auto_pad) or _check_unpool(node, kernel_shape=kernel_shape)


def _check_unpool(node: Node, *, kernel_shape) -> str | None:
    if not kernel_shape:
        return "kernel_shape is empty"
    x = node.input(0)
    if x is not None and x.type.rank is not None and x.type.rank < 3:
        return f"input of rank {x.type.rank}"
    return None


def _lowest(dtype: np.dtype):
    return -np.inf if dtype.kind == "f" else np.iinfo(dtype).min


@kernel("MaxPool", dtypes=MAX_TYPES, check=_check_pool)
def max_pool(ctx, x, *, auto_pad="NOTSET", ceil_mode=0, dilations=None, kernel_shape, pads=None, storage_order=0,
             strides=None):
    geo = PoolGeometry(x.shape[2:], kernel_shape, auto_pad, ceil_mode, dilations, pads, strides)
    if len(ctx.node.outputs) < 2:
        y = _compiled_pool(x, geo, None)  # np.maximum's values, NaN and signed zeros included
        if y is not None:
            return y
    xp = geo.padded(x, _lowest(x.dtype))
    if len(ctx.node.outputs) < 2:
        taps = geo.taps(xp)
        y = np.array(next(taps))
        for tap in taps:
            np.maximum(y, tap, out=y)
        return y
    return _max_pool_with_indices(x, xp, geo, storage_order)


#: the element types the compiled MaxPool-with-Indices loop is built for (the common float ones)
_COMPILED_TYPES = (np.dtype(np.float32), np.dtype(np.float64))


def _max_pool_with_indices(x, xp, geo: PoolGeometry, storage_order: int):
    """Max and its flat input index (row-major, or column-major over the spatial axes for storage_order=1)."""
    unpadded = not int(storage_order) and not any(geo.begin) and not any(geo.end) and not any(geo.extra)
    fast = compiled.load("pool") if unpadded and len(geo.kernel) == 2 and x.dtype in _COMPILED_TYPES else None
    if fast is not None:
        y = np.empty((x.shape[0] * x.shape[1], *geo.out), x.dtype)
        indices = np.empty(y.shape, np.int64)
        fast.max_pool_2d_with_indices(np.ascontiguousarray(x).reshape(-1, *x.shape[2:]), y, indices, geo.kernel,
                                      geo.strides, geo.dilations)
        return y.reshape(*x.shape[:2], *geo.out), indices.reshape(*x.shape[:2], *geo.out)
    if unpadded and not (x.dtype.kind == "f" and np.isnan(x).any()):
        return _max_pool_with_indices_by_taps(x, geo)
    return _max_pool_with_indices_by_windows(x, xp, geo, storage_order)


def _max_pool_with_indices_by_windows(x, xp, geo: PoolGeometry, storage_order: int):
    """Any geometry: argmax over each window's copied taps."""
    rank = len(geo.kernel)
    view = windows(xp, geo.out, geo.kernel, geo.strides, geo.dilations)
    flat = view.reshape(*view.shape[:2 + rank], -1)
    best = np.argmax(flat, axis=-1)
    y = np.take_along_axis(flat, best[..., None], axis=-1)[..., 0]
    taps = np.unravel_index(best, geo.kernel)
    sizes = x.shape[2:]
    coords = []
    for axis in range(rank):
        grid = np.arange(geo.out[axis]).reshape([-1 if a == axis else 1 for a in range(rank)])
        coords.append(grid * geo.strides[axis] - geo.begin[axis] + taps[axis] * geo.dilations[axis])
    order = "F" if int(storage_order) else "C"
    spatial = np.ravel_multi_index(tuple(coords), sizes, order=order, mode="clip")
    channel = np.arange(x.shape[0] * x.shape[1]).reshape(x.shape[0], x.shape[1], *([1] * rank))
    return y, (channel * int(np.prod(sizes)) + spatial).astype(np.int64)


def _max_pool_with_indices_by_taps(x, geo: PoolGeometry):
    """Unpadded, row-major, NaN-free: one pass per kernel tap over strided views (as the plain max does),
    keeping the first greatest value and its tap's flat offset — no window copy, no argmax over
    tiny rows (a training step's MaxPool backward asks for this every step)."""
    rank = len(geo.kernel)
    sizes = x.shape[2:]
    flat_step = [int(np.prod(sizes[axis + 1:])) for axis in range(rank)]
    taps = geo.taps(x)
    y = np.array(next(taps))
    offset = np.zeros(y.shape, np.int64)
    for tap, view in zip(itertools.islice(itertools.product(*(range(k) for k in geo.kernel)), 1, None), taps):
        better = view > y  # blends, not masked copies: a half-true mask makes those branch badly
        offset = np.where(better, sum(t * d * f for t, d, f in zip(tap, geo.dilations, flat_step)), offset)
        np.maximum(y, view, out=y)
    start = sum(np.arange(o).reshape([-1 if a == axis else 1 for a in range(rank)]) * s * f
                for axis, (o, s, f) in enumerate(zip(geo.out, geo.strides, flat_step)))
    channel = np.arange(x.shape[0] * x.shape[1]).reshape(x.shape[0], x.shape[1], *([1] * rank))
    offset += channel * int(np.prod(sizes)) + start
    return y, offset


@kernel("AveragePool", dtypes=FLOATS, check=_check_pool)
def average_pool(ctx, x, *, auto_pad="NOTSET", ceil_mode=0, count_include_pad=0, dilations=None, kernel_shape,
                 pads=None, strides=None):
    dt = compute_dtype(x.dtype)
    window = (auto_pad, int(ceil_mode), _tuple(dilations), tuple(kernel_shape), _tuple(pads), _tuple(strides))
    geo, count = _average_divisors(x.shape[2:], window, int(count_include_pad), dt)
    y = _compiled_pool(x, geo, count)  # each value's taps in the same order: bit for bit
    if y is not None:
        return y
    if x.size * math.prod(geo.kernel) <= SMALL_TAPS:  # every tap's view at once: (taps, N, C, *out)
        total = np.add.reduce(gather(x.astype(dt, copy=False), _tap_index(x.shape, window), 0), axis=0)
    else:
        total = _sum_taps(geo, geo.padded(x.astype(dt, copy=False), 0))
    return (total / count).astype(x.dtype, copy=False)


@functools.lru_cache(maxsize=64)
def _tap_index(shape: tuple, window: tuple) -> np.ndarray:
    """Where each tap's view of a pool over ``shape`` reads (``gather``'s index), taps first."""
    auto_pad, ceil_mode, dilations, kernel_shape, pads, strides = window
    geo = PoolGeometry(shape[2:], kernel_shape, auto_pad, ceil_mode, dilations, pads, strides)
    return frozen(np.stack(list(geo.taps(padded_positions(shape, geo.begin, geo.padded_end)))))


def _compiled_pool(x: np.ndarray, geo: PoolGeometry, count: np.ndarray | None) -> np.ndarray | None:
    """A float32 2-D max pool (``count`` None) or average pool (its divisors ``count``) of at least
    ``COMPILED_TAPS`` tap reads through the compiled loops, once another kernel has brought numba in
    (a LeNet's pools never import it); None where they do not apply. The sums start from +0 where
    the numpy kernel's stacked taps do (``SMALL_TAPS``)."""
    reads = x.size * math.prod(geo.kernel)
    if x.dtype != np.float32 or x.ndim != 4 or reads < COMPILED_TAPS or min(geo.begin) < 0:
        return None
    fast = compiled.loaded("pool")
    if fast is None:
        return None
    y = fast.pool_2d(np.ascontiguousarray(x).reshape(-1, *x.shape[2:]), count, geo.kernel, geo.strides,
                     geo.dilations, geo.begin, geo.out, from_zero=reads <= SMALL_TAPS)
    return y.reshape(*x.shape[:2], *geo.out)


def _tuple(values) -> tuple | None:
    return None if values is None else tuple(values)


@functools.lru_cache(maxsize=1024)
def _average_divisors(sizes: tuple, window: tuple, count_include_pad: int, dt: np.dtype
                      ) -> tuple[PoolGeometry, np.ndarray]:
    """The geometry and per-window divisors (at least 1) of an average pool over ``sizes``: the
    pooled mask of counted positions (the input, plus the declared pads with
    ``count_include_pad``), which depends on the shape only, so it is pooled once per shape (it
    cost as much as the pool itself)."""
    auto_pad, ceil_mode, dilations, kernel_shape, pads, strides = window
    geo = PoolGeometry(sizes, kernel_shape, auto_pad, ceil_mode, dilations, pads, strides)
    if count_include_pad:
        mask = pad_spatial(np.ones([n + b + e for n, b, e in zip(sizes, geo.begin, geo.end)], dt),
                           [0] * len(sizes), geo.extra)
    else:
        mask = geo.padded(np.ones(sizes, dt), 0)
    count = np.maximum(_sum_taps(geo, mask), 1)
    count.flags.writeable = False  # shared by every later call
    return geo, count


def _sum_taps(geo: PoolGeometry, xp: np.ndarray) -> np.ndarray:
    taps = geo.taps(xp)
    y = np.array(next(taps))
    for tap in taps:
        y += tap
    return y


@kernel("LpPool", dtypes=FLOATS, check=_check_pool)
def lp_pool(ctx, x, *, auto_pad="NOTSET", ceil_mode=0, dilations=None, kernel_shape, p=2, pads=None, strides=None):
    dt = compute_dtype(x.dtype)
    p = float(p)
    geo = PoolGeometry(x.shape[2:], kernel_shape, auto_pad, ceil_mode, dilations, pads, strides)
    powered = np.abs(x.astype(dt, copy=False)) ** dt.type(p)
    return (_sum_taps(geo, geo.padded(powered, 0)) ** dt.type(1 / p)).astype(x.dtype, copy=False)


def _spatial_axes(x: np.ndarray) -> tuple[int, ...]:
    return tuple(range(2, x.ndim))


def _prepare_global_average(node: Node, consts: tuple) -> KernelFn | None:
    shape = static_shape(node, 0)
    if shape is None or len(shape) < 3:
        return None
    return trailing_mean(global_average_pool, node, {}, list(range(2, len(shape))), True)


@kernel("GlobalAveragePool", dtypes=FLOATS, prepare=_prepare_global_average)
def global_average_pool(ctx, x):
    if x.dtype == np.float32 and x.flags.c_contiguous and x.size:
        fast = compiled.loaded("reduce")
        out = None if fast is None else fast.trailing_mean(x, x.ndim - 2)  # numpy's sum: bit for bit
        if out is not None:
            return out
    dt = compute_dtype(x.dtype)
    return x.mean(axis=_spatial_axes(x), keepdims=True, dtype=dt).astype(x.dtype, copy=False)


@kernel("GlobalMaxPool", dtypes=MAX_TYPES)
def global_max_pool(ctx, x):
    return x.max(axis=_spatial_axes(x), keepdims=True)


@kernel("GlobalLpPool", dtypes=FLOATS)
def global_lp_pool(ctx, x, *, p=2):
    dt = compute_dtype(x.dtype)
    p = float(p)
    s = (np.abs(x.astype(dt, copy=False)) ** dt.type(p)).sum(axis=_spatial_axes(x), keepdims=True)
    return (s ** dt.type(1 / p)).astype(x.dtype, copy=False)


@kernel("MaxUnpool", dtypes=FLOATS | {DType.INT8, DType.UINT8, DType.INT32, DType.INT64}, check=_check_unpool)
def max_unpool(ctx, x, indices, output_shape=None, *, kernel_shape, pads=None, strides=None):
    """Indices address the inferred (pre-pooling) shape; an explicit output_shape places it top-left."""
    rank = x.ndim - 2
    kernel_ = kernel_shape
    strides = list(strides or [1] * rank)
    pads = list(pads or [0] * (2 * rank))
    inferred = list(x.shape[:2]) + [(n - 1) * s + k - pads[i] - pads[rank + i]
                                    for i, (n, s, k) in enumerate(zip(x.shape[2:], strides, kernel_))]
    y = np.zeros(int(np.prod(inferred)), dtype=x.dtype)
    y[indices.reshape(-1)] = x.reshape(-1)
    y = y.reshape(inferred)
    if output_shape is None:
        return y
    out = np.zeros([int(d) for d in output_shape], dtype=x.dtype)
    common = tuple(slice(0, min(a, b)) for a, b in zip(inferred, out.shape))
    out[common] = y[common]
    return out
