"""Reductions (axes as an input, keepdims, noop_with_empty_axes; empty inputs
give ONNX's identity values), ArgMax/ArgMin and the running CumSum/CumProd.
"""

from __future__ import annotations

import math

import numpy as np

from ...ir import DType, Node
from .. import compiled
from ..registry import KernelFn, kernel
from ._common import NUMERIC, axes_of, axis_of, ints, static_shape

_F32 = np.dtype(np.float32)

BOOL = frozenset({DType.BOOL})


def _lowest(dtype: np.dtype):
    return np.iinfo(dtype).min if dtype.kind in "iu" else (False if dtype.kind == "b" else -np.inf)


def _highest(dtype: np.dtype):
    return np.iinfo(dtype).max if dtype.kind in "iu" else (True if dtype.kind == "b" else np.inf)


def _acc(x: np.ndarray) -> np.dtype:
    """16-bit floats (float16, bfloat16) accumulate in float32; everything else in its own type."""
    return np.dtype(np.float32) if x.dtype.itemsize == 2 and x.dtype.kind not in "iub" else x.dtype


def _wide(x: np.ndarray) -> np.ndarray:
    return x.astype(_acc(x), copy=False)


def _logsumexp(x, axes):
    x = _wide(x)
    peak = np.max(x, axis=axes, keepdims=True)
    peak = np.where(np.isfinite(peak), peak, 0)
    return np.log(np.sum(np.exp(x - peak), axis=axes, keepdims=True)) + peak


#: op → (fn(x, axes) computing with keepdims=True, identity of an empty reduction or None)
_REDUCTIONS = {
    "ReduceSum": (lambda x, a: np.sum(x, axis=a, keepdims=True, dtype=_acc(x)), lambda d: 0),
    "ReduceMean": (lambda x, a: np.mean(_wide(x), axis=a, keepdims=True), lambda d: np.nan),
    "ReduceMax": (lambda x, a: np.max(x, axis=a, keepdims=True), _lowest),
    "ReduceMin": (lambda x, a: np.min(x, axis=a, keepdims=True), _highest),
    "ReduceProd": (lambda x, a: np.prod(x, axis=a, keepdims=True, dtype=x.dtype), lambda d: 1),
    "ReduceL1": (lambda x, a: np.sum(np.abs(x), axis=a, keepdims=True, dtype=_acc(x)), lambda d: 0),
    "ReduceL2": (lambda x, a: np.sqrt(np.sum(np.square(_wide(x)), axis=a, keepdims=True)), lambda d: 0),
    "ReduceSumSquare": (lambda x, a: np.sum(np.square(_wide(x)), axis=a, keepdims=True, dtype=_acc(x)),
                        lambda d: 0),
    "ReduceLogSum": (lambda x, a: np.log(np.sum(_wide(x), axis=a, keepdims=True)), lambda d: -np.inf),
    "ReduceLogSumExp": (_logsumexp, lambda d: -np.inf),
}


def _trailing(axes: list[int], rank: int) -> bool:
    """``axes`` are the last ``len(axes)`` axes (in any order)."""
    return sorted(axes) == list(range(rank - len(axes), rank))


def _reduction(op: str):
    fn, identity = _REDUCTIONS[op]
    mean = op == "ReduceMean"

    def run(ctx, x, axes=None, *, keepdims=1, noop_with_empty_axes=0):
        axes = ints(axes) if axes is not None else []
        if not axes:
            if noop_with_empty_axes:
                return x
            axes = list(range(x.ndim))
        axes = axes_of(axes, x.ndim)
        if mean and x.dtype == np.float32 and x.size and _trailing(axes, x.ndim) and x.flags.c_contiguous:
            fast = compiled.loaded("reduce")
            out = None if fast is None else fast.trailing_mean(x, len(axes))  # numpy's sum: bit for bit
            if out is not None:
                return out if keepdims else out.reshape(x.shape[:x.ndim - len(axes)])
        if x.size == 0 or any(x.shape[a] == 0 for a in axes):
            shape = tuple(1 if i in axes else d for i, d in enumerate(x.shape))
            out = np.full(shape, identity(x.dtype), dtype=x.dtype)
        else:
            out = np.asarray(fn(x, axes)).astype(x.dtype, copy=False)
        return out if keepdims else out.reshape([d for i, d in enumerate(out.shape) if i not in axes])

    return run


class TrailingMean:
    """A float32 mean over the trailing axes of a static shape, prepared (``@kernel(prepare=...)``):
    the kernel's compiled path (numpy's pairwise sums, bit for bit) without its per-call work on the
    axes, one call where a squeeze-excite's mean otherwise costs 6 µs; the kernel for another
    shape, a non-contiguous input, a row past the compiled path's length, or before numba is in."""

    __slots__ = ("kernel", "attrs", "shape", "rows", "out")

    def __init__(self, kernel: KernelFn, attrs: dict, shape: tuple[int, ...], axes: int, keepdims: bool):
        lead = len(shape) - axes
        self.kernel, self.attrs, self.shape = kernel, attrs, shape
        self.rows = (math.prod(shape[:lead]), math.prod(shape[lead:]))
        self.out = shape[:lead] + (1,) * axes if keepdims else shape[:lead]

    def __call__(self, ctx, x, *rest):
        fast = compiled.loaded("reduce")
        if (fast is None or x.shape != self.shape or x.dtype != _F32 or not x.flags.c_contiguous
                or self.rows[1] > fast.MEAN_ROW):
            return self.kernel(ctx, x, *rest, **self.attrs)
        out = np.empty(self.out, np.float32)
        fast.row_means(x.reshape(self.rows), out.reshape(-1))
        return out


def trailing_mean(kernel: KernelFn, node: Node, attrs: dict, axes: list[int] | None,
                  keepdims: bool) -> TrailingMean | None:
    """The prepared mean of ``node`` over ``axes`` (None: all) when its input is a static float32
    shape, not empty, and the axes are its trailing ones."""
    shape = static_shape(node, 0)
    if shape is None or node.inputs[0].type.dtype != DType.FLOAT32 or not math.prod(shape):
        return None
    axes = list(range(len(shape))) if axes is None else axes_of(axes, len(shape))
    if not axes or not _trailing(axes, len(shape)):
        return None
    return TrailingMean(kernel, attrs, shape, len(axes), keepdims)


def _prepare_mean(node: Node, consts: tuple, *, keepdims=1, noop_with_empty_axes=0) -> KernelFn | None:
    given = len(node.inputs) > 1 and node.inputs[1] is not None
    if given and consts[1] is None:
        return None
    axes = ints(consts[1]) if given else []
    if not axes and noop_with_empty_axes:
        return None
    return trailing_mean(_KERNELS["ReduceMean"], node, {"keepdims": keepdims,
                                                         "noop_with_empty_axes": noop_with_empty_axes},
                         axes or None, bool(keepdims))


_KERNELS: dict[str, KernelFn] = {}
for _op in _REDUCTIONS:
    _types = NUMERIC | BOOL if _op in ("ReduceMax", "ReduceMin") else NUMERIC
    _KERNELS[_op] = kernel(_op, dtypes=_types, prepare=_prepare_mean if _op == "ReduceMean" else None)(
        _reduction(_op))


def _arg(pick):
    def run(ctx, x, *, axis=0, keepdims=1, select_last_index=0):
        axis = axis_of(axis, x.ndim)
        if select_last_index:  # search the reversed axis, map back
            index = x.shape[axis] - 1 - pick(np.flip(x, axis), axis=axis, keepdims=True)
        else:
            index = pick(x, axis=axis, keepdims=True)
        index = index.astype(np.int64, copy=False)
        return index if keepdims else np.squeeze(index, axis=axis)

    return run


kernel("ArgMax", dtypes=NUMERIC | BOOL)(_arg(np.argmax))
kernel("ArgMin", dtypes=NUMERIC | BOOL)(_arg(np.argmin))


def _running(accumulate, identity: int):
    """CumSum/CumProd: optional reverse direction, exclusive = shifted by one."""

    def run(ctx, x, axis, *, exclusive=0, reverse=0):
        axis = axis_of(int(np.asarray(axis).reshape(-1)[0]), x.ndim)
        if reverse:
            x = np.flip(x, axis)
        out = accumulate(x, axis=axis, dtype=x.dtype)
        if exclusive and x.shape[axis]:
            head = np.full_like(np.take(out, [0], axis=axis), identity)
            out = np.concatenate([head, np.take(out, np.arange(x.shape[axis] - 1), axis=axis)], axis=axis)
        return np.flip(out, axis) if reverse else out

    return run


kernel("CumSum", dtypes=NUMERIC - {DType.INT8, DType.INT16, DType.UINT8, DType.UINT16})(_running(np.cumsum, 0))
kernel("CumProd", dtypes=NUMERIC - {DType.INT8, DType.INT16, DType.UINT8, DType.UINT16})(_running(np.cumprod, 1))
