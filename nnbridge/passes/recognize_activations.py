"""``recognize-activations``: exporters' decomposed activations back into single ops.

``torch.onnx.export`` writes GELU as ``x·0.5·(1 + erf(x/√2))`` (five nodes), its tanh
form (GPT-2's) as ``x·0.5·(1 + tanh(√(2/π)·(x + 0.044715·x³)))`` (eight) and SiLU as
``x·sigmoid(x)`` (two); ONNX has had ``Gelu`` (opset 20) and ``Swish``
(opset 24) for them. One op reads its input once instead of streaming the tensor
through every intermediate, as onnxruntime's GeluFusion does. Only chains whose
intermediates have no other reader are rewritten.
"""

from __future__ import annotations

import math
from collections.abc import Callable

from ..ir import Graph, Node, Value
from .manager import register_pass
from .rewrite import is_close, plain, remove_dead, scalar_const, sole, sole_producer, split_operands


def _erf_plus_one(graph: Graph, value: Value) -> Value | None:
    """x when ``value`` is 1 + erf(x/√2) (its intermediates read once)."""
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


def _cube_of(graph: Graph, value: Value) -> Value | None:
    """x when ``value`` is x³ read once: Pow(x, 3) or a product of x and x·x."""
    node = value.producer if sole(graph, value) else None
    if plain(node, "Pow"):
        return node.inputs[0] if is_close(scalar_const(node.inputs[1]), 3.0) else None
    if plain(node, "Mul"):
        for left, right in (node.inputs, node.inputs[::-1]):
            square = sole_producer(graph, right, "Mul")
            if square and square.inputs[0] is left and square.inputs[1] is left:
                return left
    return None


def _tanh_plus_one(graph: Graph, value: Value) -> Value | None:
    """x when ``value`` is 1 + tanh(√(2/π)·(x + 0.044715·x³)) (its intermediates read once)."""
    add = sole_producer(graph, value, "Add")
    parts = add and split_operands(add, lambda v: is_close(scalar_const(v), 1.0))
    tanh = parts and sole_producer(graph, parts[1], "Tanh")
    scaled = tanh and sole_producer(graph, tanh.inputs[0], "Mul")
    parts = scaled and split_operands(scaled, lambda v: is_close(scalar_const(v), math.sqrt(2 / math.pi)))
    inner = parts and sole_producer(graph, parts[1], "Add")
    if not inner:
        return None
    for left, right in (inner.inputs, inner.inputs[::-1]):
        term = sole_producer(graph, right, "Mul")
        parts = term and split_operands(term, lambda v: is_close(scalar_const(v), 0.044715))
        if parts and _cube_of(graph, parts[1]) is left:
            return left
    return None


def _gelu_input(graph: Graph, final: Node, plus_one: Callable[[Graph, Value], Value | None]) -> Value | None:
    """x when ``final`` ends x·0.5·``plus_one``(x) in one of torch's two orders of multiplication."""
    half = split_operands(final, lambda v: is_close(scalar_const(v), 0.5))
    if half:  # (x · (1 + curve)) · 0.5
        inner = sole_producer(graph, half[1], "Mul")
        if inner:
            for left, right in (inner.inputs, inner.inputs[::-1]):
                if plus_one(graph, right) is left:
                    return left
        return None
    for left, right in (final.inputs, final.inputs[::-1]):  # (x · 0.5) · (1 + curve)
        scaled = sole_producer(graph, left, "Mul")
        parts = scaled and split_operands(scaled, lambda v: is_close(scalar_const(v), 0.5))
        if parts and plus_one(graph, right) is parts[1]:
            return parts[1]
    return None


#: the decomposed chains this pass recognises: (op, its attributes, the matcher of its last node's x)
_CHAINS = (
    ("Gelu", {}, lambda graph, node: _gelu_input(graph, node, _erf_plus_one)),
    ("Gelu", {"approximate": "tanh"}, lambda graph, node: _gelu_input(graph, node, _tanh_plus_one)),
    ("Swish", {}, lambda graph, node: _silu_input(graph, node)),
)


def _silu_input(graph: Graph, final: Node) -> Value | None:
    """x when ``final`` is x·sigmoid(x)."""
    for left, right in (final.inputs, final.inputs[::-1]):
        gate = right.producer
        if plain(gate, "Sigmoid") and gate.inputs[0] is left and sole(graph, right):
            return left
    return None


@register_pass("recognize-activations")
def recognize_activations(graph: Graph) -> bool:
    """Rewrite decomposed GELU (erf and tanh forms) and SiLU chains into Gelu and Swish nodes."""
    changed = False
    for node in graph.nodes:
        if not plain(node, "Mul") or len(node.inputs) != 2:
            continue
        for op, attrs, match in _CHAINS:
            x = match(graph, node)
            if x is None:
                continue
            out = node.outputs[0]
            graph.remove_node(node)
            graph.add_node(op, [x], [out], name=f"{node.name}_{op.lower()}", attrs=dict(attrs))
            changed = True
            break
    if changed:
        remove_dead(graph)
    return changed
