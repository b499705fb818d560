"""``fold``: precompute every node whose inputs are all constants.

NNVM's PrecomputePrune in our own terms: nodes fed only by initializers (or
by already-folded nodes) are evaluated once with the reference backend's numpy
kernels, and their outputs become initializers. ``Shape``/``Size`` of a value
with a static shape fold too, so ``Shape → Gather → Concat → Reshape`` chains
collapse. Folded results are de-duplicated by content. Random and
control-flow ops, sequence results and graph outputs are left alone, but the
bodies of control-flow ops are folded too (a Loop body's Constants would
otherwise be re-created on every iteration).
"""

from __future__ import annotations

import hashlib
import os

import numpy as np

from ..ir import Graph, Node, TypeKind, Value, op_traits
from ..kernels import KernelContext, get_kernel
from .manager import register_pass
from .rewrite import remove_dead, replace_all, resolve

#: Folded outputs larger than this (bytes) stay a node, so that no small file (an Expand to
#: [1e5, 1e5]) makes a conversion allocate or write gigabytes. Overridable with
#: NNBRIDGE_FOLD_LIMIT_MB; read per call so that a test or a long-lived process can change it.
DEFAULT_FOLD_LIMIT_MB = 512
#: and all folded outputs of one run together at most this many times the limit (ten 200 MB
#: Expands in a small file must not add up to gigabytes either)
TOTAL_LIMITS = 4


def fold_limit_bytes() -> int:
    return int(float(os.environ.get("NNBRIDGE_FOLD_LIMIT_MB", DEFAULT_FOLD_LIMIT_MB)) * 1024**2)


_DEDUP_ELEMENTS = 1 << 20  # larger results are not hashed for de-duplication


@register_pass("fold")
def fold_constants(graph: Graph) -> bool:
    """Evaluate constant subgraphs (incl. Shape of static shapes) into initializers."""
    return _fold(graph, [TOTAL_LIMITS * fold_limit_bytes()])


def _fold(graph: Graph, budget: list[int]) -> bool:
    """Fold ``graph`` (and its subgraphs) while the shared byte ``budget`` lasts."""
    changed = False
    seen: dict[tuple, Value] = {}
    twins: dict[int, Value] = {}  # folded value → an identical constant already folded
    for node in graph.nodes:
        for body in node.subgraphs():
            changed |= _fold(body, budget)
        results = _evaluate(node, graph, twins, budget[0])
        if results is None:
            continue
        budget[0] -= sum(int(r.nbytes) for r in results)
        graph.remove_node(node)
        for out, array in zip(node.outputs, results):
            if array.size <= _DEDUP_ELEMENTS:
                key = (array.dtype.str, array.shape, hashlib.sha1(array.tobytes()).hexdigest())
                if key in seen:
                    twins[id(out)] = seen[key]
                    continue
                seen[key] = out
            graph.values[out.name] = out
            out.producer = None
            graph.set_initializer(out, array)
        changed = True
    if changed:
        replace_all(graph, twins)
        remove_dead(graph)
    return changed


def _evaluate(node: Node, graph: Graph, twins: dict[int, Value], budget: int) -> list[np.ndarray] | None:
    """The node's outputs computed now, or None if it does not fold (not foldable, not fed only by
    constants, not tensors, too large, or its kernel cannot or will not compute it)."""
    if not op_traits(node.op, node.domain).foldable or node.subgraphs() \
            or any(graph.is_output(o) for o in node.outputs):
        return None
    if node.op in ("Shape", "Size") and not node.domain:
        return _static_shape(node)
    inputs = _constant_inputs(node, twins)
    if inputs is None or any(o.type.kind is not TypeKind.TENSOR for o in node.outputs):
        return None
    if not _small_enough(node, budget):
        return None
    return _run_kernel(node, inputs)


def _constant_inputs(node: Node, twins: dict[int, Value]) -> list[Value | None] | None:
    """The node's inputs, each folded twin read as the constant it duplicates (the node is made to
    read it, so shape inference sees constants); None if any input is not constant."""
    inputs = [resolve(twins, v) for v in node.inputs]
    if any(v is not None and v.const is None for v in inputs):
        return None
    if tuple(inputs) != node.inputs:
        node.inputs = inputs
    return inputs


def _run_kernel(node: Node, inputs: list[Value | None]) -> list[np.ndarray] | None:
    """The node's kernel on its constant inputs; None where the kernel is missing, refuses the
    node or its inputs (left for run time to report), or returns other than one array per output."""
    spec = get_kernel(node.op, node.domain)
    if spec is None or spec.unsupported_reason(node):
        return None
    try:
        result = spec.fn(KernelContext(node), *[v.const if v is not None else None for v in inputs], **spec.bind(node))
    except Exception:  # an input the kernel rejects: leave the node for run time to report
        return None
    results = result if isinstance(result, tuple) else (result,)
    if len(results) != len(node.outputs) or not all(isinstance(r, (np.ndarray, np.generic)) for r in results):
        return None
    return [np.asarray(r) for r in results]


def oversized_constant(node: Node) -> str | None:
    """Why a node fed only by constants is still an op when its size is the reason (for
    converters' messages), else None."""
    if any(v is not None and v.const is None for v in node.inputs) or _small_enough(node):
        return None
    sizes = [o.type.nbytes for o in node.outputs]
    what = f"{sum(sizes) / 1024**2:.0f} MB" if None not in sizes else "a size unknown before computing it"
    return (f"a constant of {what}, over the fold limit of {fold_limit_bytes() / 1024**2:.0f} MB, left unfolded "
            f"(set NNBRIDGE_FOLD_LIMIT_MB higher to fold it)")


def _small_enough(node: Node, budget: int | None = None) -> bool:
    """Whether the node's outputs are known, before computing them, to fit the fold limit (and
    what is left of the run's total ``budget``)."""
    from .infer_shapes import infer_node

    types = [o.type for o in node.outputs]
    if any(t.nbytes is None for t in types):
        types = infer_node(node) or []  # the loaded types may predate folding of the node's inputs
    sizes = [t.nbytes if t is not None else None for t in types]
    limit = fold_limit_bytes() if budget is None else min(fold_limit_bytes(), budget)
    return len(sizes) == len(node.outputs) and None not in sizes and sum(sizes) <= limit


def _static_shape(node: Node) -> list[np.ndarray] | None:
    x = node.inputs[0]
    if x is None or not x.type.is_static:
        return None
    shape = np.array(x.type.shape, dtype=np.int64)
    if node.op == "Size":
        return [np.array(int(np.prod(shape)), dtype=np.int64)]
    rank = len(shape)
    start = node.attr("start", 0)
    end = node.attr("end", rank)
    return [shape[slice(start, end)]]
