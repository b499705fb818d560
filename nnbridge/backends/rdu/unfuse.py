"""Inline ``nnbridge.Fused`` groups back into plain ops before partitioning.

The RDU compiler decides fusion itself, with its own rules (anchor + epilogue + injective
prologue, several anchors chained per section) and with SambaFlow's o0 mode, which needs
every operator on its own; groups formed by the generic ``fuse`` pass are therefore undone
here so both modes see the same operators whatever pipeline ran before.
"""

from __future__ import annotations

from ...ir import NNBRIDGE_DOMAIN, Graph, Node, Value


def inline_fused(graph: Graph) -> int:
    """Replace every Fused node of ``graph`` by its body's nodes; returns how many were inlined."""
    count = 0
    for node in graph.nodes:
        if node.op != "Fused" or node.domain != NNBRIDGE_DOMAIN or not isinstance(node.attrs.get("body"), Graph):
            continue
        _inline(graph, node)
        count += 1
    return count


def _inline(graph: Graph, node: Node) -> None:
    body: Graph = node.attrs["body"]
    mapping: dict[int, Value] = {id(bv): v for bv, v in zip(body.inputs, node.inputs) if v is not None}
    for name, array in body.initializers.items():
        mapping[id(body.values[name])] = graph.add_initializer(name, array)
    result_of = {id(bv): v for bv, v in zip(body.outputs, node.outputs)}
    inner_nodes = body.nodes
    produced_inside = {id(o) for n in inner_nodes for o in n.outputs}
    graph.remove_node(node)
    for inner in inner_nodes:
        outputs = []
        for o in inner.outputs:
            value = result_of.get(id(o)) or graph.add_value(o.name, o.type, exact=o.name not in graph.values)
            mapping[id(o)] = value
            outputs.append(value)
        inputs = [mapping.get(id(v), v) if v is not None else None for v in inner.inputs]
        graph.reserve_name(inner.name)
        graph.append_node(Node(inner.op, inputs, outputs, dict(inner.attrs), inner.name, inner.domain))
    for bv, outer in zip(body.outputs, node.outputs):
        if id(bv) not in produced_inside:  # a body output that is an input or constant passed through
            graph.replace_uses(outer, mapping.get(id(bv), bv))
