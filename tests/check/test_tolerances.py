"""``check --tol NAME=RTOL,ATOL`` (one output's rule) and ``--metric`` (polygraphy's error statistics)."""

from __future__ import annotations

import json

import numpy as np
import onnx
import pytest
from models import model, tensor
from onnx import helper

import nnbridge
from nnbridge.base.errors import InputError
from nnbridge.check import RULES, compare
from nnbridge.check.verdict import parse_metric, with_tolerances


def two_outputs() -> onnx.ModelProto:
    """a = x + 1 and b = x · 2: two outputs from one input."""
    nodes = [helper.make_node("Add", ["x", "one"], ["a"], name="add"),
             helper.make_node("Mul", ["x", "two"], ["b"], name="mul")]
    return model(nodes, [tensor("x", [4, 8])], [tensor("a", [4, 8]), tensor("b", [4, 8])],
                 [("one", np.array(1, np.float32)), ("two", np.array(2, np.float32))], name="two")


def test_a_tolerance_overrides_the_rule_for_that_output_only(tmp_path):
    path = tmp_path / "two.onnx"
    onnx.save(two_outputs(), path)
    strict = nnbridge.check(path, tolerances={"a": (0.0, 0.0)})  # both agree bit for bit on this model
    by_name = {o.name: o for o in strict.outputs}
    assert strict.ok and by_name["a"].rule == "custom (a)" and by_name["b"].rule == "fp32"
    # SMV's fp16 errors break a zero tolerance on 'a'; 'b' keeps the fp16 row and agrees
    smv = {o.name: o for o in nnbridge.check(path, backend="smv", tolerances={"a": (0.0, 0.0)}).outputs}
    assert not smv["a"].ok and smv["b"].ok and smv["b"].rule == "fp16"
    loose = {o.name: o for o in nnbridge.check(path, backend="smv", tolerances={"a": (0.01, 0.01)}).outputs}
    assert loose["a"].ok


def test_an_unknown_output_in_a_tolerance_is_refused_naming_the_outputs(tmp_path, cli):
    path = tmp_path / "two.onnx"
    onnx.save(two_outputs(), path)
    with pytest.raises(InputError, match=r"--tol names unknown output\(s\) \['c'\]; the model's outputs are "
                                         r"\['a', 'b'\]"):
        nnbridge.check(path, tolerances={"c": (0.0, 0.0)})
    code, text = cli("check", path, "--tol", "a=1e-3")
    assert code == 2 and "--tol a=1e-3: write RTOL,ATOL" in text and len(text.strip().splitlines()) == 1


def test_metrics_judge_a_statistic_of_the_error_in_units_of_the_bound():
    ref = np.linspace(1, 2, 100, dtype=np.float32)
    actual = ref.copy()
    actual[:3] += 1  # three elements far out: the maximum fails, the median and the 0.9 quantile do not
    rule = RULES["fp32"]
    assert not compare("y", actual, ref, rule).ok
    for metric in ("median", "quantile:0.9"):
        judged = compare("y", actual, ref, with_tolerances(rule, None, metric)("y"))
        assert judged.ok and judged.metric == metric and judged.metric_value == 0 and judged.outside == 3
    mean = compare("y", actual, ref, with_tolerances(rule, None, "mean")("y"))
    assert not mean.ok and mean.metric_value > 1  # three errors of ~10⁴ bounds each outweigh 97 zeros
    assert not compare("y", actual, ref, with_tolerances(rule, None, "quantile:0.99")("y")).ok
    nan = actual.copy()
    nan[50] = np.nan  # a NaN the oracle does not have counts as an infinite error
    assert compare("y", nan, ref, with_tolerances(rule, None, "median")("y")).ok
    assert compare("y", nan, ref, with_tolerances(rule, None, "mean")("y")).metric_value == np.inf


@pytest.mark.parametrize("text", ["min", "quantile", "quantile:1.5", "quantile:x", "max:1"])
def test_bad_metrics_are_refused_in_one_line(text):
    with pytest.raises(InputError, match=f"--metric {text}: write one of max, mean, median, quantile:Q"):
        parse_metric(text)


def test_the_json_verdict_carries_the_metric_and_each_output_rule(tmp_path, cli):
    path = tmp_path / "two.onnx"
    onnx.save(two_outputs(), path)
    code, text = cli("check", path, "--backend", "smv", "--tol", "a=0,0", "--metric", "quantile:0.99", "--json")
    data = json.loads(text)
    assert data["rule"]["metric"] == "quantile:0.99" and "quantile:0.99 of |a−ref|/bound ≤ 1" in data["rule"]["text"]
    outs = {o["name"]: o for o in data["outputs"]}
    assert outs["a"]["rule"] == "custom (a)" and outs["b"]["rule"] == "fp16"
    assert outs["b"]["metric"] == "quantile:0.99" and outs["b"]["metric_value"] <= 1
    assert data["output_rules"]["a"]["text"] == "custom (a): |a−ref| ≤ 0, quantile:0.99 of |a−ref|/bound ≤ 1"
    assert code == (0 if data["ok"] else 1)
