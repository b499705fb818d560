"""Indexing ops: Slice, the Gather and Scatter families, Compress, NonZero,
Trilu and ReverseSequence, all as numpy fancy indexing (no element loops).
"""

from __future__ import annotations

import numpy as np

from ...base.errors import KernelError
from ..registry import kernel
from ._common import all_constant, axes_of, axis_of, ints, static_shape


def slice_bounds(dim: int, start: int, end: int, step: int) -> slice:
    """ONNX Slice bounds on one axis: negatives count from the end, then clamp
    to [0, dim] (positive step) or [-1, dim-1] (negative step, -1 = before 0)."""
    if step == 0:
        raise ValueError("slice step must not be 0")
    start = start + dim if start < 0 else start
    end = end + dim if end < 0 else end
    if step > 0:
        return slice(min(max(start, 0), dim), min(max(end, 0), dim), step)
    start, end = min(max(start, -1), dim - 1), min(max(end, -1), dim - 1)
    if start < 0:
        return slice(0, 0)
    return slice(start, None if end < 0 else end, step)


def _slice_index(shape: tuple[int, ...], starts, ends, axes, steps) -> tuple[slice, ...]:
    starts, ends = ints(starts), ints(ends)
    axes = axes_of(ints(axes), len(shape)) if axes is not None else tuple(range(len(starts)))
    steps = ints(steps) if steps is not None else [1] * len(starts)
    index = [slice(None)] * len(shape)
    for axis, start, end, step in zip(axes, starts, ends, steps):
        index[axis] = slice_bounds(shape[axis], start, end, step)
    return tuple(index)


def _prepare_slice(node, consts):
    """A static input sliced by constant bounds: the index is worked out once."""
    shape = static_shape(node, 0)
    if shape is None or not all_constant(node, consts):
        return None
    try:
        index = _slice_index(shape, *(consts[1:] + (None,) * 4)[:4])
    except (ValueError, IndexError):  # not prepared: the kernel reports it when the node runs
        return None

    def run(ctx, x, *bounds):
        return x[index] if x.shape == shape else slice_(ctx, x, *bounds)

    return run


@kernel("Slice", prepare=_prepare_slice)
def slice_(ctx, x, starts=None, ends=None, axes=None, steps=None):
    return x[_slice_index(x.shape, starts, ends, axes, steps)]


def _wrap(indices: np.ndarray, dim: int | np.ndarray, ctx) -> np.ndarray:
    """Negative indices count from the end; anything outside [-dim, dim) is refused, as onnxruntime
    refuses it (numpy would wrap or clip)."""
    indices = np.asarray(indices, dtype=np.int64)
    if indices.size and np.ndim(dim) == 0 and 0 <= indices.min() and indices.max() < dim:
        return indices  # the common case in two reductions, no masks (MaxPool's gradient scatters 10⁵ a step)
    outside = (indices < -dim) | (indices >= dim)
    if indices.size and outside.any():
        bad = indices[outside].reshape(-1)[0] if np.ndim(dim) == 0 else \
            indices[outside.any(axis=-1)].reshape(-1, indices.shape[-1])[0].tolist()
        raise KernelError(f"node '{ctx.node.name}' ({ctx.node.op}): index {bad} is out of range for "
                          f"{'a dim of ' if np.ndim(dim) == 0 else 'dims '}{np.asarray(dim).tolist()}")
    return np.where(indices < 0, indices + dim, indices)


@kernel("Gather")
def gather(ctx, x, indices, *, axis=0):
    try:  # numpy's take counts negative indices from the end and refuses the rest, as ONNX does
        return np.take(x, indices, axis=axis)
    except IndexError:  # out of range (an AxisError is one too): say which, as onnxruntime does
        axis = axis_of(axis, x.ndim)
        return np.take(x, _wrap(indices, x.shape[axis], ctx), axis=axis)


@kernel("GatherElements")
def gather_elements(ctx, x, indices, *, axis=0):
    try:  # numpy's indexing counts negative indices from the end and refuses the rest, as ONNX does
        return np.take_along_axis(x, indices, axis=axis)
    except IndexError:  # say which is out of range (or the axis), as gather does
        axis = axis_of(axis, x.ndim)
        return np.take_along_axis(x, _wrap(indices, x.shape[axis], ctx), axis=axis)


@kernel("GatherND")
def gather_nd(ctx, x, indices, *, batch_dims=0):
    """Batch dims are flattened to one, then each index tuple picks a slice."""
    b = batch_dims
    k = indices.shape[-1]
    batch = x.shape[:b]
    nbatch = int(np.prod(batch, dtype=np.int64))
    data = x.reshape((nbatch, *x.shape[b:]))
    idx = _wrap(indices.reshape(nbatch, -1, k), np.array(x.shape[b:b + k], dtype=np.int64), ctx)
    picked = data[(np.arange(nbatch)[:, None], *np.moveaxis(idx, -1, 0))]
    return picked.reshape((*batch, *indices.shape[b:-1], *x.shape[b + k:]))


_SCATTER_REDUCTIONS = {"add": np.add, "mul": np.multiply, "max": np.maximum, "min": np.minimum}


def _check_reduction(node, *, reduction="none"):
    if reduction != "none" and reduction not in _SCATTER_REDUCTIONS:
        return f"reduction {reduction!r} is not implemented"
    return None


def _scatter(out: np.ndarray, where: tuple, updates: np.ndarray, reduction: str) -> np.ndarray:
    if reduction == "none":
        out[where] = updates
    else:  # ufunc.at applies repeated indices one after another
        _SCATTER_REDUCTIONS[reduction].at(out, where, updates)
    return out


def _element_index(indices: np.ndarray, axis: int, dim: int, ctx) -> tuple:
    """Full index tuple addressing data at ``indices`` along ``axis``, identity elsewhere."""
    grids = list(np.indices(indices.shape, sparse=True))
    grids[axis] = _wrap(indices, dim, ctx)
    return tuple(grids)


@kernel("ScatterElements", check=_check_reduction)
def scatter_elements(ctx, x, indices, updates, *, axis=0, reduction="none"):
    axis = axis_of(axis, x.ndim)
    where = _element_index(indices, axis, x.shape[axis], ctx)
    return _scatter(x.copy(), where, updates, reduction)


@kernel("Scatter")
def scatter(ctx, x, indices, updates, *, axis=0):
    """ScatterElements before opset 11 (replacing only)."""
    return scatter_elements(ctx, x, indices, updates, axis=axis)


@kernel("ScatterND", check=_check_reduction)
def scatter_nd(ctx, x, indices, updates, *, reduction="none"):
    k = indices.shape[-1]
    idx = _wrap(indices, np.array(x.shape[:k], dtype=np.int64), ctx)
    return _scatter(x.copy(), tuple(np.moveaxis(idx, -1, 0)), updates, reduction)


@kernel("Compress")
def compress(ctx, x, condition, *, axis=None):
    if axis is None:
        return np.compress(condition.reshape(-1), x.reshape(-1))
    return np.compress(condition.reshape(-1), x, axis=axis_of(axis, x.ndim))


def _check_nonzero(node):
    rank = node.inputs[0].type.rank
    return "NonZero of a scalar is not implemented" if rank == 0 else None


@kernel("NonZero", check=_check_nonzero)
def nonzero(ctx, x):
    return np.array(np.nonzero(x), dtype=np.int64).reshape(x.ndim, -1)


@kernel("Trilu")
def trilu(ctx, x, k=None, *, upper=1):
    k = 0 if k is None else int(np.asarray(k).reshape(-1)[0])
    return np.triu(x, k) if upper else np.tril(x, k)


@kernel("ReverseSequence")
def reverse_sequence(ctx, x, lengths, *, batch_axis=1, time_axis=0):
    """Each batch entry's first ``lengths[b]`` time steps reversed, the rest kept."""
    steps = x.shape[time_axis]
    shape = [1] * x.ndim
    shape[time_axis] = steps
    t = np.arange(steps).reshape(shape)
    shape = [1] * x.ndim
    shape[batch_axis] = x.shape[batch_axis]
    n = np.asarray(lengths, dtype=np.int64).reshape(shape)
    source = np.where(t < n, n - 1 - t, t)
    return np.take_along_axis(x, np.broadcast_to(source, x.shape), axis=time_axis)


def _check_tensor_scatter(node, *, mode="linear"):
    return None if mode in ("linear", "circular") else f"mode {mode!r} is not implemented"


@kernel("TensorScatter", check=_check_tensor_scatter)
def tensor_scatter(ctx, past, update, write_indices=None, *, axis=-2, mode="linear"):
    """KV-cache update: batch entry b's update lands at ``write_indices[b] + t`` along ``axis``."""
    axis = axis_of(axis, past.ndim)
    capacity, steps = past.shape[axis], update.shape[axis]
    batch = past.shape[0]
    starts = np.zeros(batch, np.int64) if write_indices is None else np.asarray(write_indices, np.int64)
    shape = [1] * past.ndim
    shape[0] = batch
    position = starts.reshape(shape) + np.arange(steps).reshape([-1 if i == axis else 1 for i in range(past.ndim)])
    if mode == "circular":
        position = position % capacity
    elif position.size and (position.max() >= capacity or position.min() < 0):
        raise IndexError(f"write position beyond the cache length {capacity}")
    present = past.copy()
    np.put_along_axis(present, np.broadcast_to(position, update.shape), update, axis=axis)
    return present
