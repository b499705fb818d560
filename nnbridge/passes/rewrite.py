"""Small graph-surgery helpers shared by the passes (no pass of its own).

Passes keep graph output *names* stable: when a rewrite would drop the node that
produces a graph output, the surviving producer is made to produce that output
value instead, so a user's ``outputs["prob"]`` keeps working after any pipeline.
"""

from __future__ import annotations

import math
from collections.abc import Callable

import numpy as np

from ..ir import Graph, Node, Value


def sole(graph: Graph, value: Value) -> bool:
    """Exactly one node reads ``value`` and it is not a graph output (safe to rewrite its producer)."""
    return len(graph.consumers(value)) == 1 and not graph.is_output(value)


def _liveness(graph: Graph) -> tuple[list[Node], set[int]]:
    """The nodes none of whose outputs reach a graph output (last first), and the ids of the
    values the live nodes and the graph use."""
    dead: list[Node] = []
    used = {id(v) for v in graph.outputs}
    for node in reversed(graph.nodes):
        if not any(id(o) in used for o in node.outputs):
            dead.append(node)
            continue
        used.update(id(v) for v in node.inputs if v is not None)
        used.update(id(v) for v in node.captured())
    used.update(id(v) for v in graph.inputs)
    return dead, used


def dead_nodes(graph: Graph) -> list[Node]:
    """Nodes none of whose outputs reach a graph output, last first."""
    return _liveness(graph)[0]


def remove_dead(graph: Graph) -> bool:
    """Drop nodes none of whose outputs are used, then unused initializers (one sweep each)."""
    dead, used = _liveness(graph)
    for node in dead:
        graph.remove_node(node)
    changed = bool(dead)
    for name in list(graph.initializers):
        value = graph.values.get(name)
        if value is None or id(value) not in used:
            del graph.initializers[name]
            if value is not None:
                del graph.values[name]
            changed = True
    return changed


def set_output(node: Node, index: int, value: Value) -> None:
    """Make ``node`` produce ``value`` as output ``index`` (the old output value is orphaned)."""
    graph = node.graph
    old = node.outputs[index]
    if old.producer is node:
        old.producer = None
        if graph is not None and graph.values.get(old.name) is old:
            del graph.values[old.name]
    node.outputs[index] = value
    value.producer = node
    if graph is not None:
        value.graph = graph
        graph.values[value.name] = value
        graph.mark_dirty()


def bypass(graph: Graph, node: Node, keep: Value) -> bool:
    """Remove single-output ``node`` whose result equals ``keep``; False if that is impossible.

    Impossible only when the node's output is a graph output and ``keep`` cannot be
    renamed (it is a graph input, a constant, another output, or already returned).
    """
    out = node.outputs[0]
    if graph.is_output(out):
        producer = keep.producer
        if producer is None or producer.graph is not graph or graph.is_output(keep):
            return False
        graph.remove_node(node)
        graph.replace_uses(keep, out)
        set_output(producer, producer.outputs.index(keep), out)
        out.type = keep.type
        return True
    graph.remove_node(node)
    graph.replace_uses(out, keep)
    return True


def resolve(mapping: dict[int, Value], value: Value | None) -> Value | None:
    """Follow a replacement chain (a → b → c) to its end."""
    while value is not None and id(value) in mapping:
        value = mapping[id(value)]
    return value


def replace_all(graph: Graph, mapping: dict[int, Value]) -> None:
    """Apply many value replacements in one sweep over ``graph`` and its subgraphs (linear, not
    one ``replace_uses`` walk per value). Graph outputs are left to the caller."""
    if not mapping:
        return
    stack = [graph]
    while stack:
        g = stack.pop()
        for node in g._nodes:
            if any(v is not None and id(v) in mapping for v in node.inputs):
                node.inputs = [resolve(mapping, v) for v in node.inputs]
            stack.extend(node.subgraphs())
        g.mark_dirty()


def add_const(graph: Graph, hint: str, array: np.ndarray) -> Value:
    """A new initializer with a unique name derived from ``hint``."""
    return graph.add_initializer(hint, np.ascontiguousarray(array))


def channel_vector(array: np.ndarray, rank: int, axis: int = 1) -> np.ndarray | None:
    """If ``array`` broadcast against a rank-``rank`` tensor varies only along ``axis``,
    return it as a 1-D vector (length 1 for scalars); else None."""
    if array.ndim > rank:
        return None
    shape = (1,) * (rank - array.ndim) + array.shape
    if any(d != 1 for i, d in enumerate(shape) if i != axis):
        return None
    return array.reshape(-1)


# -- matching a decomposed chain (the recognize passes) ---------------------------------------
def plain(node: Node | None, op: str) -> bool:
    """``node`` is the default domain's ``op``."""
    return node is not None and node.op == op and not node.domain


def sole_producer(graph: Graph, value: Value, *ops: str) -> Node | None:
    """The node making ``value`` when it is one of ``ops`` and ``value`` has no other reader."""
    node = value.producer
    return node if any(plain(node, op) for op in ops) and sole(graph, value) else None


def scalar_const(value: Value | None) -> float | None:
    """The value of a one-element float constant, else None."""
    const = value.const if value is not None else None
    if const is None or const.size != 1 or const.dtype.kind != "f":
        return None
    return float(np.asarray(const).reshape(-1)[0])


def is_close(value: float | None, target: float) -> bool:
    return value is not None and math.isclose(value, target, rel_tol=1e-6)


def split_operands(node: Node, is_other: Callable[[Value], bool]) -> tuple[Value, Value] | None:
    """(the operand satisfying ``is_other``, the remaining operand) of a binary node, in either order."""
    a, b = node.inputs
    if is_other(b):
        return b, a
    if is_other(a):
        return a, b
    return None
