"""``fuse``: operator fusion by pattern kind, Relay FuseOps-style (specs/passes.md §2.2).

1. Build the post-dominator tree of the dataflow DAG in one reverse-topological
   sweep: a node's immediate post-dominator is the lowest common ancestor of its
   consumers; each tree edge records the worst (max) pattern met on the way.
   Nodes producing graph outputs are roots (their results must be materialised).
2. Union-find groups, three phases over the nodes in topological order:
   phase 0 fuses an out-elementwise-fusable anchor (Conv, Gemm, MatMul, pools)
   into its post-dominator when that edge is elementwise and everything between
   is ≤ broadcast; phases 0-1 fuse elementwise/broadcast groups forward into
   injective/reduce/anchor sinks; phase 1 fuses injective groups through
   injective-only paths. A group never holds two anchors, never more than
   ``max_depth`` ops, and a reduction ends a group.
3. Each group of two or more ops becomes one ``nnbridge.Fused`` node whose
   ``body`` subgraph holds the ops; the group's external values become the
   node's inputs and outputs (names kept), so the IR shows the kernels a
   backend executes as one unit.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass

from ..ir import Graph, Node, PatternKind, TypeKind, Value, pattern_kind
from .manager import register_pass

MAX_FUSED_OPS = 256  # Relay's kMaxFusedOps

ELEMWISE, BROADCAST, INJECTIVE = PatternKind.ELEMWISE, PatternKind.BROADCAST, PatternKind.INJECTIVE
REDUCE, ANCHOR, OPAQUE = PatternKind.COMM_REDUCE, PatternKind.OUT_ELEMWISE_FUSABLE, PatternKind.OPAQUE


def op_pattern(node: Node) -> PatternKind:
    """The node's pattern kind; anything with subgraphs or non-tensor values is opaque."""
    if node.subgraphs() or any(o.type.kind is not TypeKind.TENSOR for o in node.outputs):
        return OPAQUE
    if any(v is not None and v.type.kind is not TypeKind.TENSOR for v in node.inputs):
        return OPAQUE
    return pattern_kind(node.op, node.domain)


def edge_pattern(consumer: Node, value: Value) -> PatternKind:
    """A broadcast op reading an argument of its own result shape is elementwise on that edge."""
    kind = op_pattern(consumer)
    if kind == BROADCAST and value.type.is_static and value.type.shape == consumer.outputs[0].type.shape:
        return ELEMWISE
    return kind


@dataclass
class _DomNode:
    parent: int | None  # index of the immediate post-dominator, None for roots
    depth: int
    pattern: PatternKind  # max pattern on the paths to the parent


def post_dominators(nodes: list[Node], consumers: list[list[tuple[int, PatternKind]]],
                    extern: list[bool]) -> list[_DomNode]:
    """Immediate post-dominators of a topologically ordered DAG (one reverse sweep)."""
    tree: list[_DomNode | None] = [None] * len(nodes)

    def lca(a: int | None, b: int | None, pattern: PatternKind) -> tuple[int | None, PatternKind]:
        while a != b:
            if a is None or b is None:
                return None, pattern
            da, db = tree[a].depth, tree[b].depth
            if da <= db:
                pattern = max(pattern, tree[b].pattern)
                b = tree[b].parent
            if da >= db:
                pattern = max(pattern, tree[a].pattern)
                a = tree[a].parent
        return a, pattern

    for i in range(len(nodes) - 1, -1, -1):
        if extern[i] or not consumers[i]:
            tree[i] = _DomNode(None, 1, OPAQUE)
            continue
        parent, pattern = consumers[i][0][0], consumers[i][0][1]
        for c, p in consumers[i][1:]:
            parent, pattern = lca(parent, c, pattern)
            pattern = max(pattern, p)
        tree[i] = _DomNode(parent, tree[parent].depth + 1 if parent is not None else 1, pattern)
    return tree  # type: ignore[return-value]


class _Group:
    __slots__ = ("parent", "pattern", "anchor", "size")

    def __init__(self, pattern: PatternKind, anchor: int | None):
        self.parent: _Group | None = None
        self.pattern = pattern
        self.anchor = anchor
        self.size = 1

    def root(self) -> _Group:
        g = self
        while g.parent is not None:
            g = g.parent
        if g is not self:  # path compression
            node = self
            while node.parent is not g and node.parent is not None:
                node.parent, node = g, node.parent
        return g


def _merge(child: _Group, parent: _Group) -> None:
    child, parent = child.root(), parent.root()
    if child is parent:
        return
    parent.size += child.size
    child.parent = parent
    if child.anchor is not None:
        parent.anchor = child.anchor
        parent.pattern = max(parent.pattern, child.pattern)


def partition(graph: Graph, max_depth: int = MAX_FUSED_OPS) -> list[list[Node]]:
    """Fusion groups (each in topological order) covering every node of ``graph``."""
    nodes = graph.nodes
    consumers, extern = _consumer_edges(graph, nodes)
    tree = post_dominators(nodes, consumers, extern)
    groups = [_Group(p := op_pattern(n), i if p == ANCHOR else None) for i, n in enumerate(nodes)]
    for phase in (0, 1):
        for i in range(len(nodes)):
            sink = _candidate_sink(groups, tree, i, max_depth)
            if sink is None:
                continue
            cond = _path_condition(groups[i].pattern, tree[i].pattern, phase)
            if cond is not None and _path_meets(consumers, groups, i, sink, cond):
                _fuse_path(consumers, groups, i, sink)
    members: dict[int, list[Node]] = {}
    for i, node in enumerate(nodes):
        members.setdefault(id(groups[i].root()), []).append(node)
    return list(members.values())


def _consumer_edges(graph: Graph, nodes: list[Node]) -> tuple[list[list[tuple[int, PatternKind]]], list[bool]]:
    """Per node (by index): its consumers with the worst pattern of the edges to each, and whether
    it produces a graph output."""
    index = {id(n): i for i, n in enumerate(nodes)}
    consumers: list[list[tuple[int, PatternKind]]] = []
    extern: list[bool] = []
    for node in nodes:
        edges: dict[int, PatternKind] = {}
        for out in node.outputs:
            for user in graph.consumers(out):
                j = index[id(user)]
                edges[j] = max(edges.get(j, ELEMWISE), edge_pattern(user, out))
        consumers.append(list(edges.items()))
        extern.append(any(graph.is_output(o) for o in node.outputs))
    return consumers, extern


def _candidate_sink(groups: list[_Group], tree: list[_DomNode], i: int, max_depth: int) -> int | None:
    """The post-dominator node ``i``'s group may fuse into: None if ``i`` is opaque or a root, if
    both are in one group already, or if the merged group would exceed ``max_depth``."""
    own, dom = groups[i], tree[i]
    if own.pattern == OPAQUE or dom.parent is None:
        return None
    sink = dom.parent
    own_root, sink_root = own.root(), groups[sink].root()
    if own_root is sink_root or own_root.size + sink_root.size > max_depth:
        return None
    return sink


def _anchor_path(kind: PatternKind, is_sink: bool) -> bool:
    return kind <= BROADCAST


def _elementwise_path(kind: PatternKind, is_sink: bool) -> bool:
    return kind <= BROADCAST or kind in (REDUCE, INJECTIVE, ANCHOR) if is_sink else kind <= INJECTIVE


def _injective_path(kind: PatternKind, is_sink: bool) -> bool:
    return kind <= INJECTIVE


def _path_condition(kind: PatternKind, dom_pattern: PatternKind,
                    phase: int) -> Callable[[PatternKind, bool], bool] | None:
    """What every group on the paths to the post-dominator (whose edges are ``dom_pattern`` at
    worst) must be for a node of ``kind`` to fuse into it in ``phase``; None: it does not fuse."""
    if kind == ANCHOR:
        return _anchor_path if phase == 0 and dom_pattern == ELEMWISE else None
    if kind <= BROADCAST:
        return _elementwise_path if dom_pattern <= INJECTIVE or dom_pattern == REDUCE else None
    return _injective_path if kind == INJECTIVE and phase == 1 else None


def _path_meets(consumers: list[list[tuple[int, PatternKind]]], groups: list[_Group], src: int, sink: int,
                cond: Callable[[PatternKind, bool], bool]) -> bool:
    """Does every node between ``src`` and ``sink`` (and the sink) meet ``cond`` by its group's pattern?"""
    seen: set[int] = set()
    stack = [c for c, _ in consumers[src]]
    while stack:
        n = stack.pop()
        if n in seen:
            continue
        seen.add(n)
        if not cond(groups[n].root().pattern, n == sink):
            return False
        if n != sink:
            stack.extend(c for c, _ in consumers[n])
    return True


def _fuse_path(consumers: list[list[tuple[int, PatternKind]]], groups: list[_Group], src: int, sink: int) -> None:
    """Merge every node from ``src`` up to (not including) ``sink`` into the sink's group."""
    target = groups[sink]
    seen: set[int] = set()
    stack = [src]
    while stack:
        n = stack.pop()
        if n == sink or n in seen:
            continue
        seen.add(n)
        _merge(groups[n], target)
        stack.extend(c for c, _ in consumers[n])


@register_pass("fuse", requires=["infer-shapes"])
def fuse(graph: Graph) -> bool:
    """Fuse ops into kernels by pattern kind (anchor + elementwise epilogue, injective chains, diamonds)."""
    return fuse_ops(graph)


def fuse_ops(graph: Graph, max_depth: int = MAX_FUSED_OPS) -> bool:
    """Partition ``graph`` and outline every group of 2+ ops as a ``Fused`` node."""
    if max_depth <= 1:
        return False
    groups = [g for g in partition(graph, max_depth) if len(g) > 1]
    for members in groups:
        outline(graph, members)
    return bool(groups)


def outline(graph: Graph, members: list[Node]) -> Node:
    """Replace ``members`` (topologically ordered) by one Fused node holding them. A member's output
    leaves the group if a node outside reads it (a group outlined before reads it through its Fused
    node, which is outside too)."""
    inside = {id(n) for n in members}
    ext_inputs = _external_inputs(members)
    ext_outputs = [o for n in members for o in n.outputs
                   if graph.is_output(o) or any(id(u) not in inside for u in graph.consumers(o))]
    kinds = [op_pattern(n) for n in members]
    kind = max(kinds)
    anchor = members[kinds.index(kind)]  # the first member of the highest pattern kind
    body = _move_into_body(graph, members, ext_inputs, ext_outputs, f"{anchor.name}_body")
    return graph.add_node("Fused", ext_inputs, ext_outputs,
                          {"body": body, "kind": kind.name.lower(), "anchor": anchor.op},
                          name=f"fused_{anchor.name}", domain="nnbridge")


def _external_inputs(members: list[Node]) -> list[Value]:
    """The values the members read and none of them produces, in order of first use."""
    produced = {id(o) for n in members for o in n.outputs}
    ext_inputs: list[Value] = []
    for n in members:
        for v in n.inputs:
            if v is not None and id(v) not in produced and all(v is not e for e in ext_inputs):
                ext_inputs.append(v)
    return ext_inputs


def _move_into_body(graph: Graph, members: list[Node], ext_inputs: list[Value], ext_outputs: list[Value],
                    name: str) -> Graph:
    """A subgraph holding the members, moved out of ``graph``: the external inputs become its inputs
    and the values read outside become inner copies returned as its outputs (the originals stay
    in ``graph`` for the Fused node to produce)."""
    body = Graph(name, parent=graph)
    rename: dict[int, Value] = {}
    for v in ext_inputs:
        rename[id(v)] = body.add_input(graph.unique_name(f"{v.name}_in"), v.type)
    for n in members:
        graph.remove_node(n)
        n.inputs = [rename.get(id(v), v) if v is not None else None for v in n.inputs]
        for k, o in enumerate(n.outputs):
            if any(o is e for e in ext_outputs):
                inner = body.add_value(f"{o.name}_inner", o.type)
                rename[id(o)] = inner
                n.outputs[k] = inner
            else:
                o.graph = body
        body.append_node(n)
    body.outputs = [rename[id(o)] for o in ext_outputs]
    return body
