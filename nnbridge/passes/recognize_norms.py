"""``recognize-norms``: exporters' decomposed RMS normalisation back into one op.

T5's and LLaMA's RMSNorm (``x · rsqrt(mean(x²) + ε) · w``) reach ONNX as six or seven nodes:
``Pow(x, 2)`` (or ``x·x``), ``ReduceMean`` over the trailing axes, ``Add ε``, ``Sqrt``, then
``Div(1, ·)`` or ``Reciprocal`` and a ``Mul`` by x (or one ``Div(x, ·)``), and often the weight's
``Mul``. ONNX has had ``RMSNormalization`` (opset 23) for them; one op reads the row once where the
chain streams it through every intermediate, and on a small model each of the chain's nodes costs
as much as the whole norm (T5's fixture: 11 of its 146 µs per norm). Only float32 chains whose
intermediates have no other reader are rewritten. The op divides by the root mean square where
the chain multiplies by its reciprocal: the two differ by at most an ulp of the result.
"""

from __future__ import annotations

import math

import numpy as np

from ..ir import DType, Graph, Node, Value
from .manager import register_pass
from .rewrite import add_const, is_close, plain, remove_dead, scalar_const, sole, sole_producer, split_operands


def _reduced_axes(mean: Node, rank: int) -> list[int] | None:
    """The axes a keepdims ReduceMean reduces (attribute or, from opset 18, input), sorted."""
    if not mean.attrs.get("keepdims", 1):
        return None
    if len(mean.inputs) > 1 and mean.inputs[1] is not None:
        const = mean.inputs[1].const
        if const is None:  # axes computed at run time (the pipelines fold constants first)
            return None
        axes = [int(a) for a in np.asarray(const).reshape(-1)]
    else:
        axes = mean.attrs.get("axes")
    if not axes:
        return None if mean.attrs.get("noop_with_empty_axes", 0) else list(range(rank))
    return sorted(a % rank for a in axes)


def _root_mean_square(graph: Graph, root: Value, x: Value) -> tuple[int, float] | None:
    """(first normalised axis, ε) when ``root`` is sqrt(mean(x²) + ε) over x's trailing axes."""
    sqrt = sole_producer(graph, root, "Sqrt")
    add = sqrt and sole_producer(graph, sqrt.inputs[0], "Add")
    parts = add and split_operands(add, lambda v: scalar_const(v) is not None)
    mean = parts and sole_producer(graph, parts[1], "ReduceMean")
    square = mean and sole_producer(graph, mean.inputs[0], "Pow", "Mul")
    if not square:
        return None
    exponent = square.inputs[1].const if square.op == "Pow" else None
    if square.op == "Pow" and not (square.inputs[0] is x and exponent is not None and exponent.size == 1
                                   and float(np.asarray(exponent).reshape(-1)[0]) == 2.0):
        return None
    if square.op == "Mul" and not (square.inputs[0] is x and square.inputs[1] is x):
        return None
    rank = len(x.type.shape)
    axes = _reduced_axes(mean, rank)
    if axes is None or axes != list(range(rank - len(axes), rank)):
        return None
    return axes[0], scalar_const(parts[0])


def _rms_norm(graph: Graph, final: Node) -> tuple[Value, int, float] | None:
    """(x, axis, ε) when ``final`` ends x / rms(x) as ``Div(x, rms)`` or ``Mul(x, 1/rms)``."""
    if final.op == "Div":
        x, root = final.inputs
        found = _root_mean_square(graph, root, x) if x.type.shape is not None else None
        return (x, *found) if found else None
    for x, inverse in (final.inputs, final.inputs[::-1]):
        if x.type.shape is None:
            continue
        flip = sole_producer(graph, inverse, "Div", "Reciprocal")
        if flip is None or (flip.op == "Div" and not is_close(scalar_const(flip.inputs[0]), 1.0)):
            continue
        found = _root_mean_square(graph, flip.inputs[-1], x)
        if found:
            return (x, *found)
    return None


def _weight(graph: Graph, normed: Value, shape: tuple[int, ...]) -> tuple[Node, np.ndarray] | None:
    """The ``Mul`` by a constant float32 weight of the normalised shape that alone reads ``normed``."""
    mul = graph.consumers(normed)[0] if sole(graph, normed) else None
    if not plain(mul, "Mul"):
        return None
    other = mul.inputs[1] if mul.inputs[0] is normed else mul.inputs[0]
    const = other.const  # the normalised shape, or its trailing dims after leading 1s: one value each
    if (const is None or const.dtype != np.float32 or const.ndim > len(shape)
            or const.shape != shape[len(shape) - const.ndim:] or const.size != math.prod(shape)):
        return None
    return mul, np.ascontiguousarray(const).reshape(shape)


@register_pass("recognize-norms")
def recognize_norms(graph: Graph) -> bool:
    """Rewrite decomposed float32 RMS normalisations (and a weight Mul after one) into RMSNormalization."""
    removed: set[int] = set()
    for node in list(graph.nodes):
        if not (plain(node, "Mul") or plain(node, "Div")) or len(node.inputs) != 2 or id(node) in removed:
            continue
        found = _rms_norm(graph, node)
        if found is None:
            continue
        x, axis, epsilon = found
        shape = tuple(x.type.shape[axis:])
        if x.type.dtype != DType.FLOAT32 or not all(isinstance(d, int) for d in shape):
            continue
        last, scale = _weight(graph, node.outputs[0], shape) or (node, np.ones(shape, np.float32))
        out = last.outputs[0]
        graph.remove_node(last)  # the chain before it is left unread: remove_dead takes it
        removed.add(id(last))
        graph.add_node("RMSNormalization", [x, add_const(graph, f"{node.name}_scale", scale)], [out],
                       attrs={"axis": axis, "epsilon": epsilon, "stash_type": 1}, name=f"{node.name}_rms_norm")
    if removed:
        remove_dead(graph)
    return bool(removed)
