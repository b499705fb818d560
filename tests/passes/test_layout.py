"""Layout passes: Reorders only at graph inputs/outputs, NHWC weights, flatten weight
permutation, transpose cancelling — and a round trip NHWC → NCHW keeps the numbers."""

from __future__ import annotations

import numpy as np
from onnx import helper
from passcheck import assert_close, build, count_ops, model_and_feeds, rand, run

from nnbridge.ir import Layout
from nnbridge.passes import run_passes
from nnbridge.passes.layout import layout_nhwc
from nnbridge.passes.transposes import cancel_transposes

mk = helper.make_node


def _conv(x, w, y):
    return mk("Conv", [x, w], [y], pads=[1, 1, 1, 1])


def _nhwc(model):
    graph, feeds, want = model_and_feeds(model)
    assert layout_nhwc(graph) is True
    assert layout_nhwc(graph) is False  # idempotent
    return graph, feeds, want


def test_plain_cnn_gets_one_reorder_at_the_input_and_one_at_the_output():
    model = build([_conv("x", "w1", "c"), mk("Relu", ["c"], ["r"]),
                   mk("MaxPool", ["r"], ["p"], kernel_shape=[2, 2], strides=[2, 2]), _conv("p", "w2", "y")],
                  {"x": [1, 3, 8, 8]}, ["y"], {"w1": rand(4, 3, 3, 3), "w2": rand(5, 4, 3, 3, seed=1)})
    graph, feeds, want = _nhwc(model)
    assert count_ops(graph, "Reorder") == 2
    assert graph.metadata["nnbridge.reorders"] == "2"
    convs = [n for n in graph.nodes if n.op == "Conv"]
    assert [c.inputs[1].const.shape for c in convs] == [(4, 3, 3, 3), (5, 3, 3, 4)]  # [K, kH, kW, C]
    assert all(c.outputs[0].type.layout is Layout.NHWC for c in convs)
    assert graph.outputs[0].name == "y" and graph.outputs[0].type.shape == (1, 5, 4, 4)
    assert_close(run(graph, feeds), want)  # back to NCHW for the reference kernels; pairs cancel
    back = graph.copy()
    run_passes(back, ["layout-nchw", "cancel-transposes"])
    assert count_ops(back, "Reorder") == 0


def test_flatten_keeps_nhwc_order_and_permutes_the_fc_weights():
    for op, attrs, w in (("Gemm", {"transB": 1}, rand(10, 64)), ("MatMul", {}, rand(64, 10))):
        model = build([_conv("x", "w1", "c"), mk("Relu", ["c"], ["r"]), mk("Flatten", ["r"], ["f"]),
                       mk(op, ["f", "fc"], ["y"], **attrs)], {"x": [1, 3, 4, 4]}, ["y"],
                      {"w1": rand(4, 3, 3, 3), "fc": w})
        graph, feeds, want = _nhwc(model)
        assert count_ops(graph, "Reorder") == 1  # the graph input only: none at the flatten
        fc = next(n for n in graph.nodes if n.op == op)
        assert not np.array_equal(fc.inputs[1].const, w)
        assert_close(run(graph, feeds), want)


def test_concat_batchnorm_and_constants_follow_the_layout():
    c = 4
    model = build([_conv("x", "w1", "a"), _conv("x", "w2", "b"), mk("Concat", ["a", "b"], ["cat"], axis=1),
                   mk("BatchNormalization", ["cat", "g", "be", "m", "v"], ["n"]), mk("Add", ["n", "k"], ["s"]),
                   mk("GlobalAveragePool", ["s"], ["y"])], {"x": [1, 3, 6, 6]}, ["y"],
                  {"w1": rand(c, 3, 3, 3), "w2": rand(c, 3, 3, 3, seed=1), "g": rand(2 * c), "be": rand(2 * c),
                   "m": rand(2 * c), "v": rand(2 * c, low=0.2), "k": rand(2 * c, 1, 1, seed=5)})
    graph, feeds, want = _nhwc(model)
    assert count_ops(graph, "Reorder") == 2
    concat = next(n for n in graph.nodes if n.op == "Concat")
    assert concat.attrs["axis"] == 3
    assert_close(run(graph, feeds), want)


def test_a_layout_sensitive_reader_gets_the_original_layout_back():
    model = build([_conv("x", "w1", "c"), mk("Relu", ["c"], ["r"]), mk("ReduceSum", ["r", "axes"], ["y"], keepdims=0)],
                  {"x": [1, 3, 4, 4]}, ["y"], {"w1": rand(4, 3, 3, 3), "axes": np.array([1], np.int64)})
    graph, feeds, want = _nhwc(model)
    reduce = next(n for n in graph.nodes if n.op == "ReduceSum")
    assert reduce.inputs[0].producer.op == "Reorder"
    assert reduce.inputs[0].type.layout is Layout.NCHW


def test_inverse_transposes_cancel_through_elementwise_ops():
    model = build([mk("Transpose", ["x"], ["t"], perm=[0, 2, 3, 1]), mk("Relu", ["t"], ["r"]),
                   mk("Transpose", ["r"], ["y"], perm=[0, 3, 1, 2])], {"x": [1, 3, 4, 5]}, ["y"])
    graph, feeds, want = model_and_feeds(model)
    assert cancel_transposes(graph) is True
    assert [n.op for n in graph.nodes] == ["Relu"] and graph.outputs[0].name == "y"
    assert cancel_transposes(graph) is False
    assert_close(run(graph, feeds, passes=[]), want)


def test_consecutive_transposes_compose():
    model = build([mk("Transpose", ["x"], ["t"], perm=[0, 2, 3, 1]), mk("Transpose", ["t"], ["y"], perm=[0, 2, 3, 1])],
                  {"x": [1, 3, 4, 5]}, ["y"])
    graph, _, _ = model_and_feeds(model)
    assert cancel_transposes(graph) is True
    assert [(n.op, n.attrs["perm"]) for n in graph.nodes] == [("Transpose", [0, 3, 1, 2])]


def test_reorder_and_repeat_export_to_standard_onnx():
    from nnbridge.check import run_onnxruntime
    from nnbridge.converters.onnx import graph_to_model, lowering  # noqa: F401 - registers the exporters
    from nnbridge.ir import DType, Graph, TensorType

    graph = Graph("lowering")
    x = graph.add_input("x", TensorType(DType.FLOAT32, (1, 3, 2, 4), Layout.NCHW))
    r = graph.add_node("Reorder", [x], domain="nnbridge",
                       attrs={"perm": [0, 2, 3, 1], "src_layout": "NCHW", "dst_layout": "NHWC"})
    t = graph.add_node("Repeat", r.outputs, domain="nnbridge", attrs={"multiples": [1, 2, 1, 3]})
    graph.outputs.append(t.outputs[0])
    run_passes(graph, ["infer-shapes"])
    assert t.outputs[0].type.shape == (1, 4, 4, 9) and r.outputs[0].type.layout is Layout.NHWC
    exported = graph_to_model(graph)
    assert [n.op_type for n in exported.graph.node] == ["Transpose", "Constant", "Tile"]
    feeds = {"x": np.arange(24, dtype=np.float32).reshape(1, 3, 2, 4)}
    want = np.tile(feeds["x"].transpose(0, 2, 3, 1), (1, 2, 1, 3))
    assert_close(run_onnxruntime(exported, feeds), {t.outputs[0].name: want})
    assert_close(run(graph, feeds, passes=[]), {t.outputs[0].name: want})
