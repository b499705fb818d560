"""The pass manager's own features: declared prerequisites run only when stale, Fixpoint groups
repeat until nothing changes, and a typo in any name fails before any pass runs."""

from __future__ import annotations

import pytest

from nnbridge.base.errors import NNBridgeError
from nnbridge.ir import DType, Graph, TensorType
from nnbridge.passes import PASSES, Fixpoint, PassManager, register_pass


def _chain(length: int) -> Graph:
    g = Graph("chain")
    v = g.add_input("x", TensorType(DType.FLOAT32, (2, 3)))
    for _ in range(length):
        v = g.add_node("Identity", [v]).outputs[0]
    g.outputs.append(g.add_node("Relu", [v]).outputs[0])
    return g


@pytest.fixture
def toy_passes():
    calls: list[str] = []

    def counted(name, changes=lambda g: False, requires=()):
        def fn(graph):
            calls.append(name)
            return changes(graph)
        register_pass(name, requires=requires)(fn)

    def drop_one_identity(graph):
        node = next((n for n in graph.nodes if n.op == "Identity"), None)
        if node is None:
            return False
        for user in list(graph.nodes):
            for i, v in enumerate(user.inputs):
                if v is node.outputs[0]:
                    user.set_input(i, node.inputs[0])
        graph.remove_node(node)
        return True

    counted("toy-facts")
    counted("toy-user", requires=("toy-facts",))
    counted("toy-shrink", drop_one_identity)
    yield calls
    for name in ("toy-facts", "toy-user", "toy-shrink"):
        PASSES.unregister(name)


def test_a_prerequisite_runs_first_and_again_only_after_a_change(toy_passes):
    PassManager(["toy-user", "toy-user", "toy-shrink", "toy-user"]).run(_chain(2))
    assert toy_passes == ["toy-facts", "toy-user", "toy-user", "toy-shrink", "toy-facts", "toy-user"]


def test_a_fixpoint_group_repeats_until_nothing_changes(toy_passes):
    graph = _chain(5)
    manager = PassManager([Fixpoint("toy-shrink")])
    manager.run(graph)
    assert [n.op for n in graph.nodes] == ["Relu"]
    assert manager.changed == ["toy-shrink"] * 5 and toy_passes.count("toy-shrink") == 6


def test_a_fixpoint_stops_at_its_limit(toy_passes):
    graph = _chain(5)
    PassManager([Fixpoint("toy-shrink", limit=2)]).run(graph)
    assert [n.op for n in graph.nodes].count("Identity") == 3


def test_an_unknown_name_fails_before_any_pass_runs(toy_passes):
    with pytest.raises(NNBridgeError, match="unknown pass 'toy-typo'"):
        PassManager(["toy-shrink", Fixpoint("toy-typo")]).run(_chain(1))
    assert toy_passes == []
