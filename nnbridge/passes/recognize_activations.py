"""``recognize-activations``: exporters' decomposed activations back into single ops.

``torch.onnx.export`` writes GELU as ``x·0.5·(1 + erf(x/√2))`` (five nodes) and
SiLU as ``x·sigmoid(x)`` (two); ONNX has had ``Gelu`` (opset 20) and ``Swish``
(opset 24) for them. One op reads its input once instead of streaming the tensor
through every intermediate, as onnxruntime's GeluFusion does. Only chains whose
intermediates have no other reader are rewritten.
"""

from __future__ import annotations

import math

from ..ir import Graph, Node, Value
from .manager import register_pass
from .rewrite import is_close, plain, remove_dead, scalar_const, sole, sole_producer, split_operands


def _gelu_input(graph: Graph, final: Node) -> Value | None:
    """x when ``final`` ends x·0.5·(1 + erf(x/√2)) in one of torch's two orders of multiplication."""
    def erf_plus_one(value: Value) -> Value | None:  # the x of 1 + erf(x/√2)
        add = sole_producer(graph, value, "Add")
        parts = add and split_operands(add, lambda v: is_close(scalar_const(v), 1.0))
        erf = parts and sole_producer(graph, parts[1], "Erf")
        scaled = erf and erf.inputs[0].producer
        if not erf or not sole(graph, erf.inputs[0]) or scaled is None or scaled.domain:
            return None
        if scaled.op == "Div" and is_close(scalar_const(scaled.inputs[1]), math.sqrt(2)):
            return scaled.inputs[0]
        if scaled.op == "Mul":
            parts = split_operands(scaled, lambda v: is_close(scalar_const(v), 1 / math.sqrt(2)))
            return parts[1] if parts else None
        return None

    half = split_operands(final, lambda v: is_close(scalar_const(v), 0.5))
    if half:  # (x · (1 + erf)) · 0.5
        inner = sole_producer(graph, half[1], "Mul")
        if inner:
            for left, right in (inner.inputs, inner.inputs[::-1]):
                if erf_plus_one(right) is left:
                    return left
        return None
    for left, right in (final.inputs, final.inputs[::-1]):  # (x · 0.5) · (1 + erf)
        scaled = sole_producer(graph, left, "Mul")
        parts = scaled and split_operands(scaled, lambda v: is_close(scalar_const(v), 0.5))
        if parts and erf_plus_one(right) is parts[1]:
            return parts[1]
    return None


def _silu_input(graph: Graph, final: Node) -> Value | None:
    """x when ``final`` is x·sigmoid(x)."""
    for left, right in (final.inputs, final.inputs[::-1]):
        gate = right.producer
        if plain(gate, "Sigmoid") and gate.inputs[0] is left and sole(graph, right):
            return left
    return None


@register_pass("recognize-activations")
def recognize_activations(graph: Graph) -> bool:
    """Rewrite decomposed GELU and SiLU chains into Gelu and Swish nodes."""
    changed = False
    for node in graph.nodes:
        if not plain(node, "Mul") or len(node.inputs) != 2:
            continue
        for op, match in (("Gelu", _gelu_input), ("Swish", _silu_input)):
            x = match(graph, node)
            if x is None:
                continue
            out = node.outputs[0]
            graph.remove_node(node)
            graph.add_node(op, [x], [out], name=f"{node.name}_{op.lower()}")
            changed = True
            break
    if changed:
        remove_dead(graph)
    return changed
