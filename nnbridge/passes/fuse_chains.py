"""Greedy producer-consumer fusion (the RDU compiler's kernels, specs/rdu-architecture.md §5.2).

In topological order, an op joins the group of the producer of one of its inputs when that edge
has a single consumer and is not a graph output, and the group stays "one anchor + elementwise /
broadcast epilogue + injective prologue": elementwise and broadcast ops always join; injective
ops only join anchor-less groups; an anchor (conv, matmul, pool, softmax, norms) or a reduction
joins only an anchor-less group and becomes its anchor; a reduction ends its group; opaque ops
stand alone. Every other input must come from a group that lies wholly before the joined
group's first op, so each group is convex and is outlined as one ``Fused`` node (as ``fuse``
does). Unlike ``fuse`` (Relay's post-dominator rules) it chains an injective prologue into the
next anchor, which is what the Plasticine model analyzer's kernel counts reflect.
"""

from __future__ import annotations

from ..ir import Graph, Node, PatternKind
from .fuse import MAX_FUSED_OPS, op_pattern, outline
from .manager import register_pass

ANCHORS = (PatternKind.OUT_ELEMWISE_FUSABLE, PatternKind.COMM_REDUCE)


class _Group:
    __slots__ = ("nodes", "head", "last", "anchor", "closed")

    def __init__(self, node: Node, kind: PatternKind, index: int):
        self.nodes = [node]
        self.head = self.last = index
        self.anchor: Node | None = None
        self.closed = False
        self._absorb_role(node, kind)

    def _absorb_role(self, node: Node, kind: PatternKind) -> None:
        if kind in ANCHORS:
            self.anchor = node
        self.closed = kind is PatternKind.COMM_REDUCE or kind is PatternKind.OPAQUE

    def accepts(self, kind: PatternKind) -> bool:
        if self.closed or len(self.nodes) >= MAX_FUSED_OPS:
            return False
        if kind <= PatternKind.BROADCAST:
            return True
        if kind is PatternKind.INJECTIVE or kind in ANCHORS:
            return self.anchor is None
        return False

    def add(self, node: Node, kind: PatternKind, index: int) -> None:
        self.nodes.append(node)
        self.last = index
        self._absorb_role(node, kind)


@register_pass("fuse-chains", requires=["infer-shapes"])
def fuse_chains(graph: Graph) -> bool:
    """Fuse producer-consumer chains: one anchor, elementwise epilogue, injective prologue (RDU kernels)."""
    groups = [g for g in chain_groups(graph) if len(g) > 1]
    for members in groups:
        outline(graph, members)
    return bool(groups)


def chain_groups(graph: Graph) -> list[list[Node]]:
    """The graph's nodes grouped by the chain rule, groups in topological order."""
    graph_outputs = {id(v) for v in graph.outputs}
    group_of: dict[int, _Group] = {}
    groups: list[_Group] = []
    for index, node in enumerate(graph.nodes):
        kind = op_pattern(node)
        target = _target(graph, node, kind, group_of, graph_outputs)
        if target is None:
            target = _Group(node, kind, index)
            groups.append(target)
        else:
            target.add(node, kind, index)
        group_of[id(node)] = target
    return [g.nodes for g in groups]


def _target(graph: Graph, node: Node, kind: PatternKind, group_of: dict[int, _Group],
            graph_outputs: set[int]) -> _Group | None:
    """The group of an input's producer that ``node`` may join, or None."""
    grouped = [(v, group_of[id(v.producer)]) for v in node.inputs
               if v is not None and v.producer is not None and id(v.producer) in group_of]
    for v, group in grouped:
        if len(graph.consumers(v)) != 1 or id(v) in graph_outputs or not group.accepts(kind):
            continue
        if all(other is group or other.last < group.head for _, other in grouped):
            return group
    return None
