"""The IR: topological order through mutation, verify, copy, printer, pass manager."""

from __future__ import annotations

import numpy as np
import pytest

from nnbridge.base.errors import NNBridgeError
from nnbridge.ir import DType, Graph, PatternKind, TensorType, get_schema, pattern_kind
from nnbridge.passes import PassManager, register_pass


def small_graph() -> Graph:
    g = Graph("g")
    x = g.add_input("x", TensorType(DType.FLOAT32, (1, 4)))
    w = g.add_initializer("w", np.ones((4, 4), np.float32))
    mm = g.add_node("MatMul", [x, w])
    relu = g.add_node("Relu", [mm.outputs[0]])
    g.outputs.append(relu.outputs[0])
    return g


def test_order_is_restored_after_inserting_between_nodes():
    g = small_graph()
    mm, relu = g.nodes
    # insert a node consuming mm's output and feed relu from it: it is appended last...
    neg = g.add_node("Neg", [mm.outputs[0]])
    relu.set_input(0, neg.outputs[0])
    # ...but reading the nodes gives a valid order again
    assert [n.op for n in g.nodes] == ["MatMul", "Neg", "Relu"]
    g.verify()


def test_replace_uses_updates_graph_outputs_and_consumers():
    g = small_graph()
    mm, relu = g.nodes
    tanh = g.add_node("Tanh", [mm.outputs[0]])
    g.replace_uses(relu.outputs[0], tanh.outputs[0])
    g.remove_node(relu)
    assert g.outputs[0] is tanh.outputs[0]
    assert g.consumers(mm.outputs[0]) == [tanh]
    g.verify()


def test_cycle_is_reported():
    g = small_graph()
    mm, relu = g.nodes
    mm.set_input(0, relu.outputs[0])
    with pytest.raises(NNBridgeError, match="cycle"):
        g.nodes  # noqa: B018


def test_copy_is_independent():
    g = small_graph()
    c = g.copy()
    c.remove_node(c.nodes[1])
    assert len(g) == 2 and len(c) == 1
    assert c.initializers["w"] is g.initializers["w"]


def test_schema_defaults_and_pattern_kinds():
    conv = get_schema("Conv")
    assert conv.attr_defaults["group"] == 1
    assert pattern_kind("Conv") is PatternKind.OUT_ELEMWISE_FUSABLE
    assert pattern_kind("Relu") is PatternKind.ELEMWISE
    assert pattern_kind("Reshape") is PatternKind.INJECTIVE
    assert pattern_kind("Reorder", "nnbridge") is PatternKind.INJECTIVE


def test_printer_shows_ops_types_and_constants():
    text = str(small_graph())
    assert "MatMul(%x, $w[4,4])" in text
    assert "graph g (%x: float32[1,4]" in text


def test_pass_manager_runs_verifies_and_prints():
    calls = []

    @register_pass("test-noop")
    def noop(graph: Graph) -> bool:
        """Does nothing."""
        calls.append(graph.name)
        return False

    printed = []
    pm = PassManager(["test-noop"], print_after=True, printer=printed.append)
    pm.run(small_graph())
    assert calls == ["g"] and "after test-noop" in printed[0]
    with pytest.raises(NNBridgeError, match="unknown pass"):
        PassManager(["no-such-pass"]).run(small_graph())
