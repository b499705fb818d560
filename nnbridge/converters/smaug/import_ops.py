"""SMAUG op → IR nodes (ONNX semantics), one function per SMAUG op, in ``IMPORTERS``.

Fused activations become explicit activation nodes; SamePadding becomes explicit
pads (SMAUG's rule: k−1 in total, extra on top/left); BatchNorm's stored
``var′ = 1/sqrt(var+ε)`` becomes an ONNX BatchNormalization with the variance
reconstructed (kept in float32, ONNX's T2 type, so fp16 models do not overflow).
"""

from __future__ import annotations

from collections.abc import Callable

import numpy as np

from ...base.errors import FormatError
from ...base.registry import Registry
from ...ir import NNBRIDGE_DOMAIN, DType, Layout, TensorType, Value
from ...protos.smaug import smaug_node_pb2 as npb
from ...protos.smaug import smaug_types_pb2 as pb
from . import layouts
from .importer import Importer
from .naming import output_name

#: The runtime's BatchNorm epsilon (var′ is precomputed with it).
BN_EPSILON = 1e-5

ImportFn = Callable[[Importer, npb.NodeProto], None]


class Unimportable(Exception):
    """Raised by an op importer: this node cannot become IR (the reason is reported with the op)."""

IMPORTERS: Registry[int, ImportFn] = Registry("SMAUG importers")


def importer(*ops: int) -> Callable[[ImportFn], ImportFn]:
    return IMPORTERS.decorator(*ops)


# -- activations ------------------------------------------------------------------------
#: Standalone activations: the runtime ignores the proto parameters (quirks Q1, Q2).
RUNTIME_DEFAULTS = {pb.LReLU: {"alpha": 0.1}, pb.ELU: {"alpha": 0.1},
                    pb.SELU: {"alpha": 1.6733, "gamma": 1.0507}, pb.HardTanh: {"min": -1.0, "max": 1.0}}
#: The ops whose act_params the runtime reads (fused activations).
FUSES_ACTIVATION = frozenset({pb.Convolution3d, pb.ConvolutionDepthwise, pb.InnerProduct, pb.BatchNorm})
ONNX_ACT = {pb.ReLU: "Relu", pb.LReLU: "LeakyRelu", pb.ELU: "Elu", pb.SELU: "Selu", pb.Tanh: "Tanh",
            pb.HardTanh: "Clip", pb.Sigmoid: "Sigmoid", pb.Softmax: "Softmax"}


def fused_params(act: npb.ActivationParams, op: int) -> dict[str, float]:
    """Parameters as the runtime reads them from ``act_params`` — no defaults (quirk Q4)."""
    if op == pb.LReLU:
        return {"alpha": act.lrelu_params.slope}
    if op == pb.ELU:
        return {"alpha": act.elu_params.alpha}
    if op == pb.SELU:
        return {"alpha": act.elu_params.alpha, "gamma": act.elu_params.lambda_param}
    if op == pb.HardTanh:
        return {"min": act.hard_tanh_params.min, "max": act.hard_tanh_params.max}
    return {}


def reference_sigmoid(imp: Importer, x: Value, out: str, name: str) -> Value:
    """σ as SMAUG's Reference kernel computes it (measured on the real runtime): ``1.0 / (1.0 +
    exp(-x))`` where ``exp`` is C++'s float overload (correctly rounded: float64 rounded to float32)
    and the rest is float64, stored as float32."""
    wide = TensorType(DType.FLOAT64, x.type.shape, x.type.layout)

    def step(op: str, inputs, suffix: str, attrs=None, type=wide) -> Value:
        return imp.add(op, inputs, f"{name}/{suffix}", attrs, name=f"{name}/{suffix}", type=type)

    x64 = step("Cast", [x], "x64", {"to": DType.FLOAT64.onnx})
    e = step("Exp", [step("Neg", [x64], "neg")], "exp64")
    e = step("Cast", [step("Cast", [e], "expf", {"to": DType.FLOAT32.onnx}, TensorType(
        DType.FLOAT32, x.type.shape, x.type.layout))], "exp", {"to": DType.FLOAT64.onnx})
    r = step("Reciprocal", [step("Add", [e, imp.constant(f"{name}/one64", np.array(1.0))], "denominator")], "sigmoid64")
    return imp.add("Cast", [r], out, {"to": x.type.dtype.onnx}, name=name, type=x.type)


def reference_tanh(imp: Importer, x: Value, out: str, name: str) -> Value:
    """tanh as SMAUG's Reference kernel computes it: 2·σ(2x) − 1 with its σ, the rest in float32 (exact)."""
    dtype = x.type.dtype.numpy
    twice = imp.add("Mul", [x, imp.constant(f"{name}/two_x", np.array(2, dtype))], f"{name}/2x",
                    name=f"{name}/2x", type=x.type)
    sig = reference_sigmoid(imp, twice, f"{name}/sigmoid", f"{name}/sigmoid")
    doubled = imp.add("Mul", [sig, imp.constant(f"{name}/two", np.array(2, dtype))], f"{name}/2sigmoid",
                      name=f"{name}/2sigmoid", type=x.type)
    return imp.add("Sub", [doubled, imp.constant(f"{name}/one", np.array(1, dtype))], out, name=name, type=x.type)


def apply_activation(imp: Importer, op: int, params: dict[str, float], x: Value, out: str,
                     name: str) -> Value:
    if imp.activations == "reference" and op in (pb.Tanh, pb.Sigmoid):
        return (reference_tanh if op == pb.Tanh else reference_sigmoid)(imp, x, out, name)
    onnx_op = ONNX_ACT[op]
    inputs: list[Value | None] = [x]
    attrs: dict = {}
    if op == pb.HardTanh:
        dtype = x.type.dtype.numpy
        inputs += [imp.constant(f"{name}/min", np.array(params["min"], dtype)),
                   imp.constant(f"{name}/max", np.array(params["max"], dtype))]
    elif op == pb.Softmax:
        attrs = {"axis": -1}
    else:
        attrs = {k: float(v) for k, v in params.items()}
    return imp.add(onnx_op, inputs, out, attrs, name=name, type=x.type)


def finish(imp: Importer, node: npb.NodeProto, op: str, inputs, attrs: dict, type: TensorType) -> None:
    """Add the main IR node, then the fused activation (if any), and define the output."""
    act = node.params.act_params.activation if node.HasField("params") else pb.UnknownOp
    if act == pb.Softmax:  # the runtime drops a fused softmax (quirk Q3)
        act = pb.UnknownOp
    out = output_name(node.name)
    if act == pb.UnknownOp:
        imp.define(node, 0, imp.add(op, inputs, out, attrs, name=node.name, type=type))
        return
    if act not in ONNX_ACT:
        raise FormatError(f"{imp.what}: node '{node.name}' fuses activation {act}, which is not one")
    pre = imp.add(op, inputs, f"{node.name}/preact", attrs, name=node.name, type=type)
    params = fused_params(node.params.act_params, act)
    imp.define(node, 0, apply_activation(imp, act, params, pre, out,
                                         f"{node.name}/{pb.OpType.Name(act).lower()}"))


@importer(pb.ReLU, pb.LReLU, pb.ELU, pb.SELU, pb.Tanh, pb.HardTanh, pb.Sigmoid, pb.Softmax)
def _activation(imp: Importer, node: npb.NodeProto) -> None:
    x = first_view(imp, node, 0)
    if node.op == pb.Softmax:
        x = imp.view(node, 0, Layout.NC)
    params = dict(RUNTIME_DEFAULTS.get(node.op, {}))
    if node.op == pb.LReLU and imp.lrelu == "intended":
        params = {"alpha": node.params.act_params.lrelu_params.slope}
    imp.define(node, 0, apply_activation(imp, node.op, params, x, output_name(node.name), node.name))


def first_view(imp: Importer, node: npb.NodeProto, i: int) -> Value:
    """Layout-agnostic ops take whichever view of the input exists already."""
    return next(iter(imp.views_of(node, i).values()))


# -- convolution, pooling, inner product, batch norm ----------------------------------------
def kernel_4d(imp: Importer, node: npb.NodeProto) -> tuple[int, int]:
    w = imp.input_decl(node, 1)
    if len(w.dims) != 4:
        raise FormatError(f"{imp.what}: node '{node.name}' has a {len(w.dims)}-D kernel, SMAUG needs 4-D")
    rows, cols = (w.dims[2], w.dims[3]) if w.layout == Layout.NCHW else (w.dims[1], w.dims[2])
    return rows, cols


def two(values, what: str) -> list[int]:
    """A window's two sizes or strides: exactly two, each at least 1."""
    if len(values) != 2 or any(int(v) < 1 for v in values):
        raise FormatError(f"{what}: expected exactly two values of at least 1, got {list(values)}")
    return [int(v) for v in values]


@importer(pb.Convolution3d, pb.ConvolutionDepthwise)
def _conv(imp: Importer, node: npb.NodeProto) -> None:
    what = f"{imp.what}: node '{node.name}'"
    cp = node.params.conv_params
    strides = two(cp.stride, f"{what} conv_params.stride")
    rows, cols = kernel_4d(imp, node)
    if cp.padding == pb.SamePadding:
        (t, b), (left, r) = layouts.same_pads(rows), layouts.same_pads(cols)
    elif cp.padding == pb.ValidPadding:
        t = b = left = r = 0
    else:
        raise FormatError(f"{what}: conv_params.padding must be SamePadding or ValidPadding")
    x = imp.view(node, 0, Layout.NCHW)
    w = imp.view(node, 1, Layout.NCHW)  # [K, C, kH, kW] (depthwise: [1, C, kH, kW])
    n, c, h, wd = x.type.shape
    attrs = {"kernel_shape": [rows, cols], "strides": strides, "pads": [t, left, b, r]}
    k = w.type.shape[0]
    if node.op == pb.ConvolutionDepthwise:
        k = c
        attrs["group"] = c
        if w.const is not None:  # [1, C, kH, kW] → ONNX's grouped [C, 1, kH, kW], kept a constant
            kernel = imp.constant(f"{node.parents[1]}/kernel", w.const.reshape(c, 1, rows, cols))
            imp.renames[kernel.name] = node.parents[1]
            w = kernel
        else:
            shape = imp.constant(f"{node.name}/kernel_shape", np.array([c, 1, rows, cols], np.int64))
            w = imp.add("Reshape", [w, shape], f"{node.name}/kernel", name=f"{node.name}/kernel",
                        type=w.type.with_shape([c, 1, rows, cols]))
    ho = layouts.conv_out(h, rows, strides[0], t + b)
    wo = layouts.conv_out(wd, cols, strides[1], left + r)
    finish(imp, node, "Conv", [x, w], attrs, x.type.with_shape([n, k, ho, wo]))


@importer(pb.MaxPooling, pb.AveragePooling)
def _pool(imp: Importer, node: npb.NodeProto) -> None:
    what = f"{imp.what}: node '{node.name}'"
    pp = node.params.pool_params
    size = two(pp.pool_size, f"{what} pool_params.pool_size")
    strides = two(pp.stride, f"{what} pool_params.stride")
    x = imp.view(node, 0, Layout.NCHW)
    n, c, h, w = x.type.shape
    shape = [n, c, (h - size[0]) // strides[0] + 1, (w - size[1]) // strides[1] + 1]
    op = "MaxPool" if node.op == pb.MaxPooling else "AveragePool"
    finish(imp, node, op, [x], {"kernel_shape": size, "strides": strides}, x.type.with_shape(shape))


def weights_absorb_order(imp: Importer, flatten: npb.NodeProto) -> bool:
    """Is every reader of this flatten an InnerProduct with constant weights?"""
    users = [imp.nodes[u] for u in imp.users.get(flatten.name, [])]
    return bool(users) and all(
        u.op == pb.InnerProduct and u.parents[0] == flatten.name and u.parents[1] != flatten.name
        and imp.nodes[u.parents[1]].op == pb.Data and imp.is_parameter(u.parents[1]) for u in users)


@importer(pb.InnerProduct)
def _inner_product(imp: Importer, node: npb.NodeProto) -> None:
    x = imp.view(node, 0, Layout.NC)
    w = imp.view(node, 1, Layout.CN)  # ONNX MatMul wants [in, out]
    if x.type.shape[1] != w.type.shape[0]:
        raise FormatError(f"{imp.what}: node '{node.name}': input has {x.type.shape[1]} features, "
                          f"weights expect {w.type.shape[0]}")
    order = imp.feature_order.get(f"{node.parents[0]}:{node.src_tensors_indices[0]}")
    if order is not None and len(order) != w.type.shape[0]:
        raise FormatError(f"{imp.what}: node '{node.name}': its input was flattened from {len(order)} values, "
                          f"its weights expect {w.type.shape[0]}")
    if order is not None:  # the input was flattened in another order: permute the weight rows
        data_name = node.parents[1]
        name = f"{data_name}/{node.parents[0]}"  # one permuted copy per weight and flatten (FCs may share both)
        if name in imp.graph.initializers:
            w = imp.graph.values[name]
        else:
            rows = np.empty_like(w.const)
            rows[order] = w.const
            w = imp.constant(name, rows, Layout.CN)
            imp.renames[w.name] = data_name
    finish(imp, node, "MatMul", [x, w], {}, x.type.with_shape([x.type.shape[0], w.type.shape[1]]))


@importer(pb.BatchNorm)
def _batch_norm(imp: Importer, node: npb.NodeProto) -> None:
    if len(node.parents) != 5:
        raise FormatError(f"{imp.what}: BatchNorm '{node.name}' needs 5 inputs (x, mean, var, gamma, beta)")
    x_decl = imp.input_decl(node, 0)
    x = imp.view(node, 0, Layout.NCHW if len(x_decl.dims) == 4 else Layout.NC)
    channels = x.type.shape[1]
    stats = []
    for i, role in zip(range(1, 5), ("mean", "var", "gamma", "beta")):
        array = imp.const(node, i)
        if array is None:
            raise FormatError(f"{imp.what}: BatchNorm '{node.name}': the {role} input must be a Data node")
        if array.size < channels:
            raise FormatError(f"{imp.what}: BatchNorm '{node.name}': {role} has {array.size} values for "
                              f"{channels} channels")
        stats.append(array.reshape(-1))
    mean, inv_std, gamma, beta = stats
    names = [imp.nodes[node.parents[i]].name for i in range(1, 5)]
    with np.errstate(divide="ignore"):
        var = 1.0 / np.square(inv_std.astype(np.float64)) - BN_EPSILON
    negative = inv_std[:channels] < 0
    if np.any(negative):  # a negative var′ (no variance gives one) is gamma's sign: v·g = |v|·(±g)
        gamma = gamma.copy()
        gamma[:channels] = np.where(negative, -gamma[:channels], gamma[:channels])
    arrays = [(names[2], "scale", gamma), (names[3], "bias", beta),
              (names[0], "mean", mean.astype(np.float32)), (names[1], "var", var.astype(np.float32))]
    inputs = [x]
    for data_name, role, array in arrays:  # named after their Data nodes once those are dropped
        value = imp.constant(f"{data_name}/{role}", array)
        imp.renames[value.name] = data_name
        if array.size > channels:  # the runtime reads the first C values of a wider one; the file keeps all
            bounds = [imp.constant(f"{node.name}/{role}/{end}", np.array([n], np.int64))
                      for end, n in (("begin", 0), ("end", channels))]
            value = imp.add("Slice", [value, *bounds], f"{node.name}/{role}", name=f"{node.name}/{role}",
                            type=value.type.with_shape((channels,)))
        inputs.append(value)
    finish(imp, node, "BatchNormalization", inputs, {"epsilon": BN_EPSILON}, x.type)


# -- elementwise and tensor ops ------------------------------------------------------------
@importer(pb.EltwiseAdd, pb.EltwiseMul, pb.Less, pb.LessEqual, pb.Greater, pb.GreaterEqual)
def _binary(imp: Importer, node: npb.NodeProto) -> None:
    a_views, b_views = imp.views_of(node, 0), imp.views_of(node, 1)
    common = [lay for lay in a_views if lay in b_views]
    layout = common[0] if common else next(iter(a_views))
    a, b = imp.view(node, 0, layout), imp.view(node, 1, layout)
    op = {pb.EltwiseAdd: "Add", pb.EltwiseMul: "Mul", pb.Less: "Less", pb.LessEqual: "LessOrEqual",
          pb.Greater: "Greater", pb.GreaterEqual: "GreaterOrEqual"}[node.op]
    out_type = a.type if node.op in (pb.EltwiseAdd, pb.EltwiseMul) else a.type.with_dtype(DType.BOOL)
    finish(imp, node, op, [a, b], {}, out_type)


@importer(pb.Reorder)
def _reorder(imp: Importer, node: npb.NodeProto) -> None:
    src, dst = imp.input_decl(node, 0), imp.output_decl(node, 0)
    if len(src.dims) == 4 and dst.layout in (Layout.NC, Layout.CN):  # the runtime's Flatten
        views = imp.views_of(node, 0)
        other = next((lay for lay in views if lay != src.layout and lay in (Layout.NCHW, Layout.NHWC)), None)
        if src.layout not in views and other is not None and weights_absorb_order(imp, node):
            # flatten the view we have and permute the following FC weights instead (spec §5.3)
            x = views[other]
            order = np.arange(int(np.prod(x.type.shape[1:]))).reshape(x.type.shape[1:])
            imp.feature_order[f"{node.name}:0"] = order.transpose(
                [i - 1 for i in layouts.perm(other, src.layout)[1:]]).reshape(-1)
        else:
            x = imp.view(node, 0, src.layout)
        shape = [src.dims[0], int(np.prod(src.dims[1:]))]
        flat = x.type.with_shape(shape).with_layout(Layout.NC)
        imp.define(node, 0, imp.add("Flatten", [x], output_name(node.name), {"axis": 1},
                                    name=node.name, type=flat))
        return
    x = imp.view(node, 0, src.layout)
    p = layouts.perm(src.layout, dst.layout)
    if p is None or not layouts.reorder_supported(src.layout, dst.layout):
        raise FormatError(f"{imp.what}: Reorder '{node.name}' from {src.layout.value} to "
                          f"{dst.layout.value} is not a conversion SMAUG supports")
    out_type = x.type.with_shape([x.type.shape[j] for j in p]).with_layout(dst.layout)
    imp.define(node, 0, imp.add("Reorder", [x], output_name(node.name),
                                {"perm": p, "src_layout": src.layout.value, "dst_layout": dst.layout.value},
                                name=node.name, type=out_type, domain="nnbridge"))
    # the output is the same tensor in another layout: consumers wanting any layout the input
    # already has read it directly (an unused Reorder is dropped at the end of the import)
    for layout, value in imp.views_of(node, 0).items():
        imp.views[f"{node.name}:0"].setdefault(layout, value)


@importer(pb.Concat)
def _concat(imp: Importer, node: npb.NodeProto) -> None:
    layout = imp.input_decl(node, 0).layout
    xs = [imp.view(node, i, layout) for i in range(len(node.parents))]
    axis = node.params.concat_params.concat_axis
    dims = list(xs[0].type.shape)
    dims[axis] = sum(x.type.shape[axis] for x in xs)
    finish(imp, node, "Concat", xs, {"axis": axis}, xs[0].type.with_shape(dims))


@importer(pb.Split)
def _split(imp: Importer, node: npb.NodeProto) -> None:
    x = imp.view(node, 0)
    axis = node.params.split_params.split_axis
    decls = [imp.output_decl(node, k).dims for k in range(len(node.output_tensors))]
    if not decls or any(not 0 <= axis < len(dims) for dims in [x.type.shape or (), *decls]):
        raise FormatError(f"{imp.what}: node '{node.name}': split_axis {axis} is outside its tensors' dims")
    sizes = [dims[axis] for dims in decls]
    split = imp.constant(f"{node.name}/sizes", np.array(sizes, np.int64))
    outs = [output_name(node.name, k) for k in range(len(sizes))]
    ir = imp.graph.add_node("Split", [x, split], outs, {"axis": axis}, name=node.name)
    for k, out in enumerate(ir.outputs):
        dims = list(x.type.shape)
        dims[axis] = sizes[k]
        out.type = x.type.with_shape(dims)
        imp.define(node, k, out)


@importer(pb.Reshape)
def _reshape(imp: Importer, node: npb.NodeProto) -> None:
    x = imp.view(node, 0)
    out = imp.output_decl(node, 0)
    shape = imp.constant(f"{node.name}/shape", np.array(out.dims, np.int64))
    finish(imp, node, "Reshape", [x, shape], {}, x.type.with_shape(out.dims).with_layout(out.layout))


@importer(pb.Repeat)
def _repeat(imp: Importer, node: npb.NodeProto) -> None:
    x = imp.view(node, 0)
    out = imp.output_decl(node, 0)
    if len(out.dims) != len(x.type.shape) or any(o % i for o, i in zip(out.dims, x.type.shape)):
        raise FormatError(f"{imp.what}: Repeat '{node.name}' output {list(out.dims)} is not a tiling "
                          f"of {list(x.type.shape)}")
    reps = imp.constant(f"{node.name}/repeats",
                        np.array([o // i for o, i in zip(out.dims, x.type.shape)], np.int64))
    finish(imp, node, "Tile", [x, reps], {}, x.type.with_shape(out.dims))


@importer(pb.Padding)
def _padding(imp: Importer, node: npb.NodeProto) -> None:
    x = imp.view(node, 0)
    sizes = list(node.params.padding_params.padding_size)
    rank = len(x.type.shape)
    if len(sizes) != 2 * rank:
        raise FormatError(f"{imp.what}: Padding '{node.name}' has {len(sizes)} padding sizes for a "
                          f"{rank}-D tensor")
    pads = sizes[0::2] + sizes[1::2]
    dims = [d + sizes[2 * i] + sizes[2 * i + 1] for i, d in enumerate(x.type.shape)]
    const = imp.constant(f"{node.name}/pads", np.array(pads, np.int64))
    finish(imp, node, "Pad", [x, const], {"mode": "constant"}, x.type.with_shape(dims))


# -- control flow (SMAUG's dead-tensor Switch/Merge, as its frontend's ``cond`` builds it) ---------
def branches(imp: Importer, node: npb.NodeProto, i: int) -> frozenset[tuple[str, int]]:
    """The Switch branches input ``i`` of ``node`` is computed in (its value is dead outside them)."""
    key = f"{node.parents[i]}:{node.src_tensors_indices[i]}"
    if key not in imp.branches:
        parent = imp.nodes[node.parents[i]]
        found = frozenset().union(*(branches(imp, parent, j) for j in range(len(parent.parents))))
        if parent.op == pb.Switch:
            pred = f"{parent.parents[1]}:{parent.src_tensors_indices[1]}"
            found |= {(pred, node.src_tensors_indices[i])}
        elif parent.op == pb.Merge:
            found = found - {b for b in found if (b[0], 1 - b[1]) in found}
        imp.branches[key] = found
    return imp.branches[key]


@importer(pb.Switch)
def _switch(imp: Importer, node: npb.NodeProto) -> None:
    """Both outputs carry the data; which one is live is settled by the Merge that joins them."""
    x = first_view(imp, node, 0)
    pred = imp.view(node, 1)
    ir = imp.graph.add_node("Switch", [x, pred], [output_name(node.name, 0), output_name(node.name, 1)],
                            name=node.name, domain=NNBRIDGE_DOMAIN)
    for k, out in enumerate(ir.outputs):
        out.type = x.type
        imp.define(node, k, out)


@importer(pb.Merge)
def _merge(imp: Importer, node: npb.NodeProto) -> None:
    """The first live input: ``Where(pred, true-branch input, false-branch input)`` for the two
    branches of one Switch predicate (both branches are computed; only one is kept). A one-value
    predicate, the only kind the runtime runs, is the condition itself; of a longer one the
    kernels would read the first value, which the IR takes (the writer refuses it)."""
    tags = [branches(imp, node, i) for i in range(len(node.parents))]
    if tags and not tags[0]:  # the first input is always live
        x = first_view(imp, node, 0)
        imp.define(node, 0, imp.add("Identity", [x], output_name(node.name), name=node.name, type=x.type))
        return
    ports = {}
    for i, tag in enumerate(tags):
        for pred, port in tag:
            ports.setdefault(pred, {})[port] = i
    pairs = [(pred, found) for pred, found in ports.items() if set(found) == {0, 1} and len(tags) == 2]
    if len(pairs) != 1:
        raise Unimportable("its inputs do not pair up as the two branches of one Switch predicate (nnbridge "
                           "imports control flow as SMAUG's cond builds it)")
    pred_key, found = pairs[0]
    pred_node, pred_index = pred_key.rsplit(":", 1)
    pred = imp.view_of(pred_key, imp.output_decl(imp.nodes[pred_node], int(pred_index)).layout)
    layout = imp.input_decl(node, 0).layout
    true, false = imp.view(node, found[1], layout), imp.view(node, found[0], layout)
    flag = pred
    if list(pred.type.shape) != [1]:
        flat = imp.add("Reshape", [pred, imp.constant(f"{node.name}/flat", np.array([-1], np.int64))],
                       f"{node.name}/pred_flat", name=f"{node.name}/pred_flat",
                       type=pred.type.with_shape((int(np.prod(pred.type.shape)),)))
        flag = imp.add("Gather", [flat, imp.constant(f"{node.name}/first", np.array(0, np.int64))],
                       f"{node.name}/pred", {"axis": 0}, name=f"{node.name}/pred", type=pred.type.with_shape(()))
    finish(imp, node, "Where", [flag, true, false], {}, true.type)
