"""The fusion pass's groups as RDU kernels: each ``nnbridge.Fused`` node becomes its body's ops
again (the cost model and the functional simulation work per op), and the ops of one group form
one kernel. Fusion is decided once, by the pipeline's ``fuse-chains`` pass (or ``fuse``, when a
user's ``--passes`` runs it); SambaFlow's o0 mode ignores the groups and gives every op a kernel
of its own.
"""

from __future__ import annotations

from ...ir import NNBRIDGE_DOMAIN, Graph, Node, Value


def inline_fused(graph: Graph) -> list[list[Node]]:
    """Replace every Fused node of ``graph`` by its body's nodes; returns the kernels in
    topological order: a former group's ops together, every other node alone."""
    kernels = []
    for node in graph.nodes:
        if node.op != "Fused" or node.domain != NNBRIDGE_DOMAIN or not isinstance(node.attrs.get("body"), Graph):
            kernels.append([node])
        else:
            kernels.append(_inline(graph, node))
    return kernels


def _inline(graph: Graph, node: Node) -> list[Node]:
    body: Graph = node.attrs["body"]
    mapping: dict[int, Value] = {id(bv): v for bv, v in zip(body.inputs, node.inputs) if v is not None}
    for name, array in body.initializers.items():
        mapping[id(body.values[name])] = graph.add_initializer(name, array)
    result_of = {id(bv): v for bv, v in zip(body.outputs, node.outputs)}
    inner_nodes = body.nodes
    produced_inside = {id(o) for n in inner_nodes for o in n.outputs}
    graph.remove_node(node)
    inlined = []
    for inner in inner_nodes:
        outputs = []
        for o in inner.outputs:
            value = result_of.get(id(o)) or graph.add_value(o.name, o.type, exact=o.name not in graph.values)
            mapping[id(o)] = value
            outputs.append(value)
        inputs = [mapping.get(id(v), v) if v is not None else None for v in inner.inputs]
        graph.reserve_name(inner.name)
        inlined.append(Node(inner.op, inputs, outputs, dict(inner.attrs), inner.name, inner.domain))
        graph.append_node(inlined[-1])
    for bv, outer in zip(body.outputs, node.outputs):
        if id(bv) not in produced_inside:  # a body output that is an input or constant passed through
            graph.replace_uses(outer, mapping.get(id(bv), bv))
    return inlined
