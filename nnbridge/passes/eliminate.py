"""``eliminate``: dead code and no-op removal.

Removes Identity, inference-mode Dropout, no-op Reshape/Flatten/Expand/Squeeze
(output shape equals input shape), identity Transpose/Reorder, Cast to the same
dtype, single-input Concat/Sum, all-zero Pad, ``x+0``, ``x-0``, ``x*1``, ``x/1``
(only when the constant does not broadcast the result bigger), then nodes whose
outputs nobody uses and unused initializers. Each rule is one entry in a table.
"""

from __future__ import annotations

from collections.abc import Callable

import numpy as np

from ..ir import Graph, Node, Value
from .manager import register_pass
from .rewrite import bypass, dead_nodes, remove_dead, replace_all, resolve


def _same_shape(node: Node) -> bool:
    x, y = node.inputs[0], node.outputs[0]
    return x is not None and x.type.is_static and x.type.shape == y.type.shape


def _dropout(node: Node) -> bool:
    training = node.input(2)
    if training is not None and (training.const is None or bool(np.asarray(training.const).any())):
        return False
    return len(node.outputs) == 1 or not node.graph.consumers(node.outputs[1]) and \
        not node.graph.is_output(node.outputs[1])


def _identity_perm(node: Node) -> bool:
    perm = node.attr("perm")
    rank = node.inputs[0].type.rank
    if node.inputs[0].type.layout is not node.outputs[0].type.layout:
        return False  # a relabelling (same bytes read in another layout) is not a no-op
    if perm is None:
        return rank is not None and rank <= 1
    return list(perm) == list(range(len(perm)))


def _unit(value: float) -> Callable[[Node], bool]:
    """``x op c`` where c is all ``value`` and does not enlarge x (either operand order for + and *)."""
    def test(node: Node) -> bool:
        return _unit_operand(node, value) is not None

    return test


def _unit_operand(node: Node, value: float) -> int | None:
    """Index of the operand that survives, or None."""
    order = (0, 1) if node.op in ("Add", "Mul") else (0,)
    for keep in order:
        other = node.inputs[1 - keep]
        x = node.inputs[keep]
        c = other.const if other is not None else None
        if c is None or x is None or c.dtype == object or not np.all(c == value):
            continue
        if x.type.dtype == node.outputs[0].type.dtype and x.type.is_static \
                and x.type.shape == node.outputs[0].type.shape:
            return keep
    return None


def _zero_pad(node: Node) -> bool:
    pads = node.input(1)
    return pads is not None and pads.const is not None and not np.any(pads.const) and _same_shape(node)


#: op → (is this node a no-op?, index of the input that equals its output)
RULES: dict[str, tuple[Callable[[Node], bool], Callable[[Node], int]]] = {
    "Identity": (lambda n: True, lambda n: 0),
    "Dropout": (_dropout, lambda n: 0),
    "Reshape": (_same_shape, lambda n: 0),
    "Flatten": (_same_shape, lambda n: 0),
    "Expand": (_same_shape, lambda n: 0),
    "Squeeze": (_same_shape, lambda n: 0),
    "Unsqueeze": (_same_shape, lambda n: 0),
    "Transpose": (_identity_perm, lambda n: 0),
    "Cast": (lambda n: n.inputs[0].type.dtype is not None and n.inputs[0].type.dtype == n.outputs[0].type.dtype,
             lambda n: 0),
    "Concat": (lambda n: len(n.inputs) == 1, lambda n: 0),
    "Sum": (lambda n: len(n.inputs) == 1, lambda n: 0),
    "Pad": (_zero_pad, lambda n: 0),
    "Add": (_unit(0.0), lambda n: _unit_operand(n, 0.0)),
    "Sub": (_unit(0.0), lambda n: _unit_operand(n, 0.0)),
    "Mul": (_unit(1.0), lambda n: _unit_operand(n, 1.0)),
    "Div": (_unit(1.0), lambda n: _unit_operand(n, 1.0)),
}
NNBRIDGE_RULES = {"Reorder": RULES["Transpose"]}


def _no_dead_node(graph: Graph) -> str | None:
    dead = dead_nodes(graph)
    return f"{len(dead)} dead node(s) left, first '{dead[-1].name}' ({dead[-1].op})" if dead else None


@register_pass("eliminate", ensures=[_no_dead_node])
def eliminate(graph: Graph) -> bool:
    """Remove no-op nodes (Identity, Dropout, no-op Reshape/Transpose/Cast, x*1 …) and dead code."""
    changed = False
    mapping: dict[int, Value] = {}  # removed output → the value it equals (applied in one sweep)
    returned: list[tuple[Node, Value]] = []  # no-ops producing graph outputs: need a rename
    for node in graph.nodes:
        table = NNBRIDGE_RULES if node.domain == "nnbridge" else RULES if not node.domain else {}
        rule = table.get(node.op)
        if rule is None or not node.inputs or node.inputs[0] is None:
            continue
        node.inputs = [resolve(mapping, v) for v in node.inputs]
        is_noop, keep_index = rule
        try:
            noop = is_noop(node)
        except (TypeError, ValueError):
            noop = False
        keep = node.inputs[keep_index(node)] if noop else None
        if keep is None:
            continue
        if graph.is_output(node.outputs[0]):
            returned.append((node, keep))
            continue
        graph.remove_node(node)
        mapping[id(node.outputs[0])] = keep
        changed = True
    replace_all(graph, mapping)
    for node, keep in returned:
        changed |= bypass(graph, node, resolve(mapping, keep))
    return remove_dead(graph) or changed
