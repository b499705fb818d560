"""Reductions (axes as an input, keepdims, noop_with_empty_axes; empty inputs
give ONNX's identity values), ArgMax/ArgMin and the running CumSum/CumProd.
"""

from __future__ import annotations

import numpy as np

from ...ir import DType
from .. import compiled
from ..registry import kernel
from ._common import NUMERIC, axes_of, axis_of, ints

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


for _op in _REDUCTIONS:
    _types = NUMERIC | BOOL if _op in ("ReduceMax", "ReduceMin") else NUMERIC
    kernel(_op, dtypes=_types)(_reduction(_op))


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
