"""``fold-branches``: an ``If`` whose condition is a constant becomes the branch it takes.

Pinning makes shape-derived conditions (``Shape → Gather → Equal``) constant, and the untaken
branch may then be impossible under the pinned shapes (it squeezes a dim that is 1 only in the
other case). onnxruntime infers the shapes of both branches when it loads a file and refuses
such a model, so the taken branch's nodes and constants move into the enclosing graph, an
``Identity`` per output keeps the ``If``'s output values, and the other branch is dropped
(also inside Loop/Scan bodies and nested branches). Conditions that stay data-dependent keep
their ``If``: no shape is ever pushed into a branch.
"""

from __future__ import annotations

import numpy as np

from ..ir import Graph, Node
from .manager import register_pass


@register_pass("fold-branches")
def fold_branches(graph: Graph) -> bool:
    """Replace each If with a constant condition by the branch it takes."""
    changed = False
    for node in graph.nodes:
        for body in node.subgraphs():
            changed |= fold_branches(body)
        taken = _taken_branch(node)
        if taken is not None:
            _inline(graph, node, taken)
            changed = True
    return changed


def _taken_branch(node: Node) -> Graph | None:
    if node.op != "If" or node.domain or not node.inputs or node.inputs[0] is None:
        return None
    cond = node.inputs[0].const
    if cond is None or np.asarray(cond).size != 1:
        return None
    branch = node.attrs.get("then_branch" if bool(np.asarray(cond).reshape(-1)[0]) else "else_branch")
    if not isinstance(branch, Graph) or branch.inputs or len(branch.outputs) != len(node.outputs):
        return None
    return branch


def _inline(graph: Graph, node: Node, branch: Graph) -> None:
    """Move ``branch``'s nodes and constants into ``graph`` in place of the If ``node``
    (names are unique across a model, so nothing is renamed)."""
    graph.remove_node(node)
    for name, array in branch.initializers.items():
        value = branch.values.get(name)
        if value is not None:
            value.graph = graph
            graph.values[name] = value
            graph.initializers[name] = array
    for inner in branch.nodes:
        branch.remove_node(inner)
        for out in inner.outputs:
            out.graph = graph
        graph.append_node(inner)
    for result, out in zip(branch.outputs, node.outputs):
        graph.add_node("Identity", [result], [out], name=f"{node.name}_taken")
