"""``Value``, the IR's edge, and its use-lists (as onnx-ir keeps them).

Each ``Value`` knows its uses, ``(node, input index)`` for every node in a graph that reads it,
and the graphs returning it. This module holds that bookkeeping: the records themselves, the
two steps a node's inputs take when it enters or leaves a graph (``add_uses``/``drop_uses``),
and ``OutputList``, the graph-output list that counts itself on the values it holds. Where
they are kept up to date (``Node.inputs``, ``append_node``/``remove_node``) is ``graph.py``.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import TYPE_CHECKING, Any

import numpy as np

from .dtypes import DType
from .types import TensorType

if TYPE_CHECKING:
    from .graph import Graph, Node


class Value:
    """A named edge: a graph input, an initializer, or a node output."""

    __slots__ = ("name", "type", "producer", "graph", "_uses", "_output_of")

    def __init__(self, name: str, type: TensorType | None = None, graph: Graph | None = None):
        self.name = name
        self.type = type or TensorType()
        self.producer: Node | None = None
        self.graph = graph
        #: (node, input index) of every read by a node that is in a graph (an insertion-ordered set)
        self._uses: dict[tuple[Node, int], None] = {}
        #: graph → how many of its outputs are this value (None until it is one)
        self._output_of: dict[Graph, int] | None = None

    def uses(self) -> list[tuple[Node, int]]:
        """``(node, input index)`` of every read of this value by a node in a graph (any graph,
        subgraphs included), in the order the reads were added."""
        return list(self._uses)

    @property
    def shape(self):
        return self.type.shape

    @property
    def dtype(self) -> DType | None:
        return self.type.dtype

    @property
    def const(self) -> np.ndarray | None:
        """The value of an initializer (searched through enclosing graphs), else None."""
        g = self.graph
        while g is not None:
            if self.name in g.initializers and g.values.get(self.name) is self:
                return g.initializers[self.name]
            g = g.parent
        return None

    def __repr__(self) -> str:
        return f"%{self.name}"


def add_uses(node: Node) -> None:
    """Record every input of ``node`` (which has just entered a graph) in its value's use-list."""
    for index, value in enumerate(node._inputs):
        if value is not None:
            value._uses[(node, index)] = None


def drop_uses(node: Node) -> None:
    """Forget every input of ``node`` (which is leaving a graph or being rewired) in the use-lists."""
    for index, value in enumerate(node._inputs):
        if value is not None:
            value._uses.pop((node, index), None)


def count_output(value: Value, graph: Graph | None, step: int) -> None:
    """Add ``step`` (±1) to how many of ``graph``'s outputs are ``value``."""
    if graph is None or value is None:
        return
    table = value._output_of
    if table is None:
        table = value._output_of = {}
    count = table.get(graph, 0) + step
    if count:
        table[graph] = count
    else:
        del table[graph]


class OutputList(list):
    """A graph's output list that keeps each value's record of the graphs returning it through
    every list operation (``graph.outputs[:] = …``, ``append``, ``[i] = …``)."""

    __slots__ = ("_graph",)

    def __init__(self, graph: Graph, values: Sequence[Value] = ()):
        super().__init__(values)
        self._graph: Graph | None = graph
        for v in self:
            count_output(v, graph, 1)

    def detach(self) -> None:
        """Stop being the graph's outputs (the graph assigned a new list)."""
        for v in self:
            count_output(v, self._graph, -1)
        self._graph = None

    def _recount(self, operation: Any, *args: Any) -> Any:
        before = list(self)
        result = operation(*args)
        for v in before:
            count_output(v, self._graph, -1)
        for v in self:
            count_output(v, self._graph, 1)
        return result

    def append(self, value: Value) -> None:
        super().append(value)
        count_output(value, self._graph, 1)

    def extend(self, values: Any) -> None:
        values = list(values)
        super().extend(values)
        for v in values:
            count_output(v, self._graph, 1)

    def __iadd__(self, values: Any) -> OutputList:
        self.extend(values)
        return self

    def __imul__(self, n: Any) -> OutputList:
        self._recount(super().__imul__, n)
        return self

    def __setitem__(self, index: Any, value: Any) -> None:
        self._recount(super().__setitem__, index, value)

    def __delitem__(self, index: Any) -> None:
        self._recount(super().__delitem__, index)

    def insert(self, index: Any, value: Value) -> None:
        super().insert(index, value)
        count_output(value, self._graph, 1)

    def pop(self, index: Any = -1) -> Value:
        value = super().pop(index)
        count_output(value, self._graph, -1)
        return value

    def remove(self, value: Value) -> None:
        self._recount(super().remove, value)

    def clear(self) -> None:
        self._recount(super().clear)
