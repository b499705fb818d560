"""FuseOps test vectors (specs/passes.md §2.2) and memory planning on small graphs."""

from __future__ import annotations

import numpy as np
from onnx import helper
from passcheck import assert_close, build, count_ops, model_and_feeds, rand, run

from nnbridge.passes.fuse import fuse_ops, partition
from nnbridge.passes.plan_memory import live_peak_bytes, plan_memory

mk = helper.make_node


def _conv(x: str, w: str, y: str):
    return mk("Conv", [x, w], [y], pads=[1, 1, 1, 1])


INITS = {"w1": rand(4, 3, 3, 3), "w2": rand(4, 4, 3, 3, seed=2), "bias": rand(4, 1, 1, seed=3)}


def _groups(model, max_depth: int = 256) -> list[list[str]]:
    graph, _, _ = model_and_feeds(model)
    return sorted(sorted(n.op for n in g) for g in partition(graph, max_depth))


def test_conv_bias_relu_is_one_group_and_runs_as_one_kernel():
    model = build([_conv("x", "w1", "c"), mk("Add", ["c", "bias"], ["a"]), mk("Relu", ["a"], ["y"])],
                  {"x": [1, 3, 8, 8]}, ["y"], INITS)
    assert _groups(model) == [["Add", "Conv", "Relu"]]
    graph, feeds, want = model_and_feeds(model)
    assert fuse_ops(graph) is True
    assert [n.op for n in graph.nodes] == ["Fused"]
    fused = graph.nodes[0]
    assert fused.attr("anchor") == "Conv" and fused.attr("kind") == "out_elemwise_fusable"
    assert "nnbridge.Fused" in str(graph) and "Conv(" in str(graph)  # the IR shows the group's body
    assert_close(run(graph, feeds, passes=[]), want)
    assert fuse_ops(graph) is False  # idempotent


def test_two_convs_never_share_a_group():
    model = build([_conv("x", "w1", "c"), mk("Relu", ["c"], ["r"]), _conv("r", "w2", "d"), mk("Relu", ["d"], ["y"])],
                  {"x": [1, 3, 8, 8]}, ["y"], INITS)
    assert _groups(model) == [["Conv", "Relu"], ["Conv", "Relu"]]


def test_diamond_fuses_into_one_group():
    model = build([_conv("x", "w1", "c"), mk("Relu", ["c"], ["r"]), mk("Sigmoid", ["c"], ["s"]),
                   mk("Add", ["r", "s"], ["y"])], {"x": [1, 3, 8, 8]}, ["y"], INITS)
    assert _groups(model) == [["Add", "Conv", "Relu", "Sigmoid"]]
    graph, feeds, want = model_and_feeds(model)
    fuse_ops(graph)
    assert len(graph) == 1
    assert_close(run(graph, feeds, passes=[]), want)


def test_reshape_stops_conv_fusion_then_fuses_with_relu():
    model = build([_conv("x", "w1", "c"), mk("Reshape", ["c", "shape"], ["r"]), mk("Relu", ["r"], ["q"]),
                   _conv("q", "w2", "y")], {"x": [1, 3, 8, 8]}, ["y"],
                  {**INITS, "shape": np.array([1, 4, 4, 16], np.int64)})
    assert _groups(model) == [["Conv"], ["Conv"], ["Relu", "Reshape"]]


def test_value_read_outside_the_post_dominated_region_stays_materialised():
    model = build([_conv("x", "w1", "c"), mk("Relu", ["c"], ["y1"]), mk("Sigmoid", ["c"], ["s"]),
                   mk("Add", ["s", "bias"], ["y2"])], {"x": [1, 3, 8, 8]}, ["y1", "y2"], INITS)
    assert _groups(model) == [["Add", "Sigmoid"], ["Conv"], ["Relu"]]


def test_max_depth_one_disables_fusion():
    model = build([_conv("x", "w1", "c"), mk("Add", ["c", "bias"], ["a"]), mk("Relu", ["a"], ["y"])],
                  {"x": [1, 3, 8, 8]}, ["y"], INITS)
    assert _groups(model, max_depth=1) == [["Add"], ["Conv"], ["Relu"]]
    graph, _, _ = model_and_feeds(model)
    assert fuse_ops(graph, max_depth=1) is False and count_ops(graph, "Fused") == 0


def test_fused_graph_exports_to_onnx_inlined():
    from nnbridge.check import run_onnxruntime
    from nnbridge.converters.onnx import graph_to_model, lowering  # noqa: F401 - registers the exporters

    model = build([_conv("x", "w1", "c"), mk("Add", ["c", "bias"], ["a"]), mk("Relu", ["a"], ["y"])],
                  {"x": [1, 3, 8, 8]}, ["y"], INITS)
    graph, feeds, want = model_and_feeds(model)
    fuse_ops(graph)
    exported = graph_to_model(graph)
    assert [n.op_type for n in exported.graph.node] == ["Conv", "Add", "Relu"]
    assert_close(run_onnxruntime(exported, feeds), want)


# -- memory -------------------------------------------------------------------------------

def _chain():
    return build([_conv("x", "w1", "a"), mk("Relu", ["a"], ["b"]), mk("Conv", ["b", "w3"], ["c"]),
                  mk("Sigmoid", ["c"], ["y"])], {"x": [1, 3, 16, 16]}, ["y"],
                 {"w1": rand(8, 3, 3, 3), "w3": rand(2, 8, 1, 1)})


def test_linear_chain_peak_is_the_two_largest_adjacent_tensors():
    graph, _, _ = model_and_feeds(_chain())
    plan = plan_memory(graph)
    a, c = 8 * 16 * 16 * 4, 2 * 16 * 16 * 4  # relu and sigmoid run in place
    assert plan.total_bytes == a + c
    assert plan.inplace == {"b": "a", "y": "c"}
    assert plan.total_bytes <= plan.unshared_bytes == 2 * a + 2 * c
    assert live_peak_bytes(graph) == 2 * a  # relu's input and output, without in-place reuse


def test_plan_memory_records_metadata_and_is_idempotent():
    from nnbridge.passes.plan_memory import plan_memory_pass

    graph, _, _ = model_and_feeds(_chain())
    assert plan_memory_pass(graph) is True
    assert graph.metadata["nnbridge.peak_activation_bytes"] == str(8 * 16 * 16 * 4 + 2 * 16 * 16 * 4)
    assert plan_memory_pass(graph) is False
