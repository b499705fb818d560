"""``fold-branches``: an If with a constant condition becomes the branch it takes, keeping the
graph's output names; data-dependent conditions keep their If."""

from __future__ import annotations

import numpy as np
import onnx
from onnx import TensorProto, helper
from passcheck import assert_close, build, rand, run

import nnbridge
from nnbridge.passes import get_pass, run_passes

mk = helper.make_node


def branch(name: str, nodes, out: str) -> onnx.GraphProto:
    return helper.make_graph(nodes, name, [], [helper.make_tensor_value_info(out, TensorProto.FLOAT, None)])


def ops(graph) -> list[str]:
    return [n.op for n in graph.walk()]


def test_a_constant_condition_inlines_the_taken_branch_and_keeps_the_output_name():
    """The taken branch returns an outer input as it is, and its Constant comes along; nested
    constant Ifs inline too."""
    inner = mk("If", ["yes"], ["scaled"],
               then_branch=branch("in_then", [mk("Constant", [], ["k"], value_float=3.0),
                                              mk("Mul", ["x", "k"], ["m"])], "m"),
               else_branch=branch("in_else", [mk("Neg", ["x"], ["n"])], "n"))
    model = build([mk("If", ["no"], ["y"], then_branch=branch("then", [mk("Relu", ["x"], ["r"])], "r"),
                      else_branch=branch("else", [inner, mk("Add", ["scaled", "x"], ["s"])], "s")),
                   mk("If", ["yes"], ["z"], then_branch=branch("keep", [], "x"),
                      else_branch=branch("drop", [mk("Neg", ["x"], ["d"])], "d"))],
                  {"x": [2, 3]}, ["y", "z"], {"yes": np.array(True), "no": np.array([False])})
    graph = nnbridge.load(model)
    feeds = {"x": rand(2, 3)}
    want = run(graph, feeds)
    assert run_passes(graph, ["fold-branches", "eliminate"]) is graph
    assert "If" not in ops(graph) and "Neg" not in ops(graph) and "Relu" not in ops(graph)
    assert [v.name for v in graph.outputs] == ["y", "z"]
    assert_close(run(graph, feeds), want)
    np.testing.assert_allclose(want["y"], feeds["x"] * 4, rtol=1e-6)


def test_a_data_dependent_condition_keeps_its_if():
    model = build([mk("ReduceSum", ["x"], ["t"], keepdims=0), mk("Greater", ["t", "zero"], ["c"]),
                   mk("If", ["c"], ["y"], then_branch=branch("then", [mk("Relu", ["x"], ["r"])], "r"),
                      else_branch=branch("else", [mk("Neg", ["x"], ["n"])], "n"))],
                  {"x": [2, 3]}, ["y"], {"zero": np.array(0, np.float32)})
    graph = nnbridge.load(model)
    before = str(graph)
    assert get_pass("fold-branches").fn(graph) is False
    assert str(graph) == before
