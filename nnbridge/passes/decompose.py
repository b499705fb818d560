"""``decompose``: rewrite the nodes a target's exporter cannot take as they are into ops it can,
by the op-traits table's per-target rows (``ir/decompositions.py``).

Exporters run it on their prepared copy of the graph; each rewritten node's outputs keep their
values (names, consumers, graph outputs), so only the node itself changes.
"""

from __future__ import annotations

from collections import Counter

from ..ir import Graph, Node, Value, op_traits
from ..ir.decompositions import Target
from .autodiff import Builder
from .rewrite import remove_dead, replace_all, resolve


def decompose(graph: Graph, target: Target) -> Counter:
    """Apply ``target``'s decompositions to ``graph`` in place; returns how many nodes of each op
    were rewritten."""
    rewritten: Counter = Counter()
    builder = Builder(graph, tag="decomposed")
    existing: dict[int, Value] = {}  # outputs replaced by values the graph already had
    for node in graph.nodes:
        rule = op_traits(node.op, node.domain).decompositions.get(target.name)
        if rule is None or node.domain or node.graph is not graph:
            continue
        builder.created.clear()
        replacements = rule(builder, node, target)
        if replacements is None:
            continue
        made = set(map(id, builder.created))
        for old, new in zip(node.outputs, replacements):
            if new.producer is not None and id(new.producer) in made:
                _adopt(graph, node, old, new)
            else:
                existing[id(old)] = new
        rewritten[node.op] += 1
    if existing:
        replace_all(graph, existing)
        graph.outputs = [resolve(existing, v) for v in graph.outputs]
    if rewritten:
        remove_dead(graph)
    return rewritten


def _adopt(graph: Graph, node: Node, old: Value, new: Value) -> None:
    """``new``'s producer writes ``old`` instead (its name, readers and graph-output place)."""
    if node.graph is graph:
        graph.remove_node(node)
    producer = new.producer
    producer.outputs[producer.outputs.index(new)] = old
    old.producer = producer
    graph.values.pop(new.name, None)
    graph.values[old.name] = old
    graph.mark_dirty()
