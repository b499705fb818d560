"""Every gradient rule against float64 central differences (relative error ≤ 1e-6): a one-op
graph, the loss Σ w·op(x) with random w, the autodiff gradient versus (L(x+ε) − L(x−ε)) / 2ε."""

from __future__ import annotations

import numpy as np
import pytest
from onnx import TensorProto, helper, numpy_helper

import nnbridge
from nnbridge.base.errors import UnsupportedOpError
from nnbridge.passes import run_passes
from nnbridge.passes.autodiff import gradients, training_form

D = TensorProto.DOUBLE


def _model(nodes, inputs, out_shape, extra_inits=(), seed=0):
    rng = np.random.default_rng(seed + 1000)  # unlike any input (_normal seeds 0–9)
    weights = numpy_helper.from_array(rng.normal(size=out_shape), "loss_weights")
    nodes = [*nodes, helper.make_node("Mul", ["y", "loss_weights"], ["m"]),
             helper.make_node("ReduceSum", ["m"], ["loss"], keepdims=0)]
    infos = [helper.make_tensor_value_info(n, D if a.dtype == np.float64 else TensorProto.INT64, list(a.shape))
             for n, a in inputs.items()]
    graph = helper.make_graph(nodes, "rule", infos, [helper.make_tensor_value_info("loss", D, [])],
                              [weights, *extra_inits])
    return helper.make_model(graph, opset_imports=[helper.make_opsetid("", 21)])


def _worst_error(model, feeds, wrt, training=False, masks=None, eps=1e-6):
    graph = nnbridge.load(model)
    run_passes(graph, ["infer-shapes"])
    form = training_form(graph) if training else None
    extra = {name: masks for name in form.masks} if form and masks is not None else {}
    grads = gradients(graph, graph.outputs[0], [graph.get(n) for n in wrt])
    graph.outputs[:] = [graph.outputs[0], *grads.values()]
    exe = nnbridge.compile(graph, backend="reference", passes=[])
    result = exe.run({**feeds, **extra})
    got = {n: result[grads[n].name] for n in wrt}
    reference = graph.copy()
    reference.outputs[:] = [reference.get(graph.outputs[0].name)]
    loss = nnbridge.compile(reference, backend="reference", passes=[])
    worst = 0.0
    for n in wrt:
        numeric = np.zeros_like(feeds[n])
        for index in np.ndindex(*feeds[n].shape):
            values = []
            for sign in (1, -1):
                moved = feeds[n].copy()
                moved[index] += sign * eps
                values.append(float(loss.run({**feeds, **extra, n: moved})["loss"]))
            numeric[index] = (values[0] - values[1]) / (2 * eps)
        worst = max(worst, float(np.abs(got[n] - numeric).max() / max(np.abs(numeric).max(), 1e-12)))
    return worst


def _normal(shape, seed=0, positive=False):
    x = np.random.default_rng(seed).normal(size=shape)
    return np.abs(x) + 0.5 if positive else x


UNARY = ["Neg", "Exp", "Relu", "Sigmoid", "Tanh", "Abs", "Identity", "Erf"]
POSITIVE = ["Sqrt", "Log", "Reciprocal"]


@pytest.mark.parametrize("op", [*UNARY, *POSITIVE, "Cast"])
def test_unary_rules(op):
    x = _normal((3, 4), positive=op in POSITIVE)
    node = helper.make_node(op, ["x"], ["y"], **({"to": D} if op == "Cast" else {}))
    assert _worst_error(_model([node], {"x": x}, (3, 4)), {"x": x}, ["x"]) <= 1e-6


@pytest.mark.parametrize("op", ["Add", "Sub", "Mul", "Div", "Pow", "Sum"])
def test_binary_rules_with_broadcasting(op):
    a, b = _normal((2, 3, 4), 1, positive=op == "Pow"), _normal((3, 1), 2, positive=op in ("Div", "Pow"))
    model = _model([helper.make_node(op, ["a", "b"], ["y"])], {"a": a, "b": b}, (2, 3, 4))
    assert _worst_error(model, {"a": a, "b": b}, ["a", "b"]) <= 1e-6


@pytest.mark.parametrize(("op", "attrs"), [("LeakyRelu", {"alpha": 0.2}), ("Gelu", {}),
                                           ("Gelu", {"approximate": "tanh"}), ("Softmax", {"axis": 1}),
                                           ("LogSoftmax", {"axis": -1})])
def test_activation_rules(op, attrs):
    x = _normal((3, 5))
    model = _model([helper.make_node(op, ["x"], ["y"], **attrs)], {"x": x}, (3, 5))
    model.opset_import[0].version = 21
    assert _worst_error(model, {"x": x}, ["x"]) <= 1e-6


def test_batched_matmul_with_broadcast_batch():
    a, b = _normal((2, 3, 4), 1), _normal((4, 5), 2)
    model = _model([helper.make_node("MatMul", ["a", "b"], ["y"])], {"a": a, "b": b}, (2, 3, 5))
    assert _worst_error(model, {"a": a, "b": b}, ["a", "b"]) <= 1e-6


@pytest.mark.parametrize(("ta", "tb"), [(0, 0), (1, 0), (0, 1), (1, 1)])
def test_gemm_with_transposes_alpha_beta(ta, tb):
    a, w, c = _normal((4, 3) if ta else (3, 4), 1), _normal((5, 4) if tb else (4, 5), 2), _normal((1, 5), 3)
    node = helper.make_node("Gemm", ["a", "w", "c"], ["y"], transA=ta, transB=tb, alpha=0.7, beta=1.3)
    assert _worst_error(_model([node], {"a": a, "w": w, "c": c}, (3, 5)), {"a": a, "w": w, "c": c},
                        ["a", "w", "c"]) <= 1e-6


@pytest.mark.parametrize(("group", "strides", "pads", "dilations"), [
    (1, [1, 1], [0, 0, 0, 0], [1, 1]), (2, [2, 1], [1, 0, 1, 1], [1, 2]), (4, [2, 2], [1, 1, 1, 1], [1, 1])])
def test_conv_with_groups_strides_pads_dilations(group, strides, pads, dilations):
    x, w, bias = _normal((2, 4, 7, 6), 1), _normal((4, 4 // group, 3, 2), 2), _normal((4,), 3)
    node = helper.make_node("Conv", ["x", "w", "b"], ["y"], group=group, strides=strides, pads=pads,
                            dilations=dilations)
    out = [(n + p0 + p1 - d * (k - 1) - 1) // s + 1
           for n, p0, p1, d, k, s in zip((7, 6), pads[:2], pads[2:], dilations, (3, 2), strides)]
    model = _model([node], {"x": x, "w": w, "b": bias}, (2, 4, *out))
    assert _worst_error(model, {"x": x, "w": w, "b": bias}, ["x", "w", "b"]) <= 1e-6


@pytest.mark.parametrize(("op", "attrs", "out"), [
    ("MaxPool", {"kernel_shape": [2, 2], "strides": [2, 2]}, (2, 3, 3, 2)),
    ("MaxPool", {"kernel_shape": [3, 2], "strides": [1, 2], "pads": [1, 0, 1, 0]}, (2, 3, 6, 2)),
    ("AveragePool", {"kernel_shape": [3, 3], "strides": [2, 2], "pads": [1, 1, 1, 1]}, (2, 3, 3, 3)),
    ("AveragePool", {"kernel_shape": [3, 3], "strides": [2, 2], "pads": [1, 1, 1, 1], "count_include_pad": 1},
     (2, 3, 3, 3)),
    ("GlobalAveragePool", {}, (2, 3, 1, 1)), ("GlobalMaxPool", {}, (2, 3, 1, 1))])
def test_pooling_rules(op, attrs, out):
    x = _normal((2, 3, 6, 5))
    model = _model([helper.make_node(op, ["x"], ["y"], **attrs)], {"x": x}, out)
    assert _worst_error(model, {"x": x}, ["x"]) <= 1e-6


@pytest.mark.parametrize(("op", "keepdims"), [("ReduceSum", 0), ("ReduceMean", 1)])
def test_reductions(op, keepdims):
    x = _normal((2, 3, 4))
    axes = numpy_helper.from_array(np.array([0, 2], np.int64), "axes")
    model = _model([helper.make_node(op, ["x", "axes"], ["y"], keepdims=keepdims)], {"x": x},
                   (1, 3, 1) if keepdims else (3,), [axes])
    assert _worst_error(model, {"x": x}, ["x"]) <= 1e-6


def test_shape_ops_reshape_transpose_concat_split_slice_expand_where():
    x, z = _normal((2, 3, 4), 1), _normal((2, 3, 2), 2)
    inits = [numpy_helper.from_array(np.array(v, np.int64), n) for n, v in
             (("split", [2, 4]), ("starts", [1, 0]), ("ends", [2, 5]), ("axes", [0, 2]), ("big", [3, 2, 5]),
              ("shape", [6, 5]))]
    cond = numpy_helper.from_array(np.array([True, False, True]).reshape(3, 1, 1), "cond")
    nodes = [helper.make_node("Concat", ["x", "z"], ["c"], axis=2),                   # (2, 3, 6)
             helper.make_node("Transpose", ["c"], ["t"], perm=[1, 0, 2]),             # (3, 2, 6)
             helper.make_node("Split", ["t", "split"], ["s0", "s1"], axis=2),          # (3, 2, 2), (3, 2, 4)
             helper.make_node("Mul", ["s0", "s0"], ["sq"]),
             helper.make_node("Concat", ["sq", "s1"], ["j"], axis=2),                 # (3, 2, 6)
             helper.make_node("Slice", ["j", "starts", "ends", "axes"], ["sl"]),      # (1, 2, 5)
             helper.make_node("Expand", ["sl", "big"], ["e"]),                        # (3, 2, 5)
             helper.make_node("Where", ["cond", "e", "j5"], ["w"]),
             helper.make_node("Reshape", ["w", "shape"], ["y"])]                      # (6, 5)
    j5 = [helper.make_node("Slice", ["j", "zero3", "five3"], ["j5"])]
    bounds = [numpy_helper.from_array(np.array([0, 0, 0], np.int64), "zero3"),
              numpy_helper.from_array(np.array([3, 2, 5], np.int64), "five3")]
    model = _model(j5 + nodes, {"x": x, "z": z}, (6, 5), [*inits, cond, *bounds])
    assert _worst_error(model, {"x": x, "z": z}, ["x", "z"]) <= 1e-6


def test_flatten_squeeze_unsqueeze_and_gather_as_an_embedding():
    table, index = _normal((5, 3), 1), np.array([[0, 4, 4], [2, 0, 1]], np.int64)
    axes = numpy_helper.from_array(np.array([0], np.int64), "axes")
    nodes = [helper.make_node("Gather", ["table", "index"], ["g"], axis=0),  # (2, 3, 3)
             helper.make_node("Unsqueeze", ["g", "axes"], ["u"]),
             helper.make_node("Squeeze", ["u", "axes"], ["q"]),
             helper.make_node("Flatten", ["q"], ["y"], axis=1)]
    model = _model(nodes, {"table": table, "index": index}, (2, 9), [axes])
    assert _worst_error(model, {"table": table, "index": index}, ["table"]) <= 1e-6


@pytest.mark.parametrize("reduction", ["mean", "sum", "none"])
def test_softmax_cross_entropy_and_nll(reduction):
    scores, labels = _normal((4, 5), 1), np.array([0, 3, 4, 1], np.int64)
    out = (4,) if reduction == "none" else ()
    for op, first in (("SoftmaxCrossEntropyLoss", "s"), ("NegativeLogLikelihoodLoss", "ls")):
        pre = [helper.make_node("LogSoftmax", ["s"], ["ls"], axis=1)] if first == "ls" else []
        model = _model([*pre, helper.make_node(op, [first, "labels"], ["y"], reduction=reduction)],
                       {"s": scores, "labels": labels}, out)
        assert _worst_error(model, {"s": scores, "labels": labels}, ["s"]) <= 1e-6, op


def test_batch_norm_and_layer_norm_in_training_form():
    x, scale, bias = _normal((4, 3, 2, 2), 1), _normal((3,), 2), _normal((3,), 3)
    stats = [numpy_helper.from_array(np.zeros(3), "mean"), numpy_helper.from_array(np.ones(3), "var")]
    g, h = _normal((3, 2, 2), 4), _normal((3, 2, 2), 5)
    nodes = [helper.make_node("BatchNormalization", ["x", "scale", "bias", "mean", "var"], ["bn"]),
             helper.make_node("LayerNormalization", ["bn", "g", "h"], ["y"], axis=1)]
    feeds = {"x": x, "scale": scale, "bias": bias, "g": g, "h": h}
    model = _model(nodes, feeds, (4, 3, 2, 2), stats)
    assert _worst_error(model, feeds, list(feeds), training=True) <= 1e-6


@pytest.mark.parametrize("shape", [(5, 3), (4, 3, 5), (3, 3, 2, 4)])
def test_the_fused_batch_norm_pair(shape):
    """Training form writes BatchNorm as one BatchNormTraining node, whose rule is one
    BatchNormTrainingGrad: nothing spelled out; dX, dscale and dB against central differences."""
    x, scale, bias = _normal(shape, 1) * 2 + 0.5, _normal((3,), 2), _normal((3,), 3)
    stats = [numpy_helper.from_array(np.zeros(3), "mean"), numpy_helper.from_array(np.ones(3), "var")]
    feeds = {"x": x, "scale": scale, "bias": bias}
    model = _model([helper.make_node("BatchNormalization", ["x", "scale", "bias", "mean", "var"], ["y"],
                                     epsilon=1e-3)], feeds, shape, stats)
    assert _worst_error(model, feeds, list(feeds), training=True) <= 1e-6
    graph = nnbridge.load(model)
    run_passes(graph, ["infer-shapes"])
    training_form(graph)
    gradients(graph, graph.outputs[0], [graph.get(n) for n in feeds])
    ops = sorted(n.op for n in graph.nodes if n.domain == "nnbridge.training")
    assert ops == ["BatchNormTraining", "BatchNormTrainingGrad"]
    assert not {"ReduceMean", "Sqrt", "Div"} & {n.op for n in graph.nodes}


def test_dropout_in_training_form_uses_the_fed_mask():
    x = _normal((3, 4))
    ratio = numpy_helper.from_array(np.array(0.25), "ratio")
    model = _model([helper.make_node("Dropout", ["x", "ratio"], ["y"])], {"x": x}, (3, 4), [ratio])
    mask = (np.random.default_rng(9).random((3, 4)) > 0.25).astype(np.float64)
    assert _worst_error(model, {"x": x}, ["x"], training=True, masks=mask) <= 1e-6


def test_ops_without_a_rule_are_listed_together():
    x = _normal((3, 4))
    nodes = [helper.make_node("Tan", ["x"], ["c"]), helper.make_node("Atan", ["c"], ["s"]),
             helper.make_node("Tan", ["s"], ["y"])]
    graph = nnbridge.load(_model(nodes, {"x": x}, (3, 4)))
    run_passes(graph, ["infer-shapes"])
    with pytest.raises(UnsupportedOpError) as info:
        gradients(graph, graph.outputs[0], [graph.get("x")])
    assert sorted(i.op for i in info.value.items) == ["Atan", "Tan", "Tan"]
    assert "no gradient rule" in str(info.value)


@pytest.mark.parametrize(("op", "attrs"), [
    ("HardSigmoid", {"alpha": 0.3, "beta": 0.4}), ("HardSigmoid", {"alpha": 1 / 6, "beta": 0.5}), ("HardSwish", {}),
    ("Elu", {"alpha": 0.7}), ("Celu", {"alpha": 1.5}), ("Selu", {}), ("Softplus", {}), ("Softsign", {}),
    ("Sin", {}), ("Cos", {})])
def test_the_mobile_and_smooth_activation_rules(op, attrs):
    """The ops that blocked fine-tuning mobile CNNs (issue 32): x kept off the kinks by 1e-3."""
    x = _normal((4, 5), 7) * 3
    for kink in (-3.0, 0.0, 3.0, -0.4 / 0.3, 0.6 / 0.3, -3.0, 3.0):
        x[np.abs(x - kink) < 1e-3] += 2e-3
    model = _model([helper.make_node(op, ["x"], ["y"], **attrs)], {"x": x}, (4, 5))
    assert _worst_error(model, {"x": x}, ["x"]) <= 1e-6


@pytest.mark.parametrize("bounds", [("lo", "hi"), ("lo", ""), ("", "hi")])
def test_clip_passes_the_gradient_between_its_bounds(bounds):
    x = _normal((4, 5), 8) * 2
    inits = [numpy_helper.from_array(np.array(v), n) for n, v in (("lo", -0.5), ("hi", 1.0)) if n in bounds]
    model = _model([helper.make_node("Clip", ["x", *bounds], ["y"])], {"x": x}, (4, 5), inits)
    assert _worst_error(model, {"x": x}, ["x"]) <= 1e-6


def test_prelu_max_min_and_constant_pad_rules():
    x, slope, y = _normal((2, 3, 4), 1), _normal((3, 1), 2), _normal((3, 4), 3)
    model = _model([helper.make_node("PRelu", ["x", "s"], ["y"])], {"x": x, "s": slope}, (2, 3, 4))
    assert _worst_error(model, {"x": x, "s": slope}, ["x", "s"]) <= 1e-6
    for op in ("Max", "Min"):
        model = _model([helper.make_node(op, ["x", "z"], ["y"])], {"x": x, "z": y}, (2, 3, 4))
        assert _worst_error(model, {"x": x, "z": y}, ["x", "z"]) <= 1e-6, op
    pads = numpy_helper.from_array(np.array([0, 1, 2, 1, 0, 3], np.int64), "pads")
    model = _model([helper.make_node("Pad", ["x", "pads"], ["y"])], {"x": x}, (3, 4, 9), [pads])
    assert _worst_error(model, {"x": x}, ["x"]) <= 1e-6


@pytest.mark.parametrize(("group", "strides", "pads", "output_padding"), [
    (1, [1, 1], [0, 0, 0, 0], [0, 0]), (2, [2, 2], [1, 0, 1, 1], [1, 0]), (1, [2, 1], [1, 1, 0, 0], [1, 0])])
def test_conv_transpose_with_groups_strides_pads(group, strides, pads, output_padding):
    x, w, bias = _normal((2, 4, 3, 4), 1), _normal((4, 6 // group, 3, 2), 2), _normal((6,), 3)
    node = helper.make_node("ConvTranspose", ["x", "w", "b"], ["y"], group=group, strides=strides, pads=pads,
                            output_padding=output_padding)
    out = [s * (n - 1) + op + k - p0 - p1
           for n, s, op, k, p0, p1 in zip((3, 4), strides, output_padding, (3, 2), pads[:2], pads[2:])]
    model = _model([node], {"x": x, "w": w, "b": bias}, (2, 6, *out))
    assert _worst_error(model, {"x": x, "w": w, "b": bias}, ["x", "w", "b"]) <= 1e-6


def test_gather_along_another_axis():
    x = _normal((3, 5, 4), 1)
    index = numpy_helper.from_array(np.array([[4, 0], [1, 4]], np.int64), "index")
    model = _model([helper.make_node("Gather", ["x", "index"], ["y"], axis=1)], {"x": x}, (3, 2, 2, 4), [index])
    assert _worst_error(model, {"x": x}, ["x"]) <= 1e-6


@pytest.mark.parametrize(("axis", "at"), [(0, 2), (1, -1), (2, 0)])
def test_gather_of_one_constant_slice_pads_the_gradient_back(axis, at):
    """A scalar constant index (attention's q, k, v taken from one projection) is padded back in place."""
    x = _normal((3, 5, 4), 2)
    index = numpy_helper.from_array(np.array(at, np.int64), "index")
    out = tuple(d for i, d in enumerate(x.shape) if i != axis)
    model = _model([helper.make_node("Gather", ["x", "index"], ["y"], axis=axis)], {"x": x}, out, [index])
    assert _worst_error(model, {"x": x}, ["x"]) <= 1e-6
    graph = nnbridge.load(model)
    run_passes(graph, ["infer-shapes"])
    gradients(graph, graph.outputs[0], [graph.get("x")])
    assert "Pad" in {n.op for n in graph.nodes} and "ScatterND" not in {n.op for n in graph.nodes}


def test_an_if_whose_branch_reads_a_trained_value_is_refused_not_skipped():
    """The If's only input is its condition; its branches capture x. Autodiff once saw no path and
    gave x a zero gradient; now the If is on the path, and it has no rule."""
    x = _normal((3, 4))
    branch = helper.make_graph([helper.make_node("Tanh", ["x"], ["t"])], "then", [],
                               [helper.make_tensor_value_info("t", D, [3, 4])])
    other = helper.make_graph([helper.make_node("Neg", ["x"], ["n"])], "else", [],
                              [helper.make_tensor_value_info("n", D, [3, 4])])
    model = _model([helper.make_node("If", ["cond"], ["y"], then_branch=branch, else_branch=other)], {"x": x},
                   (3, 4))
    model.graph.input.append(helper.make_tensor_value_info("cond", TensorProto.BOOL, []))
    graph = nnbridge.load(model)
    run_passes(graph, ["infer-shapes"])
    with pytest.raises(UnsupportedOpError) as info:
        gradients(graph, graph.outputs[0], [graph.get("x")])
    assert [i.op for i in info.value.items] == ["If"]


@pytest.mark.parametrize(("op", "attrs"), [("LSTM", {}), ("GRU", {}), ("GRU", {"linear_before_reset": 1})])
def test_lstm_and_gru_unrolled_in_training_form(op, attrs):
    """Spelled out step by step in training form; the gradients of the input, the weights, the
    biases and the initial state against central differences."""
    gates, hidden = (4 if op == "LSTM" else 3), 3
    feeds = {"x": _normal((4, 2, 5), 1), "w": _normal((1, gates * hidden, 5), 2) * 0.5,
             "r": _normal((1, gates * hidden, hidden), 3) * 0.5, "b": _normal((1, 2 * gates * hidden), 4) * 0.3,
             "h0": _normal((1, 2, hidden), 5) * 0.5}
    node = helper.make_node(op, ["x", "w", "r", "b", "", "h0"], ["y", "y_h"], hidden_size=hidden, **attrs)
    model = _model([node], feeds, (4, 1, 2, hidden))
    assert _worst_error(model, feeds, list(feeds), training=True) <= 1e-6


@pytest.mark.parametrize(("where", "rounding"), [("asymmetric", "floor"), ("half_pixel", "round_prefer_floor"),
                                                 ("pytorch_half_pixel", "round_prefer_floor")])
def test_nearest_resize_by_whole_factors(where, rounding):
    x = _normal((2, 3, 3, 4), 1)
    scales = numpy_helper.from_array(np.array([1, 1, 2, 3], np.float32), "scales")
    node = helper.make_node("Resize", ["x", "", "scales"], ["y"], mode="nearest",
                            coordinate_transformation_mode=where, nearest_mode=rounding)
    model = _model([node], {"x": x}, (2, 3, 6, 12), [scales])
    assert _worst_error(model, {"x": x}, ["x"]) <= 1e-6


def test_resize_the_rule_does_not_cover_is_named():
    x = _normal((1, 1, 3, 3), 1)
    scales = numpy_helper.from_array(np.array([1, 1, 2, 2], np.float32), "scales")
    node = helper.make_node("Resize", ["x", "", "scales"], ["y"], mode="linear")
    graph = nnbridge.load(_model([node], {"x": x}, (1, 1, 6, 6), [scales]))
    run_passes(graph, ["infer-shapes"])
    with pytest.raises(UnsupportedOpError, match="nearest upsampling by whole factors"):
        gradients(graph, graph.outputs[0], [graph.get("x")])


@pytest.mark.parametrize("shape", [(2, 3, 4), (2, 3, 2, 3)])
def test_instance_normalization(shape):
    feeds = {"x": _normal(shape, 1) * 2 + 0.5, "scale": _normal((3,), 2), "bias": _normal((3,), 3)}
    model = _model([helper.make_node("InstanceNormalization", ["x", "scale", "bias"], ["y"], epsilon=1e-3)],
                   feeds, shape)
    assert _worst_error(model, feeds, list(feeds)) <= 1e-6


@pytest.mark.parametrize(("size", "shape"), [(3, (2, 5, 2, 2)), (4, (2, 6, 3)), (5, (3, 4))])
def test_lrn_over_odd_and_even_windows(size, shape):
    x = _normal(shape, 4) * 3
    node = helper.make_node("LRN", ["x"], ["y"], size=size, alpha=0.3, beta=0.7, bias=1.5)
    assert _worst_error(_model([node], {"x": x}, shape), {"x": x}, ["x"]) <= 1e-6


@pytest.mark.parametrize("axis", [0, 1, -1])
def test_gather_elements_adds_repeated_picks(axis):
    x = _normal((3, 4), 5)
    index = np.random.default_rng(6).integers(-3, 3, size=(3, 4) if axis == 0 else (3, 5))
    init = [numpy_helper.from_array(index.astype(np.int64), "index")]
    node = helper.make_node("GatherElements", ["x", "index"], ["y"], axis=axis)
    assert _worst_error(_model([node], {"x": x}, index.shape, init), {"x": x}, ["x"]) <= 1e-6


@pytest.mark.parametrize("scale_shape", [(3, 2), (1, 2)])
def test_layer_norm_is_one_grad_op_or_spelled_out_for_a_broadcast_scale(scale_shape):
    """Scale and bias of the normalized shape: one LayerNormalizationGrad; broadcast ones: the
    training form spells the node out. Both against central differences."""
    feeds = {"x": _normal((4, 3, 2), 1) * 2, "g": _normal(scale_shape, 2), "h": _normal(scale_shape, 3)}
    model = _model([helper.make_node("LayerNormalization", ["x", "g", "h"], ["y"], axis=1)], feeds, (4, 3, 2))
    assert _worst_error(model, feeds, list(feeds), training=True) <= 1e-6
    graph = nnbridge.load(model)
    run_passes(graph, ["infer-shapes"])
    training_form(graph)
    gradients(graph, graph.outputs[0], [graph.get(n) for n in feeds])
    fused = "LayerNormalizationGrad" in {n.op for n in graph.nodes}
    assert fused == (scale_shape == (3, 2))
