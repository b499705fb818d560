"""A flat view of a graph for the simulator: nodes with value *names*, fused
groups (``nnbridge.Fused``) inlined, and every value's type by name.

SMV executes operators one at a time (spec §1), so a fusion group made by the
passes is only a hint here; its body's operators are simulated individually,
and SMAUG's own fusion (activations into conv/FC/BN) is redone by lowering.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from ...ir import Graph, Node, TensorType


@dataclass
class FlatNode:
    node: Node  # the original node (attributes, name, op)
    inputs: list[str | None]
    outputs: list[str]

    @property
    def op(self) -> str:
        return self.node.op

    @property
    def domain(self) -> str:
        return self.node.domain

    @property
    def name(self) -> str:
        return self.node.name or self.outputs[0]


@dataclass
class FlatGraph:
    nodes: list[FlatNode]
    types: dict[str, TensorType]
    consts: dict[str, np.ndarray]
    inputs: list[str]
    outputs: list[str]

    def consumers(self) -> dict[str, list[FlatNode]]:
        users: dict[str, list[FlatNode]] = {}
        for fn in self.nodes:
            for name in fn.inputs:
                if name is not None:
                    users.setdefault(name, []).append(fn)
        return users


def flatten(graph: Graph) -> FlatGraph:
    flat = FlatGraph([], {}, dict(graph.initializers), [v.name for v in graph.inputs],
                     [v.name for v in graph.outputs])
    for v in graph.inputs:
        flat.types[v.name] = v.type
    for name in graph.initializers:
        value = graph.get(name)
        if value is not None:
            flat.types[name] = value.type
    _add_nodes(graph, flat, {})
    return flat


def _is_fused(node: Node) -> bool:
    return node.op == "Fused" and node.domain == "nnbridge" and isinstance(node.attrs.get("body"), Graph)


def _add_nodes(graph: Graph, flat: FlatGraph, rename: dict[str, str]) -> None:
    def mapped(v):
        return None if v is None else rename.get(v.name, v.name)

    for node in graph.nodes:
        if _is_fused(node):
            body: Graph = node.attrs["body"]
            prefix = f"{node.name or node.outputs[0].name}/"
            inner = {b.name: mapped(o) for b, o in zip(body.inputs, node.inputs)}
            inner.update({b.name: mapped(o) for b, o in zip(body.outputs, node.outputs)})
            for name, array in body.initializers.items():
                inner.setdefault(name, prefix + name)
                flat.consts[inner[name]] = array
                value = body.get(name)
                flat.types[inner[name]] = value.type if value is not None else TensorType()
            for n in body.nodes:
                for o in n.outputs:
                    inner.setdefault(o.name, prefix + o.name)
            _add_nodes(body, flat, inner)
            continue
        fn = FlatNode(node, [mapped(v) for v in node.inputs], [mapped(o) for o in node.outputs])
        for o, name in zip(node.outputs, fn.outputs):
            flat.types[name] = o.type
        for v, name in zip(node.inputs, fn.inputs):
            if v is not None and name not in flat.types:
                flat.types[name] = v.type
        flat.nodes.append(fn)
