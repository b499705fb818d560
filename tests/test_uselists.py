"""Use-lists on ``Value`` (issue 40 item 5): after any sequence of graph edits they equal a
from-scratch recomputation, and the passes that ask for readers no longer walk the graph per ask."""

from __future__ import annotations

import itertools
import os

import numpy as np
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from nnbridge.base.errors import NNBridgeError
from nnbridge.ir import DType, Graph, Node, TensorType, Value
from nnbridge.passes import PassManager

CASES = settings(max_examples=int(os.environ.get("NNBRIDGE_PROPERTY_CASES", 150)), deadline=None,
                 derandomize=True, suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large])


# -- the from-scratch recomputation (what consumers() did before it read the use-lists) -----------
def recomputed_consumers(graph: Graph, value: Value) -> list[Node]:
    """Nodes of ``graph``, in its node order, reading ``value`` directly or through a subgraph."""
    return [node for node in graph._nodes
            if any(v is value for v in itertools.chain(node.inputs, node.captured()))]


def recomputed_uses(graphs: list[Graph]) -> set[tuple[int, int, int]]:
    """(id(value), id(node), index) of every input slot of every node in any of ``graphs``."""
    return {(id(v), id(n), i) for g in graphs for n in g._nodes for i, v in enumerate(n.inputs) if v is not None}


def recomputed_replace_count(graph: Graph, old: Value) -> int:
    graphs = {id(g): g for g in graph._self_and_subgraphs()}  # a subgraph two nodes hold counts once
    count = sum(v is old for g in graphs.values() for n in g._nodes for v in n.inputs)
    return count + sum(v is old for v in graph.outputs)


class World:
    """Every graph and value made so far, and the edits a test may apply to them."""

    def __init__(self) -> None:
        self.root = Graph("root")
        self.graphs = [self.root]
        self.values = [self.root.add_input(f"x{i}", TensorType(DType.FLOAT32, (2,))) for i in range(3)]
        self.values.append(self.root.add_initializer("w", np.ones(2, np.float32)))
        self.removed: list[Node] = []

    def nodes(self) -> list[Node]:
        return [n for g in self.graphs for n in g._nodes]

    def check(self) -> None:
        for g in self.graphs:
            for v in self.values:
                assert g.consumers(v) == recomputed_consumers(g, v), (g.name, v.name)
                assert g.is_output(v) == any(o is v for o in g.outputs)
        got = {(id(v), id(n), i) for v in self.values for n, i in v.uses()}
        assert got == recomputed_uses(self.graphs)

    # -- edits ---------------------------------------------------------------------------------
    def pick(self, data, items):
        return items[data.draw(st.integers(0, len(items) - 1))]

    def some_inputs(self, data) -> list[Value | None]:
        n = data.draw(st.integers(0, 3))
        return [None if data.draw(st.integers(0, 7)) == 0 else self.pick(data, self.values) for _ in range(n)]

    def add_node(self, data) -> None:
        g = self.pick(data, self.graphs)
        node = g.add_node("Op", self.some_inputs(data), data.draw(st.integers(1, 2)))
        self.values.extend(node.outputs)

    def add_holder(self, data) -> None:
        """A node holding one or two new subgraphs that read outer values and may return them."""
        g = self.pick(data, self.graphs)
        subs = []
        for k in range(data.draw(st.integers(1, 2))):
            sub = Graph(f"{g.name}_s{len(self.graphs)}_{k}", parent=g)
            self.graphs.append(sub)
            local = sub.add_input(sub.unique_name("in"), TensorType(DType.FLOAT32, (2,)))
            self.values.append(local)
            for _ in range(data.draw(st.integers(0, 2))):
                inner = sub.add_node("Op", [local, *self.some_inputs(data)])
                self.values.extend(inner.outputs)
            sub.outputs = [self.pick(data, self.values) for _ in range(data.draw(st.integers(0, 2)))]
            subs.append(sub)
        attrs = {"body": subs[0]} if len(subs) == 1 else {"branches": subs}
        node = g.add_node("Hold", self.some_inputs(data), 1, attrs=attrs)
        self.values.extend(node.outputs)

    def set_input(self, data) -> None:
        nodes = self.nodes()
        if nodes:
            self.pick(data, nodes).set_input(data.draw(st.integers(0, 4)), self.pick(data, [None, *self.values]))

    def assign_inputs(self, data) -> None:
        nodes = self.nodes()
        if nodes:
            self.pick(data, nodes).inputs = self.some_inputs(data)

    def remove(self, data) -> None:
        nodes = self.nodes()
        if nodes:
            node = self.pick(data, nodes)
            node.graph.remove_node(node)
            self.removed.append(node)

    def re_append(self, data) -> None:
        """A removed node put back, possibly into another graph (passes move nodes into bodies)."""
        if self.removed:
            node = self.removed.pop(data.draw(st.integers(0, len(self.removed) - 1)))
            inside = {id(g) for sub in node.subgraphs() for g in sub._self_and_subgraphs()}
            places = [g for g in self.graphs if id(g) not in inside]  # not into its own body
            if all(o.producer is None or o.producer is node for o in node.outputs):
                self.pick(data, places).append_node(node)

    def replace_uses(self, data) -> None:
        g, old, new = self.pick(data, self.graphs), self.pick(data, self.values), self.pick(data, self.values)
        expected = recomputed_replace_count(g, old) if old is not new else None
        count = g.replace_uses(old, new)
        if expected is not None:
            assert count == expected

    def edit_outputs(self, data) -> None:
        g, v = self.pick(data, self.graphs), self.pick(data, self.values)
        how = data.draw(st.integers(0, 5))
        if how == 0:
            g.outputs.append(v)
        elif how == 1 and g.outputs:
            g.outputs[data.draw(st.integers(0, len(g.outputs) - 1))] = v
        elif how == 2:
            g.outputs[:] = [v, *g.outputs[1:]]
        elif how == 3 and g.outputs:
            g.outputs.pop(0)
        elif how == 4:
            g.outputs = [v]
        elif g.outputs:
            del g.outputs[-1]

    def _node_and_subgraph(self, data) -> tuple[Node, Graph] | None:
        """A node and a subgraph it may hold: not one the node sits in (a graph nested in itself)."""
        subs = [g for g in self.graphs if g is not self.root]
        nodes = self.nodes()
        if not (subs and nodes):
            return None
        node = self.pick(data, nodes)
        free = [s for s in subs if all(g is not node.graph for g in s._self_and_subgraphs())]
        return (node, self.pick(data, free)) if free else None

    def move_subgraph(self, data) -> None:
        """A subgraph given to another node by assigning its ``attrs`` (both hold it then)."""
        if picked := self._node_and_subgraph(data):
            node, sub = picked
            node.attrs = {**node.attrs, "then_branch": sub}

    def write_subgraph(self, data) -> None:
        """A subgraph written into a node's attributes in place (``node.attrs["body"] = g``)."""
        if picked := self._node_and_subgraph(data):
            node, sub = picked
            how = data.draw(st.integers(0, 2))
            if how == 0:
                node.attrs["body"] = sub
            elif how == 1:
                node.attrs.update(else_branch=sub)
            else:
                node.attrs.setdefault("then_branch", sub)

    def reorder(self, data) -> None:
        g = self.pick(data, self.graphs)
        try:
            g.nodes  # noqa: B018 (restores topological order, renumbering node positions)
        except NNBridgeError:
            pass  # a random edit made a cycle: the order stays as it was


EDITS = [World.add_node, World.add_node, World.add_holder, World.set_input, World.assign_inputs, World.remove,
         World.re_append, World.replace_uses, World.edit_outputs, World.move_subgraph, World.write_subgraph,
         World.reorder]


@CASES
@given(st.data())
def test_use_lists_equal_a_recomputation_after_random_edits(data):
    world = World()
    for _ in range(data.draw(st.integers(1, 25))):
        data.draw(st.sampled_from(EDITS))(world, data)
        world.check()
    try:
        copy = world.root.copy()  # a copy's use-lists are its own and as fresh
    except NNBridgeError:
        return  # random rewiring made a cycle: a graph that cannot be copied in order
    copied_graphs = [copy] + [s for n in copy.walk() for s in n.subgraphs()]
    copied_values = {id(v): v for g in copied_graphs for v in [*g.values.values(), *g.inputs]}
    for g in copied_graphs:
        for v in copied_values.values():
            assert g.consumers(v) == recomputed_consumers(g, v)


def test_inputs_cannot_be_changed_behind_the_use_lists():
    g = Graph("g")
    x = g.add_input("x", TensorType(DType.FLOAT32, (2,)))
    node = g.add_node("Relu", [x])
    with pytest.raises(TypeError):
        node.inputs[0] = None  # a tuple: rewiring goes through set_input / the setter
    node.inputs = [None]
    assert g.consumers(x) == [] and x.uses() == []


def test_a_node_reading_through_its_subgraph_is_a_consumer():
    g = Graph("g")
    x = g.add_input("x", TensorType(DType.FLOAT32, (2,)))
    inner = Graph("then", parent=g)
    inner.outputs = [x]  # a branch returning the outer value as it is
    deeper = Graph("deeper", parent=inner)
    deeper.add_node("Neg", [x])
    holder_inner = inner.add_node("Loop", [], 1, attrs={"body": deeper})
    node = g.add_node("If", [], 1, attrs={"then_branch": inner})
    assert g.consumers(x) == [node]
    assert inner.consumers(x) == [holder_inner]
    inner.outputs = []
    inner.remove_node(holder_inner)
    assert g.consumers(x) == []


def test_a_subgraph_written_into_attrs_in_place_is_held():
    """``node.attrs["body"] = g`` after the node is in a graph registers it as g's holder, as
    assigning ``node.attrs`` or adding the node does; removing the body forgets it."""
    g = Graph("g")
    x = g.add_input("x", TensorType(DType.FLOAT32, (2,)))
    body = Graph("body", parent=g)
    body.add_node("Neg", [x])
    node = g.add_node("Loop", [], 1)
    assert g.consumers(x) == []
    node.attrs["body"] = body
    assert g.consumers(x) == [node]
    del node.attrs["body"]
    assert g.consumers(x) == []
    node.attrs |= {"body": body}
    assert g.consumers(x) == [node]
    assert g.replace_uses(x, g.add_input("y", TensorType(DType.FLOAT32, (2,)))) == 1


def test_attrs_copy_and_pickle_as_plain_dicts():
    import pickle

    node = Node("Relu", [], [], {"alpha": 0.5})
    assert dict(node.attrs) == {"alpha": 0.5} and pickle.loads(pickle.dumps(node.attrs)) == {"alpha": 0.5}


# -- passes read the use-lists instead of rebuilding a reader map per question ---------------------
def _gelu_chains(n: int) -> Graph:
    """``n`` decomposed GELUs in a row: recognize-activations asks "sole reader?" several times per
    chain and rewrites each, which made the old reader map be rebuilt once per rewrite."""
    g = Graph("gelus")
    x = g.add_input("x", TensorType(DType.FLOAT32, (1, 8)))
    half, one, root2 = (g.add_initializer(name, np.array(c, np.float32))
                        for name, c in (("half", 0.5), ("one", 1.0), ("root2", np.sqrt(2.0))))
    for _ in range(n):
        scaled = g.add_node("Div", [x, root2]).outputs[0]
        erf = g.add_node("Erf", [scaled]).outputs[0]
        plus = g.add_node("Add", [erf, one]).outputs[0]
        xh = g.add_node("Mul", [x, half]).outputs[0]
        x = g.add_node("Mul", [xh, plus]).outputs[0]
    g.outputs.append(x)
    return g


def _graph_walks(monkeypatch, graph: Graph, passes: list[str]) -> tuple[int, int]:
    """(calls of Graph.consumers, node visits made by asking a node for what its subgraphs read —
    the per-node step of the old whole-graph reader map) while ``passes`` run."""
    asked, visits = [0], [0]
    consumers, captured = Graph.consumers, Node.captured

    def counting_consumers(self, value):
        asked[0] += 1
        return consumers(self, value)

    def counting_captured(self):
        visits[0] += 1
        return captured(self)

    monkeypatch.setattr(Graph, "consumers", counting_consumers)
    monkeypatch.setattr(Node, "captured", counting_captured)
    PassManager(passes, verify=False).run(graph)
    return asked[0], visits[0]


def test_passes_asking_for_readers_do_not_walk_the_graph_per_question(monkeypatch):
    small, large = 40, 160
    asked_small, visits_small = _graph_walks(monkeypatch, _gelu_chains(small), ["recognize-activations"])
    asked_large, visits_large = _graph_walks(monkeypatch, _gelu_chains(large), ["recognize-activations"])
    nodes = 5 * large
    # the old map cost one visit per node per rebuild, rebuilt after each of the `large` rewrites
    # (≥ large² / 2 visits); reading use-lists leaves only the pass's own linear sweeps
    assert visits_large <= 4 * nodes, visits_large
    assert visits_large <= 4.5 * visits_small, (visits_small, visits_large)  # linear: 4× the nodes
    assert asked_large >= large and asked_small >= small  # and the pass does ask, per chain


def test_consumers_cost_follows_the_uses_not_the_graph(monkeypatch):
    g = _gelu_chains(200)
    values = [o for n in g.nodes for o in n.outputs]
    asked, visits = [0], [0]
    captured = Node.captured

    def counting_captured(self):
        visits[0] += 1
        return captured(self)

    monkeypatch.setattr(Node, "captured", counting_captured)
    for v in values:
        asked[0] += len(g.consumers(v))
    assert visits[0] == 0  # no node was visited to answer (the old map visited every node per ask)
    assert asked[0] == sum(len(v.uses()) for v in values)  # one reader per use, no duplicates here


def test_a_graph_holding_subgraphs_deep_copies():
    """``copy.deepcopy`` rebuilds a node's attributes before the node's own graph slot is set
    (``nnbridge port`` copies the model per target): the holder record must wait for it."""
    import copy

    g = Graph("g")
    x = g.add_input("x", TensorType(DType.FLOAT32, (2,)))
    body = Graph("body", parent=g)
    body.add_node("Neg", [x])
    g.add_node("Loop", [], 1, {"body": body})
    twin = copy.deepcopy(g)
    assert [n.op for n in twin.nodes] == ["Loop"] and twin.consumers(twin.get("x")) == [twin.nodes[0]]
