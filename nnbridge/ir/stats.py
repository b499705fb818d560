"""Sizes of a model as a reader of its weights sees them: parameters after constant folding.

A weight may be stored as a small recipe (``ConstantOfShape``, ``Expand`` of a scalar, a
``Reshape`` of an initializer): exporters from other frameworks write big weights this way, and
counting initializers alone reports VGG-19's 143 M weights as 217. Here every constant value read
by a computed node counts, sized from its static type, without materialising anything.
"""

from __future__ import annotations

import math

from .dtypes import DType
from .graph import Graph
from .ops import op_traits


def parameters(graph: Graph) -> tuple[int, int]:
    """(values, bytes) of every parameter (:func:`parameter_values`)."""
    sizes = parameter_values(graph).values()
    return sum(n for n, _ in sizes), sum(b for _, b in sizes)


def parameter_values(graph: Graph) -> dict[str, tuple[int, int]]:
    """Name → (values, bytes) of the constants that non-constant nodes read: initializers plus the
    outputs of constant-only subgraphs, as constant folding would store them. int64 constants are
    shapes, axes and indices, not parameters; sizes unknown statically are left out."""
    constant = _constant_names(graph)
    read_by_computed = [v for n in graph.nodes if not all(o.name in constant for o in n.outputs)
                        for v in n.inputs if v is not None]
    read: dict[str, tuple[int, int]] = {}
    for v in [*read_by_computed, *graph.outputs]:  # a constant output is stored too
        if v.name in constant and v.name not in read and v.type.dtype is not DType.INT64:
            read[v.name] = _size(graph, v)
    return read


def _constant_names(graph: Graph) -> set[str]:
    """The initializers and the outputs of foldable nodes fed only by constants."""
    constant = set(graph.initializers)
    for node in graph.nodes:
        inputs = [v for v in node.inputs if v is not None]
        foldable = not node.subgraphs() and op_traits(node.op, node.domain).foldable
        if foldable and all(v.name in constant for v in inputs):
            constant.update(o.name for o in node.outputs)
    return constant


def _size(graph: Graph, value) -> tuple[int, int]:
    array = graph.initializers.get(value.name)
    if array is not None:
        return int(array.size), int(array.nbytes)
    t = value.type
    if not t.is_static or t.dtype is None:
        return 0, 0
    count = math.prod(t.shape)
    return count, count * t.dtype.itemsize
