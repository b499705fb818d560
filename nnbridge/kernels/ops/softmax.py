"""Softmax, LogSoftmax and Hardmax along one axis (opset >= 13 semantics), numerically stable."""

from __future__ import annotations

import numpy as np

from ..registry import kernel
from ._windows import FLOATS, WITH_BF16, compute_dtype


def _shifted(x: np.ndarray, axis: int) -> np.ndarray:
    """x minus its max along ``axis`` so that exp never overflows."""
    peak = np.max(x, axis=axis, keepdims=True)
    return x - np.where(np.isfinite(peak), peak, 0)


@kernel("Softmax", dtypes=WITH_BF16)
def softmax(ctx, x):
    if x.size == 0:
        return x.copy()
    # fp16 stays in fp16 (rounded per step, as ONNX's own definition computes it); bf16 goes through fp32
    e = np.exp(_shifted(x if x.dtype == np.float16 else x.astype(compute_dtype(x.dtype), copy=False),
                        ctx.attr("axis", -1)))
    e /= e.sum(axis=ctx.attr("axis", -1), keepdims=True)
    return e.astype(x.dtype, copy=False)


def log_softmax_along(x: np.ndarray, axis: int) -> np.ndarray:
    """log(softmax(x)) without forming the softmax (no log of an underflowed 0)."""
    if x.size == 0:
        return x.copy()
    s = _shifted(x, axis)
    return s - np.log(np.exp(s).sum(axis=axis, keepdims=True))


@kernel("LogSoftmax", dtypes=WITH_BF16)
def log_softmax(ctx, x):
    return log_softmax_along(x.astype(compute_dtype(x.dtype), copy=False), ctx.attr("axis", -1)).astype(x.dtype)


@kernel("Hardmax", dtypes=FLOATS)
def hardmax(ctx, x):
    axis = ctx.attr("axis", -1)
    y = np.zeros_like(x)
    if x.size:
        np.put_along_axis(y, np.expand_dims(np.argmax(x, axis=axis), axis), 1, axis=axis)
    return y
