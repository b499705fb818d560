"""ONNX LSTM → SMAUG, decomposed per time step the way SMAUG's Python frontend builds its LSTM
(SMAUG has no recurrent operator): per step an InnerProduct for the input and one for the
hidden state, their sum plus bias, a Split into the four gates, the gate activations and the
elementwise cell update. Node names use SMAUG's ``:`` scopes (``lstm:step0:mm_x``).
Also Squeeze/Unsqueeze, which are Reshapes in SMAUG.
"""

from __future__ import annotations

import os

import numpy as np

from ...ir import Layout, Node
from ...protos.smaug import smaug_types_pb2 as pb
from . import layouts
from .export_ops import affine_node, const_input, define, exporter, row_tail
from .exporter import Exporter, Inexpressible, Ref


def inner_product(ex: Exporter, x: Ref, weight: np.ndarray, request: str) -> Ref:
    """x [B, in] · weightᵀ for ``weight`` [out, in], stored in the backend's FC layout."""
    want = layouts.FC_WEIGHT[ex.backend]
    w = ex.data(f"{request}_w", weight if want == Layout.NC else weight.T, want)
    node, (out,) = ex.emit(pb.InnerProduct, request, [x, w], [([x.dims[0], weight.shape[0]], Layout.NC)])
    node.params.SetInParent()
    return out


def elementwise(ex: Exporter, op: int, a: Ref, b: Ref, request: str) -> Ref:
    return ex.emit(op, request, [a, b], [(a.dims, a.layout)])[1][0]


def unary(ex: Exporter, op: int, x: Ref, request: str) -> Ref:
    return ex.emit(op, request, [x], [(x.dims, x.layout)])[1][0]


#: time steps an LSTM may unroll into (each step is about a dozen SMAUG nodes and ~2 ms of export):
#: a small file declaring a 65,535-step sequence would otherwise take minutes and a huge topology
MAX_UNROLLED_STEPS = 1024


def max_unrolled_steps() -> int:
    return int(os.environ.get("NNBRIDGE_MAX_UNROLLED_STEPS", MAX_UNROLLED_STEPS))


def check_lstm(ex: Exporter, node: Node) -> None:
    if node.attr("direction", "forward") not in ("forward", b"forward"):
        raise Inexpressible("only forward LSTMs are decomposed for SMAUG")
    if int(node.attr("layout", 0)) or int(node.attr("input_forget", 0)) or node.attr("clip") is not None:
        raise Inexpressible("LSTM layout=1, input_forget and clip have no SMAUG decomposition")
    acts = node.attr("activations")
    if acts and [a.decode() if isinstance(a, bytes) else a for a in acts] != ["Sigmoid", "Tanh", "Tanh"]:
        raise Inexpressible("only the default LSTM activations (Sigmoid, Tanh, Tanh) are decomposed")
    if node.input(7) is not None:
        raise Inexpressible("LSTM peepholes have no SMAUG decomposition")
    if node.input(4) is not None:
        lens = ex.constant(node.input(4))
        if lens is None or np.any(np.asarray(lens) != node.inputs[0].type.shape[0]):
            raise Inexpressible("LSTM sequence_lens shorter than the sequence have no SMAUG decomposition")
    if not node.inputs[0].type.is_static:
        raise Inexpressible("SMAUG needs a static sequence length and batch")
    if 0 in node.inputs[0].type.shape:
        raise Inexpressible(f"input X has the shape {list(node.inputs[0].type.shape)}; SMAUG unrolls no "
                            "empty sequence, batch or input")
    steps, limit = node.inputs[0].type.shape[0], max_unrolled_steps()
    if steps > limit:
        raise Inexpressible(f"a sequence of {steps} steps would unroll into about {12 * steps:,} SMAUG nodes, over "
                            f"the limit of {limit} steps (NNBRIDGE_MAX_UNROLLED_STEPS raises it)")


@exporter("LSTM")
def _lstm(ex: Exporter, node: Node) -> None:
    check_lstm(ex, node)
    steps, batch, _ = node.inputs[0].type.shape
    w = const_input(ex, node, 1, "the LSTM input weights")[0]  # [4H, I], gates i, o, f, c
    r = const_input(ex, node, 2, "the LSTM recurrent weights")[0]  # [4H, H]
    hidden = r.shape[1]
    bias = const_input(ex, node, 3, "the LSTM bias")[0] if node.input(3) is not None else None
    bias = None if bias is None else bias[: 4 * hidden] + bias[4 * hidden:]
    if bias is not None and row_tail(ex, 4 * hidden):
        raise Inexpressible(f"on SMV the gate bias rows ({4 * hidden} values) must be a multiple of 8: "
                            f"SMV's post-FC batch-norm kernel leaves the last {4 * hidden % 8} unbiased")
    h = c = None
    if node.input(5) is not None:
        h = ex.data(f"{node.name}:h0", const_input(ex, node, 5, "initial_h")[0], Layout.NC)
    if node.input(6) is not None:
        c = ex.data(f"{node.name}:c0", const_input(ex, node, 6, "initial_c")[0], Layout.NC)
    x = ex.need(node.inputs[0], ex.layout_of(node.inputs[0]))
    split, xs = ex.emit(pb.Split, f"{node.name}:split_x", [x],
                        [([1, *x.dims[1:]], x.layout)] * steps)
    split.params.split_params.split_axis = 0
    outputs = []
    for t, x_t in enumerate(xs):
        scope = f"{node.name}:step{t}"
        x_t = ex.emit(pb.Reshape, f"{scope}:x", [x_t], [([batch, x.dims[2]], Layout.NC)])[1][0]
        z = inner_product(ex, x_t, w, f"{scope}:mm_x")
        if h is not None:
            z = elementwise(ex, pb.EltwiseAdd, z, inner_product(ex, h, r, f"{scope}:mm_h"), f"{scope}:add")
        if bias is not None:
            ones = np.ones(4 * hidden)
            z = affine_node(ex, z, [0 * ones, ones, ones, bias], f"{scope}:bias",
                            names=[f"{scope}:bias_{role}" for role in ("mean", "var", "gamma", "beta")])[1]
        gates_node, gates = ex.emit(pb.Split, f"{scope}:gates", [z], [([batch, hidden], Layout.NC)] * 4)
        gates_node.params.split_params.split_axis = 1
        i, o = (unary(ex, pb.Sigmoid, g, f"{scope}:{n}") for g, n in zip(gates[:2], ("i", "o")))
        g = unary(ex, pb.Tanh, gates[3], f"{scope}:g")
        c_new = elementwise(ex, pb.EltwiseMul, i, g, f"{scope}:ig")
        if c is not None:  # without a previous cell state the forget gate has nothing to act on
            f = unary(ex, pb.Sigmoid, gates[2], f"{scope}:f")
            c_new = elementwise(ex, pb.EltwiseAdd, elementwise(ex, pb.EltwiseMul, f, c, f"{scope}:fc"), c_new,
                                f"{scope}:c")
        c = c_new
        h = elementwise(ex, pb.EltwiseMul, o, unary(ex, pb.Tanh, c, f"{scope}:tanh_c"), f"{scope}:h")
        outputs.append(h)
    results = {1: h, 2: c}
    if needed(ex, node, 0):
        all_h = outputs[0] if steps == 1 else ex.emit(
            pb.Concat, f"{node.name}:concat", outputs, [([steps * batch, hidden], Layout.NC)])[1][0]
        if steps > 1:
            ex.proto.nodes[-1].params.concat_params.concat_axis = 0
        results[0] = all_h
    for k, ref in results.items():
        if needed(ex, node, k):
            value = node.outputs[k]
            dims = list(value.type.shape)
            layout = ex.layout_of(value)
            ref = ex.emit(pb.Reshape, f"{node.name}:output{k}", [ref], [(dims, layout)])[1][0]
            define(ex, value, ref)


def needed(ex: Exporter, node: Node, k: int) -> bool:
    if k >= len(node.outputs) or not node.outputs[k].name:
        return False
    value = node.outputs[k]
    return bool(ex.graph.consumers(value)) or ex.graph.is_output(value)


@exporter("Squeeze", "Unsqueeze")
def _squeeze(ex: Exporter, node: Node) -> None:
    """A Squeeze/Unsqueeze keeps the element order: a SMAUG Reshape to the output's dims."""
    x_value, y = node.inputs[0], node.outputs[0]
    if not y.type.is_static:
        raise Inexpressible("SMAUG Reshape needs static shapes")
    layout = ex.layout_of(y)
    if layout not in layouts.RANK:
        raise Inexpressible(f"SMAUG has no layout for a {y.type.rank}-D tensor")
    x = ex.need(x_value, ex.layout_of(x_value))
    define(ex, y, ex.emit(pb.Reshape, node.name, [x], [(list(y.type.shape), layout)])[1][0])
