"""``fold-scale-axis``: fold per-channel ``Mul`` (and ``Add``) constants into Conv/Gemm/MatMul.

Backward folding as in NNVM's FoldScaleAxis (specs/passes.md §5): from
``Mul(x, s)`` with ``s`` a per-channel constant, walk up a chain of
single-consumer nodes — Add/Sub by a constant (whose constant is scaled too) and
Relu/LeakyRelu — to a Conv/Gemm/MatMul with constant weights, and multiply the
scale into those weights. Unlike NNVM we pass Relu/LeakyRelu **only when every
scale entry is ≥ 0**: ``relu(x)·s = relu(x·s)`` is false for negative ``s``.
A per-channel ``Add`` directly after a Conv/Gemm/MatMul becomes its bias.
"""

from __future__ import annotations

import numpy as np

from ..ir import Graph, Node, Value
from .layouts import image_layout
from .manager import register_pass
from .rewrite import add_const, bypass, channel_vector, remove_dead, sole
from .simplify_inference import AFFINE_FOLDERS, fold_affine_into_producer


@register_pass("fold-scale-axis")
def fold_scale_axis(graph: Graph) -> bool:
    """Fold per-channel Mul/Add constants into the weights/bias of a preceding Conv/Gemm/MatMul."""
    changed = False
    for node in graph.nodes:
        if node.graph is not graph or node.domain or node.op not in ("Mul", "Add"):
            continue
        operand = _constant_operand(node)
        if operand is None:
            continue
        x, const = operand
        if node.op == "Mul":
            result = _fold_scale(graph, x, const)
        else:
            vec = _channel_vec(x, const)
            result = None if vec is None else fold_affine_into_producer(graph, x, np.ones(1), vec)
        if result is not None:
            changed |= bypass(graph, node, result)

    if changed:
        remove_dead(graph)
    return changed


def _constant_operand(node: Node) -> tuple[Value, np.ndarray] | None:
    """(x, c) for ``x op c`` where c is constant and does not enlarge x."""
    for i in (0, 1):
        x, c = node.inputs[i], node.inputs[1 - i]
        if x is None or c is None or c.const is None or x.const is not None:
            continue
        if x.type.is_static and x.type.shape == node.outputs[0].type.shape and c.const.dtype.kind == "f":
            return x, c.const
    return None


def _channel_vec(x: Value, const: np.ndarray) -> np.ndarray | None:
    rank = x.type.rank
    if rank is None:
        return None
    axis = rank - 1 if rank == 2 or image_layout(x) is not None and image_layout(x).value == "NHWC" else 1
    return channel_vector(const, rank, axis)


def _fold_scale(graph: Graph, x: Value, scale: np.ndarray) -> Value | None:
    """Walk from ``x`` up to an anchor; rewrite the chain with the scale folded. None if illegal."""
    chain: list[Node] = []
    value = x
    while True:
        producer = value.producer
        if producer is None or producer.domain or not sole(graph, value):
            return None
        if producer.op in AFFINE_FOLDERS:
            break
        if producer.op in ("Relu", "LeakyRelu"):
            if np.any(scale < 0) or np.any(np.isnan(scale)):
                return None  # relu(x)·s ≠ relu(x·s) for s < 0: stop here
            chain.append(producer)
            value = producer.inputs[0]
            continue
        if producer.op in ("Add", "Sub") and _constant_operand(producer) is not None:
            chain.append(producer)
            value = _constant_operand(producer)[0]
            continue
        return None
    vec = _channel_vec(value, scale)
    if vec is None:
        return None
    folded = fold_affine_into_producer(graph, value, vec, None)
    if folded is None:
        return None
    for node in chain:
        for i, v in enumerate(node.inputs):
            if v is not None and v.const is not None:
                node.set_input(i, add_const(graph, f"{node.name}_scaled", (v.const * scale).astype(v.const.dtype)))
    return x
