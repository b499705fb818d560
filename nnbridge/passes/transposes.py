"""``cancel-transposes``: push transposes through elementwise ops and cancel inverse pairs.

Transpose and Reorder are both physical transposes with a ``perm``. Two in a
row compose into one (``z = x.transpose([pa[i] for i in pb])``) and vanish when
the composition is the identity. A transpose whose only reader is a unary
elementwise op whose readers are all transposes is moved below that op, so
the pair can meet and cancel (``relu(xᵀ)ᵀ' = relu(x)ᵀᵀ'``).
"""

from __future__ import annotations

from ..ir import Graph, Node, PatternKind
from ..ir.passes import register_pass
from .fuse import op_pattern
from .rewrite import bypass, remove_dead, set_output


def is_transpose(node: Node) -> bool:
    return (node.op == "Transpose" and not node.domain and node.attrs.get("perm") is not None) or \
        (node.op == "Reorder" and node.domain == "nnbridge")


@register_pass("cancel-transposes")
def cancel_transposes(graph: Graph) -> bool:
    """Compose consecutive Transpose/Reorder, drop identity pairs, push them past elementwise ops."""
    changed = False
    progress = True
    while progress:
        progress = False
        for node in graph.nodes:
            if node.graph is graph and is_transpose(node):
                progress |= _push_down(graph, node) or _compose(graph, node)
        changed |= progress
    if changed:
        remove_dead(graph)
    return changed


def _compose(graph: Graph, second: Node) -> bool:
    first = second.inputs[0].producer
    if first is None or not is_transpose(first) or first.graph is not graph:
        return False
    pa, pb = list(first.attr("perm")), list(second.attr("perm"))
    if len(pa) != len(pb):
        return False
    perm = [pa[i] for i in pb]
    source = first.inputs[0]
    if perm == list(range(len(perm))):
        return bypass(graph, second, source)
    second.set_input(0, source)
    second.attrs["perm"] = perm
    if second.op == "Reorder" and first.op == "Reorder":
        second.attrs["src_layout"] = first.attr("src_layout")
    elif second.op == "Reorder":  # a plain transpose in front: keep the more general op
        second.op, second.domain = "Transpose", ""
        second.attrs = {"perm": perm}
    return True


def _push_down(graph: Graph, t: Node) -> bool:
    moved = t.outputs[0]
    users = graph.consumers(moved)
    if len(users) != 1 or graph.is_output(moved):
        return False
    user = users[0]
    if user.domain or len(user.inputs) != 1 or len(user.outputs) != 1 or op_pattern(user) != PatternKind.ELEMWISE:
        return False
    after = graph.consumers(user.outputs[0])
    if not after or graph.is_output(user.outputs[0]) or not all(is_transpose(a) for a in after):
        return False
    x = t.inputs[0]
    result = user.outputs[0]
    fresh = graph.add_value(f"{result.name}_pre", result.type.with_shape(x.type.shape).with_layout(x.type.layout))
    user.set_input(0, x)
    set_output(user, 0, fresh)
    t.set_input(0, fresh)
    set_output(t, 0, result)
    result.type = moved.type.with_dtype(result.type.dtype)
    return True
