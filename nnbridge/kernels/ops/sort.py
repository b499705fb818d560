"""Order-based ops: TopK (ties keep the lower index first) and Unique (all four outputs)."""

from __future__ import annotations

import numpy as np

from ...ir import DType
from ..registry import kernel
from ._common import NUMERIC, axis_of


def descending_key(x: np.ndarray) -> np.ndarray:
    """A key whose ascending order is ``x``'s descending order, without overflow:
    ``~x`` (= -x-1) for integers, ``-x`` for floats."""
    if x.dtype.kind in "iu":
        return np.invert(x)
    if x.dtype.kind == "b":
        return np.logical_not(x)
    return np.negative(x)


@kernel("TopK", dtypes=NUMERIC)
def topk(ctx, x, k, *, axis=-1, largest=1):
    k = int(np.asarray(k).reshape(-1)[0])
    axis = axis_of(axis, x.ndim)
    if not 0 <= k <= x.shape[axis]:
        raise ValueError(f"k={k} is out of range for dim {x.shape[axis]}")
    key = descending_key(x) if largest else x
    # a stable sort keeps equal values in index order; output always sorted (allowed when sorted=0)
    order = np.argsort(key, axis=axis, kind="stable")
    indices = np.take(order, np.arange(k), axis=axis)
    return np.take_along_axis(x, indices, axis=axis), indices.astype(np.int64, copy=False)


def _check_unique(node, *, axis=None):
    dtype = node.inputs[0].type.dtype
    if dtype is DType.STRING and axis is not None:
        return "Unique of strings along an axis is not implemented"
    return None


@kernel("Unique", check=_check_unique)
def unique(ctx, x, *, axis=None, sorted=1):  # the attribute's name shadows the builtin here
    """Unique values (sorted, or in order of first occurrence), first indices, inverse, counts."""
    if axis is None:
        x, axis = x.reshape(-1), None
    else:
        axis = axis_of(axis, x.ndim)
    values, first, inverse, counts = np.unique(x, return_index=True, return_inverse=True, return_counts=True,
                                               axis=axis)
    inverse = inverse.reshape(-1)
    if not sorted:
        order = np.argsort(first, kind="stable")
        rank = np.empty_like(order)
        rank[order] = np.arange(order.size)
        values = np.take(values, order, axis=0 if axis is None else axis)
        first, counts, inverse = first[order], counts[order], rank[inverse]
    outputs = (values, first.astype(np.int64), inverse.astype(np.int64), counts.astype(np.int64))
    return outputs[:len(ctx.node.outputs)]
