"""``decompose``: rewrite the nodes a target's exporter cannot take as they are into ops it can,
by the op-traits table's per-target rows (``ir/decompositions.py``).

Exporters run it on their prepared copy of the graph; each rewritten node's outputs keep their
values (names, consumers, graph outputs), so only the node itself changes.
"""

from __future__ import annotations

from collections import Counter

from ..ir import Graph, op_traits
from ..ir.decompositions import Target
from .autodiff import Builder


def decompose(graph: Graph, target: Target) -> Counter:
    """Apply ``target``'s decompositions to ``graph`` in place; returns how many nodes of each op
    were rewritten."""
    rewritten: Counter = Counter()
    builder = Builder(graph, tag="decomposed")
    for node in graph.nodes:
        rule = op_traits(node.op, node.domain).decompositions.get(target.name)
        if rule is None or node.domain:
            continue
        replacements = rule(builder, node, target)
        if replacements is None:
            continue
        graph.remove_node(node)
        for old, new in zip(node.outputs, replacements):
            producer = new.producer
            producer.outputs[producer.outputs.index(new)] = old
            old.producer = producer
            graph.values.pop(new.name, None)
            graph.values[old.name] = old
        graph.mark_dirty()
        rewritten[node.op] += 1
    return rewritten
