"""``cancel-transposes``: push transposes through elementwise ops and cancel inverse pairs.

Transpose and Reorder are both physical transposes with a ``perm``. Two in a
row compose into one (``z = x.transpose([pa[i] for i in pb])``) and vanish when
the composition is the identity. A transpose whose only reader is a unary
elementwise op whose readers are all transposes is moved below that op, so
the pair can meet and cancel (``relu(xᵀ)ᵀ' = relu(x)ᵀᵀ'``).
"""

from __future__ import annotations

from ..ir import Graph, Node, PatternKind
from .fuse import op_pattern
from .manager import register_pass
from .rewrite import bypass, remove_dead, set_output


def is_transpose(node: Node) -> bool:
    return (node.op == "Transpose" and not node.domain and node.attrs.get("perm") is not None) or \
        (node.op == "Reorder" and node.domain == "nnbridge")


@register_pass("cancel-transposes")
def cancel_transposes(graph: Graph) -> bool:
    """Compose consecutive Transpose/Reorder, drop identity pairs, push them past elementwise ops."""
    work = [n for n in graph.nodes if is_transpose(n)]
    work.reverse()  # pop from the end: topological order
    queued = set(work)
    changed = False
    while work:
        node = work.pop()
        queued.discard(node)
        if node.graph is not graph or not is_transpose(node):
            continue
        touched = _push_down(graph, node) or _compose(graph, node)
        if touched:
            changed = True
            for again in touched:
                if again not in queued and again.graph is graph and is_transpose(again):
                    work.append(again)
                    queued.add(again)
    if changed:
        remove_dead(graph)
    return changed


def _compose(graph: Graph, second: Node) -> list[Node]:
    """Fold ``second`` into the transpose feeding it; returns the nodes worth revisiting."""
    first = second.inputs[0].producer
    if first is None or not is_transpose(first) or first.graph is not graph:
        return []
    pa, pb = list(first.attr("perm")), list(second.attr("perm"))
    if len(pa) != len(pb):
        return []
    perm = [pa[i] for i in pb]
    source = first.inputs[0]
    if perm == list(range(len(perm))):
        out = second.outputs[0]
        if source.type.layout is not out.type.layout:
            # same bytes, different meaning: after Transpose(0,2,3,1) → LayerNorm → Transpose(0,3,1,2)
            # → Reorder to NHWC, the data is right but a spatial reader would take the NCHW-labelled
            # source for NCHW; the label must stay true, so the pair stays
            return []
        users = graph.consumers(out)
        return users if bypass(graph, second, source) else []
    second.set_input(0, source)
    second.attrs["perm"] = perm
    if second.op == "Reorder" and first.op == "Reorder":
        second.attrs["src_layout"] = first.attr("src_layout")
    elif second.op == "Reorder":  # a plain transpose in front: keep the more general op
        second.op, second.domain = "Transpose", ""
        second.attrs = {"perm": perm}
    return [second]


def _push_down(graph: Graph, t: Node) -> list[Node]:
    """Move ``t`` below its one elementwise reader; returns the nodes worth revisiting."""
    moved = t.outputs[0]
    users = graph.consumers(moved)
    if len(users) != 1 or graph.is_output(moved):
        return []
    user = users[0]
    if user.domain or len(user.inputs) != 1 or len(user.outputs) != 1 or op_pattern(user) != PatternKind.ELEMWISE:
        return []
    result = user.outputs[0]
    after = graph.consumers(result)
    if not after or graph.is_output(result) or not all(is_transpose(a) for a in after):
        return []
    x = t.inputs[0]
    fresh = graph.add_value(f"{result.name}_pre", result.type.with_shape(x.type.shape).with_layout(x.type.layout))
    user.set_input(0, x)
    set_output(user, 0, fresh)
    t.set_input(0, fresh)
    set_output(t, 0, result)
    result.type = moved.type.with_dtype(result.type.dtype)
    return [t, *after]
