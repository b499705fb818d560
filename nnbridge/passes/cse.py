"""``cse``: common subexpression elimination.

Two nodes of one op, domain and attributes reading the same values compute the same results, so the
later one is dropped and its readers read the first one's outputs. Exporters repeat such nodes
freely: a dynamic-shape transformer re-derives ``Shape → Gather → Unsqueeze → Concat`` for every
Reshape of every layer (BERT's dynamic fixture: 210 nodes, a third of them repeats), and on a
small graph each repeat costs as much as a real kernel. Ops that may not fold (random ones,
control flow) and nodes with subgraphs are never merged, nor a node whose output the graph returns.
"""

from __future__ import annotations

from collections.abc import Hashable
from typing import Any

import numpy as np

from ..ir import Graph, Node, Value, op_traits
from .manager import register_pass
from .rewrite import replace_all, resolve


def _frozen(value: Any) -> Hashable:
    """An attribute's value as a dictionary key; a TypeError for one that cannot be compared so."""
    if isinstance(value, (list, tuple)):
        return tuple(_frozen(v) for v in value)
    if isinstance(value, np.ndarray):
        return ("array", value.dtype.str, value.shape, value.tobytes())
    hash(value)  # a subgraph or another unhashable value: the node is not merged
    return value


def _key(node: Node, mapping: dict[int, Value]) -> Hashable | None:
    if node.subgraphs() or not op_traits(node.op, node.domain).foldable:
        return None
    try:
        attrs = tuple(sorted((name, _frozen(value)) for name, value in node.attrs.items()))
    except TypeError:
        return None
    inputs = tuple(None if v is None else id(resolve(mapping, v)) for v in node.inputs)
    return node.domain, node.op, inputs, attrs, len(node.outputs)


@register_pass("cse")
def cse(graph: Graph) -> bool:
    """Drop every node that repeats an earlier one (same op, attributes and inputs)."""
    first: dict[Hashable, Node] = {}
    mapping: dict[int, Value] = {}  # a dropped node's output → the first one's
    dropped: list[Node] = []
    for node in graph.nodes:
        key = _key(node, mapping)
        if key is None:
            continue
        kept = first.setdefault(key, node)
        if kept is node or any(graph.is_output(o) for o in node.outputs):
            continue
        for mine, theirs in zip(node.outputs, kept.outputs):
            mapping[id(mine)] = theirs
        dropped.append(node)
    replace_all(graph, mapping)  # readers rewired first, then the repeats go
    for node in dropped:
        graph.remove_node(node)
    return bool(dropped)
