"""Normalizations: Batch (inference and training outputs), Layer, Instance, Group, RMS, LRN, MVN, Lp.

Statistics are computed in the stash precision (fp32 by default, never below
the input's) and results cast back to the input dtype.
"""

from __future__ import annotations

import math

import numpy as np

from ...ir import Node
from ..registry import kernel
from ._windows import FLOATS, compute_dtype

_STASH = {1: np.dtype(np.float32), 10: np.dtype(np.float16), 11: np.dtype(np.float64)}


def _channel_shape(x: np.ndarray) -> tuple[int, ...]:
    return (1, -1) + (1,) * (x.ndim - 2)


def _check_batch_norm(node: Node) -> str | None:
    if node.attr("training_mode", 0) and len(node.outputs) not in (1, 3):
        return "training_mode with saved statistics outputs is not implemented"
    return None


@kernel("BatchNormalization", dtypes=FLOATS, check=_check_batch_norm)
def batch_norm(ctx, x, scale, bias, mean, var):
    dt = compute_dtype(x.dtype)
    eps = float(ctx.attr("epsilon", 1e-5))
    xc = x.astype(dt, copy=False)
    training = bool(ctx.attr("training_mode", 0))
    if training:
        axes = (0,) + tuple(range(2, x.ndim))
        batch_mean, batch_var = xc.mean(axis=axes), xc.var(axis=axes)
        use_mean, use_var = batch_mean, batch_var
    else:
        use_mean, use_var = mean.astype(dt, copy=False), var.astype(dt, copy=False)
    shape = _channel_shape(x)
    factor = (scale.astype(dt) / np.sqrt(use_var.astype(dt) + dt.type(eps))).astype(dt, copy=False)
    shift = bias.astype(dt) - use_mean.astype(dt) * factor
    y = (xc * factor.reshape(shape) + shift.reshape(shape)).astype(x.dtype, copy=False)
    if not training:
        return y
    momentum = float(ctx.attr("momentum", 0.9))
    running_mean = mean * momentum + batch_mean * (1 - momentum)
    running_var = var * momentum + batch_var * (1 - momentum)
    outs = (y, running_mean.astype(mean.dtype), running_var.astype(var.dtype))
    return outs[:len(ctx.node.outputs)]


def _stash(ctx, x: np.ndarray) -> np.dtype:
    """The stash type (attribute), widened to the input precision."""
    stash = _STASH.get(int(ctx.attr("stash_type", 1)), np.dtype(np.float32))
    return np.promote_types(stash, compute_dtype(x.dtype))


def _check_stash(node: Node) -> str | None:
    stash = int(node.attr("stash_type", 1))
    return None if stash in _STASH else f"stash_type={stash} is not implemented"


@kernel("LayerNormalization", dtypes=FLOATS, check=_check_stash)
def layer_norm(ctx, x, scale, bias=None):
    dt = _stash(ctx, x)
    axis = int(ctx.attr("axis", -1)) % x.ndim
    axes = tuple(range(axis, x.ndim))
    xc = x.astype(dt, copy=False)
    count = math.prod(x.shape[axis:])
    # np.mean's sum and division without its per-call bookkeeping (the fixtures' norms are tiny)
    mean = np.divide(np.add.reduce(xc, axis=axes, keepdims=True), count)
    centered = xc - mean
    square = np.multiply(centered, centered)
    variance = np.divide(np.add.reduce(square, axis=axes, keepdims=True), count)
    variance += dt.type(ctx.attr("epsilon", 1e-5))
    inv_std = np.reciprocal(np.sqrt(variance, out=variance), out=variance)
    y = np.multiply(centered, inv_std, out=centered)
    y *= scale.astype(dt, copy=False)
    if bias is not None:
        y += bias.astype(dt, copy=False)
    if len(ctx.node.outputs) == 1:
        return y.astype(x.dtype, copy=False)
    stat_type = _STASH.get(int(ctx.attr("stash_type", 1)), np.dtype(np.float32))
    outs = (y.astype(x.dtype, copy=False), mean.astype(stat_type), inv_std.astype(stat_type))
    return outs[:len(ctx.node.outputs)]


@kernel("RMSNormalization", dtypes=FLOATS, check=_check_stash)
def rms_norm(ctx, x, scale):
    dt = _stash(ctx, x)
    axis = int(ctx.attr("axis", -1)) % x.ndim
    xc = x.astype(dt, copy=False)
    mean_square = (xc * xc).mean(axis=tuple(range(axis, x.ndim)), keepdims=True)
    y = xc / np.sqrt(mean_square + dt.type(ctx.attr("epsilon", 1e-5))) * scale.astype(dt, copy=False)
    return y.astype(x.dtype, copy=False)


def _standardize(xc: np.ndarray, axes: tuple[int, ...], eps: float) -> np.ndarray:
    mean = xc.mean(axis=axes, keepdims=True)
    centered = xc - mean
    return centered / np.sqrt((centered * centered).mean(axis=axes, keepdims=True) + xc.dtype.type(eps))


@kernel("InstanceNormalization", dtypes=FLOATS)
def instance_norm(ctx, x, scale, bias):
    dt = compute_dtype(x.dtype)
    y = _standardize(x.astype(dt, copy=False), tuple(range(2, x.ndim)), float(ctx.attr("epsilon", 1e-5)))
    shape = _channel_shape(x)
    y = y * scale.astype(dt).reshape(shape) + bias.astype(dt).reshape(shape)
    return y.astype(x.dtype, copy=False)


@kernel("GroupNormalization", dtypes=FLOATS, check=_check_stash)
def group_norm(ctx, x, scale, bias):
    dt = _stash(ctx, x)
    groups = int(ctx.attr("num_groups"))
    n, c = x.shape[:2]
    grouped = x.astype(dt, copy=False).reshape(n, groups, -1)
    y = _standardize(grouped, (2,), float(ctx.attr("epsilon", 1e-5))).reshape(x.shape)
    if scale.size == groups and c != groups:  # opset-18 form: one scale per group
        scale, bias = np.repeat(scale, c // groups), np.repeat(bias, c // groups)
    shape = _channel_shape(x)
    y = y * scale.astype(dt).reshape(shape) + bias.astype(dt).reshape(shape)
    return y.astype(x.dtype, copy=False)


@kernel("LRN", dtypes=FLOATS)
def lrn(ctx, x):
    """Cross-channel normalization; the channel window sum loops over the (small) window taps only."""
    dt = compute_dtype(x.dtype)
    size = int(ctx.attr("size"))
    alpha, beta, bias = float(ctx.attr("alpha", 1e-4)), float(ctx.attr("beta", 0.75)), float(ctx.attr("bias", 1.0))
    xc = x.astype(dt, copy=False)
    sq = xc * xc
    before, after = (size - 1) // 2, size - 1 - (size - 1) // 2
    padded = np.pad(sq, [(0, 0), (before, after)] + [(0, 0)] * (x.ndim - 2))
    c = x.shape[1]
    total = np.zeros_like(sq)
    for tap in range(size):
        total += padded[:, tap:tap + c]
    y = xc / (dt.type(bias) + dt.type(alpha / size) * total) ** dt.type(beta)
    return y.astype(x.dtype, copy=False)


@kernel("MeanVarianceNormalization", dtypes=FLOATS)
def mean_variance_norm(ctx, x):
    dt = compute_dtype(x.dtype)
    axes = tuple(a % x.ndim for a in (ctx.attr("axes", None) or [0, 2, 3]))
    xc = x.astype(dt, copy=False)
    mean = xc.mean(axis=axes, keepdims=True)
    std = np.sqrt(np.maximum((xc * xc).mean(axis=axes, keepdims=True) - mean * mean, 0))
    return ((xc - mean) / (std + dt.type(1e-9))).astype(x.dtype, copy=False)


def _check_lp(node: Node) -> str | None:
    p = node.attr("p", 2)
    return None if p in (1, 2) else f"p={p} is not implemented"


@kernel("LpNormalization", dtypes=FLOATS, check=_check_lp)
def lp_norm(ctx, x):
    dt = compute_dtype(x.dtype)
    axis = int(ctx.attr("axis", -1))
    xc = x.astype(dt, copy=False)
    if int(ctx.attr("p", 2)) == 1:
        norm = np.abs(xc).sum(axis=axis, keepdims=True)
    else:
        norm = np.sqrt((xc * xc).sum(axis=axis, keepdims=True))
    y = np.divide(xc, norm, out=np.zeros_like(xc), where=norm != 0)
    return y.astype(x.dtype, copy=False)


