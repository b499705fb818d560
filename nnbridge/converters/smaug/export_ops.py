"""IR (ONNX semantics) → SMAUG ops, one function per IR op, in ``EXPORTERS``.

Each function emits through the :class:`~.exporter.Exporter` and raises
``Inexpressible(reason)`` for what SMAUG cannot compute faithfully; the writer
collects every such node into one error. The runtime quirks of the spec (§9) are
honoured here: activations are fused only into Conv/InnerProduct/BatchNorm with
their parameters always written (Q4), softmax is never fused (Q3), standalone
LReLU/ELU/SELU/HardTanh are accepted only with the runtime's hard-wired
parameters (Q1, Q2), depthwise convolution is refused for SMV (Q10), padding
that SMAUG's "same" rule does not produce becomes an explicit Padding node (Q6).
"""

from __future__ import annotations

from collections.abc import Callable

import numpy as np

from ...base.errors import ShapeError
from ...base.registry import Registry
from ...base.smaug_runtime import ALIGN, padded
from ...ir import Layout, Node, Value
from ...protos.smaug import smaug_node_pb2 as npb
from ...protos.smaug import smaug_types_pb2 as pb
from . import layouts
from .exporter import LOOKED_THROUGH, SMV_TILER, Exporter, Inexpressible, Ref
from .import_ops import RUNTIME_DEFAULTS

ExportFn = Callable[[Exporter, Node], None]
EXPORTERS: Registry[tuple[str, str], ExportFn] = Registry("SMAUG exporters")

#: SMV Softmax tiles only along N: one padded row must fit (quirk Q12).
SMV_SOFTMAX_MAX_ROW = 16384


def exporter(*ops: str, domain: str = "") -> Callable[[ExportFn], ExportFn]:
    return EXPORTERS.decorator(*((domain, op) for op in ops))


def supported_ops() -> set[str]:
    return {op for _, op in EXPORTERS}


# -- helpers -------------------------------------------------------------------------------
def const_input(ex: Exporter, node: Node, i: int, what: str) -> np.ndarray:
    value = node.input(i)
    array = None if value is None else ex.constant(value)
    if array is None:
        raise Inexpressible(f"{what} must be a constant for SMAUG")
    return np.asarray(array)


def spatial(ex: Exporter, node: Node) -> tuple[Layout, Layout]:
    """(layout of the IR data input, layout SMAUG computes in for this backend)."""
    x = node.inputs[0]
    if x.type.rank != 4:
        raise Inexpressible(f"SMAUG {node.op} needs a 4-D input, got rank {x.type.rank}")
    have = ex.layout_of(x)
    return (have if have in (Layout.NCHW, Layout.NHWC) else Layout.NCHW), layouts.ACTIVATION_4D[ex.backend]


def nchw_dims(value: Value, have: Layout) -> list[int]:
    dims = list(value.type.shape)
    return layouts.permute_dims(dims, have, Layout.NCHW) if have != Layout.NCHW else dims


def out_dims(value: Value, have: Layout, layout: Layout) -> list[int]:
    dims = list(value.type.shape)
    return layouts.permute_dims(dims, have, layout) if have != layout else dims


def define(ex: Exporter, value: Value, ref: Ref) -> None:
    ex.native[id(value)] = ref


def int_list(values) -> list[int]:
    return [int(v) for v in values] if values is not None else []


#: IR activation → SMAUG activation OpType, for fusion and standalone nodes.
ACTIVATIONS = {"Relu": pb.ReLU, "LeakyRelu": pb.LReLU, "Elu": pb.ELU, "Selu": pb.SELU, "Tanh": pb.Tanh,
               "Sigmoid": pb.Sigmoid, "Clip": pb.HardTanh}


def activation_params(ex: Exporter, node: Node) -> tuple[int, dict[str, float]]:
    """The SMAUG activation of an IR activation node and its parameters (ONNX values)."""
    op = ACTIVATIONS[node.op]
    if op == pb.LReLU:
        return op, {"alpha": float(node.attr("alpha", 0.01))}
    if op == pb.ELU:
        return op, {"alpha": float(node.attr("alpha", 1.0))}
    if op == pb.SELU:
        return op, {"alpha": float(node.attr("alpha", 1.67326319217681884765625)),
                    "gamma": float(node.attr("gamma", 1.05070102214813232421875))}
    if op == pb.HardTanh:
        lo = ex.constant(node.input(1)) if node.input(1) is not None else None
        hi = ex.constant(node.input(2)) if node.input(2) is not None else None
        if (node.input(1) is not None and lo is None) or (node.input(2) is not None and hi is None):
            raise Inexpressible("Clip bounds must be constants")
        if hi is None and lo is not None and float(lo) == 0.0:
            return pb.ReLU, {}
        if lo is None or hi is None:
            raise Inexpressible("a one-sided Clip other than max(x, 0) has no SMAUG equivalent")
        return op, {"min": float(lo), "max": float(hi)}
    return op, {}


def fill_act_params(act: npb.ActivationParams, op: int, values: dict[str, float], fused: bool) -> None:
    """Always write the parameter message (quirk Q4); ``activation`` only when fused."""
    if fused:
        act.activation = op
    if op == pb.LReLU:
        act.lrelu_params.slope = values["alpha"]
    elif op == pb.ELU:
        act.elu_params.alpha = values["alpha"]
    elif op == pb.SELU:
        act.elu_params.alpha = values["alpha"]
        act.elu_params.lambda_param = values["gamma"]
    elif op == pb.HardTanh:
        act.hard_tanh_params.min = values["min"]
        act.hard_tanh_params.max = values["max"]


def fusable_activation(ex: Exporter, value: Value) -> Node | None:
    """The activation node that can be fused into the op producing ``value`` (never Softmax; never one
    that was a node of its own in the SMAUG file the graph was loaded from)."""
    user = ex.single_consumer(value)
    if user is None or user.domain or user.op not in ACTIVATIONS or user.inputs[0] is not value \
            or user.name in ex.file_nodes:
        return None
    try:
        activation_params(ex, user)
    except Inexpressible:
        return None
    return user


def finish_fused(ex: Exporter, node_proto: npb.NodeProto | None, ref: Ref, value: Value,
                 width: int | None = None, masked: bool = False) -> None:
    """Fuse the following activation (if any) into ``node_proto`` (None: a node that cannot fuse
    one); define the final IR value (``width``: ``ref`` holds rows padded beyond the value's
    ``width`` columns, see row_tail)."""
    act = fusable_activation(ex, value) if node_proto is not None else None
    if act is not None:
        op, values = activation_params(ex, act)
        fill_act_params(node_proto.params.act_params, op, values, fused=True)
        ex.absorbed.add(id(act))
        value = act.outputs[0]
    if width is None:
        define(ex, value, ref)
    else:
        ex.padded[id(value)] = (ref, width, masked and act is None)


def affine_node(ex: Exporter, x: Ref, stats: list[np.ndarray], request: str, *,
                names: list[str] | None = None) -> tuple[npb.NodeProto | None, Ref]:
    """``(x − mean)·var′·gamma + beta`` per channel (``stats`` = [mean, var′, gamma, beta]): a SMAUG
    BatchNorm, except on SMV for an NC tensor of several rows, whose post-FC batch-norm kernel
    reads every row after the first at a stride of the whole tensor (the real runtime gives
    garbage there); that becomes EltwiseMul/EltwiseAdd by row-repeated constants (node None)."""
    mean, inv_std, gamma, beta = (np.asarray(a, np.float64).reshape(-1) for a in stats)
    if ex.backend == "SMV" and len(x.dims) == 2 and x.dims[0] > 1:
        scale = inv_std * gamma
        y = x
        if np.any(scale != 1):
            y = elementwise_by(ex, pb.EltwiseMul, y, scale, f"{request}/scale")
        return None, elementwise_by(ex, pb.EltwiseAdd, y, beta - mean * scale, f"{request}/shift")
    roles = ("mean", "var", "gamma", "beta")
    refs = [ex.data(names[i] if names else f"{request}/{role}", arr.reshape(1, -1), Layout.NC)
            for i, (role, arr) in enumerate(zip(roles, (mean, inv_std, gamma, beta)))]
    node, outs = ex.emit(pb.BatchNorm, request, [x, *refs], [(x.dims, x.layout)])
    node.params.SetInParent()
    return node, outs[0]


def elementwise_by(ex: Exporter, op: int, x: Ref, row: np.ndarray, request: str) -> Ref:
    """x (NC) ∘ a constant row, repeated to every row (SMAUG has no broadcasting)."""
    const = ex.data(request, row.reshape(1, -1), Layout.NC)
    if x.dims[0] > 1:
        const = ex.emit(pb.Repeat, f"{request}/repeat", [const], [(x.dims, Layout.NC)])[1][0]
    return ex.emit(op, request, [x, const], [(x.dims, Layout.NC)])[1][0]


def bias_batch_norm(ex: Exporter, x: Ref, bias: np.ndarray, value: Value, request: str,
                    width: int | None = None) -> None:
    """SMAUG has no bias: add it with a BatchNorm (mean 0, var′ 1, gamma 1, beta = bias), §6.3.
    For a row-padded FC output (``width``), the padding lanes get beta 0, or the softmax mask
    when a Softmax is the only reader."""
    c = x.dims[-1] if width is not None else bias.size
    beta = np.zeros(c)
    beta[: bias.size] = bias.reshape(-1)
    masked = width is not None and only_softmax_reads(ex, value)
    if masked:
        beta[width:] = SOFTMAX_MASK
    node, ref = affine_node(ex, x, [np.zeros(c), np.ones(c), np.ones(c), beta], f"{request}/bias")
    finish_fused(ex, node, ref, value, width, masked)


# -- rows that SMV kernels process in full only when padded ---------------------------------
#: SMAUG's SMV softmax and post-FC batch-norm kernels compute the first floor(C/8)·8 values of a
#: row and leave the rest to whatever the scratchpad held (the real runtime shows it: the tail
#: of a 10-class softmax is not normalised, a 4-output FC's bias is never added). On SMV such
#: rows are computed padded to a multiple of 8 and sliced back with a Split.
def row_tail(ex: Exporter, width: int) -> bool:
    return ex.backend == "SMV" and width % ALIGN != 0


#: Value of a softmax row's padding lanes: exp(−30000) is exactly 0 in the kernel's arithmetic,
#: so the padding takes no share of the normalisation (and −30000 is exact in fp16).
SOFTMAX_MASK = -30000.0


def only_softmax_reads(ex: Exporter, value: Value) -> bool:
    users = ex.graph.consumers(value)
    return len(users) == 1 and users[0].op == "Softmax" and not ex.graph.is_output(value)


def reads_full_rows(ex: Exporter, value: Value) -> bool:
    """Does a Softmax or a 2-D BatchNormalization read ``value`` (after a fusable activation)?"""
    act = fusable_activation(ex, value)
    final = act.outputs[0] if act is not None else value
    return any(u.op in ("Softmax", "BatchNormalization") for u in ex.graph.consumers(final))


def pad_rows(ex: Exporter, value: Value, request: str) -> tuple[Ref, int, bool]:
    """``value`` [N, C] as a row-padded tensor [N, C8] (padding lanes 0): the padded form its
    producer made, else an InnerProduct by the identity (x·1 + 0 is exact)."""
    if id(value) in ex.padded:
        return ex.padded[id(value)]
    x = ex.need(value, Layout.NC)
    if x.feature_perm is not None:
        raise Inexpressible("a row kernel over a flattened NHWC tensor")
    width = x.dims[1]
    eye = np.eye(padded(width), width)
    want = layouts.FC_WEIGHT[ex.backend]
    w = ex.data(f"{request}/pad_rows", eye if want == Layout.NC else eye.T, want)
    node, refs = ex.emit(pb.InnerProduct, f"{request}/pad_rows", [x, w],
                         [([x.dims[0], padded(width)], Layout.NC)])
    node.params.SetInParent()
    return refs[0], width, False


# -- convolution ---------------------------------------------------------------------------------
def explicit_pads(node: Node, x_hw: list[int], kernel: list[int], strides: list[int]) -> list[int]:
    """ONNX pads [top, left, bottom, right] (auto_pad resolved)."""
    auto = node.attr("auto_pad", "NOTSET")
    if auto in ("NOTSET", "VALID", b"NOTSET", b"VALID"):
        pads = int_list(node.attr("pads")) or [0, 0, 0, 0]
        return pads if auto in ("NOTSET", b"NOTSET") else [0, 0, 0, 0]
    out = []
    for size, k, s in zip(x_hw, kernel, strides):
        total = max((-(-size // s) - 1) * s + k - size, 0)
        small = total // 2
        out.append((total - small, small) if auto in ("SAME_LOWER", b"SAME_LOWER") else (small, total - small))
    return [out[0][0], out[1][0], out[0][1], out[1][1]]


def padding_node(ex: Exporter, x: Ref, pads: list[int], request: str) -> Ref:
    """Zero padding of a 4-D activation, pads = [top, left, bottom, right]."""
    top, left, bottom, right = pads
    per_axis = {"N": (0, 0), "C": (0, 0), "H": (top, bottom), "W": (left, right)}
    return zero_pad(ex, x, [per_axis[letter] for letter in x.layout.value], f"{request}/padding")


def zero_pad(ex: Exporter, x: Ref, pads: list[tuple[int, int]], request: str) -> Ref:
    """Zero padding, (begin, end) per axis of ``x``. A SMAUG Padding node, except on SMV, where the
    Padding operator aborts (it fills its output through a float32 path, quirk Q5): there each
    padded axis becomes a Concat with zero Data blocks, which copies whole padded rows as long as
    the last axis is not padded."""
    if ex.backend != "SMV":
        dims = [d + b + e for d, (b, e) in zip(x.dims, pads)]
        node, refs = ex.emit(pb.Padding, request, [x], [(dims, x.layout)])
        node.params.padding_params.padding_size.extend(v for pair in pads for v in pair)
        return refs[0]
    if any(pads[-1]):
        raise Inexpressible("padding the last axis on SMV: the Padding operator aborts there and a Concat "
                            "along the last axis would copy the alignment lanes over its neighbours")
    dtype = np.float16 if ex.float_type == pb.Float16 else np.float32
    zero = ex.data(f"{request}/zero", np.zeros([1] * (len(x.dims) - 1) + [x.dims[-1]], dtype), x.layout)
    for axis, (begin, end) in enumerate(pads):
        if not begin and not end:
            continue
        blocks = []
        for side, size in (("begin", begin), ("end", end)):
            if size:
                dims = list(x.dims)
                dims[axis] = size  # a zero pixel repeated over the block (Repeat copies whole padded rows)
                blocks.append(ex.emit(pb.Repeat, f"{request}/{side}{axis}", [zero], [(dims, x.layout)])[1][0])
        blocks.insert(1 if begin else 0, x)
        dims = list(x.dims)
        dims[axis] += begin + end
        node, refs = ex.emit(pb.Concat, request, blocks, [(dims, x.layout)])
        node.params.concat_params.concat_axis = axis
        x = refs[0]
    return x


@exporter("Conv")
def _conv(ex: Exporter, node: Node) -> None:
    have, layout = spatial(ex, node)
    x_value, w_value, y = node.inputs[0], node.inputs[1], node.outputs[0]
    if w_value.type.rank != 4 or not w_value.type.is_static:
        raise Inexpressible("SMAUG convolutions are 2-D with static kernels")
    if any(d != 1 for d in int_list(node.attr("dilations"))):
        raise Inexpressible("SMAUG convolutions have no dilation (quirk Q7)")
    n, c, h, w = nchw_dims(x_value, have)
    kdims = nchw_dims(w_value, have)  # [K, C/g, kH, kW]
    kernel = [kdims[2], kdims[3]]
    strides = int_list(node.attr("strides")) or [1, 1]
    group = int(node.attr("group", 1))
    op = pb.Convolution3d
    if group != 1:
        if not (group == c and kdims[0] == c and kdims[1] == 1):
            raise Inexpressible(f"grouped convolution (group={group}) has no SMAUG equivalent (quirk Q7)")
        if ex.backend == "SMV":
            raise Inexpressible("depthwise convolution does nothing on SMV (its run function is empty, "
                                "quirk Q10); convert for the Reference backend")
        op, layout = pb.ConvolutionDepthwise, Layout.NCHW  # Reference depthwise is NCHW only
    pads = explicit_pads(node, [h, w], kernel, strides)
    same = list(layouts.same_pads(kernel[0])) + list(layouts.same_pads(kernel[1]))
    x = ex.need(x_value, layout, have)
    if pads == [same[0], same[2], same[1], same[3]]:
        padding, total = pb.SamePadding, [kernel[0] - 1, kernel[1] - 1]
    else:
        padding, total = pb.ValidPadding, [pads[0] + pads[2], pads[1] + pads[3]]
        if any(pads):
            x = padding_node(ex, x, pads, node.name)
    if op == pb.ConvolutionDepthwise:
        array = const_input(ex, node, 1, "the depthwise kernel")
        array = array.transpose(layouts.perm(have, Layout.NCHW)) if have != Layout.NCHW else array
        wref = ex.data(w_value.name, array.reshape(1, c, kernel[0], kernel[1]), Layout.NCHW)
    else:
        wref = ex.need(w_value, layout, have)
    out_nchw = [n, kdims[0] if op == pb.Convolution3d else c,
                layouts.conv_out(h, kernel[0], strides[0], total[0]),
                layouts.conv_out(w, kernel[1], strides[1], total[1])]
    dims = layouts.permute_dims(out_nchw, Layout.NCHW, layout) if layout != Layout.NCHW else out_nchw
    proto, refs = ex.emit(op, node.name, [x, wref], [(dims, layout)])
    proto.params.conv_params.padding = padding
    proto.params.conv_params.stride.extend(strides)
    bias = node.input(2)
    if bias is None:
        finish_fused(ex, proto, refs[0], y)
    else:
        bias_batch_norm(ex, refs[0], const_input(ex, node, 2, "the convolution bias"), y, node.name)


# -- pooling -----------------------------------------------------------------------------------
@exporter("MaxPool", "AveragePool", "GlobalAveragePool", "GlobalMaxPool")
def _pool(ex: Exporter, node: Node) -> None:
    have, layout = spatial(ex, node)
    x_value = node.inputs[0]
    _, _, h, w = nchw_dims(x_value, have)
    kernel, strides, pads = _pool_window(node, h, w)
    if len(node.outputs) > 1 and len(ex.graph.consumers(node.outputs[1])):
        raise Inexpressible("MaxPool indices have no SMAUG equivalent")
    op = pb.MaxPooling if "Max" in node.op else pb.AveragePooling
    x = ex.need(x_value, layout, have)
    if any(pads):
        x = _padded_pool_input(ex, node, op, x, pads)
        h, w = h + pads[0] + pads[2], w + pads[1] + pads[3]
    if op == pb.MaxPooling and ex.backend == "Reference" and kernel == [1, 1]:
        if strides != [1, 1]:
            raise Inexpressible("Reference max pooling aborts on 1x1 windows (quirk Q11)")
        define(ex, node.outputs[0], x)  # a 1x1/1 max pool is the identity
        return
    out = [(h - kernel[0]) // strides[0] + 1, (w - kernel[1]) // strides[1] + 1]
    parts = _channel_groups(ex, node, x, layout, _pool_group(ex, op, x, kernel, strides))
    pooled = []
    for part in parts:
        dims = [part.dims[0], *out, part.dims[3]] if layout == Layout.NHWC else [x.dims[0], x.dims[1], *out]
        proto, refs = ex.emit(op, node.name, [part], [(dims, layout)])
        proto.params.pool_params.stride.extend(strides)
        proto.params.pool_params.pool_size.extend(kernel)
        pooled.append(refs[0])
    if len(pooled) > 1:
        dims = [x.dims[0], *out, x.dims[3]]
        cat, pooled = ex.emit(pb.Concat, f"{node.name}/concat", pooled, [(dims, layout)])
        cat.params.concat_params.concat_axis = 3
    define(ex, node.outputs[0], pooled[0])


def _pool_window(node: Node, h: int, w: int) -> tuple[list[int], list[int], list[int]]:
    """Kernel, strides and explicit pads of a pooling node, refusing the windows SMAUG lacks."""
    if node.op.startswith("Global"):
        return [h, w], [h, w], [0, 0, 0, 0]
    kernel = int_list(node.attr("kernel_shape"))
    strides = int_list(node.attr("strides")) or [1] * len(kernel)
    if len(kernel) != 2:
        raise Inexpressible("SMAUG pooling is 2-D")
    if any(d != 1 for d in int_list(node.attr("dilations"))):
        raise Inexpressible("SMAUG pooling has no dilation (quirk Q7)")
    if int(node.attr("ceil_mode", 0)):
        raise Inexpressible("SMAUG pooling has no ceil mode (quirk Q7)")
    return kernel, strides, explicit_pads(node, [h, w], kernel, strides)


def _padded_pool_input(ex: Exporter, node: Node, op: int, x: Ref, pads: list[int]) -> Ref:
    """The pooling input padded with zeros, where zeros do not change the result."""
    if op == pb.MaxPooling and not non_negative(node.inputs[0]):
        raise Inexpressible("padded max pooling: SMAUG can only pad with zeros, which changes the "
                            "maximum of a possibly negative input (quirk Q7)")
    if op == pb.AveragePooling and not int(node.attr("count_include_pad", 0)):
        raise Inexpressible("padded average pooling that excludes the padding has no SMAUG equivalent")
    return padding_node(ex, x, pads, node.name)


def _pool_group(ex: Exporter, op: int, x: Ref, kernel: list[int], strides: list[int]) -> int:
    """How many channels one pooling node may take: all of them, except where SMAUG's SMV tiler
    splits them."""
    if ex.backend != "SMV" or not SMV_TILER:
        return x.dims[3]
    try:
        return SMV_TILER[0].pool_group(tuple(x.dims), kernel, strides, "max" if op == pb.MaxPooling else "avg")
    except ShapeError as exc:
        raise Inexpressible(f"SMAUG's SMV tiler cannot run this shape: {exc}") from None


def _channel_groups(ex: Exporter, node: Node, x: Ref, layout: Layout, group: int) -> list[Ref]:
    """``x`` split into channel groups of ``group`` (tiles SMAUG pairs consistently only per channel
    group, whole 8-lane rows), or ``[x]`` when one group holds them all."""
    if group >= x.dims[3]:
        return [x]
    split, parts = ex.emit(pb.Split, f"{node.name}/groups", [x],
                           [([*x.dims[:3], group], layout)] * (x.dims[3] // group))
    split.params.split_params.split_axis = 3
    return parts


def non_negative(value: Value) -> bool:
    """Is the value known to be ≥ 0 (a ReLU/sigmoid output, possibly moved or pooled)?"""
    p = value.producer
    if p is None:
        return False
    if p.op in ("Relu", "Sigmoid", "Softmax"):
        return True
    if p.op in ("MaxPool", "AveragePool", "Reorder", "Transpose", "Flatten", "Reshape", "Identity",
                "Dropout", "Split"):
        return non_negative(p.inputs[0])
    return p.op in ("Concat", "Add", "Max") and all(v is not None and non_negative(v) for v in p.inputs)


# -- inner product, batch norm ---------------------------------------------------------------
def inner_product(ex: Exporter, node: Node, a: Value, b: Value, b_have: Layout, scale: float,
                  bias: np.ndarray | None) -> None:
    """y = a · B (+ bias), B given in ``b_have`` orientation (CN = [in, out], NC = [out, in])."""
    if a.type.rank != 2 or b.type.rank != 2:
        raise Inexpressible("SMAUG InnerProduct multiplies a 2-D input by a 2-D weight matrix")
    x = ex.need(a, Layout.NC)
    want = layouts.FC_WEIGHT[ex.backend]
    array = ex.constant(b)
    outs = int(b.type.shape[1] if b_have == Layout.CN else b.type.shape[0])
    pad = row_tail(ex, outs) and (bias is not None or reads_full_rows(ex, node.outputs[0]))
    if x.feature_perm is not None or scale != 1.0 or pad:
        if array is None:
            raise Inexpressible("the weights must be constant (they absorb a scale, a flatten order "
                                "or the padding of the output rows to a multiple of 8 on SMV)")
        key = (id(b), b_have, x.node if x.feature_perm is not None else None, scale, pad)
        if key not in ex.derived:
            cn = array if b_have == Layout.CN else array.T
            if x.feature_perm is not None:
                cn = cn[x.feature_perm]
            cn = cn * scale
            if pad:
                cn = np.concatenate([cn, np.zeros((cn.shape[0], padded(outs) - outs), cn.dtype)], axis=1)
            ex.derived[key] = ex.data(b.name, cn if want == Layout.CN else cn.T, want)
        w = ex.derived[key]
    else:
        w = ex.need(b, want, b_have)
    rows = padded(outs) if pad else outs
    proto, refs = ex.emit(pb.InnerProduct, node.name, [x, w], [([x.dims[0], rows], Layout.NC)])
    proto.params.SetInParent()
    width = outs if pad else None
    if bias is None:
        finish_fused(ex, proto, refs[0], node.outputs[0], width)
    else:
        bias_batch_norm(ex, refs[0], np.broadcast_to(bias, (1, outs)).reshape(-1), node.outputs[0], node.name,
                        width)


@exporter("MatMul")
def _matmul(ex: Exporter, node: Node) -> None:
    inner_product(ex, node, node.inputs[0], node.inputs[1], Layout.CN, 1.0, None)


@exporter("Gemm")
def _gemm(ex: Exporter, node: Node) -> None:
    if int(node.attr("transA", 0)):
        raise Inexpressible("Gemm with transA has no SMAUG equivalent")
    b_have = Layout.NC if int(node.attr("transB", 0)) else Layout.CN
    bias = None
    if node.input(2) is not None:
        bias = const_input(ex, node, 2, "the Gemm bias C") * float(node.attr("beta", 1.0))
        if bias.size not in (1, node.inputs[1].type.shape[0 if b_have == Layout.NC else 1]):
            raise Inexpressible("a Gemm bias that varies along the batch has no SMAUG equivalent")
    inner_product(ex, node, node.inputs[0], node.inputs[1], b_have, float(node.attr("alpha", 1.0)), bias)


@exporter("BatchNormalization")
def _batch_norm(ex: Exporter, node: Node) -> None:
    x_value = node.inputs[0]
    if len(node.outputs) > 1 and any(ex.graph.consumers(o) for o in node.outputs[1:]):
        raise Inexpressible("training-mode BatchNormalization outputs have no SMAUG equivalent")
    if x_value.type.rank == 4:
        have, layout = spatial(ex, node)
    elif x_value.type.rank == 2:
        have = layout = Layout.NC
    else:
        raise Inexpressible("SMAUG BatchNorm takes a 4-D or 2-D input")
    given = [stat_input(ex, node, i) for i in range(1, 5)]
    channels = int(x_value.type.shape[1])
    rows = x_value.type.shape[0] if x_value.type.rank == 2 else 1
    full = not (ex.backend == "SMV" and x_value.type.rank == 2 and (rows > 1 or row_tail(ex, channels)))
    scale, beta, mean, var = (array.astype(np.float64).reshape(-1)[: None if full else channels] for array, _ in given)
    eps = float(node.attr("epsilon", 1e-5))
    inv_std = 1.0 / np.sqrt(var + eps)  # SMAUG stores var′ = 1/sqrt(var + ε) (§6.3)
    names = [name for _, name in given]
    stats = [mean, inv_std, scale, beta]
    if x_value.type.rank == 2 and row_tail(ex, channels):
        x, width, _ = pad_rows(ex, x_value, node.name)
        extra = x.dims[1] - width  # the padding lanes pass through: mean 0, var′ 1, gamma 1, beta 0
        stats = [np.concatenate([a.reshape(-1), np.full(extra, fill)]) for a, fill in zip(stats, (0, 1, 1, 0))]
        proto, ref = affine_node(ex, x, stats, node.name)
        finish_fused(ex, proto, ref, node.outputs[0], width)
        return
    x = ex.need(x_value, layout, have)
    proto, ref = affine_node(ex, x, stats, node.name, names=[names[i] for i in (2, 3, 0, 1)])
    finish_fused(ex, proto, ref, node.outputs[0])


def first_values_of(value: Value) -> Value | None:
    """``c`` when ``value`` is ``Slice(c, [0], [n])`` of a 1-D constant (the first values of a wider one)."""
    p = value.producer
    if p is None or p.op != "Slice" or p.domain or len(p.inputs) not in (3, 4) or p.inputs[0].const is None:
        return None
    bounds = [v.const if v is not None else None for v in p.inputs[1:]]
    if any(b is None for b in bounds) or p.inputs[0].const.ndim != 1 or int(bounds[0].reshape(-1)[0]) != 0 \
            or (len(bounds) == 3 and int(bounds[2].reshape(-1)[0]) != 0):
        return None
    return p.inputs[0]


def stat_input(ex: Exporter, node: Node, i: int) -> tuple[np.ndarray, str]:
    """A BatchNormalization statistic and the name of its constant: all of a wider constant whose first
    values the IR reads (a SMAUG file's [1, C'] parameters; the runtime reads the first C)."""
    wide = first_values_of(node.inputs[i]) if node.input(i) is not None else None
    if wide is not None:
        return np.asarray(wide.const), wide.name
    return const_input(ex, node, i, f"BatchNormalization input {i}"), node.inputs[i].name


def _claimed_stat(ex: Exporter, node: Node) -> bool:
    """The Slice taking the first values of a wide statistic is read through by its BatchNormalizations."""
    out = node.outputs[0]
    if node.op != "Slice" or node.domain or first_values_of(out) is None or ex.graph.is_output(out):
        return False
    users = ex.graph.consumers(out)
    return bool(users) and all(u.op == "BatchNormalization" and not u.domain and u.inputs[0] is not out for u in users)


LOOKED_THROUGH.append(_claimed_stat)


# -- activations -------------------------------------------------------------------------------
def same_layout_ref(ex: Exporter, value: Value) -> Ref:
    """A layout-agnostic op reads its input in whatever layout it already has."""
    native = ex.native_of(value)
    return native if native is not None else ex.need(value, ex.layout_of(value))


@exporter("Relu", "LeakyRelu", "Elu", "Selu", "Tanh", "Sigmoid", "Clip")
def _activation(ex: Exporter, node: Node) -> None:
    op, values = activation_params(ex, node)
    defaults = RUNTIME_DEFAULTS.get(op)
    if defaults is not None and any(not np.isclose(values[k], v, rtol=1e-3) for k, v in defaults.items()):
        raise Inexpressible(
            f"a standalone SMAUG {pb.OpType.Name(op)} ignores its parameters and uses {defaults} "
            f"(quirks Q1/Q2); fuse it into the preceding Conv/Gemm/BatchNorm or use those values")
    x = same_layout_ref(ex, node.inputs[0])
    proto, refs = ex.emit(op, node.name, [x], [(x.dims, x.layout)])
    if defaults is not None:
        fill_act_params(proto.params.act_params, op, values, fused=False)
    define(ex, node.outputs[0], refs[0])


@exporter("Softmax")
def _softmax(ex: Exporter, node: Node) -> None:
    x_value = node.inputs[0]
    if x_value.type.rank != 2 or int(node.attr("axis", -1)) not in (-1, 1):
        raise Inexpressible("SMAUG Softmax works on the rows of a 2-D NC tensor")
    width = int(x_value.type.shape[1])
    if ex.backend == "SMV" and padded(width) > SMV_SOFTMAX_MAX_ROW:
        raise Inexpressible(f"SMV Softmax needs a padded row of at most {SMV_SOFTMAX_MAX_ROW} values (Q12)")
    if row_tail(ex, width):
        x, width, masked = pad_rows(ex, x_value, node.name)
        if not masked:
            c = x.dims[1]
            mask = np.where(np.arange(c) < width, 0.0, SOFTMAX_MASK)
            x = affine_node(ex, x, [np.zeros(c), np.ones(c), np.ones(c), mask], f"{node.name}/mask")[1]
        ref = ex.emit(pb.Softmax, node.name, [x], [(x.dims, Layout.NC)])[1][0]
        ex.padded[id(node.outputs[0])] = (ref, width, False)
        return
    x = ex.need(x_value, Layout.NC)
    if x.feature_perm is not None:
        raise Inexpressible("softmax over a flattened NHWC tensor")
    _, refs = ex.emit(pb.Softmax, node.name, [x], [(x.dims, Layout.NC)])
    define(ex, node.outputs[0], refs[0])


# -- elementwise -------------------------------------------------------------------------------
def operand(ex: Exporter, value: Value, dims: list[int], layout: Layout, have: Layout, request: str) -> Ref:
    """An elementwise operand stored as ``dims`` in ``layout``; broadcasts become Repeat nodes."""
    rank = len(dims)
    array = ex.constant(value)
    if array is not None:
        array = np.asarray(array).reshape((1,) * (rank - np.ndim(array)) + np.shape(array))
        p = layouts.perm(have, layout) if have != layout else None
        if p is not None:
            array = array.transpose(p)
        ref = ex.data(value.name, array, layout)
    else:
        if value.type.rank != rank:
            raise Inexpressible("broadcasting between tensors of different rank")
        ref = ex.need(value, layout, have)
    if ref.dims == dims:
        return ref
    if any(i == 0 or o % i for o, i in zip(dims, ref.dims)):
        raise Inexpressible(f"cannot broadcast {ref.dims} to {dims}")
    return ex.emit(pb.Repeat, f"{request}/repeat", [ref], [(dims, layout)])[1][0]


@exporter("Add", "Mul", "Sub", "Div", "Less", "LessOrEqual", "Greater", "GreaterOrEqual")
def _binary(ex: Exporter, node: Node) -> None:
    a, b = node.inputs
    y = node.outputs[0]
    if not y.type.is_static:
        raise Inexpressible("SMAUG needs static shapes")
    op = {"Add": pb.EltwiseAdd, "Sub": pb.EltwiseAdd, "Mul": pb.EltwiseMul, "Div": pb.EltwiseMul,
          "Less": pb.Less, "LessOrEqual": pb.LessEqual, "Greater": pb.Greater,
          "GreaterOrEqual": pb.GreaterEqual}[node.op]
    if node.op in ("Sub", "Div"):  # only by a constant: x − c = x + (−c), x / c = x · (1/c)
        c = ex.constant(b)
        if c is None:
            raise Inexpressible(f"{node.op} by a computed tensor has no SMAUG equivalent")
        arr = np.asarray(c, dtype=np.float64)
        b = b.graph.add_initializer(f"{b.name}/{'neg' if node.op == 'Sub' else 'inv'}",
                                    (-arr if node.op == "Sub" else 1.0 / arr).astype(np.asarray(c).dtype))
    have = ex.layout_of(y)
    computed = [v for v in (a, b) if ex.constant(v) is None]
    first = ex.native_of(computed[0]) if computed else None
    if first is not None and first.layout != have and computed[0].type.rank == y.type.rank:
        layout = first.layout
    else:
        layout = have
    dims = out_dims(y, have, layout)
    refs = [operand(ex, v, dims, layout, have, node.name) for v in (a, b)]
    data_type = pb.Bool if op in (pb.Less, pb.LessEqual, pb.Greater, pb.GreaterEqual) else None
    _, outs = ex.emit(op, node.name, refs, [(dims, layout)], data_type=data_type)
    define(ex, y, outs[0])


@exporter("Sum")
def _sum(ex: Exporter, node: Node) -> None:
    """Sum of k tensors: a chain of EltwiseAdd nodes (SMAUG adds two at a time)."""
    y = node.outputs[0]
    if not y.type.is_static:
        raise Inexpressible("SMAUG needs static shapes")
    have = ex.layout_of(y)
    first = ex.native_of(node.inputs[0])
    layout = first.layout if first is not None and layouts.perm(have, first.layout) is not None else have
    dims = out_dims(y, have, layout)
    total = operand(ex, node.inputs[0], dims, layout, have, node.name)
    for i, value in enumerate(node.inputs[1:]):
        other = operand(ex, value, dims, layout, have, node.name)
        request = node.name if i == len(node.inputs) - 2 else f"{node.name}/partial"
        total = ex.emit(pb.EltwiseAdd, request, [total, other], [(dims, layout)])[1][0]
    define(ex, y, total)
