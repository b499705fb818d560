"""``simplify``: BatchNormalization → per-channel scale and shift.

``y = x·scale + shift`` with ``scale = γ/√(σ²+ε)`` and ``shift = β − μ·scale``
(specs/passes.md §4). When the BN's input comes from a Conv / Gemm / MatMul with
constant weights that nobody else reads, the scale and shift go straight into
those weights and bias (ONNX Runtime's Conv+BatchNorm fusion); otherwise the BN
becomes a ``Mul`` and an ``Add`` by constants shaped ``[C, 1, …]`` to broadcast
along the channel axis. Training-mode BNs (with running-stat outputs) are kept.
"""

from __future__ import annotations

import numpy as np

from ..ir import Graph, Layout, Node, Value
from .layouts import image_layout
from .manager import register_pass
from .rewrite import add_const, bypass, remove_dead, sole


@register_pass("simplify")
def simplify_inference(graph: Graph) -> bool:
    """Turn inference BatchNormalization into scale/shift, folded into a preceding Conv/Gemm/MatMul."""
    changed = False
    for node in graph.nodes:
        if node.op != "BatchNormalization" or node.domain or len(node.outputs) != 1:
            continue
        if node.attr("training_mode", 0):
            continue
        params = [v.const if v is not None else None for v in node.inputs[1:5]]
        x = node.inputs[0]
        if any(p is None for p in params) or x is None or x.type.rank is None or x.type.rank < 2:
            continue
        gamma, beta, mean, var = (np.asarray(p, dtype=np.float64) for p in params)
        scale = gamma / np.sqrt(var + float(node.attr("epsilon", 1e-5)))
        shift = beta - mean * scale
        dtype = node.outputs[0].type.dtype.numpy if node.outputs[0].type.dtype else np.float32
        folded = fold_affine_into_producer(graph, x, scale, shift)
        if folded is not None:
            changed |= bypass(graph, node, folded)
            continue
        nhwc = image_layout(x) is Layout.NHWC
        bshape = [1] * (x.type.rank - 1)  # broadcasting from the right: no batch dim needed
        bshape[-1 if nhwc else 0] = -1
        s = add_const(graph, f"{node.name}_scale", scale.astype(dtype).reshape(bshape))
        b = add_const(graph, f"{node.name}_shift", shift.astype(dtype).reshape(bshape))
        mul = graph.add_node("Mul", [x, s], name=f"{node.name}_mul")
        mul.outputs[0].type = x.type
        graph.remove_node(node)
        graph.add_node("Add", [mul.outputs[0], b], [node.outputs[0]], name=f"{node.name}_add")
        changed = True
    if changed:
        remove_dead(graph)
    return changed


def fold_affine_into_producer(graph: Graph, x: Value, scale: np.ndarray,
                              shift: np.ndarray | None) -> Value | None:
    """Fold ``x·scale + shift`` (per output channel) into the Conv/Gemm/MatMul producing ``x``.

    Returns the value now holding the result (None if not legal). Legal only when
    ``x`` has no other reader and the producer's weights are constants; new
    initializers are created (shared weights are never mutated).
    """
    producer = x.producer
    if producer is None or producer.domain or not sole(graph, x):
        return None
    fold = AFFINE_FOLDERS.get(producer.op)
    return fold(graph, producer, np.asarray(scale, np.float64),
                None if shift is None else np.asarray(shift, np.float64)) if fold else None


def _new_bias(graph: Graph, node: Node, index: int, channels: int, scale, shift, dtype) -> None:
    old = node.input(index)
    bias = np.zeros(channels) if old is None else np.broadcast_to(np.asarray(old.const, np.float64), (channels,))
    bias = bias * scale + (0.0 if shift is None else shift)
    node.set_input(index, add_const(graph, f"{node.name}_bias", bias.astype(dtype)))


def _fold_into_conv(graph: Graph, conv: Node, scale, shift) -> Value | None:
    w = conv.inputs[1].const
    bias_in = conv.input(2)
    if w is None or (bias_in is not None and bias_in.const is None):
        return None
    channels = w.shape[0]
    if scale.size not in (1, channels) or (shift is not None and shift.size not in (1, channels)):
        return None
    scale = np.broadcast_to(scale.reshape(-1), (channels,))
    # NCHW weights are [K, C, kH, kW] and NHWC ones [K, kH, kW, C]: output channels lead in both
    new_w = (w.astype(np.float64) * scale.reshape((-1,) + (1,) * (w.ndim - 1))).astype(w.dtype)
    conv.set_input(1, add_const(graph, f"{conv.name}_w", new_w))
    _new_bias(graph, conv, 2, channels, scale,
              None if shift is None else np.broadcast_to(shift.reshape(-1), (channels,)), w.dtype)
    return conv.outputs[0]


def _fold_into_gemm(graph: Graph, gemm: Node, scale, shift) -> Value | None:
    b = gemm.inputs[1].const
    c_in = gemm.input(2)
    out_shape = gemm.outputs[0].type.shape
    if b is None or b.ndim != 2 or (c_in is not None and c_in.const is None) or not out_shape:
        return None
    channels = b.shape[0] if gemm.attr("transB", 0) else b.shape[1]
    if scale.size not in (1, channels) or (shift is not None and shift.size not in (1, channels)):
        return None
    if c_in is not None and c_in.const.ndim == 2 and c_in.const.shape[0] != 1:
        return None  # a per-row bias cannot become per-column
    scale = np.broadcast_to(scale.reshape(-1), (channels,))
    alpha, beta = float(gemm.attr("alpha", 1.0)), float(gemm.attr("beta", 1.0))
    axis_scale = scale.reshape(-1, 1) if gemm.attr("transB", 0) else scale.reshape(1, -1)
    gemm.set_input(1, add_const(graph, f"{gemm.name}_w", (b.astype(np.float64) * axis_scale).astype(b.dtype)))
    bias = np.zeros(channels) if c_in is None else np.broadcast_to(
        np.asarray(c_in.const, np.float64).reshape(-1), (channels,)) * beta
    bias = bias * scale + (0.0 if shift is None else np.broadcast_to(shift.reshape(-1), (channels,)))
    gemm.attrs["beta"] = 1.0
    gemm.attrs["alpha"] = alpha
    gemm.set_input(2, add_const(graph, f"{gemm.name}_bias", bias.astype(b.dtype)))
    return gemm.outputs[0]


def _fold_into_matmul(graph: Graph, matmul: Node, scale, shift) -> Value | None:
    b = matmul.inputs[1].const
    if b is None or b.ndim != 2 or matmul.outputs[0].type.rank != 2:
        return None  # on a batched [B, T, N] result the per-channel axis is T, not B's columns
    channels = b.shape[1]
    if scale.size not in (1, channels) or (shift is not None and shift.size not in (1, channels)):
        return None
    scale = np.broadcast_to(scale.reshape(-1), (channels,))
    matmul.set_input(1, add_const(graph, f"{matmul.name}_w", (b.astype(np.float64) * scale).astype(b.dtype)))
    out = matmul.outputs[0]
    if shift is None or not np.any(shift):
        return out
    bias = add_const(graph, f"{matmul.name}_bias", np.broadcast_to(shift.reshape(-1), (channels,)).astype(b.dtype))
    add = graph.add_node("Add", [out, bias], name=f"{matmul.name}_bias_add")
    add.outputs[0].type = out.type
    return add.outputs[0]


#: ops whose weights can absorb a per-output-channel scale and shift (also fold-scale-axis's anchors)
AFFINE_FOLDERS = {"Conv": _fold_into_conv, "Gemm": _fold_into_gemm, "MatMul": _fold_into_matmul}
