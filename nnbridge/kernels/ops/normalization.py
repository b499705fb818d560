"""Normalizations: Batch (inference and training outputs), Layer, Instance, Group, RMS, LRN, MVN, Lp;
the training form's fused BatchNorm and its backward (``nnbridge.training``).

Statistics are computed in the stash precision (fp32 by default, never below
the input's) and results cast back to the input dtype.
"""

from __future__ import annotations

import math

import numpy as np

from ...ir import NNBRIDGE_TRAINING_DOMAIN, DType, Node
from .. import compiled
from ..registry import KernelFn, kernel
from ._common import all_constant, static_shape
from ._windows import FLOATS, compute_dtype

_STASH = {1: np.dtype(np.float32), 10: np.dtype(np.float16), 11: np.dtype(np.float64)}


def _channel_shape(x: np.ndarray) -> tuple[int, ...]:
    return (1, -1) + (1,) * (x.ndim - 2)


def _check_batch_norm(node: Node, *, training_mode=0) -> str | None:
    if training_mode and len(node.outputs) not in (1, 3):
        return "training_mode with saved statistics outputs is not implemented"
    return None


@kernel("BatchNormalization", dtypes=FLOATS, check=_check_batch_norm)
def batch_norm(ctx, x, scale, bias, mean, var, *, epsilon=1e-5, momentum=0.9, training_mode=0):
    dt = compute_dtype(x.dtype)
    eps = float(epsilon)
    xc = x.astype(dt, copy=False)
    training = bool(training_mode)
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
    momentum = float(momentum)
    running_mean = mean * momentum + batch_mean * (1 - momentum)
    running_var = var * momentum + batch_var * (1 - momentum)
    outs = (y, running_mean.astype(mean.dtype), running_var.astype(var.dtype))
    return outs[:len(ctx.node.outputs)]


def _per_channel(x: np.ndarray, dt: np.dtype) -> tuple[np.ndarray, int]:
    """``x`` as (N, C, rest) in the compute dtype (a view when it can be), and N·rest."""
    flat = x.astype(dt, copy=False).reshape(x.shape[0], x.shape[1], -1)
    return flat, flat.shape[0] * flat.shape[2]


def _channel_sum(a: np.ndarray) -> np.ndarray:
    """Σ over N and the spatial axes of an (N, C, rest) array, per channel."""
    return np.add.reduce(np.add.reduce(a, axis=2), axis=0)


@kernel("BatchNormTraining", domain=NNBRIDGE_TRAINING_DOMAIN, dtypes=FLOATS)
def batch_norm_training(ctx, x, scale, bias, mean, var, *, epsilon=1e-5, momentum=0.9, unbiased=0):
    """One pass for the mean, one to centre, one for the variance, two to scale and shift (in place)."""
    dt = compute_dtype(x.dtype)
    xc, count = _per_channel(x, dt)
    batch_mean = _channel_sum(xc) / dt.type(count)
    centred = xc - batch_mean[:, None]
    batch_var = _channel_sum(np.multiply(centred, centred)) / dt.type(count)
    inv_std = np.reciprocal(np.sqrt(batch_var + dt.type(epsilon)))
    centred *= (scale.astype(dt, copy=False) * inv_std)[:, None]
    centred += bias.astype(dt, copy=False)[:, None]
    y = centred.reshape(x.shape).astype(x.dtype, copy=False)
    momentum = dt.type(momentum)
    update_var = batch_var * dt.type(count / max(count - 1, 1)) if unbiased else batch_var
    running_mean = mean * momentum + batch_mean * (1 - momentum)
    running_var = var * momentum + update_var * (1 - momentum)
    return y, running_mean.astype(mean.dtype), running_var.astype(var.dtype), inv_std.astype(var.dtype)


@kernel("BatchNormTrainingGrad", domain=NNBRIDGE_TRAINING_DOMAIN, dtypes=FLOATS)
def batch_norm_training_grad(ctx, dy, x, scale, inv_std):
    """With x̂ = (x − mean)·inv_std over m = N·rest values per channel: dB = Σ dy, dscale = Σ dy·x̂,
    dx = scale·inv_std·(dy − dB / m − x̂·dscale / m). The mean is taken again from x, so that the
    centred values sum to zero however the forward's statistics were stored (bf16 on the RDU: a
    rounded mean would bias every dx of its channel)."""
    dt = compute_dtype(x.dtype)
    g, count = _per_channel(dy, dt)
    xc = _per_channel(x, dt)[0]
    centred = xc - (_channel_sum(xc) / dt.type(count))[:, None]
    dbias = _channel_sum(g)
    dot = _channel_sum(g * centred)
    inv = inv_std.astype(dt, copy=False)
    dscale = dot * inv
    a = scale.astype(dt, copy=False) * inv
    centred *= (-a * inv * inv * dot / dt.type(count))[:, None]
    centred += g * a[:, None]
    centred -= (a * dbias / dt.type(count))[:, None]
    dx = centred.reshape(x.shape).astype(x.dtype, copy=False)
    return dx, dscale.astype(scale.dtype, copy=False), dbias.astype(scale.dtype, copy=False)


@kernel("LayerNormalizationGrad", domain=NNBRIDGE_TRAINING_DOMAIN, dtypes=FLOATS)
def layer_norm_grad(ctx, dy, x, scale, *, axis=-1, epsilon=1e-5):
    """Per row of the normalized axes (d values), x̂ = (x − mean)·inv_std and ĝ = dy·scale:
    dx = inv_std·(ĝ − mean(ĝ) − x̂·mean(ĝ·x̂)); dscale = Σ_rows dy·x̂, dB = Σ_rows dy. One kernel in
    place of the ~20 primitive ops the spelled-out form's rules emit."""
    dt = compute_dtype(x.dtype)
    axis = int(axis) % x.ndim
    d = math.prod(x.shape[axis:])
    xc = x.astype(dt, copy=False).reshape(-1, d)
    g = dy.astype(dt, copy=False).reshape(-1, d)
    centred = xc - xc.mean(axis=1, keepdims=True)
    inv = np.reciprocal(np.sqrt(np.multiply(centred, centred).mean(axis=1, keepdims=True) + dt.type(epsilon)))
    centred *= inv  # x̂
    dbias = g.sum(axis=0)
    dscale = np.multiply(g, centred).sum(axis=0)
    gs = g * scale.astype(dt, copy=False).reshape(1, d)
    dx = gs - gs.mean(axis=1, keepdims=True)
    dx -= centred * np.multiply(gs, centred).mean(axis=1, keepdims=True)
    dx *= inv
    shape = scale.shape
    return (dx.reshape(x.shape).astype(x.dtype, copy=False), dscale.reshape(shape).astype(scale.dtype, copy=False),
            dbias.reshape(shape).astype(scale.dtype, copy=False))


def _stash(stash_type: int, x: np.ndarray) -> np.dtype:
    """The stash type (attribute), widened to the input precision."""
    stash = _STASH.get(int(stash_type), np.dtype(np.float32))
    return np.promote_types(stash, compute_dtype(x.dtype))


def _check_stash(node: Node, *, stash_type=1) -> str | None:
    stash = int(stash_type)
    return None if stash in _STASH else f"stash_type={stash} is not implemented"


_F32 = np.dtype(np.float32)


class _PreparedNorm:
    """A float32 LayerNormalization or RMSNormalization of a static shape with constant weights,
    prepared (``@kernel(prepare=...)``): the kernel's compiled rows called directly, its per-call
    checks, reshapes and keyword binding done once (a transformer fixture's norm: 6 µs, most of it
    that work); the kernel for another shape or dtype, or before numba is in."""

    __slots__ = ("kernel", "attrs", "shape", "rows", "scale", "bias", "epsilon")

    def __init__(self, kernel: KernelFn, attrs: dict, shape: tuple[int, ...], axis: int, weights: tuple):
        self.kernel, self.attrs, self.shape = kernel, attrs, shape
        self.rows = (math.prod(shape[:axis]), math.prod(shape[axis:]))
        self.scale, self.bias = (None if w is None else np.ascontiguousarray(w).reshape(-1) for w in weights)
        self.epsilon = np.float32(attrs["epsilon"])

    def __call__(self, ctx, x, *rest):
        fast = compiled.loaded("reduce")
        if fast is None or x.shape != self.shape or x.dtype != _F32:
            return self.kernel(ctx, x, *rest, **self.attrs)
        x = np.ascontiguousarray(x).reshape(self.rows)  # a channels-last view between Transposes: copied
        y = np.empty(self.rows, np.float32)
        if self.kernel is rms_norm:
            fast.rms_norm_into(x, self.scale, self.epsilon, y)
        else:
            fast.layer_norm_into(x, self.scale, fast.NO_BIAS if self.bias is None else self.bias, self.epsilon, y)
        return y.reshape(self.shape)


def _prepare_norm(kernel: KernelFn, node: Node, consts: tuple, attrs: dict) -> KernelFn | None:
    """The prepared norm of ``node`` when the kernel's compiled path is the one it would take: a
    static float32 input, float32 stash, one output, constant float32 weights of the normalised
    shape, rows of at most the compiled path's ``NORM_ROW`` values (a float32 norm loads numba anyway)."""
    from ..compiled.reduce import NORM_ROW

    shape = static_shape(node, 0)
    if shape is None or not shape or int(attrs["stash_type"]) != 1 or len(node.outputs) != 1:
        return None
    axis = int(attrs["axis"]) % len(shape)
    weights = tuple(consts[1:])
    if (not all_constant(node, consts) or not 0 < math.prod(shape[axis:]) <= NORM_ROW
            or node.inputs[0].type.dtype != DType.FLOAT32
            or any(w is not None and (w.dtype != _F32 or w.shape != shape[axis:]) for w in weights)):
        return None
    return _PreparedNorm(kernel, attrs, shape, axis, weights + (None,) * (2 - len(weights)))


def _prepare_layer_norm(node: Node, consts: tuple, *, axis=-1, epsilon=1e-5, stash_type=1) -> KernelFn | None:
    return _prepare_norm(layer_norm, node, consts, {"axis": axis, "epsilon": epsilon, "stash_type": stash_type})


def _prepare_rms_norm(node: Node, consts: tuple, *, axis=-1, epsilon=1e-5, stash_type=1) -> KernelFn | None:
    return _prepare_norm(rms_norm, node, consts, {"axis": axis, "epsilon": epsilon, "stash_type": stash_type})


@kernel("LayerNormalization", dtypes=FLOATS, check=_check_stash, prepare=_prepare_layer_norm)
def layer_norm(ctx, x, scale, bias=None, *, axis=-1, epsilon=1e-5, stash_type=1):
    dt = _stash(stash_type, x)
    axis = int(axis) % x.ndim
    if (dt == x.dtype == scale.dtype == np.float32 and len(ctx.node.outputs) == 1
            and (bias is None or bias.dtype == np.float32)):
        fast = compiled.loaded("reduce")  # the same operations in one call (rows up to NORM_ROW); a transposed
        # input (ConvNeXt's channels-last norm between two Transposes) is copied first: 1 µs against 10
        y = None if fast is None else fast.layer_norm(np.ascontiguousarray(x), scale, bias, axis, np.float32(epsilon))
        if y is not None:
            return y
    axes = tuple(range(axis, x.ndim))
    xc = x.astype(dt, copy=False)
    count = math.prod(x.shape[axis:])
    # np.mean's sum and division without its per-call bookkeeping (the fixtures' norms are tiny)
    mean = np.divide(np.add.reduce(xc, axis=axes, keepdims=True), count)
    centered = xc - mean
    square = np.multiply(centered, centered)
    variance = np.divide(np.add.reduce(square, axis=axes, keepdims=True), count)
    variance += dt.type(epsilon)
    inv_std = np.reciprocal(np.sqrt(variance, out=variance), out=variance)
    y = np.multiply(centered, inv_std, out=centered)
    y *= scale.astype(dt, copy=False)
    if bias is not None:
        y += bias.astype(dt, copy=False)
    if len(ctx.node.outputs) == 1:
        return y.astype(x.dtype, copy=False)
    stat_type = _STASH.get(int(stash_type), np.dtype(np.float32))
    outs = (y.astype(x.dtype, copy=False), mean.astype(stat_type), inv_std.astype(stat_type))
    return outs[:len(ctx.node.outputs)]


@kernel("RMSNormalization", dtypes=FLOATS, check=_check_stash, prepare=_prepare_rms_norm)
def rms_norm(ctx, x, scale, *, axis=-1, epsilon=1e-5, stash_type=1):
    dt = _stash(stash_type, x)
    axis = int(axis) % x.ndim
    if dt == x.dtype == scale.dtype == np.float32:
        fast = compiled.loaded("reduce")  # the same operations in one call (rows up to NORM_ROW)
        y = None if fast is None else fast.rms_norm(np.ascontiguousarray(x), scale, axis, np.float32(epsilon))
        if y is not None:
            return y
    xc = x.astype(dt, copy=False)
    mean_square = (xc * xc).mean(axis=tuple(range(axis, x.ndim)), keepdims=True)
    y = xc / np.sqrt(mean_square + dt.type(epsilon)) * scale.astype(dt, copy=False)
    return y.astype(x.dtype, copy=False)


def _standardize(xc: np.ndarray, axes: tuple[int, ...], eps: float) -> np.ndarray:
    """np.mean's sum and division without its per-call bookkeeping (as layer_norm: small maps)."""
    count = math.prod(xc.shape[a] for a in axes)
    centered = xc - np.divide(np.add.reduce(xc, axis=axes, keepdims=True), count)
    variance = np.divide(np.add.reduce(np.multiply(centered, centered), axis=axes, keepdims=True), count)
    variance += xc.dtype.type(eps)
    return np.divide(centered, np.sqrt(variance, out=variance), out=centered)


@kernel("InstanceNormalization", dtypes=FLOATS)
def instance_norm(ctx, x, scale, bias, *, epsilon=1e-5):
    if x.dtype == scale.dtype == bias.dtype == _F32 and x.size and scale.size == x.shape[1] == bias.size:
        fast = compiled.loaded("reduce")  # the same operations in one call (a PoolFormer's GroupNorm: 14 µs → 2)
        if fast is not None:
            return fast.instance_norm(np.ascontiguousarray(x), scale, bias, np.float32(epsilon))
    dt = compute_dtype(x.dtype)
    y = _standardize(x.astype(dt, copy=False), tuple(range(2, x.ndim)), float(epsilon))
    shape = _channel_shape(x)
    y = y * scale.astype(dt).reshape(shape) + bias.astype(dt).reshape(shape)
    return y.astype(x.dtype, copy=False)


@kernel("GroupNormalization", dtypes=FLOATS, check=_check_stash)
def group_norm(ctx, x, scale, bias, *, epsilon=1e-5, num_groups, stash_type=1):
    dt = _stash(stash_type, x)
    groups = int(num_groups)
    n, c = x.shape[:2]
    grouped = x.astype(dt, copy=False).reshape(n, groups, -1)
    y = _standardize(grouped, (2,), float(epsilon)).reshape(x.shape)
    if scale.size == groups and c != groups:  # opset-18 form: one scale per group
        scale, bias = np.repeat(scale, c // groups), np.repeat(bias, c // groups)
    shape = _channel_shape(x)
    y = y * scale.astype(dt).reshape(shape) + bias.astype(dt).reshape(shape)
    return y.astype(x.dtype, copy=False)


@kernel("LRN", dtypes=FLOATS)
def lrn(ctx, x, *, alpha=1e-4, beta=0.75, bias=1.0, size):
    """Cross-channel normalization; the channel window sum loops over the (small) window taps only."""
    dt = compute_dtype(x.dtype)
    size = int(size)
    alpha, beta, bias = float(alpha), float(beta), float(bias)
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
def mean_variance_norm(ctx, x, *, axes=(0, 2, 3)):
    dt = compute_dtype(x.dtype)
    axes = tuple(a % x.ndim for a in (axes or (0, 2, 3)))  # an empty list too
    xc = x.astype(dt, copy=False)
    mean = xc.mean(axis=axes, keepdims=True)
    std = np.sqrt(np.maximum((xc * xc).mean(axis=axes, keepdims=True) - mean * mean, 0))
    return ((xc - mean) / (std + dt.type(1e-9))).astype(x.dtype, copy=False)


def _check_lp(node: Node, *, p=2) -> str | None:
    return None if p in (1, 2) else f"p={p} is not implemented"


@kernel("LpNormalization", dtypes=FLOATS, check=_check_lp)
def lp_norm(ctx, x, *, axis=-1, p=2):
    dt = compute_dtype(x.dtype)
    axis = int(axis)
    xc = x.astype(dt, copy=False)
    if int(p) == 1:
        norm = np.abs(xc).sum(axis=axis, keepdims=True)
    else:
        norm = np.sqrt((xc * xc).sum(axis=axis, keepdims=True))
    y = np.divide(xc, norm, out=np.zeros_like(xc), where=norm != 0)
    return y.astype(x.dtype, copy=False)


