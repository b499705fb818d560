"""ONNX → LBANN exporters for layers with weights or windows: convolution, pooling,
fully-connected, normalization, softmax, embedding (specs/lbann-format.md §6.2, §8).

Weights are registered as LBANN matrices (Height × Width) plus the natural array
a ``.npy`` holds; ``weights.column_major`` later turns matrices into
``value_initializer`` lists.
"""

from __future__ import annotations

import math

import numpy as np

from ...ir import Node
from .exporting import ExportContext, Inexpressible, exporter


def _pads(ctx: ExportContext, node: Node, spatial, kernel, strides, dilations) -> tuple[list[int], list[int]]:
    """(begin, end) padding per spatial dim, ``auto_pad`` resolved."""
    n = len(spatial)
    auto = node.attr("auto_pad", "NOTSET")
    if auto in ("SAME_UPPER", "SAME_LOWER"):
        total = [max((math.ceil(i / s) - 1) * s + (k - 1) * d + 1 - i, 0)
                 for i, k, s, d in zip(spatial, kernel, strides, dilations)]
        small = [t // 2 for t in total]
        large = [t - t // 2 for t in total]
        return (small, large) if auto == "SAME_UPPER" else (large, small)
    pads = [0] * (2 * n) if auto == "VALID" else [int(p) for p in node.attr("pads", [0] * (2 * n))]
    return pads[:n], pads[n:]


def _symmetric(begin: list[int], end: list[int]) -> list[int]:
    if begin != end:
        raise Inexpressible(f"asymmetric pads {begin + end}; LBANN pads symmetrically")
    return begin


def _window(ctx: ExportContext, node: Node, kernel: list[int]):
    dims = ctx.sample(node.inputs[0])
    n = len(kernel)
    strides = [int(s) for s in node.attr("strides", [1] * n)]
    dilations = [int(d) for d in node.attr("dilations", [1] * n)]
    return dims, strides, dilations, _pads(ctx, node, dims[1:], kernel, strides, dilations)


@exporter("Conv", "ConvTranspose")
def _conv(ctx: ExportContext, node: Node) -> None:
    x, w_value, b_value = node.input(0), node.input(1), node.input(2)
    w = ctx.need_const(w_value, "the kernel")
    if w.ndim < 3 or (x.type.rank is not None and x.type.rank != w.ndim):
        raise Inexpressible(f"kernel of shape {list(w.shape)} does not fit an input of rank {x.type.rank}")
    kernel = [int(k) for k in node.attr("kernel_shape", list(w.shape[2:]))]
    dims, strides, dilations, (begin, end) = _window(ctx, node, kernel)
    pads = _symmetric(begin, end)
    groups = int(node.attr("group", 1))
    transposed = node.op == "ConvTranspose"
    if transposed and groups != 1:
        raise Inexpressible("grouped ConvTranspose has no documented LBANN weight layout")
    if transposed and node.attrs.get("output_shape"):
        raise Inexpressible("output_shape is not expressible; give pads/output_padding instead")
    out = node.outputs[0]
    ctx.sample(out)
    kind = "deconvolution" if transposed else "convolution"
    layer, params = ctx.layer(out.name, [ctx.parent(x)], kind, out)
    params.num_dims = len(kernel)
    params.out_channels = int(w.shape[1] * groups if transposed else w.shape[0])
    params.kernel_size.extend(kernel)
    params.stride.extend(strides)
    params.padding.extend(pads)
    if transposed:
        params.output_padding.extend(int(p) for p in node.attr("output_padding", [0] * len(kernel)))
    params.groups.value = groups
    params.has_bias.value = b_value is not None
    params.dilation.extend(dilations)
    layer.weights.append(ctx.add_weights(layer.name, "kernel", w.reshape(-1, 1), w, source=w_value))
    if b_value is not None:
        b = ctx.need_const(b_value, "the bias")
        layer.weights.append(ctx.add_weights(layer.name, "bias", b.reshape(-1, 1), b, source=b_value))


@exporter("MaxPool", "AveragePool")
def _pool(ctx: ExportContext, node: Node) -> None:
    if node.attr("ceil_mode", 0):
        raise Inexpressible("ceil_mode = 1 pooling; LBANN rounds output sizes down")
    if len(node.outputs) > 1 and ctx.graph.consumers(node.outputs[1]):
        raise Inexpressible("the Indices output of MaxPool has no LBANN equivalent")
    kernel = [int(k) for k in node.attr("kernel_shape")]
    dims, strides, dilations, (begin, end) = _window(ctx, node, kernel)
    if any(d != 1 for d in dilations):
        raise Inexpressible("dilated pooling; LBANN pooling has no dilation")
    mode = "max" if node.op == "MaxPool" else ("average" if node.attr("count_include_pad", 0) else "average_no_pad")
    if mode == "average_no_pad" and not any(begin + end):
        mode = "average"  # the same without pads, and LBANN's CPU pooling aborts on average_no_pad
    parent = ctx.parent(node.inputs[0])
    if begin != end:
        if mode == "average_no_pad":
            raise Inexpressible(f"asymmetric pads {begin + end} with count_include_pad = 0; LBANN pads "
                                f"symmetrically")
        parent = _pre_pad(ctx, node, parent, dims, begin, end, mode)
    _pooling(ctx, node, mode, kernel, strides, [min(b, e) for b, e in zip(begin, end)], parent)


def _pre_pad(ctx: ExportContext, node: Node, parent: str, dims, begin, end, mode: str) -> str:
    """The asymmetric part of pooling pads as concatenated constant slabs: the lowest float for
    max pooling (never selected), zeros for counted average padding."""
    fill = float(-np.finfo(np.float32).max) if mode == "max" else 0.0
    shape = list(dims)
    for axis, (b, e) in enumerate(zip(begin, end), start=1):
        extra, at_end = abs(e - b), e > b
        if not extra:
            continue
        slab_dims = shape.copy()
        slab_dims[axis] = extra
        slab, params = ctx.layer(f"{node.outputs[0].name}_pad{axis}", [], "constant")
        params.value = fill
        params.num_neurons.extend(slab_dims)
        parents = [parent, slab.name] if at_end else [slab.name, parent]
        cat, params = ctx.layer(f"{node.outputs[0].name}_padded{axis}", parents, "concatenation")
        params.axis = axis
        parent = cat.name
        shape[axis] += extra
    return parent


def _pooling(ctx: ExportContext, node: Node, mode: str, kernel, strides, pads, parent: str | None = None) -> None:
    out = node.outputs[0]
    ctx.sample(out)
    parent = ctx.parent(node.inputs[0]) if parent is None else parent
    _, params = ctx.layer(out.name, [parent], "pooling", out)
    params.pool_mode = mode
    params.num_dims = len(kernel)
    params.has_vectors = True
    params.pool_dims.extend(kernel)
    params.pool_pads.extend(pads)
    params.pool_strides.extend(strides)


@exporter("GlobalMaxPool", "GlobalAveragePool")
def _global_pool(ctx: ExportContext, node: Node) -> None:
    """A window over the whole image keeps the 4-D result (spec §8 also allows channelwise_mean)."""
    spatial = list(ctx.sample(node.inputs[0])[1:])
    mode = "max" if node.op == "GlobalMaxPool" else "average"
    _pooling(ctx, node, mode, spatial, [1] * len(spatial), [0] * len(spatial))


def _fully_connected(ctx: ExportContext, node: Node, x, linear: np.ndarray, bias: np.ndarray | None, out,
                     sources: tuple = (None, None)) -> None:
    """``linear`` is the (out, in) matrix; written with transpose = true (LBANN's PyTorch frontend style).
    ``sources``: the constants the matrix and the bias come from (their names name the weights)."""
    dims = ctx.sample(x)
    if len(dims) != 1 or linear.shape[1] != dims[0]:
        raise Inexpressible(f"fully-connected input {list(dims)} does not match weights {list(linear.shape)}")
    ctx.sample(out)
    layer, params = ctx.layer(out.name, [ctx.parent(x)], "fully_connected", out)
    params.num_neurons = int(linear.shape[0])
    params.has_bias = bias is not None
    params.transpose = True
    layer.weights.append(ctx.add_weights(layer.name, "linearity", linear.T, source=sources[0]))
    if bias is not None:
        layer.weights.append(ctx.add_weights(layer.name, "bias", bias.reshape(-1, 1), bias.reshape(-1),
                                             source=sources[1]))


def _bias_vector(array: np.ndarray, n: int) -> np.ndarray | None:
    """A bias that adds the same length-n vector to every row, else None."""
    array = np.asarray(array, dtype=np.float32)
    if array.size == 1 or (array.shape and array.shape[-1] == n and array.size == n):
        return np.broadcast_to(array.reshape(-1), (n,)).copy()
    return None


@exporter("Gemm")
def _gemm(ctx: ExportContext, node: Node) -> None:
    if node.attr("transA", 0):
        raise Inexpressible("transA = 1 transposes across the batch dimension")
    b = np.asarray(ctx.need_const(node.input(1), "the B matrix"), dtype=np.float32)  # no copy of a float32 matrix
    linear = b if node.attr("transB", 0) else b.T
    if node.attr("alpha", 1.0) != 1.0:
        linear = linear * np.float32(node.attr("alpha", 1.0))
    bias = None
    if node.input(2) is not None:
        c = ctx.need_const(node.input(2), "the C bias")
        bias = _bias_vector(c, linear.shape[0])
        if bias is None:
            raise Inexpressible(f"C of shape {list(c.shape)} is not one bias vector for every sample")
        bias = bias * np.float32(node.attr("beta", 1.0))
    _fully_connected(ctx, node, node.inputs[0], linear, bias, node.outputs[0], (node.input(1), node.input(2)))


@exporter("MatMul")
def _matmul(ctx: ExportContext, node: Node) -> None:
    a, b = node.inputs
    rhs = ctx.const(b)
    if ctx.const(a) is not None:
        raise Inexpressible("a constant left operand; LBANN multiplies activations by weights on the right")
    if rhs is None:
        return _matmul_activations(ctx, node)
    if rhs.ndim != 2:
        raise Inexpressible(f"a constant right operand of rank {rhs.ndim}; LBANN takes a matrix")
    out, bias, bias_source = node.outputs[0], None, None
    add = ctx.sole_consumer(out)
    if add is not None and add.op == "Add" and not add.domain:
        other = add.inputs[1] if add.inputs[0] is out else add.inputs[0]
        c = ctx.const(other)
        bias = None if c is None or c.ndim > len(out.type.shape or ()) else _bias_vector(c, rhs.shape[1])
        if bias is not None:
            ctx.absorbed.add(id(add))
            out, bias_source = add.outputs[0], other
    dims = ctx.sample(a)
    if len(dims) == 1:
        return _fully_connected(ctx, node, a, rhs.T, bias, out, (b, bias_source))
    _channelwise_fully_connected(ctx, a, dims, rhs, bias, out, (b, bias_source))


def _channelwise_fully_connected(ctx: ExportContext, a, dims, rhs: np.ndarray, bias, out,
                                 sources: tuple = (None, None)) -> None:
    """Rank ≥ 2 samples: the same affine map on every row (viewed as [rows, in])."""
    parent = ctx.parent(a)
    rows = math.prod(dims[:-1])
    if len(dims) > 2:
        view, params = ctx.layer(f"{out.name}_rows", [parent], "reshape")
        params.dims.extend([rows, dims[-1]])
        parent = view.name
    final = len(dims) == 2
    layer, params = ctx.layer(out.name if final else f"{out.name}_linear", [parent],
                              "channelwise_fully_connected", out if final else None)
    params.output_channel_dims.append(int(rhs.shape[1]))
    params.bias.value = bias is not None
    params.transpose.value = False
    layer.weights.append(ctx.add_weights(layer.name, "linearity", rhs.T, source=sources[0]))  # out × in
    if bias is not None:
        layer.weights.append(ctx.add_weights(layer.name, "bias", bias.reshape(-1, 1), bias, source=sources[1]))
    if not final:
        _, shape = ctx.layer(out.name, [layer.name], "reshape", out)
        shape.dims.extend(ctx.sample(out))


def _matmul_activations(ctx: ExportContext, node: Node) -> None:
    a, b = node.inputs
    da, db = ctx.sample(a), ctx.sample(b)
    if len(da) not in (2, 3) or len(db) != len(da) or da[:-2] != db[:-2]:
        raise Inexpressible(f"matmul of {list(da)} by {list(db)}; LBANN multiplies 2-D or batched 3-D samples "
                            f"without broadcasting")
    out = node.outputs[0]
    ctx.layer(out.name, [ctx.parent(a), ctx.parent(b)], "matmul", out)


@exporter("BatchNormalization")
def _batch_normalization(ctx: ExportContext, node: Node) -> None:
    if node.attr("training_mode", 0) or len(node.outputs) > 1:
        raise Inexpressible("training-mode BatchNormalization (extra outputs)")
    stats = [ctx.need_const(node.input(i), what) for i, what in
             ((1, "scale"), (2, "bias"), (3, "running mean"), (4, "running variance"))]
    out = node.outputs[0]
    ctx.sample(out)
    layer, params = ctx.layer(out.name, [ctx.parent(node.inputs[0])], "batch_normalization", out)
    params.decay = float(node.attr("momentum", 0.9))
    params.epsilon = float(node.attr("epsilon", 1e-5))
    if ctx.at_least("0.104"):
        params.no_bessel_correction = True
    for i, ((suffix, frozen), array) in enumerate(zip((("scale", False), ("bias", False), ("running_mean", True),
                                                       ("running_variance", True)), stats), start=1):
        layer.weights.append(ctx.add_weights(layer.name, suffix, array.reshape(-1, 1), array, frozen=frozen,
                                             source=node.input(i)))


@exporter("LayerNormalization")
def _layer_norm(ctx: ExportContext, node: Node) -> None:
    x, out = node.inputs[0], node.outputs[0]
    if any(ctx.graph.consumers(o) for o in node.outputs[1:]):
        raise Inexpressible("the Mean/InvStdDev outputs have no LBANN equivalent")
    dims = ctx.sample(x)
    axis = int(node.attr("axis", -1))
    axis = axis + len(dims) + 1 if axis < 0 else axis
    if axis < 1:
        raise Inexpressible("normalizes across the batch dimension")
    start = axis - 1
    norm = dims[start:]
    scale = ctx.per_sample_constant(ctx.need_const(node.input(1), "scale"), norm)
    bias = ctx.per_sample_constant(ctx.const(node.input(2)) if node.input(2) is not None else
                                   np.zeros(1, np.float32), norm)
    epsilon = float(node.attr("epsilon", 1e-5))
    if start and not ctx.at_least("develop"):
        raise Inexpressible(f"normalizes dims {list(norm)} of a {list(dims)} sample; LBANN {ctx.version} "
                            f"layer_norm normalizes whole samples (use --lbann-version develop for start_dim)")
    affine = ctx.at_least("0.104")
    layer, params = ctx.layer(out.name if affine else f"{out.name}_norm", [ctx.parent(x)], "layer_norm",
                              out if affine else None)
    params.epsilon.value = epsilon
    if start:
        params.start_dim = start - len(dims)
    if affine:
        params.scale = params.bias = True
        layer.weights.append(ctx.add_weights(layer.name, "scale", scale.reshape(-1, 1), scale, source=node.input(1)))
        layer.weights.append(ctx.add_weights(layer.name, "bias", bias.reshape(-1, 1), bias, source=node.input(2)))
        return
    sb, _ = ctx.layer(out.name, [layer.name], "entrywise_scale_bias", out)
    sb.weights.append(ctx.add_weights(sb.name, "weights", np.stack([scale.reshape(-1), bias.reshape(-1)], 1)))


@exporter("InstanceNormalization")
def _instance_norm(ctx: ExportContext, node: Node) -> None:
    out = node.outputs[0]
    dims = ctx.sample(node.inputs[0])
    scale = ctx.need_const(node.input(1), "scale").reshape(-1)
    bias = ctx.need_const(node.input(2), "bias").reshape(-1)
    norm, params = ctx.layer(f"{out.name}_norm", [ctx.parent(node.inputs[0])], "instance_norm")
    params.epsilon.value = float(node.attr("epsilon", 1e-5))
    if scale.size != dims[0] or bias.size != dims[0]:
        raise Inexpressible(f"scale/bias of {scale.size}/{bias.size} values for {dims[0]} channels")
    sb, _ = ctx.layer(out.name, [norm.name], "channelwise_scale_bias", out)
    sb.weights.append(ctx.add_weights(sb.name, "weights", np.stack([scale, bias], 1)))


@exporter("LRN")
def _lrn(ctx: ExportContext, node: Node) -> None:
    """LBANN's local_response_normalization computes k + alpha·Σx² on CPUs but k + alpha/n·Σx² on
    GPUs (cuDNN), and even windows differ too; written instead as layers both builds compute
    alike: x² → its sum over the channel window (a frozen 1×…×1 convolution with a band of ones)
    → (k + alpha/n·sum)^−beta (operators) → × x."""
    x, out = node.inputs[0], node.outputs[0]
    dims = ctx.sample(x)
    ctx.sample(out)
    if len(dims) < 2:
        raise Inexpressible("LRN of a sample without spatial dims")
    size, channels, spatial = int(node.attr("size")), dims[0], len(dims) - 1
    alpha, beta, k = (float(node.attr(a, d)) for a, d in (("alpha", 1e-4), ("beta", 0.75), ("bias", 1.0)))
    below = (size - 1) // 2  # ONNX's window: channels c − ⌊(size−1)/2⌋ … c + ⌈(size−1)/2⌉
    band = np.zeros((channels, channels), np.float32)
    for c in range(channels):
        band[c, max(c - below, 0):min(c - below + size, channels)] = 1.0
    kernel = band.reshape(channels, channels, *([1] * spatial))
    parent = ctx.parent(x)
    square = ctx.operator_layer(f"{out.name}_square", [parent], [ctx.operator("SquareOperator")])
    window, params = ctx.layer(f"{out.name}_window", [square.name], "convolution")
    params.num_dims, params.out_channels = spatial, channels
    params.kernel_size.extend([1] * spatial)
    params.stride.extend([1] * spatial)
    params.padding.extend([0] * spatial)
    params.dilation.extend([1] * spatial)
    params.groups.value, params.has_bias.value = 1, False
    window.weights.append(ctx.add_weights(window.name, "band", kernel.reshape(-1, 1), kernel, frozen=True))
    scale = ctx.operator_layer(f"{out.name}_scale", [window.name], [
        ctx.operator("ScaleOperator", constant=alpha / size), ctx.operator("AddConstantOperator", constant=k),
        ctx.operator("LogOperator"), ctx.operator("ScaleOperator", constant=-beta), ctx.operator("ExpOperator")])
    ctx.operator_layer(out.name, [parent, scale.name], [ctx.operator("MultiplyOperator")], out)


@exporter("Softmax", "LogSoftmax")
def _softmax(ctx: ExportContext, node: Node) -> None:
    x, out = node.inputs[0], node.outputs[0]
    dims = ctx.sample(x)
    axis = int(node.attr("axis", -1))
    axis = axis + len(dims) + 1 if axis < 0 else axis
    if axis != len(dims):
        raise Inexpressible(f"{node.op} over axis {axis} of a rank-{len(dims) + 1} tensor; LBANN normalizes the "
                            f"last axis only")
    if len(dims) == 1:
        ctx.layer(out.name, [ctx.parent(x)], "softmax" if node.op == "Softmax" else "log_softmax", out)
        return
    if node.op == "LogSoftmax":
        raise Inexpressible("LogSoftmax over the last axis of a sample with more than one dim")
    if ctx.at_least("0.104"):
        _, params = ctx.layer(out.name, [ctx.parent(x)], "channelwise_softmax", out)
        params.dim = -1
        params.single_dim_mode = True
        return
    rows = math.prod(dims[:-1])  # v0.103: channelwise softmax of the [rows, last] view
    view, params = ctx.layer(f"{out.name}_rows", [ctx.parent(x)], "reshape")
    params.dims.extend([rows, dims[-1]])
    soft, _ = ctx.layer(f"{out.name}_softmax", [view.name], "channelwise_softmax")
    _, params = ctx.layer(out.name, [soft.name], "reshape", out)
    params.dims.extend(dims)


@exporter("Gather")
def _gather(ctx: ExportContext, node: Node) -> None:
    table = ctx.const(node.inputs[0])
    if table is None or table.ndim != 2 or int(node.attr("axis", 0)) != 0:
        raise Inexpressible("only a lookup in a constant 2-D table (axis 0) maps to LBANN's embedding")
    out = node.outputs[0]
    ctx.sample(node.inputs[1])
    ctx.sample(out)
    layer, params = ctx.layer(out.name, [ctx.parent(node.inputs[1])], "embedding", out)
    params.num_embeddings, params.embedding_dim = int(table.shape[0]), int(table.shape[1])
    layer.weights.append(ctx.add_weights(layer.name, "weights", table.T, source=node.inputs[0]))  # D × N
