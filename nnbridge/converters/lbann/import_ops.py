"""One importer per LBANN layer type: Era C layer → IR nodes (specs/lbann-format.md §4, §8).

An importer is ``fn(ctx, layer, params, inputs) -> [Tensor, …]`` where ``params``
is the layer-type message and each ``Tensor`` carries per-sample dims (no batch
dim); ``ctx`` (import_context.ImportContext) emits nodes and reads the layer's weights
in LBANN's matrix layouts. The last node of a layer is emitted with
``final=True`` so its output keeps the layer's name.
"""

from __future__ import annotations

import math
import zlib
from collections.abc import Callable, Sequence

import numpy as np

from ...base.errors import FormatError, ShapeError, Unsupported, UnsupportedOpError
from ...base.registry import Registry
from ...ir import DType
from ...protos.lbann import lbann_pb2
from .import_composed import COMPOSED, Builder
from .import_context import ImportContext, Tensor, reader_slice_points
from .mapping import BINARY, COMPOSITE, CONSTANT_OPS, UNARY

Importer = Callable[..., list[Tensor]]
IMPORTERS: Registry[str, Importer] = Registry("LBANN importers")


def importer(*kinds: str) -> Callable[[Importer], Importer]:
    return IMPORTERS.decorator(*kinds)


def layer_inputs(ctx: ImportContext, inputs: list[Tensor], count: int | None = 1) -> list[Tensor]:
    if count is not None and len(inputs) != count:
        raise FormatError(f"{ctx.where()} needs {count} parent(s), has {len(inputs)}")
    if count is None and not inputs:
        raise FormatError(f"{ctx.where()} has no parents")
    return inputs


def _spread(values: Sequence[int], n: int, default: int, ctx: ImportContext, what: str) -> list[int]:
    """LBANN lists: empty → default, one value → broadcast to every spatial dim."""
    values = [int(v) for v in values]
    if not values:
        return [default] * n
    if len(values) == 1:
        return values * n
    if len(values) != n:
        raise FormatError(f"{ctx.where()}: {what} has {len(values)} entries for {n} spatial dims")
    return values


def _positive(ctx: ImportContext, dims: Sequence[int]) -> tuple[int, ...]:
    if any(d <= 0 for d in dims):
        raise ShapeError(f"{ctx.where()}: output shape {list(dims)} is empty for its input shape")
    return tuple(dims)


# -- pass-through and activations ----------------------------------------------

@importer("identity", "split", "dropout", "selu_dropout", "stop_gradient")
def _identity(ctx, layer, params, inputs):
    (x,) = layer_inputs(ctx, inputs)
    return [ctx.emit("Identity", [x], x.dims, final=True)]


@importer("relu")
def _relu(ctx, layer, params, inputs):
    (x,) = layer_inputs(ctx, inputs)
    return [ctx.emit("Relu", [x], x.dims, final=True)]


@importer("leaky_relu")
def _leaky_relu(ctx, layer, params, inputs):
    (x,) = layer_inputs(ctx, inputs)
    return [ctx.emit("LeakyRelu", [x], x.dims, {"alpha": params.negative_slope or 0.01}, final=True)]


@importer("elu")
def _elu(ctx, layer, params, inputs):
    (x,) = layer_inputs(ctx, inputs)
    return [ctx.emit("Elu", [x], x.dims, {"alpha": params.alpha or 1.0}, final=True)]


def _over_groups(ctx, x: Tensor, op: str, groups: int) -> Tensor:
    """``op`` over the last axis after viewing the sample as [groups, rest] (1: whole sample)."""
    if len(x.dims) == 1 and groups == 1:
        return ctx.emit(op, [x], x.dims, {"axis": -1}, final=True)
    flat = (groups, math.prod(x.dims) // groups) if groups > 1 else (math.prod(x.dims),)
    view = ctx.emit("Reshape", [x, ctx.ints((ctx.batch, *flat), "view")], flat)
    y = ctx.emit(op, [view], flat, {"axis": -1})
    return ctx.emit("Reshape", [y, ctx.ints((ctx.batch, *x.dims), "shape")], x.dims, final=True)


@importer("softmax")
def _softmax(ctx, layer, params, inputs):
    (x,) = layer_inputs(ctx, inputs)
    channel = params.softmax_mode == "channel" and len(x.dims) > 1
    return [_over_groups(ctx, x, "Softmax", x.dims[0] if channel else 1)]


@importer("log_softmax")
def _log_softmax(ctx, layer, params, inputs):
    (x,) = layer_inputs(ctx, inputs)
    return [_over_groups(ctx, x, "LogSoftmax", 1)]


@importer("channelwise_softmax")
def _channelwise_softmax(ctx, layer, params, inputs):
    (x,) = layer_inputs(ctx, inputs)
    if params.single_dim_mode:
        axis = params.dim if params.dim >= 0 else len(x.dims) + params.dim
        if not 0 <= axis < len(x.dims):
            raise FormatError(f"{ctx.where()}: dim {params.dim} is out of range for {list(x.dims)}")
        return [ctx.emit("Softmax", [x], x.dims, {"axis": axis + 1}, final=True)]
    return [_over_groups(ctx, x, "Softmax", x.dims[0])]


# -- learning layers -------------------------------------------------------------

@importer("fully_connected")
def _fully_connected(ctx, layer, params, inputs):
    (x,) = layer_inputs(ctx, inputs)
    n_in = math.prod(x.dims)
    if ctx.hint is not None:  # LBANN's Layer::setup_dims gives it the hint's dims, whatever num_neurons says
        params.read.add("num_neurons")
    n_out = math.prod(ctx.hint) if ctx.hint is not None else int(params.num_neurons)
    if len(x.dims) > 1:  # LBANN flattens the input implicitly
        x = ctx.emit("Flatten", [x], (n_in,), {"axis": 1})
    shape = (n_in, n_out) if params.transpose else (n_out, n_in)
    matrix = ctx.weights(0, "linearity_weights", *shape, fans=(n_in, n_out))
    ins = [x, ctx.const(matrix, "linearity", slot=0)]
    if params.has_bias:
        ins.append(ctx.const(ctx.weights(1, "bias_weights", n_out, default="zeros").reshape(n_out), "bias", slot=1))
    return [ctx.emit("Gemm", ins, (n_out,), {"transB": 0 if params.transpose else 1}, final=True)]


def _conv_geometry(ctx, params, x: Tensor):
    spatial = x.dims[1:]
    nd = int(params.num_dims) or len(spatial)
    if nd != len(spatial):
        raise ShapeError(f"{ctx.where()}: num_dims {nd} but the input {list(x.dims)} has {len(spatial)} "
                         f"spatial dims")
    kernel = _spread(params.kernel_size, nd, 0, ctx, "kernel_size")
    if not all(kernel):
        raise FormatError(f"{ctx.where()}: kernel_size is missing")
    stride = _spread(params.stride, nd, 1, ctx, "stride")
    pads = _spread(params.padding, nd, 0, ctx, "padding")
    dilation = _spread(params.dilation, nd, 1, ctx, "dilation")
    for name, values, low in (("kernel_size", kernel, 1), ("stride", stride, 1), ("dilation", dilation, 1),
                              ("padding", pads, 0)):
        if min(values) < low:
            raise FormatError(f"{ctx.where()}: {name} {values} must be >= {low}")
    groups = int(params.groups.value) if params.HasField("groups") else 1
    if groups < 1:
        raise FormatError(f"{ctx.where()}: groups {groups} must be >= 1 (leave it out for one group)")
    has_bias = params.has_bias.value if params.HasField("has_bias") else True
    return spatial, kernel, stride, pads, dilation, groups, has_bias


@importer("convolution")
def _convolution(ctx, layer, params, inputs):
    (x,) = layer_inputs(ctx, inputs)
    spatial, kernel, stride, pads, dilation, groups, has_bias = _conv_geometry(ctx, params, x)
    c_in, c_out = x.dims[0], int(params.out_channels)
    if c_in % groups or c_out % groups:
        raise ShapeError(f"{ctx.where()}: {c_in} input / {c_out} output channels do not split into {groups} groups")
    k = math.prod(kernel)
    w = ctx.weights(0, "kernel", c_out * c_in // groups * k, fans=(c_in // groups * k, c_out // groups * k))
    ins = [x, ctx.const(w.reshape(c_out, c_in // groups, *kernel), "kernel", slot=0)]
    if has_bias:
        ins.append(ctx.const(ctx.weights(1, "bias", c_out, default="zeros").reshape(c_out), "bias", slot=1))
    out = [(i + 2 * p - d * (kk - 1) - 1) // s + 1 for i, kk, s, p, d in zip(spatial, kernel, stride, pads, dilation)]
    attrs = {"kernel_shape": kernel, "strides": stride, "pads": pads + pads, "dilations": dilation, "group": groups}
    return [ctx.emit("Conv", ins, _positive(ctx, (c_out, *out)), attrs, final=True)]


@importer("deconvolution")
def _deconvolution(ctx, layer, params, inputs):
    (x,) = layer_inputs(ctx, inputs)
    spatial, kernel, stride, pads, dilation, groups, has_bias = _conv_geometry(ctx, params, x)
    extra = _spread(params.output_padding, len(spatial), 0, ctx, "output_padding")
    c_in, c_out = x.dims[0], int(params.out_channels)
    if c_in % groups or c_out % groups:
        raise ShapeError(f"{ctx.where()}: {c_in} input / {c_out} output channels do not split into {groups} groups")
    k = math.prod(kernel)
    w = ctx.weights(0, "kernel", c_in * c_out // groups * k, fans=(c_in * k, c_out // groups * k))
    ins = [x, ctx.const(w.reshape(c_in, c_out // groups, *kernel), "kernel", slot=0)]
    if has_bias:
        ins.append(ctx.const(ctx.weights(1, "bias", c_out, default="zeros").reshape(c_out), "bias", slot=1))
    out = [(i - 1) * s - 2 * p + d * (kk - 1) + 1 + e
           for i, kk, s, p, d, e in zip(spatial, kernel, stride, pads, dilation, extra)]
    attrs = {"kernel_shape": kernel, "strides": stride, "pads": pads + pads, "dilations": dilation,
             "group": groups, "output_padding": extra}
    return [ctx.emit("ConvTranspose", ins, _positive(ctx, (c_out, *out)), attrs, final=True)]


def pool_geometry(ctx: ImportContext, params, nd: int) -> tuple[list[int], list[int], list[int]]:
    """A pooling layer's window, pads and strides over ``nd`` spatial dims."""
    if params.has_vectors:
        kernel = _spread(params.pool_dims, nd, 0, ctx, "pool_dims")
        pads = _spread(params.pool_pads, nd, 0, ctx, "pool_pads")
        stride = _spread(params.pool_strides, nd, 1, ctx, "pool_strides")
    else:
        kernel, pads = [int(params.pool_dims_i)] * nd, [int(params.pool_pads_i)] * nd
        stride = [int(params.pool_strides_i) or 1] * nd
    if not all(kernel):
        raise FormatError(f"{ctx.where()}: pooling window size is missing")
    for name, values, low in (("pool_dims", kernel, 1), ("pool_strides", stride, 1), ("pool_pads", pads, 0)):
        if min(values) < low:
            raise FormatError(f"{ctx.where()}: {name} {values} must be >= {low}")
    return kernel, pads, stride


@importer("pooling")
def _pooling(ctx, layer, params, inputs):
    (x,) = layer_inputs(ctx, inputs)
    spatial = x.dims[1:]
    kernel, pads, stride = pool_geometry(ctx, params, len(spatial))
    modes = {"max": ("MaxPool", {}), "average": ("AveragePool", {"count_include_pad": 1}),
             "average_no_pad": ("AveragePool", {"count_include_pad": 0})}
    if params.pool_mode not in modes:
        raise FormatError(f"{ctx.where()}: unknown pool_mode '{params.pool_mode}' (max, average, average_no_pad)")
    op, attrs = modes[params.pool_mode]
    out = [(i + 2 * p - kk) // s + 1 for i, kk, s, p in zip(spatial, kernel, stride, pads)]
    attrs = {**attrs, "kernel_shape": kernel, "strides": stride, "pads": pads + pads}
    return [ctx.emit(op, [x], _positive(ctx, (x.dims[0], *out)), attrs, final=True)]


@importer("embedding")
def _embedding(ctx, layer, params, inputs):
    (x,) = layer_inputs(ctx, inputs)
    n, d = int(params.num_embeddings), int(params.embedding_dim)
    table = ctx.weights(0, "weights", d, n, fans=(n, d), default="he_normal").T  # stored D × N
    pad = params.padding_idx.value if params.HasField("padding_idx") else -1
    if 0 <= pad < min(d, n):  # LBANN zeroes that embedding at setup when 0 <= padding_idx < embedding_dim
        table = table.copy()
        table[pad] = 0.0
    return [embedding_lookup(ctx, x, table)]


def embedding_lookup(ctx: ImportContext, x: Tensor, table: np.ndarray) -> Tensor:
    """The rows of ``table`` (N × D) that the indices ``x`` name, as LBANN's embedding layers read them."""
    index = x if x.value.type.dtype is DType.INT64 else \
        ctx.emit("Cast", [x], x.dims, {"to": DType.INT64.onnx}, dtype=DType.INT64)
    return ctx.emit("Gather", [ctx.const(np.ascontiguousarray(table), "table", slot=0), index],
                    (*x.dims, table.shape[1]), {"axis": 0}, final=True)


@importer("channelwise_fully_connected")
def _channelwise_fully_connected(ctx, layer, params, inputs):
    (x,) = layer_inputs(ctx, inputs)
    if len(x.dims) < 2:
        raise ShapeError(f"{ctx.where()}: needs an input of at least 2 dims, got {list(x.dims)}")
    channels, n_in = x.dims[0], math.prod(x.dims[1:])
    out_dims = tuple(int(d) for d in params.output_channel_dims)
    n_out = math.prod(out_dims)
    transpose = params.transpose.value if params.HasField("transpose") else False
    matrix = ctx.weights(0, "linearity_weights", *((n_in, n_out) if transpose else (n_out, n_in)), fans=(n_in, n_out))
    rhs = matrix if transpose else matrix.T
    if len(x.dims) > 2:
        x = ctx.emit("Reshape", [x, ctx.ints((ctx.batch, channels, n_in), "view")], (channels, n_in))
    has_bias = params.bias.value if params.HasField("bias") else True
    final_shape = len(out_dims) == 1
    y = ctx.emit("MatMul", [x, ctx.const(np.ascontiguousarray(rhs), "linearity", slot=0)], (channels, n_out),
                 final=final_shape and not has_bias)
    if has_bias:
        bias = ctx.weights(1, "bias_weights", n_out, default="zeros").reshape(n_out)
        y = ctx.emit("Add", [y, ctx.const(bias, "bias", slot=1)], (channels, n_out), final=final_shape)
    if not final_shape:
        y = ctx.emit("Reshape", [y, ctx.ints((ctx.batch, channels, *out_dims), "shape")], (channels, *out_dims),
                     final=True)
    return [y]


def _scale_bias(ctx, x: Tensor, matrix: np.ndarray, shape: tuple[int, ...]) -> Tensor:
    scaled = ctx.emit("Mul", [x, ctx.const(matrix[:, 0].reshape(shape), "scale")], x.dims)
    return ctx.emit("Add", [scaled, ctx.const(matrix[:, 1].reshape(shape), "bias")], x.dims, final=True)


@importer("channelwise_scale_bias")
def _channelwise_scale_bias(ctx, layer, params, inputs):
    (x,) = layer_inputs(ctx, inputs)
    c = x.dims[0]
    matrix = ctx.weights(0, "weights", c, 2, default="ones")
    if not list(layer.weights):
        matrix[:, 1] = 0.0  # LBANN's default: scale 1, bias 0
    return [_scale_bias(ctx, x, matrix, (c,) + (1,) * (len(x.dims) - 1))]


@importer("entrywise_scale_bias")
def _entrywise_scale_bias(ctx, layer, params, inputs):
    (x,) = layer_inputs(ctx, inputs)
    matrix = ctx.weights(0, "weights", math.prod(x.dims), 2, default="ones")
    if not list(layer.weights):
        matrix[:, 1] = 0.0
    return [_scale_bias(ctx, x, matrix, x.dims)]


# -- normalization -------------------------------------------------------------

@importer("batch_normalization")
def _batch_normalization(ctx, layer, params, inputs):
    (x,) = layer_inputs(ctx, inputs)
    c = x.dims[0]
    slots = [("scale", "ones"), ("bias", "zeros"), ("running_mean", "zeros"), ("running_variance", "ones")]
    stats = [ctx.const(ctx.weights(i, name, c, default=fill).reshape(c), name, slot=i)
             for i, (name, fill) in enumerate(slots)]
    attrs = {"epsilon": params.epsilon or 1e-5, "momentum": params.decay or 0.9}
    return [ctx.emit("BatchNormalization", [x, *stats], x.dims, attrs, final=True)]


@importer("layer_norm")
def _layer_norm(ctx, layer, params, inputs):
    (x,) = layer_inputs(ctx, inputs)
    start = int(params.start_dim)
    start = start if start >= 0 else len(x.dims) + start
    if not 0 <= start < len(x.dims):
        raise FormatError(f"{ctx.where()}: start_dim {params.start_dim} is out of range for {list(x.dims)}")
    norm_dims = x.dims[start:]
    size = math.prod(norm_dims)
    slot = 0
    scale = np.ones(size, np.float32)
    if params.scale:
        scale, slot = ctx.weights(0, "scale_weights", size, default="ones").reshape(size), 1
    bias = np.zeros(size, np.float32)
    if params.bias:
        bias = ctx.weights(slot, "bias_weights", size, default="zeros").reshape(size)
    epsilon = params.epsilon.value if params.HasField("epsilon") else 1e-5
    ins = [x, ctx.const(scale.reshape(norm_dims), "scale", slot=0 if params.scale else None),
           ctx.const(bias.reshape(norm_dims), "bias", slot=slot if params.bias else None)]
    return [ctx.emit("LayerNormalization", ins, x.dims, {"axis": start + 1, "epsilon": epsilon}, final=True)]


@importer("instance_norm")
def _instance_norm(ctx, layer, params, inputs):
    (x,) = layer_inputs(ctx, inputs)
    c = x.dims[0]
    epsilon = params.epsilon.value if params.HasField("epsilon") else 1e-5
    ins = [x, ctx.const(np.ones(c, np.float32), "scale"), ctx.const(np.zeros(c, np.float32), "bias")]
    return [ctx.emit("InstanceNormalization", ins, x.dims, {"epsilon": epsilon}, final=True)]


@importer("local_response_normalization")
def _lrn(ctx, layer, params, inputs):
    (x,) = layer_inputs(ctx, inputs)
    attrs = {"size": int(params.window_width), "alpha": params.lrn_alpha, "beta": params.lrn_beta,
             "bias": params.lrn_k}
    return [ctx.emit("LRN", [x], x.dims, attrs, final=True)]


# -- tensor manipulation ---------------------------------------------------------

@importer("reshape")
def _reshape(ctx, layer, params, inputs):
    (x,) = layer_inputs(ctx, inputs)
    dims = [int(d) for d in params.dims]
    total = math.prod(x.dims)
    if dims.count(-1) > 1 or any(d == 0 or d < -1 for d in dims):
        raise FormatError(f"{ctx.where()}: dims {dims} may hold one -1 and otherwise positive sizes")
    if -1 in dims:
        known = math.prod(d for d in dims if d != -1)
        dims[dims.index(-1)] = total // known if known and total % known == 0 else -2
    if math.prod(dims) != total or any(d < 0 for d in dims):
        raise ShapeError(f"{ctx.where()}: cannot reshape {list(x.dims)} ({total} values) to {list(params.dims)}")
    return [ctx.emit("Reshape", [x, ctx.ints((ctx.batch, *dims), "shape")], dims, final=True)]


@importer("permute")
def _permute(ctx, layer, params, inputs):
    (x,) = layer_inputs(ctx, inputs)
    axes = [int(a) for a in params.axes]
    if sorted(axes) != list(range(len(x.dims))):
        raise FormatError(f"{ctx.where()}: axes {axes} are not a permutation of {len(x.dims)} dims")
    dims = tuple(x.dims[a] for a in axes)
    return [ctx.emit("Transpose", [x], dims, {"perm": [0] + [a + 1 for a in axes]}, final=True)]


@importer("concatenation")
def _concatenation(ctx, layer, params, inputs):
    xs = layer_inputs(ctx, inputs, None)
    axis = int(params.axis)
    rank = len(xs[0].dims)
    if not 0 <= axis < rank or any(len(x.dims) != rank or x.dims[:axis] + x.dims[axis + 1:] !=
                                   xs[0].dims[:axis] + xs[0].dims[axis + 1:] for x in xs):
        raise ShapeError(f"{ctx.where()}: cannot concatenate {[list(x.dims) for x in xs]} on axis {axis}")
    dims = list(xs[0].dims)
    dims[axis] = sum(x.dims[axis] for x in xs)
    return [ctx.emit("Concat", xs, dims, {"axis": axis + 1}, final=True)]


@importer("slice")
def _slice(ctx, layer, params, inputs):
    (x,) = layer_inputs(ctx, inputs)
    axis, points = int(params.axis), [int(p) for p in params.slice_points]
    if params.get_slice_points_from_reader:
        points = reader_slice_points(ctx.slice_points, params.get_slice_points_from_reader, ctx.where(),
                                     "get_slice_points_from_reader")
    if not 0 <= axis < len(x.dims) or len(points) < 2 or points != sorted(points) or points[-1] > x.dims[axis] \
            or points[0] < 0:
        raise FormatError(f"{ctx.where()}: slice_points {points} on axis {axis} do not fit {list(x.dims)}")
    outs = []
    for start, end in zip(points, points[1:]):
        dims = list(x.dims)
        dims[axis] = end - start
        ins = [x, ctx.ints([start], "starts"), ctx.ints([end], "ends"), ctx.ints([axis + 1], "axes")]
        outs.append(ctx.emit("Slice", ins, dims, final=len(points) == 2))
    return outs


@importer("sum")
def _sum(ctx, layer, params, inputs):
    xs = same_shapes(ctx, layer_inputs(ctx, inputs, None))
    return [ctx.emit("Sum", xs, xs[0].dims, final=True)]


@importer("hadamard")
def _hadamard(ctx, layer, params, inputs):
    xs = same_shapes(ctx, layer_inputs(ctx, inputs, None))
    y = xs[0]
    for i, x in enumerate(xs[1:], 2):
        y = ctx.emit("Mul", [y, x], y.dims, final=i == len(xs))
    return [y if len(xs) > 1 else ctx.emit("Identity", [y], y.dims, final=True)]


@importer("weighted_sum")
def _weighted_sum(ctx, layer, params, inputs):
    xs = same_shapes(ctx, layer_inputs(ctx, inputs, None))
    factors = list(params.scaling_factors)
    if len(factors) != len(xs):
        raise FormatError(f"{ctx.where()}: {len(factors)} scaling_factors for {len(xs)} parents")
    terms = [ctx.emit("Mul", [x, ctx.const(np.float32(f), "factor")], x.dims) for x, f in zip(xs, factors)]
    return [ctx.emit("Sum", terms, xs[0].dims, final=True)]


def same_shapes(ctx, xs: list[Tensor]) -> list[Tensor]:
    if any(x.dims != xs[0].dims for x in xs):
        raise ShapeError(f"{ctx.where()}: parents have different shapes {[list(x.dims) for x in xs]} "
                         f"(LBANN does not broadcast)")
    return xs


def broadcast_constant(ctx, values: np.ndarray, dims: tuple[int, ...]) -> list[Tensor]:
    """A per-sample constant repeated over the mini-batch (LBANN's constant/weights_layer)."""
    const = ctx.const(values.astype(np.float32).reshape(1, *dims), "value")
    return [ctx.emit("Expand", [const, ctx.ints((ctx.batch, *dims), "shape")], dims, final=True)]


def _own_dims(ctx, dims) -> tuple[int, ...]:
    """A layer's output dims: its hint_layer's when it names one (LBANN's Layer::setup_dims, which
    constant, weights and noise layers do not override: a layer without a size of its own takes
    the hint's), else the layer's own."""
    return ctx.hint if ctx.hint is not None else tuple(int(d) for d in dims)


@importer("constant")
def _constant(ctx, layer, params, inputs):
    layer_inputs(ctx, inputs, 0)
    dims = _own_dims(ctx, params.num_neurons)
    return broadcast_constant(ctx, np.full(dims, params.value, np.float32), dims)


def _noise_dims(ctx, params) -> tuple[int, ...]:
    return ctx.hint if ctx.hint is not None else _positive(ctx, [int(d) for d in params.neuron_dims])


def _seed(ctx) -> float:
    """A fixed seed per layer, so that runs repeat (LBANN seeds its generators per trainer)."""
    return float(zlib.crc32(ctx.layer.name.encode()) % 2**24)


@importer("gaussian", "uniform")
def _noise(ctx, layer, params, inputs):
    """Random per sample; with ``training_only``, inference gives the mean (LBANN's fp_compute)."""
    layer_inputs(ctx, inputs, 0)
    dims = _noise_dims(ctx, params)
    gaussian = layer.WhichOneof("layer_type") == "gaussian"
    mean = params.mean if gaussian else (params.min + params.max) / 2
    if params.training_only:
        params.read.add("stdev")  # it only spreads the draws made while training
        return broadcast_constant(ctx, np.full(dims, mean, np.float32), dims)
    attrs = {"shape": [ctx.batch, *dims], "seed": _seed(ctx), "dtype": DType.FLOAT32.onnx}
    attrs.update({"mean": params.mean, "scale": params.stdev} if gaussian else {"low": params.min, "high": params.max})
    return [ctx.emit("RandomNormal" if gaussian else "RandomUniform", [], dims, attrs, final=True)]


@importer("bernoulli")
def _bernoulli(ctx, layer, params, inputs):
    """LBANN draws Bernoulli noise only while training; inference gives zeros."""
    layer_inputs(ctx, inputs, 0)
    dims = _noise_dims(ctx, params)
    return broadcast_constant(ctx, np.zeros(dims, np.float32), dims)


@importer("weights_layer")
def _weights_layer(ctx, layer, params, inputs):
    layer_inputs(ctx, inputs, 0)
    dims = _own_dims(ctx, params.dims)
    return broadcast_constant(ctx, ctx.weights(0, "weights", math.prod(dims), default="zeros"), dims)


@importer("tessellate")
def _tessellate(ctx, layer, params, inputs):
    (x,) = layer_inputs(ctx, inputs)
    dims = ctx.hint if ctx.hint is not None else tuple(int(d) for d in params.dims)
    if len(dims) != len(x.dims) or not all(dims):
        raise ShapeError(f"{ctx.where()}: cannot tile {list(x.dims)} to {list(dims)}")
    repeats = [1] + [-(-o // i) for o, i in zip(dims, x.dims)]
    if all(o % i == 0 for o, i in zip(dims, x.dims)):
        return [ctx.emit("Tile", [x, ctx.ints(repeats, "repeats")], dims, final=True)]
    # output[i] = input[i mod n] per dim: tile past the target, then cut it
    tiled = ctx.emit("Tile", [x, ctx.ints(repeats, "repeats")], tuple(r * i for r, i in zip(repeats[1:], x.dims)))
    ends = ctx.ints([ctx.batch, *dims], "ends")
    return [ctx.emit("Slice", [tiled, ctx.ints([0] * (len(dims) + 1), "starts"), ends], dims, final=True)]


@importer("channelwise_mean")
def _channelwise_mean(ctx, layer, params, inputs):
    (x,) = layer_inputs(ctx, inputs)
    axes = list(range(2, len(x.dims) + 1))
    if not axes:
        return [ctx.emit("Identity", [x], x.dims, final=True)]
    return [ctx.emit("ReduceMean", [x, ctx.ints(axes, "axes")], (x.dims[0],), {"keepdims": 0}, final=True)]


@importer("reduction")
def _reduction(ctx, layer, params, inputs):
    (x,) = layer_inputs(ctx, inputs)
    ops = {"sum": "ReduceSum", "mean": "ReduceMean", "": "ReduceSum"}
    if params.mode not in ops:
        raise FormatError(f"{ctx.where()}: unknown reduction mode '{params.mode}' (sum, mean)")
    flat = ctx.emit("Flatten", [x], (math.prod(x.dims),), {"axis": 1})
    return [ctx.emit(ops[params.mode], [flat, ctx.ints([1], "axes")], (1,), {"keepdims": 1}, final=True)]


@importer("matmul")
def _matmul(ctx, layer, params, inputs):
    a, b = layer_inputs(ctx, inputs, 2)
    if len(a.dims) not in (2, 3) or len(b.dims) != len(a.dims):
        raise ShapeError(f"{ctx.where()}: matmul takes two 2-D or two 3-D inputs, got {list(a.dims)}, {list(b.dims)}")
    a, b = (_swap_last(ctx, t) if flag else t for t, flag in ((a, params.transpose_a), (b, params.transpose_b)))
    if a.dims[-1] != b.dims[-2] or a.dims[:-2] != b.dims[:-2]:
        raise ShapeError(f"{ctx.where()}: cannot multiply {list(a.dims)} by {list(b.dims)}")
    return [ctx.emit("MatMul", [a, b], (*a.dims[:-1], b.dims[-1]), final=True)]


def _swap_last(ctx, x: Tensor) -> Tensor:
    n = len(x.dims) + 1
    perm = list(range(n - 2)) + [n - 1, n - 2]
    return ctx.emit("Transpose", [x], (*x.dims[:-2], x.dims[-1], x.dims[-2]), {"perm": perm})


# -- operator layers -----------------------------------------------------------

_ONNX_OF = {v: k for k, v in UNARY.items()}
_BINARY_OF = {v: k for k, v in BINARY.items()}


@importer("operator_layer")
def _operator_layer(ctx, layer, params, inputs):
    if not params.ops:
        raise FormatError(f"{ctx.where()}: operator_layer has no ops")
    current = layer_inputs(ctx, inputs, None)
    for i, op in enumerate(params.ops):
        name = op.parameters.type_url.rsplit("/", 1)[-1].removeprefix("lbann_data.")
        last = i == len(params.ops) - 1
        current = [_apply_operator(ctx, name, op, current, last)]
    return current


def _apply_operator(ctx, name: str, op, xs: list[Tensor], last: bool) -> Tensor:
    cls = lbann_pb2.DESCRIPTOR.message_types_by_name.get(name)  # a message type, never another module attribute
    cls = getattr(lbann_pb2, name) if cls is not None else None
    if cls is None:
        raise FormatError(f"{ctx.where()}: unknown operator type '{op.parameters.type_url}'")
    message = cls()
    op.parameters.Unpack(message)
    if name in COMPOSED:
        arity, build = COMPOSED[name]
        if arity is None:  # SelectOperator: constants replace inputs
            arity = 3 - bool(message.constant_if_true) - bool(message.constant_if_false)
        xs = layer_inputs(ctx, xs, arity)
        xs = same_shapes(ctx, xs) if arity > 1 else xs
        return build(Builder(ctx, xs[0].dims, last), xs, message)
    if name in _BINARY_OF:
        a, b = same_shapes(ctx, layer_inputs(ctx, xs, 2))
        return ctx.emit(_BINARY_OF[name], [a, b], a.dims, final=last)
    (x,) = layer_inputs(ctx, xs)
    if name in _ONNX_OF:
        return ctx.emit(_ONNX_OF[name], [x], x.dims, final=last)
    if name in CONSTANT_OPS:
        onnx_op, constant_first = CONSTANT_OPS[name]
        c = ctx.const(np.float32(message.constant), "constant")
        return ctx.emit(onnx_op, [c, x] if constant_first else [x, c], x.dims, final=last)
    if name == "ClampOperator":
        ins = [x, ctx.const(np.float32(message.min), "min"), ctx.const(np.float32(message.max), "max")]
        return ctx.emit("Clip", ins, x.dims, final=last)
    if name in COMPOSITE:
        steps = COMPOSITE[name]
        y = x
        for j, (onnx_op, constant) in enumerate(steps):
            other = [y] if onnx_op == "Mul" and constant is None else \
                ([] if constant is None else [ctx.const(np.float32(constant), "constant")])
            y = ctx.emit(onnx_op, [y, *other], x.dims, final=last and j == len(steps) - 1)
        return y
    raise UnsupportedOpError(f"LBANN import of {ctx.source}", [Unsupported(name, ctx.layer.name,
                                                                           "no ONNX equivalent in nnbridge")])
