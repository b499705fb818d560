"""Each pass on small hand-built graphs: the rewrite it must (or must not) make, and
the numbers still agree with onnxruntime on the original model."""

from __future__ import annotations

from collections import Counter

import numpy as np
import pytest
from onnx import helper
from passcheck import assert_close, build, count_ops, model_and_feeds, rand, run

import nnbridge
from nnbridge.ir import DType, Graph, Layout, TensorType
from nnbridge.passes import run_passes
from nnbridge.passes.cse import cse
from nnbridge.passes.fold_scale_axis import fold_scale_axis
from nnbridge.passes.infer_shapes import infer_shapes

mk = helper.make_node


def _check(model, passes, expect_changed=True):
    graph, feeds, want = model_and_feeds(model)
    before = str(graph)
    pm = run_passes(graph, passes)
    assert (str(pm) != before) == expect_changed
    assert_close(run(graph, feeds, passes=[]), want)
    return graph


def conv_model(tail: list, tail_inits: dict, out: str, channels: int = 4) -> object:
    nodes = [mk("Conv", ["x", "w", "b"], ["c"], pads=[1, 1, 1, 1])] + tail
    inits = {"w": rand(channels, 3, 3, 3), "b": rand(channels, seed=1), **tail_inits}
    return build(nodes, {"x": [1, 3, 8, 8]}, [out], inits)


# -- fold-constants ------------------------------------------------------------------

def test_fold_constants_evaluates_constant_subgraphs_and_static_shapes():
    model = build([mk("Add", ["c1", "c2"], ["c"]), mk("Mul", ["x", "c"], ["y"]),
                   mk("Shape", ["x"], ["s"]), mk("Cast", ["s"], ["sf"], to=1), mk("Add", ["v", "sf"], ["z"])],
                  {"x": [2, 3, 4, 5], "v": [4]}, ["y", "z"], {"c1": rand(5), "c2": rand(5, seed=3)})
    graph = _check(model, ["fold"])
    assert [n.op for n in graph.nodes] == ["Mul", "Add"]
    shape_const = graph.nodes[1].inputs[1].const
    np.testing.assert_array_equal(shape_const, [2, 3, 4, 5])


def test_fold_collapses_a_shape_gather_concat_reshape_chain():
    model = build([mk("Shape", ["x"], ["s"]), mk("Gather", ["s", "zero"], ["n"], axis=0),
                   mk("Unsqueeze", ["n", "axes"], ["n1"]), mk("Concat", ["n1", "rest"], ["shape"], axis=0),
                   mk("Reshape", ["x", "shape"], ["r"]), mk("Relu", ["r"], ["y"])], {"x": [2, 3, 4]}, ["y"],
                  {"zero": np.array(0, np.int64), "axes": np.array([0], np.int64), "rest": np.array([-1], np.int64)})
    graph = _check(model, ["fold"])
    assert [n.op for n in graph.nodes] == ["Reshape", "Relu"]
    np.testing.assert_array_equal(graph.nodes[0].inputs[1].const, [2, -1])


# -- recognize-norms -----------------------------------------------------------------


def _rms_nodes(form: str, opset: int = 17) -> tuple[list, dict]:
    """T5's and LLaMA's exported RMSNorm (x·(1/√(mean(x²)+ε))·w), the spec's Div(x, √…), or Reciprocal."""
    square = mk("Pow", ["x", "two"], ["sq"]) if form != "div" else mk("Mul", ["x", "x"], ["sq"])
    mean = (mk("ReduceMean", ["sq", "axes"], ["ms"], keepdims=1) if opset >= 18
            else mk("ReduceMean", ["sq"], ["ms"], axes=[-1], keepdims=1))
    head = [square, mean, mk("Add", ["ms", "eps"], ["mse"]), mk("Sqrt", ["mse"], ["rms"])]
    if form == "div":
        tail = [mk("Div", ["x", "rms"], ["y"])]
    elif form == "reciprocal":
        tail = [mk("Reciprocal", ["rms"], ["inv"]), mk("Mul", ["inv", "x"], ["y"])]
    else:
        tail = [mk("Div", ["one", "rms"], ["inv"]), mk("Mul", ["x", "inv"], ["normed"]),
                mk("Mul", ["w", "normed"], ["y"])]
    inits = {"two": np.float32(2), "eps": np.float32(1e-6), "one": np.float32(1), "w": rand(16, seed=2),
             "axes": np.array([-1], np.int64)}
    return head + tail, {k: v for k, v in inits.items() if any(k in n.input for n in head + tail)}


@pytest.mark.parametrize(("form", "opset"), [("t5", 17), ("t5", 18), ("div", 17), ("reciprocal", 18)])
def test_a_decomposed_rms_norm_becomes_one_rms_normalization(form, opset):
    nodes, inits = _rms_nodes(form, opset)  # the loader makes opset 17's axes a Constant: folded first
    graph = _check(build(nodes, {"x": [2, 5, 16]}, ["y"], inits, opset=opset), ["fold", "recognize-norms"])
    assert [n.op for n in graph.nodes] == ["RMSNormalization"]
    norm = graph.nodes[0]
    assert norm.attrs["axis"] == 2 and np.isclose(norm.attrs["epsilon"], 1e-6)
    np.testing.assert_array_equal(norm.inputs[1].const, inits["w"] if form == "t5" else np.ones(16, np.float32))


def test_rms_chains_that_are_not_rms_norms_stay():
    """An intermediate read elsewhere, a mean over a leading axis, a fourth power: no rewrite."""
    nodes, inits = _rms_nodes("div", 18)
    shared = build(nodes + [mk("Add", ["ms", "ms"], ["other"])], {"x": [2, 5, 16]}, ["y", "other"], inits, 18)
    _check(shared, ["recognize-norms"], expect_changed=False)
    _check(build(nodes, {"x": [2, 5, 16]}, ["y"], {**inits, "axes": np.array([1], np.int64)}, 18),
           ["recognize-norms"], expect_changed=False)
    nodes, inits = _rms_nodes("t5", 18)
    _check(build(nodes, {"x": [2, 5, 16]}, ["y"], {**inits, "two": np.float32(4)}, 18), ["recognize-norms"],
           expect_changed=False)


# -- cse -----------------------------------------------------------------------------

def test_cse_merges_repeated_nodes_and_their_chains():
    """A dynamic export's shape arithmetic, repeated per Reshape: the repeats go, chain and all."""
    chain = [mk("Shape", ["x"], ["s1"]), mk("Gather", ["s1", "zero"], ["n1"], axis=0),
             mk("Shape", ["x"], ["s2"]), mk("Gather", ["s2", "zero"], ["n2"], axis=0),
             mk("Gather", ["s2", "zero"], ["n3"], axis=0),
             mk("Unsqueeze", ["n1", "axes"], ["u1"]), mk("Unsqueeze", ["n2", "axes"], ["u2"]),
             mk("Concat", ["u1", "rest"], ["t1"], axis=0), mk("Concat", ["u2", "rest"], ["t2"], axis=0),
             mk("Reshape", ["x", "t1"], ["r1"]), mk("Reshape", ["x", "t2"], ["r2"]),
             mk("Add", ["r1", "r2"], ["y"]), mk("Unsqueeze", ["n3", "axes"], ["u3"]),
             mk("Concat", ["u3", "rest"], ["t3"], axis=-1),  # another attribute: kept
             mk("Reshape", ["x", "t3"], ["r3"]), mk("Add", ["y", "r3"], ["z"])]
    model = build(chain, {"x": [2, 3, 4]}, ["z"],
                  {"zero": np.array(0, np.int64), "axes": np.array([0], np.int64), "rest": np.array([-1], np.int64)})
    graph = _check(model, ["cse"])
    assert Counter(n.op for n in graph.nodes) == {"Shape": 1, "Gather": 1, "Unsqueeze": 1, "Concat": 2,
                                                  "Reshape": 2, "Add": 2}
    assert not cse(graph)


def test_cse_keeps_random_ops_and_returned_outputs_apart():
    model = build([mk("RandomUniformLike", ["x"], ["a"], seed=1.0), mk("RandomUniformLike", ["x"], ["b"], seed=1.0),
                   mk("Relu", ["x"], ["c"]), mk("Relu", ["x"], ["d"]), mk("Add", ["a", "b"], ["y"])],
                  {"x": [2, 3]}, ["y", "c", "d"])
    graph = nnbridge.load(model)
    assert not cse(graph)
    assert Counter(n.op for n in graph.nodes) == {"RandomUniformLike": 2, "Relu": 2, "Add": 1}


# -- eliminate -----------------------------------------------------------------------

def test_eliminate_drops_identity_dropout_and_unit_ops_keeping_output_names():
    model = build([mk("Identity", ["x"], ["a"]), mk("Mul", ["a", "one"], ["b"]), mk("Relu", ["b"], ["r"]),
                   mk("Dropout", ["r"], ["y"])], {"x": [2, 5]}, ["y"], {"one": np.ones(5, np.float32)})
    graph = _check(model, ["eliminate"])
    assert [n.op for n in graph.nodes] == ["Relu"]
    assert graph.outputs[0].name == "y" and graph.nodes[0].outputs[0] is graph.outputs[0]


def test_eliminate_keeps_a_broadcasting_unit_op():
    model = build([mk("Mul", ["x", "one"], ["y"])], {"x": [1, 5]}, ["y"], {"one": np.ones((3, 5), np.float32)})
    _check(model, ["eliminate"], expect_changed=False)


# -- simplify-inference ----------------------------------------------------------------

def _bn_inits(c: int) -> dict:
    return {"g": rand(c, seed=4), "be": rand(c, seed=5), "m": rand(c, seed=6), "v": rand(c, seed=7, low=0.1)}


def test_batchnorm_after_conv_folds_into_its_weights():
    model = conv_model([mk("BatchNormalization", ["c", "g", "be", "m", "v"], ["n"]), mk("Relu", ["n"], ["y"])],
                       _bn_inits(4), "y")
    graph = _check(model, ["simplify"])
    assert [n.op for n in graph.nodes] == ["Conv", "Relu"]


def test_batchnorm_without_foldable_producer_becomes_scale_and_shift():
    model = build([mk("Relu", ["x"], ["r"]), mk("BatchNormalization", ["r", "g", "be", "m", "v"], ["y"])],
                  {"x": [2, 4, 3, 3]}, ["y"], _bn_inits(4))
    graph = _check(model, ["simplify"])
    assert [n.op for n in graph.nodes] == ["Relu", "Mul", "Add"]
    assert graph.outputs[0].name == "y"


@pytest.mark.parametrize("op", ["Gemm", "MatMul"])
def test_batchnorm_after_fully_connected_folds(op):
    model = build([mk(op, ["x", "w"], ["f"]), mk("BatchNormalization", ["f", "g", "be", "m", "v"], ["y"])],
                  {"x": [2, 6]}, ["y"], {"w": rand(6, 5), **_bn_inits(5)})
    graph = _check(model, ["simplify"])
    assert count_ops(graph, "BatchNormalization") == 0 and count_ops(graph, "Mul") == 0


# -- fold-scale-axis -----------------------------------------------------------------------

def test_scale_folds_through_bias_add_and_relu_into_conv():
    scale = np.abs(rand(4, 1, 1, seed=9)) + 0.1
    model = conv_model([mk("Add", ["c", "bias"], ["a"]), mk("Relu", ["a"], ["r"]), mk("Mul", ["r", "s"], ["y"])],
                       {"bias": rand(4, 1, 1, seed=8), "s": scale}, "y")
    graph = _check(model, ["fold-scale-axis"])
    assert count_ops(graph, "Mul") == 0


def test_negative_scale_is_not_moved_through_relu():
    """NNVM's sign bug: relu(x)·s ≠ relu(x·s) for s < 0 — the Mul must stay."""
    model = conv_model([mk("Relu", ["c"], ["r"]), mk("Mul", ["r", "s"], ["y"])],
                       {"s": np.array([-1, 2], np.float32).reshape(2, 1, 1)}, "y", channels=2)
    graph, feeds, want = model_and_feeds(model)
    assert fold_scale_axis(graph) is False
    assert count_ops(graph, "Mul") == 1
    assert_close(run(graph, feeds, passes=[]), want)


def test_negative_scale_directly_after_conv_folds():
    model = conv_model([mk("Mul", ["c", "s"], ["y"])], {"s": np.array([-1, 2], np.float32).reshape(2, 1, 1)},
                       "y", channels=2)
    graph = _check(model, ["fold-scale-axis"])
    assert [n.op for n in graph.nodes] == ["Conv"]


# -- infer-shapes -------------------------------------------------------------------------

def test_infer_shapes_recovers_types_and_keeps_symbolic_dims():
    model = build([mk("Add", ["x", "c"], ["a"]), mk("Relu", ["a"], ["y"])], {"x": ["N", 3]}, ["y"],
                  {"c": rand(3)})
    graph = nnbridge.load(model)
    expected = [str(n.outputs[0].type) for n in graph.nodes]
    for n in graph.nodes:
        n.outputs[0].type = TensorType()
    assert infer_shapes(graph) is True
    assert [str(n.outputs[0].type) for n in graph.nodes] == expected == ["float32[N,3] NC"] * 2
    assert infer_shapes(graph) is False


def test_infer_shapes_understands_nhwc_and_reorder():
    model = conv_model([mk("MaxPool", ["c"], ["y"], kernel_shape=[2, 2], strides=[2, 2])], {}, "y")
    graph, _, _ = model_and_feeds(model)
    run_passes(graph, ["layout-nhwc"])
    pool = next(n for n in graph.nodes if n.op == "MaxPool")
    assert pool.outputs[0].type.shape == (1, 4, 4, 4) and pool.outputs[0].type.layout is Layout.NHWC
    assert infer_shapes(graph) is False  # the layout pass left consistent types


def test_batchnorm_after_batched_matmul_is_not_folded_into_its_columns():
    """On [B, T, N] the BN channel axis is T; B's columns are N (equal sizes here on purpose)."""
    model = build([mk("MatMul", ["x", "w"], ["f"]), mk("BatchNormalization", ["f", "g", "be", "m", "v"], ["y"])],
                  {"x": [2, 3, 6]}, ["y"], {"w": rand(6, 3), **_bn_inits(3)})
    graph = _check(model, ["simplify"])
    assert [n.op for n in graph.nodes] == ["MatMul", "Mul", "Add"]


# -- recognize-activations ------------------------------------------------------------

_SQRT2 = np.float32(np.sqrt(2))


def _gelu_nodes(order: str) -> tuple[list, dict]:
    """torch.onnx.export's GELU: x·0.5·(1+erf(x/√2)) in both orders of multiplication, or with x·(1/√2)."""
    scale = mk("Div", ["x", "sqrt2"], ["s"]) if order != "mul-scale" else mk("Mul", ["x", "inv_sqrt2"], ["s"])
    head = [scale, mk("Erf", ["s"], ["e"]), mk("Add", ["e", "one"], ["p"])]
    if order == "half-last":
        tail = [mk("Mul", ["x", "p"], ["xp"]), mk("Mul", ["xp", "half"], ["y"])]
    else:
        tail = [mk("Mul", ["x", "half"], ["xh"]), mk("Mul", ["xh", "p"], ["y"])]
    inits = {"sqrt2": _SQRT2, "inv_sqrt2": np.float32(1 / np.sqrt(2)), "one": np.float32(1), "half": np.float32(0.5)}
    return head + tail, inits


@pytest.mark.parametrize("order", ["half-last", "half-first", "mul-scale"])
def test_decomposed_gelu_becomes_one_gelu(order):
    nodes, inits = _gelu_nodes(order)
    used = {k: v for k, v in inits.items() if any(k in n.input for n in nodes)}
    graph = _check(build(nodes, {"x": [3, 7]}, ["y"], used), ["recognize-activations"])
    assert [n.op for n in graph.nodes] == ["Gelu"]


def _tanh_gelu_nodes(order: str, cube: str) -> tuple[list, dict]:
    """GPT-2's GELU, x·0.5·(1 + tanh(√(2/π)·(x + 0.044715·x³))), as HF's export writes it (x³ a Pow)
    or with x³ as products, in both orders of the last multiplications."""
    cubed = ([mk("Pow", ["x", "three"], ["x3"])] if cube == "pow" else
             [mk("Mul", ["x", "x"], ["x2"]), mk("Mul", ["x2", "x"] if cube == "mul" else ["x", "x2"], ["x3"])])
    head = cubed + [mk("Mul", ["x3", "kappa"], ["k"]), mk("Add", ["x", "k"], ["inner"]),
                    mk("Mul", ["inner", "beta"], ["s"]), mk("Tanh", ["s"], ["t"]), mk("Add", ["t", "one"], ["p"])]
    if order == "half-last":
        tail = [mk("Mul", ["x", "p"], ["xp"]), mk("Mul", ["xp", "half"], ["y"])]
    else:
        tail = [mk("Mul", ["x", "half"], ["xh"]), mk("Mul", ["xh", "p"], ["y"])]
    inits = {"three": np.float32(3), "kappa": np.float32(0.044715), "beta": np.float32(np.sqrt(2 / np.pi)),
             "one": np.float32(1), "half": np.float32(0.5)}
    return head + tail, {k: v for k, v in inits.items() if any(k in n.input for n in head + tail)}


@pytest.mark.parametrize("cube", ["pow", "mul", "mul-swapped"])
@pytest.mark.parametrize("order", ["half-last", "half-first"])
def test_decomposed_tanh_gelu_becomes_one_tanh_gelu(order, cube):
    nodes, inits = _tanh_gelu_nodes(order, cube)
    graph = _check(build(nodes, {"x": [3, 7]}, ["y"], inits), ["recognize-activations"])
    assert [(n.op, n.attr("approximate", "none")) for n in graph.nodes] == [("Gelu", "tanh")]


def test_a_tanh_chain_with_another_coefficient_is_not_gelu():
    nodes, inits = _tanh_gelu_nodes("half-first", "pow")
    inits["kappa"] = np.float32(0.05)
    graph = _check(build(nodes, {"x": [3, 7]}, ["y"], inits), ["recognize-activations"], expect_changed=False)
    assert count_ops(graph, "Gelu") == 0


def test_silu_becomes_swish_in_either_operand_order():
    model = build([mk("Sigmoid", ["x"], ["g"]), mk("Mul", ["g", "x"], ["y"]),
                   mk("Sigmoid", ["y"], ["g2"]), mk("Mul", ["y", "g2"], ["z"])], {"x": [4, 5]}, ["z"])
    graph = _check(model, ["recognize-activations"])
    assert [n.op for n in graph.nodes] == ["Swish", "Swish"]


def test_activation_chains_whose_intermediates_are_read_elsewhere_stay():
    nodes, inits = _gelu_nodes("half-last")
    nodes.append(mk("Add", ["e", "x"], ["other"]))  # the Erf output has a second reader
    model = build(nodes + [mk("Sigmoid", ["x"], ["g"]), mk("Mul", ["x", "g"], ["z"])], {"x": [3, 7]},
                  ["y", "other", "z", "g"], {k: inits[k] for k in ("sqrt2", "one", "half")})
    graph = _check(model, ["recognize-activations"], expect_changed=False)
    assert count_ops(graph, "Gelu") == count_ops(graph, "Swish") == 0


def test_a_scale_other_than_one_half_is_not_gelu():
    nodes, inits = _gelu_nodes("half-last")
    inits["half"] = np.float32(0.25)
    graph = _check(build(nodes, {"x": [3, 7]}, ["y"], {k: inits[k] for k in ("sqrt2", "one", "half")}),
                   ["recognize-activations"], expect_changed=False)
    assert count_ops(graph, "Gelu") == 0


def test_fold_reaches_into_loop_bodies():
    from onnx import TensorProto

    body = helper.make_graph(
        [mk("Constant", [], ["k"], value=helper.make_tensor("kv", TensorProto.FLOAT, [2], [1.0, 2.0])),
         mk("Mul", ["k", "k"], ["k2"]), mk("Add", ["s_in", "k2"], ["s_out"]), mk("Identity", ["c"], ["c_out"])],
        "body", [helper.make_tensor_value_info("i", TensorProto.INT64, []),
                 helper.make_tensor_value_info("c", TensorProto.BOOL, []),
                 helper.make_tensor_value_info("s_in", TensorProto.FLOAT, [2])],
        [helper.make_tensor_value_info("c_out", TensorProto.BOOL, []),
         helper.make_tensor_value_info("s_out", TensorProto.FLOAT, [2])])
    model = build([mk("Loop", ["trips", "", "x"], ["y"], body=body)], {"x": [2]}, ["y"],
                  {"trips": np.array(3, np.int64)})
    graph = _check(model, ["fold"])
    assert [n.op for n in graph.nodes[0].attr("body").nodes] == ["Add", "Identity"]


@pytest.mark.parametrize("op, shapes, attrs", [
    ("Transpose", [(2, 3, 4)], {}), ("Transpose", [(2, 3, 4, 5)], {"perm": [0, 2, 3, 1]}),
    ("Transpose", [(7,)], {}), ("Transpose", [(2, 3)], {"perm": [0, 0]}),
    ("MatMul", [(2, 3), (3, 4)], {}), ("MatMul", [(5, 1, 2, 3), (4, 3, 6)], {}), ("MatMul", [(3,), (3,)], {}),
    ("MatMul", [(3,), (2, 3, 4)], {}), ("MatMul", [(2, 3, 4), (4,)], {}), ("MatMul", [(2, 3), (4, 5)], {}),
    ("MatMul", [(2, 2, 3), (3, 3, 4)], {}),
])
def test_the_tables_transpose_and_matmul_shape_rules_agree_with_onnxs_inference(op, shapes, attrs):
    """The fast rules stand in for onnx's per-node inference: the same shape, or no answer where
    onnx refuses the node (so onnx still says what is wrong)."""
    from nnbridge.passes.infer_shapes import _fast_rule, _onnx_infer

    graph = Graph("g")
    inputs = [graph.add_input(f"x{i}", TensorType(DType.FLOAT32, s)) for i, s in enumerate(shapes)]
    node = graph.add_node(op, inputs, 1, attrs)
    fast = _fast_rule(node)
    try:
        onnx_says = _onnx_infer(node, [v.type for v in inputs])
    except Exception:
        onnx_says = None
    if onnx_says is None or onnx_says[0] is None or onnx_says[0].shape is None:
        assert fast is None
    else:
        assert fast is not None and fast[0].shape == onnx_says[0].shape and fast[0].dtype is onnx_says[0].dtype


def test_cse_leaves_no_repeat_in_the_dynamic_bert_fixture():
    """Counting work: the reference plan of the dynamic-shape BERT fixture runs each of its shape
    computations once (116 steps before cse, 96 with it)."""
    from architecture_fixtures import load

    from nnbridge.passes.cse import _key

    path, _ = load("bert-dynamic")
    exe = nnbridge.compile(str(path), backend="reference")
    keys = [_key(node, {}) for node in exe.graph.nodes]
    repeated = [k for k in keys if k is not None and keys.count(k) > 1]
    assert not repeated
    assert len(exe.plan.steps) <= 96
