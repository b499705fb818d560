"""ONNX → LBANN exporters for activations, element-wise math and tensor reshuffling
(specs/lbann-format.md §5, §8). Axes shift by one: LBANN's axis 0 is the first
non-batch dim, and anything that moves or mixes the batch dim is refused.
"""

from __future__ import annotations

import numpy as np

from ...ir import DType, Node
from .exporting import ExportContext, Inexpressible, exporter
from .mapping import BINARY, UNARY, WITH_CONSTANT

_SIMPLE = {"Relu": "relu", "Identity": "identity"}


@exporter(*_SIMPLE)
def _simple(ctx: ExportContext, node: Node) -> None:
    out = node.outputs[0]
    ctx.sample(out)
    ctx.layer(out.name, [ctx.parent(node.inputs[0])], _SIMPLE[node.op], out)


@exporter("LeakyRelu", "Elu")
def _alpha_activation(ctx: ExportContext, node: Node) -> None:
    out = node.outputs[0]
    ctx.sample(out)
    alpha = float(node.attr("alpha", 0.01 if node.op == "LeakyRelu" else 1.0))
    if alpha == 0.0:  # LBANN reads 0 as "use the default"; both ops are Relu then
        ctx.layer(out.name, [ctx.parent(node.inputs[0])], "relu", out)
        return
    kind = "leaky_relu" if node.op == "LeakyRelu" else "elu"
    _, params = ctx.layer(out.name, [ctx.parent(node.inputs[0])], kind, out)
    if node.op == "LeakyRelu":
        params.negative_slope = alpha
    else:
        params.alpha = alpha


@exporter("Dropout")
def _dropout(ctx: ExportContext, node: Node) -> None:
    if len(node.outputs) > 1 and ctx.graph.consumers(node.outputs[1]):
        raise Inexpressible("the dropout mask output has no LBANN equivalent")
    ratio = ctx.const(node.input(1))
    out = node.outputs[0]
    ctx.sample(out)
    _, params = ctx.layer(out.name, [ctx.parent(node.inputs[0])], "dropout", out)
    params.keep_prob = 1.0 - float(0.5 if ratio is None else np.asarray(ratio).reshape(-1)[0])


@exporter("Cast")
def _cast(ctx: ExportContext, node: Node) -> None:
    if DType(int(node.attr("to"))) is not DType.FLOAT32 or node.inputs[0].type.dtype is not DType.FLOAT32:
        raise Inexpressible("LBANN layers compute in one floating-point type; only float32 → float32 casts map")
    _simple_identity(ctx, node)


def _simple_identity(ctx: ExportContext, node: Node) -> None:
    out = node.outputs[0]
    ctx.sample(out)
    ctx.layer(out.name, [ctx.parent(node.inputs[0])], "identity", out)


@exporter("Gelu")
def _gelu(ctx: ExportContext, node: Node) -> None:
    """LBANN's GeluOperator is the tanh approximation (src/operators/math/unary.cpp); the exact
    Gelu reaches the writer decomposed over ErfOperator (ir/decompositions.py)."""
    if node.attr("approximate", "none") != "tanh":
        raise Inexpressible("exact Gelu; LBANN's GeluOperator is the tanh approximation")
    out = node.outputs[0]
    ctx.sample(out)
    ctx.operator_layer(out.name, [ctx.parent(node.inputs[0])], [ctx.operator("GeluOperator")], out)


@exporter(*UNARY)
def _unary(ctx: ExportContext, node: Node) -> None:
    if node.op == "Selu" and (abs(node.attr("alpha", 1.67326319) - 1.67326319) > 1e-6 or
                              abs(node.attr("gamma", 1.05070102) - 1.05070102) > 1e-6):
        raise Inexpressible("Selu with non-standard alpha/gamma")
    out = node.outputs[0]
    ctx.sample(out)
    ctx.operator_layer(out.name, [ctx.parent(node.inputs[0])], [ctx.operator(UNARY[node.op])], out)


@exporter("Clip")
def _clip(ctx: ExportContext, node: Node) -> None:
    bounds = []
    for i, default in ((1, -np.finfo(np.float32).max), (2, np.finfo(np.float32).max)):
        if node.input(i) is None:
            bounds.append(float(default))
        else:
            bounds.append(float(np.asarray(ctx.need_const(node.input(i), "a Clip bound")).reshape(-1)[0]))
    out = node.outputs[0]
    ctx.sample(out)
    ctx.operator_layer(out.name, [ctx.parent(node.inputs[0])],
                       [ctx.operator("ClampOperator", min=bounds[0], max=bounds[1])], out)


@exporter("Sum")
def _sum(ctx: ExportContext, node: Node) -> None:
    out = node.outputs[0]
    dims = ctx.sample(out)
    if any(ctx.const(v) is not None or ctx.sample(v) != dims for v in node.inputs):
        raise Inexpressible("Sum with constants or broadcasting; LBANN's sum adds same-shape activations")
    ctx.layer(out.name, [ctx.parent(v) for v in node.inputs], "sum", out)


@exporter(*BINARY)
def _binary(ctx: ExportContext, node: Node) -> None:
    a, b = node.inputs
    out = node.outputs[0]
    dims = ctx.sample(out)
    ca, cb = ctx.const(a), ctx.const(b)
    if ca is not None and cb is not None:
        raise Inexpressible("both operands are constants (fold the expression first)")
    if ca is None and cb is None:
        if ctx.sample(a) != dims or ctx.sample(b) != dims:
            raise Inexpressible(f"broadcasting {list(a.type.shape)} with {list(b.type.shape)}; LBANN does not "
                                f"broadcast between activations")
        ctx.operator_layer(out.name, [ctx.parent(a), ctx.parent(b)], [ctx.operator(BINARY[node.op])], out)
        return
    x, c, const_second = (a, cb, True) if cb is not None else (b, ca, False)
    if ctx.sample(x) != dims:
        raise Inexpressible(f"the constant {list(c.shape)} broadcasts the activation {list(x.type.shape)} "
                            f"to a larger shape")
    if np.asarray(c).size == 1:
        _with_scalar(ctx, node, x, float(np.asarray(c).reshape(-1)[0]), const_second)
    elif node.op in ("Add", "Sub", "Mul"):
        _scale_bias(ctx, node, x, ctx.per_sample_constant(c, dims), const_second)
    else:
        parents = [ctx.parent(x), ctx.parent(b if const_second else a, dims)]
        ctx.operator_layer(out.name, parents if const_second else parents[::-1],
                           [ctx.operator(BINARY[node.op])], out)


def _with_scalar(ctx: ExportContext, node: Node, x, c: float, const_second: bool) -> None:
    out = node.outputs[0]
    key = (node.op, const_second)
    if key in WITH_CONSTANT:
        ops = [ctx.operator(WITH_CONSTANT[key], constant=c)]
    elif node.op == "Div" and const_second:
        if c == 0.0:
            raise Inexpressible("division by a constant zero")
        ops = [ctx.operator("ScaleOperator", constant=1.0 / c)]
    elif node.op == "Div":
        ops = [ctx.operator("ReciprocalOperator"), ctx.operator("ScaleOperator", constant=c)]
    elif node.op == "Pow" and const_second and c in (0.5, 1.0, 2.0):
        ops = {0.5: [ctx.operator("SqrtOperator")], 1.0: [ctx.operator("ScaleOperator", constant=1.0)],
               2.0: [ctx.operator("SquareOperator")]}[c]
    else:
        dims = ctx.sample(out)
        parents = [ctx.parent(x), ctx.parent(node.inputs[1] if const_second else node.inputs[0], dims)]
        ctx.operator_layer(out.name, parents if const_second else parents[::-1],
                           [ctx.operator(BINARY[node.op])], out)
        return
    ctx.operator_layer(out.name, [ctx.parent(x)], ops, out)


def _scale_bias(ctx: ExportContext, node: Node, x, c: np.ndarray, const_second: bool) -> None:
    """x·s + b with constant s, b: channelwise when they vary along channels only, else entrywise."""
    one, zero = np.ones_like(c), np.zeros_like(c)
    table = {("Mul", True): (c, zero), ("Mul", False): (c, zero), ("Add", True): (one, c),
             ("Add", False): (one, c), ("Sub", True): (one, -c), ("Sub", False): (-one, c)}
    scale, bias = table[(node.op, const_second)]
    out = node.outputs[0]
    if _channel_only(scale) and _channel_only(bias):
        layer, _ = ctx.layer(out.name, [ctx.parent(x)], "channelwise_scale_bias", out)
        columns = [a.reshape(a.shape[0], -1)[:, 0] for a in (scale, bias)]
    else:
        layer, _ = ctx.layer(out.name, [ctx.parent(x)], "entrywise_scale_bias", out)
        columns = [scale.reshape(-1), bias.reshape(-1)]
    layer.weights.append(ctx.add_weights(layer.name, "weights", np.stack(columns, 1)))


def _channel_only(a: np.ndarray) -> bool:
    """True when a per-sample constant varies along the first (channel) dim only."""
    if a.ndim < 2:
        return False
    first = a.reshape(a.shape[0], -1)[:, :1]
    return bool(np.all(a.reshape(a.shape[0], -1) == first))


# -- shape and data movement ---------------------------------------------------

@exporter("Reshape", "Flatten", "Squeeze", "Unsqueeze")
def _reshape(ctx: ExportContext, node: Node) -> None:
    x, out = node.inputs[0], node.outputs[0]
    ctx.sample(x)
    if node.op == "Flatten" and int(node.attr("axis", 1)) % max(len(x.type.shape), 1) != 1:
        raise Inexpressible("Flatten with axis ≠ 1 merges the batch dimension")
    if node.op in ("Squeeze", "Unsqueeze"):
        axes = ctx.const(node.input(1))
        if axes is None and node.op == "Squeeze" and node.input(1) is None:  # every dim of size 1
            axes = [i for i, d in enumerate(x.type.shape) if d == 1]
        rank = len(out.type.shape if node.op == "Unsqueeze" else x.type.shape)
        if axes is None or any(int(a) % rank == 0 for a in np.asarray(axes).reshape(-1)):
            raise Inexpressible(f"{node.op} must name constant axes other than the batch dim")
    dims = ctx.sample(out)
    _, params = ctx.layer(out.name, [ctx.parent(x)], "reshape", out)
    params.dims.extend(dims)


@exporter("Expand", "Tile")
def _tessellate(ctx: ExportContext, node: Node) -> None:
    """Broadcasting (Expand) and tiling (Tile) within a sample: LBANN's tessellate repeats the
    input along each dim (output[i] = input[i mod n]), which is a broadcast where n = 1."""
    x, out = node.inputs[0], node.outputs[0]
    dims, have = ctx.sample(out), ctx.sample(x)
    if ctx.const(node.input(1)) is None:
        raise Inexpressible(f"{node.op} needs a constant {'shape' if node.op == 'Expand' else 'repeats'}")
    if len(have) != len(dims) or any(i < 1 or o % i for o, i in zip(dims, have)):
        raise Inexpressible(f"tiling a {list(have)} sample to {list(dims)}; tessellate repeats whole dims "
                            f"of a sample of the same rank")
    if node.op == "Expand" and any(i not in (1, o) for o, i in zip(dims, have)):
        raise Inexpressible(f"Expand {list(have)} → {list(dims)} broadcasts only dims of size 1")
    _, params = ctx.layer(out.name, [ctx.parent(x)], "tessellate", out)
    params.dims.extend(dims)


@exporter("Transpose", "nnbridge.Reorder")  # a Reorder is a transpose that changes layout
def _transpose(ctx: ExportContext, node: Node) -> None:
    x, out = node.inputs[0], node.outputs[0]
    rank = len(ctx.sample(x)) + 1
    perm = [int(p) for p in node.attr("perm", list(range(rank))[::-1])]
    if perm[0] != 0:
        raise Inexpressible(f"perm {perm} moves the batch dimension")
    ctx.sample(out)
    _, params = ctx.layer(out.name, [ctx.parent(x)], "permute", out)
    params.axes.extend(p - 1 for p in perm[1:])


def _axis(ctx: ExportContext, node: Node, rank: int) -> int:
    axis = int(node.attr("axis", 0))
    axis = axis + rank if axis < 0 else axis
    if axis == 0:
        raise Inexpressible("works along the batch dimension")
    return axis - 1


@exporter("Concat")
def _concat(ctx: ExportContext, node: Node) -> None:
    out = node.outputs[0]
    dims = ctx.sample(out)
    axis = _axis(ctx, node, len(dims) + 1)
    parents = []
    for v in node.inputs:
        if ctx.const(v) is not None:
            if v.type.shape is None or len(v.type.shape) != len(dims) + 1:
                raise Inexpressible(f"Concat input '{v.name}' has rank {v.type.rank}, not {len(dims) + 1}")
            part = list(dims)
            part[axis] = int(v.type.shape[axis + 1])
            parents.append(ctx.parent(v, part))
        else:
            ctx.sample(v)
            parents.append(ctx.parent(v))
    _, params = ctx.layer(out.name, parents, "concatenation", out)
    params.axis = axis


@exporter("Split")
def _split(ctx: ExportContext, node: Node) -> None:
    x = node.inputs[0]
    dims = ctx.sample(x)
    axis = _axis(ctx, node, len(dims) + 1)
    sizes = [ctx.sample(o)[axis] for o in node.outputs]
    points = np.concatenate([[0], np.cumsum(sizes)]).astype(int).tolist()
    _slice_layer(ctx, node, ctx.parent(x), axis, points, list(node.outputs))


def _slice_layer(ctx: ExportContext, node: Node, parent: str, axis: int, points, outputs) -> None:
    """A slice layer whose outputs feed one identity child per output (LBANN's child order)."""
    slicer, params = ctx.layer(f"{outputs[0].name}_slice" if len(outputs) > 1 else outputs[0].name, [parent],
                               "slice", outputs[0] if len(outputs) == 1 else None)
    params.axis = axis
    params.slice_points.extend(int(p) for p in points)
    if len(outputs) > 1:
        children = [ctx.layer(o.name, [slicer.name], "identity", o)[0].name for o in outputs]
        slicer.children.extend(children)


@exporter("Slice")
def _slice(ctx: ExportContext, node: Node) -> None:
    x, out = node.inputs[0], node.outputs[0]
    dims = list(ctx.sample(x))
    starts, ends = (np.asarray(ctx.need_const(node.input(i), what)).reshape(-1) for i, what in
                    ((1, "starts"), (2, "ends")))
    axes = np.arange(len(starts)) if node.input(3) is None else np.asarray(ctx.need_const(node.input(3), "axes"))
    steps = np.ones(len(starts), int) if node.input(4) is None else np.asarray(ctx.need_const(node.input(4), "steps"))
    rank = len(dims) + 1
    cuts = []
    for start, end, axis, step in zip(starts, ends, axes.reshape(-1), steps.reshape(-1)):
        axis = int(axis) % rank
        if step != 1:
            raise Inexpressible("strided Slice; LBANN slices contiguous ranges")
        if axis == 0:
            raise Inexpressible("slices the batch dimension")
        size = dims[axis - 1]
        lo, hi = (int(np.clip(v + size if v < 0 else v, 0, size)) for v in (start, end))
        if (lo, hi) != (0, size):
            cuts.append((axis - 1, lo, hi))
    if not cuts:
        return _simple_identity(ctx, node)
    parent = ctx.parent(x)
    for i, (axis, lo, hi) in enumerate(cuts):
        last = i == len(cuts) - 1
        layer, params = ctx.layer(out.name if last else f"{out.name}_axis{axis}", [parent], "slice",
                                  out if last else None)
        params.axis = axis
        params.slice_points.extend([lo, hi])
        parent = layer.name


def _reduced_axes(ctx: ExportContext, node: Node, rank: int) -> list[int] | None:
    """The constant axes a Reduce* node reduces (all of them when none are given), or None."""
    axes = ctx.const(node.input(1)) if len(node.inputs) > 1 else node.attr("axes")
    if axes is None:
        return None if node.attr("noop_with_empty_axes", 0) else list(range(rank))
    return sorted(int(a) % rank for a in np.asarray(axes).reshape(-1))


@exporter("ReduceSum", "ReduceMean")
def _reduce(ctx: ExportContext, node: Node) -> None:
    """Every per-sample dim → ``reduction`` (one value per sample); a mean over the spatial dims
    of a channels-first sample → ``channelwise_mean`` (LBANN's global average pool)."""
    x, out = node.inputs[0], node.outputs[0]
    dims = ctx.sample(x)
    rank = len(dims) + 1
    axes = _reduced_axes(ctx, node, rank)
    if axes is None or 0 in axes:
        raise Inexpressible("reduces over the batch dimension or over axes that are not constant")
    out_dims = ctx.sample(out)
    if axes == list(range(1, rank)):
        reduced, params = ctx.layer(out.name if out_dims == (1,) else f"{out.name}_reduce", [ctx.parent(x)],
                                    "reduction", out if out_dims == (1,) else None)
        params.mode = "sum" if node.op == "ReduceSum" else "mean"
        parent = reduced.name
    elif node.op == "ReduceMean" and len(dims) >= 2 and axes == list(range(2, rank)):
        final = out_dims == (dims[0],)
        layer, _ = ctx.layer(out.name if final else f"{out.name}_mean", [ctx.parent(x)], "channelwise_mean",
                             out if final else None)
        parent = layer.name
    else:
        raise Inexpressible(f"reduces axes {axes} of a rank-{rank} tensor; LBANN reduces whole samples "
                            f"(reduction) or the spatial dims of each channel (channelwise_mean)")
    if ctx.layer_of.get(id(out)) is None:
        _, params = ctx.layer(out.name, [parent], "reshape", out)
        params.dims.extend(out_dims)


@exporter("RandomNormal", "RandomUniform")
def _noise(ctx: ExportContext, node: Node) -> None:
    """A fresh draw per sample → ``gaussian`` / ``uniform`` (LBANN seeds its own generators)."""
    out = node.outputs[0]
    dims = ctx.sample(out)
    if DType(int(node.attr("dtype", DType.FLOAT32.onnx))) is not DType.FLOAT32:
        raise Inexpressible("LBANN draws noise in the layer's floating-point type; only float32 maps")
    if node.op == "RandomNormal":
        _, params = ctx.layer(out.name, [], "gaussian", out)
        params.mean, params.stdev = float(node.attr("mean", 0.0)), float(node.attr("scale", 1.0))
    else:
        _, params = ctx.layer(out.name, [], "uniform", out)
        params.min, params.max = float(node.attr("low", 0.0)), float(node.attr("high", 1.0))
    params.neuron_dims.extend(dims)


# -- comparisons and resizing ------------------------------------------------------

#: ONNX comparison → LBANN operator between activations, with a scalar constant second, with it first
COMPARISONS = {
    "Equal": ("EqualOperator", "EqualConstantOperator", "EqualConstantOperator"),
    "Less": ("LessOperator", "LessConstantOperator", "GreaterConstantOperator"),
    "Greater": ("GreaterOperator", "GreaterConstantOperator", "LessConstantOperator"),
    "LessOrEqual": ("LessEqualOperator", "LessEqualConstantOperator", "GreaterEqualConstantOperator"),
    "GreaterOrEqual": ("GreaterEqualOperator", "GreaterEqualConstantOperator", "LessEqualConstantOperator"),
}


@exporter(*COMPARISONS)
def _comparison(ctx: ExportContext, node: Node) -> None:
    """LBANN's comparison operators give 1.0 / 0.0 in the layer's type: a comparison of float
    values read through a Cast to float32 (a mask, a one-hot of an index against a constant
    range) is one operator layer, the operand that broadcasts tiled first (``tessellate``)."""
    cast = ctx.sole_consumer(node.outputs[0])
    if cast is None or cast.op != "Cast" or DType(int(cast.attr("to"))) is not DType.FLOAT32:
        raise Inexpressible("LBANN's comparisons give 0/1 as floats: only a comparison cast to float32 maps")
    if any(v.type.dtype is not DType.FLOAT32 for v in node.inputs):
        raise Inexpressible("compares non-float32 values; LBANN layers compute in float32")
    out = cast.outputs[0]
    dims = ctx.sample(out)
    a, b = node.inputs
    ca, cb = ctx.const(a), ctx.const(b)
    between, const_second, const_first = COMPARISONS[node.op]
    scalar = cb if cb is not None and np.size(cb) == 1 else ca if ca is not None and np.size(ca) == 1 else None
    if scalar is not None and (ca is None or cb is None):
        x = a if scalar is cb else b
        op = ctx.operator(const_second if scalar is cb else const_first, constant=float(np.reshape(scalar, -1)[0]))
        ctx.operator_layer(out.name, [_tiled(ctx, x, dims)], [op], out)
    else:
        ctx.operator_layer(out.name, [_tiled(ctx, v, dims) for v in (a, b)], [ctx.operator(between)], out)
    ctx.absorbed.add(id(cast))


def _tiled(ctx: ExportContext, value, dims: tuple[int, ...]) -> str:
    """The layer giving ``value`` broadcast to the sample shape ``dims`` (a constant: a weights
    layer of that shape; an activation: reshaped to the rank of ``dims``, then tessellated)."""
    if ctx.const(value) is not None:
        return ctx.parent(value, dims)
    have = ctx.sample(value)
    if have == dims:
        return ctx.parent(value)
    lifted = (1,) * (len(dims) - len(have)) + have
    if len(lifted) != len(dims) or any(i not in (1, o) for o, i in zip(dims, lifted)):
        raise Inexpressible(f"'{value.name}' {list(have)} does not broadcast to the sample shape {list(dims)}")
    parent = ctx.parent(value)
    if lifted != have:
        layer, params = ctx.layer(f"{value.name}_lifted", [parent], "reshape")
        params.dims.extend(lifted)
        parent = layer.name
    layer, params = ctx.layer(f"{value.name}_tiled", [parent], "tessellate")
    params.dims.extend(dims)
    return layer.name


@exporter("Resize")
def _bilinear_resize(ctx: ExportContext, node: Node) -> None:
    """A linear Resize of the last two dims with half-pixel centres: LBANN's ``bilinear_resize``
    (it samples at (i + ½)·in/out − ½ and clamps at the borders, as ONNX does). Nearest Resizes
    by whole factors are rewritten before (``ir/decompositions.py``)."""
    x, out = node.inputs[0], node.outputs[0]
    have, dims = ctx.sample(x), ctx.sample(out)
    mode = node.attr("coordinate_transformation_mode", "half_pixel")
    if node.attr("mode", "nearest") != "linear" or len(dims) < 2 or have[:-2] != dims[:-2] or \
            int(node.attr("antialias", 0)) or node.attr("axes") is not None or \
            (mode != "half_pixel" and not (mode == "pytorch_half_pixel" and min(dims[-2:]) > 1)):
        raise Inexpressible("LBANN resizes bilinearly (half-pixel centres, no antialias) over the last two "
                            "dims, or by whole factors to the nearest entry")
    scales = ctx.const(node.input(2))
    if scales is not None and np.size(scales) and \
            any(float(s) * i != o for s, i, o in zip(np.reshape(scales, -1)[-2:], have[-2:], dims[-2:])):
        raise Inexpressible("scales that do not give whole output sizes (LBANN samples at in/out steps)")
    _, params = ctx.layer(out.name, [ctx.parent(x)], "bilinear_resize", out)
    params.height, params.width = dims[-2:]
