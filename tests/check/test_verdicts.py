"""The verdict table: NaN/inf handling, precision-aware rules, the metrics of docs/check.md."""

from __future__ import annotations

import json

import ml_dtypes
import numpy as np
import pytest
from models import large_outputs, log_of, scaled_softmax

import nnbridge
from nnbridge.check import RULES, compare, rule_for
from nnbridge.check.verdict import ulp
from nnbridge.ir import DType

F16 = np.float16


def test_nan_against_nan_is_a_disagreement_unless_the_model_declares_it():
    x = {"x": np.linspace(-1, 1, 16, dtype=np.float32).reshape(2, 8)}  # 8 negatives → 8 NaN
    result = nnbridge.check(log_of(), inputs=x)
    (out,) = result.outputs
    assert not result.ok
    assert out.nonfinite_matched == out.nonfinite_expected == out.nonfinite_actual == 8
    assert out.outside == 8 and "does not declare" in out.note
    assert result.origin is not None and result.origin.node == "log" and result.origin.oracle_nonfinite == 8
    declared = nnbridge.check(log_of(), inputs=x, nonfinite=["y"], layerwise=True)
    assert declared.ok and declared.layerwise.culprit is None  # the Log node makes the declared NaN
    assert nnbridge.check(log_of(), inputs=x, layerwise=True).layerwise.culprit.name == "log"
    assert nnbridge.check(log_of(metadata={"nnbridge.nonfinite_outputs": "y"}), inputs=x).ok
    assert not nnbridge.check(log_of(metadata={"nnbridge.nonfinite_outputs": "other"}), inputs=x).ok


def test_nan_where_the_oracle_is_finite_never_agrees_even_when_declared():
    want = np.array([1.0, np.nan, np.inf, -np.inf, 2.0], np.float32)
    got = np.array([1.0, np.nan, -np.inf, -np.inf, np.nan], np.float32)
    check = compare("y", got, want, RULES["fp32"], nonfinite_ok=True)
    assert not check.ok and check.max_abs_err == np.inf
    assert check.nonfinite_matched == 2 and check.outside == 2  # -inf for inf, NaN for 2.0
    assert "1 NaN/inf where the oracle is finite" in check.note
    assert "of another kind" in check.note
    assert compare("y", want.copy(), want, RULES["fp32"], nonfinite_ok=True).ok


def test_one_fp16_ulp_on_large_outputs_agrees_on_fp16_and_not_on_fp32():
    want = np.linspace(250, 400, 64, dtype=np.float32)
    one_ulp = np.nextafter(want.astype(F16), F16(np.inf)).astype(np.float32)  # one fp16 ulp above
    fp16 = compare("boxes", one_ulp, want, RULES["fp16"])
    assert fp16.ok and fp16.max_abs_err == pytest.approx(0.25, abs=0.13)  # fp16 spacing at 256-512
    assert 0.5 <= fp16.ulp_err <= 1.5
    assert not compare("boxes", one_ulp, want, RULES["fp32"]).ok
    three_percent = want * np.float32(1.03)
    assert not compare("boxes", three_percent, want, RULES["fp16"]).ok


def test_smv_on_detector_like_large_outputs_agrees_with_its_ulp_and_sqnr_reported():
    result = nnbridge.check(large_outputs(), backend="smv")
    (out,) = result.outputs
    assert result.ok and result.rule.name == "fp16"
    assert out.max_abs_err > 0 and out.scale > 300  # a real fp16 rounding on ≈ 300-sized values
    assert out.ulp_err <= 2 and out.sqnr_db > 60
    assert out.err_vs_scale == pytest.approx(out.max_abs_err / out.scale)


def test_near_zero_elements_are_judged_against_the_output_scale():
    want = np.array([1e-30, 1.0, -2.0], np.float32)
    got = want + np.float32(1e-4)
    check = compare("y", got, want, RULES["fp16"])
    assert check.ok and check.err_vs_scale == pytest.approx(5e-5, rel=1e-2)


def test_metrics_count_the_elements_outside():
    want = np.ones(1000, np.float32)
    got = want.copy()
    got[:25] += 0.05
    check = compare("y", got, want, RULES["bf16"])
    assert not check.ok and check.outside == 25 and check.outside_frac == pytest.approx(0.025)
    assert check.ulp_err == pytest.approx(0.05 / 2**-7, rel=1e-3)  # bf16 spacing at 1 is 2^-7
    assert check.sqnr_db == pytest.approx(10 * np.log10(1000 / (25 * 0.05**2)), rel=1e-3)


@pytest.mark.parametrize("fmt, x, want", [
    (DType.FLOAT16, 300.0, 0.25), (DType.FLOAT16, 1.0, 2**-10), (DType.FLOAT16, 0.0, 2**-24),
    (DType.FLOAT16, 1e-6, 2**-24), (DType.BFLOAT16, 1.0, 2**-7), (DType.BFLOAT16, 3.0e5, 2048.0),
    (DType.FLOAT32, 1.0, 2**-23),
])
def test_ulp_is_the_formats_spacing(fmt, x, want):
    assert float(ulp(np.float64(x), fmt)) == want
    if fmt is DType.BFLOAT16 and x:
        b = np.array(x, ml_dtypes.bfloat16)
        assert float(np.nextafter(b, b + b).astype(np.float64)) - float(b) == want


def test_the_row_is_chosen_from_the_model_and_the_backend_precision():
    assert rule_for(DType.FLOAT32, None).name == "fp32"       # reference on an fp32 model
    assert rule_for(DType.FLOAT64, None).name == "fp32"
    assert rule_for(DType.FLOAT16, None).name == "fp16"       # reference on a SMAUG SMV file
    assert rule_for(DType.FLOAT32, DType.FLOAT16).name == "fp16"  # SMV
    assert rule_for(DType.FLOAT32, DType.BFLOAT16).name == "bf16"  # RDU
    assert rule_for(DType.FLOAT16, DType.BFLOAT16).name == "bf16"
    custom = rule_for(DType.FLOAT32, DType.FLOAT16, rtol=1e-3)
    assert custom.name == "custom" and custom.rtol == 1e-3 and custom.format is DType.FLOAT16


def test_exact_outputs_and_shape_or_dtype_mismatches():
    ids = np.array([3, 1, 2], np.int64)
    assert compare("i", ids, ids.copy(), RULES["bf16"]).ok
    off = compare("i", ids + np.array([0, 0, 1]), ids, RULES["bf16"])
    assert not off.ok and off.rule == "exact" and off.outside == 1
    assert not compare("y", np.zeros(3, np.float32), np.zeros(4, np.float32), RULES["fp32"]).ok
    assert not compare("y", np.zeros(3, np.float64), np.zeros(3, np.float32), RULES["fp32"]).ok
    assert compare("s", np.array(["a", "b"]), np.array(["a", "b"], object), RULES["fp32"]).ok


def test_sequence_outputs_compare_every_tensor():
    want = [np.ones(3, np.float32), np.zeros(2, np.float32)]
    assert compare("seq", [w.copy() for w in want], want, RULES["fp32"]).ok
    off = compare("seq", [want[0], want[1] + 1], want, RULES["fp32"])
    assert not off.ok and off.outside == 2 and off.max_abs_err == 1.0 and "seq[1]" not in off.note
    short = compare("seq", want[:1], want, RULES["fp32"])
    assert not short.ok and "sequence of 1 != expected sequence of 2" in short.note


def test_json_carries_every_metric_and_only_valid_json(cli):
    code, text = cli("check", _saved(log_of()), "--json")
    assert code == 1

    def refuse(constant):
        raise AssertionError(f"invalid JSON constant {constant}")

    data = json.loads(text, parse_constant=refuse)
    (out,) = data["outputs"]
    for key in ("max_abs_err", "err_vs_scale", "scale", "outside", "outside_frac", "ulp_err", "sqnr_db",
                "nonfinite_matched", "rule", "note"):
        assert key in out
    assert data["rule"]["name"] == "fp32" and data["precision"] == "fp32"
    assert data["inputs"][0]["distribution"] == "normal(0, 1)" and data["inputs"][0]["seed"] == 0
    assert data["nonfinite_origin"]["node"] == "log"


def _saved(model, name="m.onnx"):
    import tempfile

    import onnx

    path = tempfile.mkdtemp() + "/" + name
    onnx.save(model, path)
    return path


def test_a_backends_deviation_notes_are_reported_with_the_verdict_and_the_node():
    """SMV reproduces SMAUG's softmax (no row-maximum subtraction) and says so in its report."""
    result = nnbridge.check(scaled_softmax(), backend="smv", input_ranges={"x": (1, 2)}, layerwise=True)
    assert not result.ok and result.origin.node == "softmax" and result.origin.oracle_nonfinite == 0
    assert any(n.startswith("softmax: ") and "does not subtract the row maximum" in n for n in result.notes)
    culprit = result.layerwise.culprit
    assert culprit.name == "softmax" and "row maximum" in culprit.note
    assert nnbridge.check(scaled_softmax(), backend="rdu", input_ranges={"x": (1, 2)}).ok
