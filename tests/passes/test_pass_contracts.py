"""Contracts every registered pass keeps: idempotent, never corrupts an op it does not
know, switchable one by one out of every pipeline."""

from __future__ import annotations

import numpy as np
import pytest
from onnx import helper
from passcheck import BACKENDS, assert_close, build, model_and_feeds, pipeline_for, rand, run

import nnbridge
from nnbridge.ir import Graph
from nnbridge.passes import available_passes, run_passes

mk = helper.make_node
PASSES = sorted(available_passes())


def _mixed_model():
    """Conv-BN-ReLU-pool, a scale, a no-op, transposes and a flatten into a Gemm."""
    c = 4
    return build([
        mk("Conv", ["x", "w", "b"], ["c"], pads=[1, 1, 1, 1]),
        mk("BatchNormalization", ["c", "g", "be", "m", "v"], ["n"]), mk("Relu", ["n"], ["r"]),
        mk("Mul", ["r", "s"], ["ms"]), mk("Identity", ["ms"], ["i"]),
        mk("MaxPool", ["i"], ["p"], kernel_shape=[2, 2], strides=[2, 2]),
        mk("Transpose", ["p"], ["t"], perm=[0, 2, 3, 1]), mk("Sigmoid", ["t"], ["sg"]),
        mk("Transpose", ["sg"], ["u"], perm=[0, 3, 1, 2]),
        mk("Shape", ["u"], ["sh"]), mk("Cast", ["sh"], ["shf"], to=1),
        mk("Conv", ["u", "w2"], ["c2"]), mk("Add", ["c2", "shf"], ["y"]),
    ], {"x": [1, 3, 8, 8]}, ["y"], {
        "w": rand(c, 3, 3, 3), "b": rand(c), "g": rand(c), "be": rand(c), "m": rand(c), "v": rand(c, low=0.2),
        "s": np.abs(rand(c, 1, 1)) + 0.5, "w2": rand(2, c, 1, 1, seed=3)})


@pytest.mark.parametrize("name", PASSES)
def test_each_pass_alone_keeps_the_numbers_and_is_idempotent(name):
    graph, feeds, want = model_and_feeds(_mixed_model())
    run_passes(graph, [name])
    snapshot = str(graph)
    assert available_passes()[name].fn(graph) is False, f"{name} changed the graph a second time"
    assert str(graph) == snapshot
    assert_close(run(graph, feeds), want)


def _with_unknown_op() -> Graph:
    model = build([mk("Conv", ["x", "w"], ["c"], pads=[1, 1, 1, 1]), mk("Relu", ["c"], ["r"]),
                   mk("Mystery", ["r", "k"], ["m"], domain="com.example", colour="blue"),
                   mk("Identity", ["m"], ["y"])], {"x": [1, 3, 4, 4]}, ["y"],
                  {"w": rand(2, 3, 3, 3), "k": rand(2)})
    model.opset_import.append(helper.make_opsetid("com.example", 1))
    return nnbridge.load(model)


@pytest.mark.parametrize("name", PASSES)
def test_a_pass_leaves_an_unknown_op_alone(name):
    graph = _with_unknown_op()
    run_passes(graph, [name])  # verifies the IR after the pass
    mystery = [n for n in graph.nodes if n.op == "Mystery"]
    assert len(mystery) == 1 and mystery[0].domain == "com.example" and mystery[0].attrs == {"colour": "blue"}
    assert mystery[0].inputs[1].name == "k" and mystery[0].inputs[0].type.shape == (1, 2, 4, 4)
    assert mystery[0].outputs[0].type == _with_unknown_op().values["m"].type


@pytest.mark.parametrize("backend", BACKENDS)
@pytest.mark.parametrize("level", [0, 1, 2, 3])
def test_pipelines_name_only_registered_passes(backend, level):
    assert set(pipeline_for(backend, level)) <= set(PASSES)


@pytest.mark.parametrize("level", [1, 3])
def test_every_pass_can_be_switched_off(level):
    graph, feeds, want = model_and_feeds(_mixed_model())
    full = pipeline_for("reference", level)
    for name in dict.fromkeys(full):
        exe = nnbridge.compile(graph, "reference", passes=[p for p in full if p != name] + ["layout-nchw"])
        assert_close(exe.run(feeds), want)


def test_a_crashing_pass_is_named_with_the_passes_before_it():
    from nnbridge.passes import PASSES, PassError, register_pass

    @register_pass("test-crash")
    def crash(graph: Graph) -> bool:
        raise KeyError("no such value")

    try:
        graph = _with_unknown_op()
        with pytest.raises(PassError, match=r"pass 'test-crash' \(after infer-shapes, eliminate\) crashed: "
                                            r"KeyError: 'no such value'") as caught:
            run_passes(graph, ["infer-shapes", "eliminate", "test-crash"])
        assert caught.value.pass_name == "test-crash" and caught.value.before == ("infer-shapes", "eliminate")
    finally:
        PASSES.unregister("test-crash")


def test_a_pass_that_breaks_what_it_ensures_is_named():
    from nnbridge.passes import PASSES, PassError, register_pass

    @register_pass("test-no-op", ensures=[lambda g: "a Relu is still there" if any(
        n.op == "Relu" for n in g.nodes) else None])
    def no_op(graph: Graph) -> bool:
        return False

    try:
        with pytest.raises(PassError, match=r"pass 'test-no-op' \(as the first pass\) broke its promise: "
                                            r"a Relu is still there"):
            run_passes(_with_unknown_op(), ["test-no-op"])
        run_passes(_with_unknown_op(), ["test-no-op"], verify=False)  # postconditions are checked when verifying
    finally:
        PASSES.unregister("test-no-op")


def test_eliminate_ensures_no_dead_node_is_left():
    from nnbridge.passes.eliminate import _no_dead_node

    graph = _with_unknown_op()
    run_passes(graph, ["eliminate"])
    assert _no_dead_node(graph) is None
    graph.add_node("Relu", [graph.inputs[0]], name="orphan")
    assert _no_dead_node(graph) == "1 dead node(s) left, first 'orphan' (Relu)"
