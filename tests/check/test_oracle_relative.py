"""The oracle-relative rule: an output that fails its row is judged against a float64 evaluation and
DIFFERs only when the backend is materially worse than onnxruntime (docs/check.md)."""

from __future__ import annotations

import numpy as np
import onnx
import pytest
from models import large_outputs, sigmoid_head
from onnx import TensorProto, helper

import nnbridge
from nnbridge.check import RULES, compare, exact
from nnbridge.check.exact import float64_model, run_float64
from nnbridge.check.verdict import ORACLE_FACTOR, against_exact


@pytest.mark.parametrize("conv, evaluator", [(False, "onnxruntime"), (True, "onnx.reference")])
def test_a_sigmoid_map_of_1e_6_agrees_on_the_reference_backend_as_accurate_as_onnxruntime(conv, evaluator):
    """float32 sigmoid(−14) has no relative precision (onnxruntime's is off by ~1e-7 on values of 1e-6):
    the fp32 row alone put most elements outside; against float64 nnbridge is the closer of the two."""
    result = nnbridge.check(sigmoid_head(-14.0, conv=conv))
    (out,) = result.outputs
    assert out.scale < 1e-5 and out.outside > out.size // 4  # the plain row fails
    assert result.ok and out.exact == evaluator and out.exact_outside == 0
    assert out.exact_err < out.oracle_exact_err  # nnbridge is nearer the exact value than the oracle
    assert "float64 evaluation" in out.note


def test_a_perturbed_sigmoid_map_still_differs(faulty_weight):
    """The backend's bias −13.5 instead of −14: its scores are 1.65× the exact ones (errors ≈ 5e-7),
    far beyond twice onnxruntime's own error (≈ 1e-7)."""
    faulty_weight("b", 13.5 / 14.0)
    result = nnbridge.check(sigmoid_head(-14.0))
    (out,) = result.outputs
    assert not result.ok and out.exact == "onnxruntime" and out.exact_outside > out.size // 2
    assert out.exact_err > 2 * ORACLE_FACTOR * out.oracle_exact_err


def test_the_rule_is_the_row_from_the_exact_value_widened_by_k_times_the_oracles_error():
    rng = np.random.default_rng(0)
    exact = rng.uniform(1e-6, 2e-6, 256)
    oracle = (exact + rng.uniform(-1e-7, 1e-7, 256)).astype(np.float32)
    worst = float(np.max(np.abs(oracle - exact)))

    def judged(error: float):
        actual = (exact + error).astype(np.float32)
        plain = compare("y", actual, oracle, RULES["fp32"])
        return against_exact(plain, actual, oracle, exact, RULES["fp32"], "onnxruntime")

    assert judged(0.5 * worst).ok and judged(1.9 * worst).ok
    far = judged(2.2 * worst)  # materially worse: more than twice the oracle's worst error everywhere
    assert not far.ok and far.exact_outside == 256 and far.exact_err == pytest.approx(2.2 * worst, rel=1e-2)


def test_a_large_error_stays_a_difference_where_the_oracle_is_accurate():
    """Where onnxruntime is exact to float32 rounding, the rule is the row itself, measured from float64."""
    exact = np.linspace(1.0, 2.0, 64)
    oracle = exact.astype(np.float32)
    actual = (exact * 1.001).astype(np.float32)
    plain = compare("y", actual, oracle, RULES["fp32"])
    judged = against_exact(plain, actual, oracle, exact, RULES["fp32"], "onnxruntime")
    assert not judged.ok and judged.oracle_exact_err < 1e-7 and judged.exact_outside == 64


def test_nan_inf_mismatches_and_custom_bounds_are_never_rejudged():
    exact = np.ones(4)
    oracle = np.ones(4, np.float32)
    nan = np.array([1, 1, np.nan, 1], np.float32)
    plain = compare("y", nan, oracle, RULES["fp32"])
    assert against_exact(plain, nan, oracle, exact, RULES["fp32"], "onnxruntime") is plain
    custom = nnbridge.check(sigmoid_head(-14.0), rtol=1e-6)
    assert not custom.ok and custom.outputs[0].exact == ""  # the user's bound is what was asked


def test_the_float64_evaluation_is_asked_only_when_the_row_fails(monkeypatch):
    def refuse(*args, **kwargs):
        raise AssertionError("the float64 evaluation ran for an output that agrees")

    monkeypatch.setattr(exact, "run_float64", refuse)
    assert nnbridge.check(large_outputs()).ok


def test_when_no_float64_evaluation_runs_the_row_stands_and_says_why(monkeypatch):
    def unavailable(*args, **kwargs):
        raise nnbridge.NNBridgeError("no float64 evaluation: neither runtime runs it")

    monkeypatch.setattr(exact, "run_float64", unavailable)
    result = nnbridge.check(sigmoid_head(-14.0))
    assert not result.ok and "no float64 evaluation" in result.outputs[0].note


def test_the_float64_model_casts_inputs_weights_constants_and_casts():
    nodes = [helper.make_node("Constant", [], ["c"], value_float=0.5),
             helper.make_node("Cast", ["h"], ["h32"], to=TensorProto.FLOAT),
             helper.make_node("Mul", ["h32", "w"], ["p"]),
             helper.make_node("Add", ["p", "c"], ["y"])]
    graph = helper.make_graph(nodes, "g", [helper.make_tensor_value_info("h", TensorProto.FLOAT16, [3])],
                              [helper.make_tensor_value_info("y", TensorProto.FLOAT, [3])],
                              [onnx.numpy_helper.from_array(np.full(3, 0.1, np.float32), "w")])
    proto = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)])
    wide = float64_model(proto)
    assert wide.graph.input[0].type.tensor_type.elem_type == TensorProto.DOUBLE
    assert wide.graph.initializer[0].data_type == TensorProto.DOUBLE
    assert wide.graph.node[1].attribute[0].i == TensorProto.DOUBLE
    values, evaluator = run_float64(proto, {"h": np.array([1, 2, 3], np.float16)})
    assert evaluator == "onnxruntime" and values["y"].dtype == np.float64
    # the stored weight is float32's 0.1; the arithmetic is float64's (float32 would round 0.6 to 0.60000002)
    np.testing.assert_array_equal(values["y"], np.array([1, 2, 3]) * float(np.float32(0.1)) + 0.5)


def test_layerwise_judges_every_node_by_the_same_rule(faulty_weight):
    """--layerwise used to mark the sigmoid SOURCE of an error on a model whose verdict agrees."""
    lw = nnbridge.check(sigmoid_head(-14.0), layerwise=True).layerwise
    assert lw.first_divergent is None and lw.culprit is None
    sigmoid = lw.nodes[-1]
    assert sigmoid.op == "Sigmoid" and sigmoid.outputs[0].exact and sigmoid.local[0].exact_outside == 0
    faulty_weight("b", 13.5 / 14.0)
    lw = nnbridge.check(sigmoid_head(-14.0), layerwise=True).layerwise
    assert lw.culprit.name == "bias" and lw.first_divergent.name == "bias"
