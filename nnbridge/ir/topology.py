"""A graph's order, its invariants and its forward walks: whether its nodes are in topological
order, the stable topological sort that restores it, the verifier (SSA, definition before use,
outputs produced), and the walk from a value to every reader it reaches (``walk_readers``).

These are algorithms over a ``Graph``, not its bookkeeping: ``graph.py`` calls them (``Graph.nodes``
restores the order lazily, ``Graph.verify`` checks), and nothing here changes a graph.
"""

from __future__ import annotations

import heapq
import itertools
from collections.abc import Callable, Iterable, Iterator
from typing import TYPE_CHECKING

from ..base.errors import NNBridgeError

if TYPE_CHECKING:
    from .graph import Graph, Node
    from .value import Value


def in_order(graph: Graph, nodes: Iterable[Node]) -> bool:
    """Whether every node of ``nodes`` (``graph``'s, in their current order) already comes after the
    producers it reads (most rewrites append in order, and one scan is cheaper than a sort)."""
    placed: set[int] = set()
    for n in nodes:
        for v in itertools.chain(n.inputs, n.captured()):
            if v is not None and (p := v.producer) is not None and p.graph is graph and p is not n \
                    and id(p) not in placed:
                return False
        placed.add(id(n))
    return True


def sorted_nodes(graph: Graph, nodes: Iterable[Node]) -> list[Node]:
    """``nodes`` (``graph``'s) in a stable topological order (Kahn's algorithm, ties broken by old
    position); a cycle is an error naming some of its nodes."""
    nodes = list(nodes)
    position = {id(n): i for i, n in enumerate(nodes)}
    producer_of: dict[int, Node] = {}
    for n in nodes:
        for out in n.outputs:
            producer_of[id(out)] = n
    deps: dict[int, int] = {}
    users: dict[int, list[Node]] = {}
    for n in nodes:
        preds = {
            id(p): p
            for v in itertools.chain(n.inputs, n.captured())
            if v is not None and (p := producer_of.get(id(v))) is not None and p is not n
        }
        deps[id(n)] = len(preds)
        for p in preds.values():
            users.setdefault(id(p), []).append(n)
    ready = [(position[id(n)], n) for n in nodes if deps[id(n)] == 0]
    heapq.heapify(ready)
    order: list[Node] = []
    while ready:
        _, n = heapq.heappop(ready)
        order.append(n)
        for u in users.get(id(n), []):
            deps[id(u)] -= 1
            if deps[id(u)] == 0:
                heapq.heappush(ready, (position[id(u)], u))
    if len(order) != len(nodes):
        stuck = [n.name for n in nodes if deps[id(n)] > 0][:5]
        raise NNBridgeError(f"graph '{graph.name}' has a cycle through nodes {stuck}")
    return order


def verify(graph: Graph, visible: set[int] | None = None) -> None:
    """Check SSA, definitions before use, topological order; raise on the first fault.

    ``visible``: ids of the enclosing graphs' values, passed down so that verifying
    many subgraphs (fused groups) does not rescan their parents each time."""
    if visible is None:
        visible = _enclosing_values(graph)
    defined: set[int] = {id(v) for v in graph.inputs}
    defined.update(id(graph.values[n]) for n in graph.initializers if n in graph.values)
    seen_outputs: set[str] = set()
    scope: set[int] | None = None  # what a subgraph sees: built once, at the first subgraph
    for node in graph.nodes:  # (inline: this loop runs over every node of large graphs)
        for i, v in enumerate(node.inputs):
            if v is not None and id(v) not in defined and id(v) not in visible:
                raise NNBridgeError(
                    f"graph '{graph.name}': node '{node.name}' ({node.op}) input {i} "
                    f"'{v.name}' is used before it is defined"
                )
        for out in node.outputs:
            if out.name in seen_outputs:
                raise NNBridgeError(f"graph '{graph.name}': value '{out.name}' is defined twice")
            if out.producer is not node:
                raise NNBridgeError(f"graph '{graph.name}': '{out.name}' has the wrong producer")
            seen_outputs.add(out.name)
            defined.add(id(out))
        schema = node.schema
        if schema is not None:
            schema.check_node(node)
        subgraphs = node.subgraphs()
        if subgraphs:
            if scope is None:
                scope = visible | {id(v) for v in graph.values.values()}
            for sub in subgraphs:
                verify(sub, scope)
    _verify_outputs(graph, defined, visible)


def _enclosing_values(graph: Graph) -> set[int]:
    """Ids of every value of the enclosing graphs (all visible to this one)."""
    visible: set[int] = set()
    g = graph.parent
    while g is not None:
        visible.update(id(v) for v in g.values.values())
        g = g.parent
    return visible


def _verify_outputs(graph: Graph, defined: set[int], visible: set[int]) -> None:
    """Every graph output is produced here or visible from an enclosing graph."""
    for v in graph.outputs:
        if id(v) not in defined and id(v) not in visible:
            raise NNBridgeError(f"graph '{graph.name}': output '{v.name}' is never produced")


def walk_readers(graph: Graph, start: Value, follow: Callable[[Node, Value], bool]) -> Iterator[tuple[Node, Value]]:
    """``(reader, value)`` for every node of ``graph`` reading ``start``, then, through each reader
    that ``follow(reader, value)`` accepts, the readers of its outputs, and so on; each value is
    expanded once. Lazy, so a caller stops the walk by stopping to ask (``all``, ``any``, ``break``)."""
    frontier, seen = [start], set()
    while frontier:
        value = frontier.pop()
        if id(value) in seen:
            continue
        seen.add(id(value))
        for node in graph.consumers(value):
            yield node, value
            if follow(node, value):
                frontier.extend(o for o in node.outputs if o is not None)
