"""The in-memory IR: ``Graph`` of ``Node``s connected by ``Value``s.

Every converter translates between a file format and this IR, and every backend
consumes it. Nodes are kept in a valid topological order after every mutation
(the order is restored lazily, the next time ``graph.nodes`` is read), so a pass
may add a node anywhere and rewire uses without caring about placement.

Subgraphs (the bodies of If / Loop / Scan) are ``Graph`` objects stored in node
attributes; their ``parent`` is the enclosing graph, and their nodes may use
values of any enclosing graph directly.

Use-lists (as onnx-ir keeps them): each ``Value`` knows its uses, ``(node, input index)`` for
every node in a graph that reads it, and the graphs returning it. They are kept by the only
places that change them: ``Node.inputs`` (an immutable tuple, replaced through its setter,
``set_input`` or ``set_inputs``), ``append_node``/``remove_node``, and a graph's ``outputs``
list. ``Graph.consumers`` reads them instead of walking the graph; a node whose subgraph reads
an outer value is found through the subgraph's holder, recorded when the node is added, when its
``attrs`` are assigned and when a subgraph is written into them (``Attrs``).

This module is the container: ``Node``, ``Graph`` and their edits. ``Value`` and the use-list
records are in ``value.py``; the order (topological sort) and the verifier in ``topology.py``.
"""

from __future__ import annotations

import gc
import itertools
from collections.abc import Iterator, Sequence
from contextlib import contextmanager
from typing import Any

import numpy as np

from ..base.errors import NNBridgeError
from . import topology
from .dtypes import DType
from .schema import get_schema
from .types import Layout, TensorType
from .value import OutputList, Value, add_uses, drop_uses


@contextmanager
def paused_gc() -> Iterator[None]:
    """Pause Python's cyclic garbage collector while a large graph is built or rewritten.

    Every node and its output values reference each other, so a 100k-node graph is hundreds of
    thousands of cycle-tracked objects that each generation-2 collection rescans: 25–40 % of
    compile time at 30k nodes. Reference counting still frees what it can; collection resumes after.
    """
    was_enabled = gc.isenabled()
    gc.disable()
    try:
        yield
    finally:
        if was_enabled:
            gc.enable()


class Node:
    """One operator application. ``attrs`` hold plain Python values (and Graphs)."""

    __slots__ = ("op", "domain", "name", "_inputs", "outputs", "_attrs", "graph", "_pos")

    def __init__(
        self,
        op: str,
        inputs: Sequence[Value | None],
        outputs: Sequence[Value],
        attrs: dict[str, Any] | None = None,
        name: str = "",
        domain: str = "",
    ):
        self.op = op
        self.domain = "" if domain == "ai.onnx" else domain
        self.name = name
        self._inputs: tuple[Value | None, ...] = tuple(inputs)
        self.outputs: list[Value] = list(outputs)
        self._attrs = Attrs(self, attrs or ())
        self.graph: Graph | None = None
        self._pos = 0  # place in its graph's node order (consumers are listed in that order)

    @property
    def inputs(self) -> tuple[Value | None, ...]:
        """The values read, in order (None: an absent optional input). A tuple: change it by
        assigning ``node.inputs``, or with ``set_input``, so the values' use-lists follow."""
        return self._inputs

    @inputs.setter
    def inputs(self, values: Sequence[Value | None]) -> None:
        self.set_inputs(values)

    @property
    def attrs(self) -> dict[str, Any]:
        """The attributes: a dict whose writes (``node.attrs["body"] = g``) record this node as
        the holder of a subgraph they attach, as adding the node to a graph does."""
        return self._attrs

    @attrs.setter
    def attrs(self, attrs: dict[str, Any]) -> None:
        self._attrs = Attrs(self, attrs)
        if self.graph is not None:
            _hold_subgraphs(self)

    # -- reading -----------------------------------------------------------
    @property
    def schema(self):
        return get_schema(self.op, self.domain)

    def attr(self, name: str, default: Any = None) -> Any:
        """The attribute's value, else the schema default, else ``default``."""
        if name in self.attrs:
            return self.attrs[name]
        schema = self.schema
        if schema is not None and name in schema.attr_defaults:
            value = schema.attr_defaults[name]
            if value is not None:
                return value
        return default

    def input(self, index: int) -> Value | None:
        """Input ``index``, or None when it is absent (optional inputs)."""
        return self.inputs[index] if index < len(self.inputs) else None

    def subgraphs(self) -> list[Graph]:
        found: list[Graph] = []
        for value in self.attrs.values():
            if isinstance(value, Graph):
                found.append(value)
            elif isinstance(value, (list, tuple)) and value and isinstance(value[0], Graph):
                found.extend(value)  # an attribute's list holds one kind (ONNX's GRAPHS)
        return found

    def captured(self) -> list[Value]:
        """Values of enclosing graphs that this node's subgraphs read."""
        seen: dict[int, Value] = {}
        for sub in self.subgraphs():
            for v in sub.outer_values():
                seen.setdefault(id(v), v)
        return list(seen.values())

    # -- rewiring ----------------------------------------------------------
    def set_input(self, index: int, value: Value | None) -> None:
        """Read ``value`` as input ``index`` (absent inputs before it become None)."""
        inputs = list(self._inputs)
        inputs.extend([None] * (index + 1 - len(inputs)))
        old, inputs[index] = inputs[index], value
        if self.graph is None:
            self._inputs = tuple(inputs)
            return
        if old is not None:
            old._uses.pop((self, index), None)
        self._inputs = tuple(inputs)
        if value is not None:
            value._uses[(self, index)] = None
        self.graph.mark_dirty()

    def set_inputs(self, values: Sequence[Value | None]) -> None:
        """Read ``values`` instead of the current inputs."""
        values = tuple(values)
        if values == self._inputs:  # Values compare by identity
            return
        if self.graph is None:
            self._inputs = values
            return
        drop_uses(self)
        self._inputs = values
        add_uses(self)
        self.graph.mark_dirty()

    def __repr__(self) -> str:
        return f"Node({self.op} '{self.name}')"


class Graph:
    """A dataflow graph with named values, initializers and an opset."""

    def __init__(self, name: str = "graph", parent: Graph | None = None):
        self.name = name
        self.parent = parent
        self._nodes: dict[Node, None] = {}  # an insertion-ordered set: O(1) add and remove
        self._order_dirty = False
        self._next_pos = 0
        #: the nodes holding this graph in their attrs (pruned when read: see ``_live_holders``)
        self._holders: list[Node] = []
        self.inputs: list[Value] = []
        self._outputs = OutputList(self)
        self.initializers: dict[str, np.ndarray] = {}
        self.values: dict[str, Value] = {}
        self.opset: dict[str, int] = {}
        self.metadata: dict[str, str] = {}
        #: input name → the values the model file stores for that input (SMAUG keeps the network
        #: input in its params file); default inputs of run/simulate/check, written back on save
        self.input_values: dict[str, np.ndarray] = {}
        self.doc: str = ""
        #: what the layers above work out once per graph (the evaluator's plan of a subgraph): it
        #: lives and dies with the graph, and ``copy`` starts the copy's empty
        self.memo: dict[Any, Any] = {}
        self._names: set[str] = set() if parent is None else parent.root._names
        self._counter = itertools.count()

    # -- structure ---------------------------------------------------------
    @property
    def root(self) -> Graph:
        g = self
        while g.parent is not None:
            g = g.parent
        return g

    @property
    def nodes(self) -> list[Node]:
        """A snapshot of the nodes in topological order."""
        if self._order_dirty:
            if not topology.in_order(self, self._nodes):
                self._nodes = dict.fromkeys(topology.sorted_nodes(self, self._nodes))
                for pos, node in enumerate(self._nodes):
                    node._pos = pos
                self._next_pos = len(self._nodes)
            self._order_dirty = False
        return list(self._nodes)

    @property
    def outputs(self) -> list[Value]:
        """The graph's results: a list whose every change is recorded on the values it holds."""
        return self._outputs

    @outputs.setter
    def outputs(self, values: Sequence[Value]) -> None:
        self._outputs.detach()
        self._outputs = OutputList(self, values)

    def mark_dirty(self) -> None:
        self._order_dirty = True

    def __iter__(self) -> Iterator[Node]:
        return iter(self.nodes)

    def __len__(self) -> int:
        return len(self._nodes)

    def walk(self) -> Iterator[Node]:
        """All nodes, including those inside subgraphs (depth first)."""
        for node in self.nodes:
            yield node
            for sub in node.subgraphs():
                yield from sub.walk()

    # -- names -------------------------------------------------------------
    def unique_name(self, hint: str) -> str:
        hint = hint or "v"
        if hint not in self._names:
            self._names.add(hint)
            return hint
        while True:
            candidate = f"{hint}_{next(self._counter)}"
            if candidate not in self._names:
                self._names.add(candidate)
                return candidate

    def reserve_name(self, name: str) -> None:
        self._names.add(name)

    # -- values ------------------------------------------------------------
    def add_value(self, name: str, type: TensorType | None = None, *, exact: bool = False) -> Value:
        """Create a value. With ``exact`` the name must be free (import keeps names)."""
        if exact:
            if name in self.values:
                raise NNBridgeError(f"graph '{self.name}': value '{name}' is defined twice")
            self._names.add(name)
        else:
            name = self.unique_name(name)
        value = Value(name, type, self)
        self.values[name] = value
        return value

    def get(self, name: str) -> Value | None:
        """Look a value up here and in enclosing graphs."""
        g: Graph | None = self
        while g is not None:
            if name in g.values:
                return g.values[name]
            g = g.parent
        return None

    def add_input(self, name: str, type: TensorType | None = None) -> Value:
        value = self.add_value(name, type, exact=True)
        self.inputs.append(value)
        return value

    def add_initializer(self, name: str, array: np.ndarray, *, exact: bool = False) -> Value:
        array = np.asarray(array)
        ttype = TensorType(
            DType.from_numpy(array.dtype),
            tuple(array.shape),
            Layout.default_for_rank(array.ndim),
        )
        value = self.add_value(name, ttype, exact=exact)
        self.initializers[value.name] = array
        return value

    def set_initializer(self, value: Value, array: np.ndarray) -> None:
        """Replace a constant's data (shape and dtype follow the new array)."""
        array = np.asarray(array)
        self.initializers[value.name] = array
        value.type = TensorType(
            DType.from_numpy(array.dtype), tuple(array.shape),
            value.type.layout if value.type.rank == array.ndim else Layout.default_for_rank(array.ndim),
        )

    def const(self, value: Value | None) -> np.ndarray | None:
        return None if value is None else value.const

    # -- nodes -------------------------------------------------------------
    def add_node(
        self,
        op: str,
        inputs: Sequence[Value | None],
        outputs: int | Sequence[str | Value] = 1,
        attrs: dict[str, Any] | None = None,
        name: str | None = None,
        domain: str = "",
    ) -> Node:
        """Create a node; outputs may be a count, names (made unique) or Values."""
        node_name = self.unique_name(name or op.lower())
        if isinstance(outputs, int):
            outputs = [f"{node_name}_out{i}" if outputs > 1 else f"{node_name}_out" for i in range(outputs)]
        out_values = [o if isinstance(o, Value) else self.add_value(o) for o in outputs]
        node = Node(op, inputs, out_values, attrs, node_name, domain)
        self.append_node(node)
        return node

    def append_node(self, node: Node) -> Node:
        """Attach an already built node (its outputs are registered here)."""
        node.graph = self
        for out in node.outputs:
            if out.producer is not None and out.producer is not node:
                raise NNBridgeError(
                    f"value '{out.name}' is produced by both '{out.producer.name}' and '{node.name}'"
                )
            out.producer = node
            if out.graph is None:
                out.graph = self
            self.values.setdefault(out.name, out)
            self._names.add(out.name)
        self._names.add(node.name)
        self._nodes[node] = None
        node._pos = self._next_pos
        self._next_pos += 1
        add_uses(node)
        _hold_subgraphs(node)
        self._order_dirty = True
        return node

    def remove_node(self, node: Node) -> None:
        """Remove a node. Its outputs must no longer be used (rewire them first)."""
        del self._nodes[node]
        drop_uses(node)
        for out in node.outputs:
            if out.producer is node:
                out.producer = None
                if self.values.get(out.name) is out:
                    del self.values[out.name]
        node.graph = None
        self._order_dirty = True

    def replace_uses(self, old: Value, new: Value) -> int:
        """Point every use of ``old`` (nodes, subgraphs, graph outputs) at ``new``."""
        count = 0
        for node, index in list(old._uses):
            chain = self._path_to(node)
            if chain is not None:
                node.set_input(index, new)
                for graph in chain:  # a subgraph's new read may reorder its holder
                    graph._order_dirty = True
                count += 1
        outputs = self._outputs
        for i, v in enumerate(outputs):
            if v is old:
                outputs[i] = new
                count += 1
        self._order_dirty = True
        return count

    def consumers(self, value: Value) -> list[Node]:
        """Nodes of this graph that read ``value`` (directly or through a subgraph), in node
        order: read from the use-lists, so its cost is the value's uses, not the graph's size."""
        found: dict[Node, None] = {}
        for node, _ in value._uses:
            if node.graph is self:
                found[node] = None
            else:
                found.update(dict.fromkeys(self._readers_through(node, value)))
        if value._output_of:
            for graph in value._output_of:
                if graph is not self and not graph._defines(value):
                    for holder in graph._live_holders():
                        found.update(dict.fromkeys(self._readers_through(holder, value)))
        if len(found) > 1:
            return sorted(found, key=_position)
        return list(found)

    def _readers_through(self, node: Node, value: Value) -> Iterator[Node]:
        """The nodes of this graph through which ``node`` reads ``value``: ``node`` itself, or
        the nodes holding the subgraphs it sits in, while ``value`` is outer to each of them."""
        graph = node.graph
        if graph is self:
            yield node
        elif graph is not None and not graph._defines(value):
            for holder in graph._live_holders():
                yield from self._readers_through(holder, value)

    def _path_to(self, node: Node) -> list[Graph] | None:
        """The graphs from ``node``'s up to this one if ``node`` is in this graph or one of its
        subgraphs (at any depth), else None."""
        graph = node.graph
        if graph is None:
            return None
        if graph is self:
            return [self]
        for holder in graph._live_holders():
            above = self._path_to(holder)
            if above is not None:
                return [graph, *above]
        return None

    def _defines(self, value: Value) -> bool:
        """Whether ``value`` is this graph's own (an input, initializer or node output), not outer."""
        return self.values.get(value.name) is value or any(v is value for v in self.inputs)

    def _live_holders(self) -> list[Node]:
        """The nodes in a graph whose attributes hold this graph (stale entries are dropped)."""
        live = [n for n in self._holders if n.graph is not None and any(s is self for s in n.subgraphs())]
        if len(live) != len(self._holders):
            self._holders = live
        return live

    def is_output(self, value: Value) -> bool:
        return bool(value._output_of) and self in value._output_of  # type: ignore[operator]

    # -- scope -------------------------------------------------------------
    def outer_values(self) -> list[Value]:
        """Values used by this graph (or its subgraphs) but defined outside it."""
        local = set(map(id, self.inputs))
        local.update(id(v) for v in self.values.values())
        found: dict[int, Value] = {}
        for node in self._nodes:
            for v in itertools.chain(node.inputs, node.captured()):
                if v is not None and id(v) not in local:
                    found.setdefault(id(v), v)
        for v in self.outputs:
            if id(v) not in local:
                found.setdefault(id(v), v)
        return list(found.values())

    def _self_and_subgraphs(self) -> Iterator[Graph]:
        yield self
        for node in self._nodes:
            for sub in node.subgraphs():
                yield from sub._self_and_subgraphs()

    # -- whole-graph helpers ----------------------------------------------
    def verify(self, visible: set[int] | None = None) -> None:
        """Check SSA, definitions before use, topological order; raise on the first fault
        (``topology.verify``; ``visible``: ids of the enclosing graphs' values, if known)."""
        topology.verify(self, visible)

    def copy(self, parent: Graph | None = None) -> Graph:
        """A structural deep copy; initializer arrays are shared (treat them as immutable)."""
        new = Graph(self.name, parent)
        if parent is None:
            new._names = set(self._names)
        new.opset = dict(self.opset)
        new.metadata = dict(self.metadata)
        new.input_values = dict(self.input_values)
        new.doc = self.doc
        mapping: dict[int, Value] = {}

        def clone(v: Value | None) -> Value | None:
            if v is None:
                return None
            if id(v) in mapping:
                return mapping[id(v)]
            return v  # defined in an enclosing graph: resolved by the caller's mapping

        for v in self.values.values():
            nv = Value(v.name, v.type, new)
            mapping[id(v)] = nv
            new.values[v.name] = nv
        for v in self.inputs:
            if id(v) not in mapping:
                mapping[id(v)] = Value(v.name, v.type, new)
                new.values[v.name] = mapping[id(v)]
        new.inputs = [mapping[id(v)] for v in self.inputs]
        new.initializers = dict(self.initializers)
        for node in self.nodes:
            attrs = {k: _copy_attr(val, new, mapping) for k, val in node.attrs.items()}
            nn = Node(node.op, [clone(v) for v in node.inputs], [mapping[id(o)] for o in node.outputs],
                      attrs, node.name, node.domain)
            new.append_node(nn)
        new.outputs = [clone(v) for v in self.outputs]  # type: ignore[misc]
        new._order_dirty = False
        return new

    def __str__(self) -> str:
        from .printer import format_graph

        return format_graph(self)


def _copy_attr(value: Any, parent: Graph, mapping: dict[int, Value]) -> Any:
    if isinstance(value, Graph):
        sub = value.copy(parent)
        _rebind_outer(sub, mapping)
        return sub
    if isinstance(value, list) and value and isinstance(value[0], Graph):
        return [_copy_attr(v, parent, mapping) for v in value]
    return value


def _rebind_outer(sub: Graph, mapping: dict[int, Value]) -> None:
    """After copying, point a subgraph's uses of outer values at the copies."""
    for g in sub._self_and_subgraphs():
        for node in g._nodes:
            if any(v is not None and id(v) in mapping for v in node.inputs):
                node.inputs = [mapping.get(id(v), v) if v is not None else None for v in node.inputs]
        if any(id(v) in mapping for v in g.outputs):
            g.outputs = [mapping.get(id(v), v) for v in g.outputs]


def _position(node: Node) -> int:
    return node._pos


class Attrs(dict):
    """A node's attribute dict. Every way of writing into it (``[k] = v``, ``update``,
    ``setdefault``, ``|=``) records the node as the holder of the subgraphs it then holds, once
    the node is in a graph: a subgraph's reads of outer values reach the use-lists through its
    holder, so a body attached after insertion must be registered too. Removing one needs no
    step (stale holders are dropped when read). Reads are a plain dict's."""

    __slots__ = ("_node",)

    def __init__(self, node: Node, items: Any = ()):
        super().__init__(items)
        self._node = node

    def _written(self) -> None:
        node = getattr(self, "_node", None)  # (unset while pickle or copy rebuilds the dict,
        if node is not None and getattr(node, "graph", None) is not None:  # as is the node's graph)
            _hold_subgraphs(node)

    def __setitem__(self, key: str, value: Any) -> None:
        super().__setitem__(key, value)
        self._written()

    def update(self, *args: Any, **kwargs: Any) -> None:
        super().update(*args, **kwargs)
        self._written()

    def setdefault(self, key: str, default: Any = None) -> Any:
        value = super().setdefault(key, default)
        self._written()
        return value

    def __ior__(self, other: Any) -> Attrs:
        super().__ior__(other)
        self._written()
        return self


def _hold_subgraphs(node: Node) -> None:
    """Record ``node`` as the holder of the subgraphs in its attributes."""
    for sub in node.subgraphs():
        if all(h is not node for h in sub._holders):
            sub._holders.append(node)


