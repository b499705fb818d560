"""check --layerwise: the broken layer is found; NaN/inf are traced to the node that made them."""

from __future__ import annotations

import dataclasses
import json

import numpy as np
import onnx
import pytest
from models import deep_cnn, overflowing, rms_norm, scales_then_squeeze

import nnbridge
from nnbridge.cli.commands import check as check_command


@pytest.mark.parametrize("backend", ["reference", "smv", "rdu"])
@pytest.mark.parametrize("layer", [3, 17, 28])
def test_a_5_percent_fault_in_one_layer_of_a_30_layer_cnn_is_found_at_that_layer(faulty_weight, backend, layer):
    faulty_weight(f"w{layer}")
    result = nnbridge.check(deep_cnn(30), backend=backend, layerwise=True)
    lw = result.layerwise
    assert len(lw.nodes) == 60 and not lw.unexposed
    assert lw.culprit is not None and lw.culprit.name == f"conv{layer}"
    assert lw.culprit.op == "Conv" and lw.culprit.input_shapes == [[1, 8, 16, 16], [8, 8, 3, 3], [8]]
    own = max(o.err_vs_scale for o in lw.culprit.local)
    assert 0.04 < own < 0.06  # the node's own error is the injected 5 %
    before = lw.nodes[:lw.nodes.index(lw.culprit)]
    assert all(n.local_ok for n in before)


@pytest.mark.parametrize("backend", ["smv", "rdu"])
def test_without_a_fault_no_node_is_blamed(backend):
    """Negative control: fp16/bf16 rounding alone never makes a node the culprit."""
    result = nnbridge.check(deep_cnn(30), backend=backend, layerwise=True)
    lw = result.layerwise
    assert lw.culprit is None
    assert result.ok  # end to end within the table's rule
    worst_own = max(max(o.err_vs_scale for o in n.local) for n in lw.nodes)
    assert worst_own < 2 * result.rule.eps  # one node rounds once


def test_on_smv_the_faulty_layer_is_also_the_first_to_leave_tolerance(faulty_weight):
    faulty_weight("w17")
    lw = nnbridge.check(deep_cnn(30), backend="smv", layerwise=True).layerwise
    assert lw.first_divergent.name == "conv17" == lw.culprit.name


def test_fp16_overflow_is_attributed_to_the_node_that_first_produced_inf():
    result = nnbridge.check(overflowing(), backend="smv", input_ranges={"x": (0.25, 0.75)})
    assert not result.ok
    origin = result.origin  # found without --layerwise: the outputs held inf the oracle lacks
    assert origin.node == "fc" and origin.op == "MatMul" and origin.output == "fc_out"
    assert origin.overflow and origin.exact_min > 65504 and origin.format_max == 65504
    assert origin.count == origin.size == 8 and origin.oracle_nonfinite == 0
    assert origin.input_ranges["scaled"][1] < 65504  # the scale node before it stayed finite
    assert "overflow" in origin.describe() and "'fc'" in origin.describe()
    assert result.layerwise is None
    assert nnbridge.check(overflowing(), backend="rdu", input_ranges={"x": (0.25, 0.75)}).ok  # bf16's range


def test_cli_layerwise_names_the_node_op_shapes_and_error(cli, tmp_path, faulty_weight):
    path = tmp_path / "cnn.onnx"
    onnx.save(deep_cnn(30), path)
    faulty_weight("w17")
    _, text = cli("check", path, "--backend", "rdu", "--layerwise")
    assert "first node whose own error leaves tolerance" in text
    assert "conv17 (Conv, inputs 1x8x16x16, 8x8x3x3, 8 → 1x8x16x16)" in text
    assert "SOURCE" in text


def test_cli_names_the_overflowing_node(cli, tmp_path):
    path = tmp_path / "overflow.onnx"
    onnx.save(overflowing(), path)
    code, text = cli("check", path, "--backend", "smv", "--input-range", "x=0.25:0.75")
    assert code == 1
    assert "first NaN/inf at node 'fc' (MatMul)" in " ".join(text.split())


def test_an_fp16_overflow_inside_the_model_is_named_when_the_outputs_stay_finite():
    """x / sqrt(Σx²/n): the sum of 256 squares of 20–25 reaches 1.3e5 > 65504 on SMV; the output is
    x / inf = 0, finite and wrong. A plain check names the sum."""
    result = nnbridge.check(rms_norm(), backend="smv", input_ranges={"x": (20, 25)})
    (out,) = result.outputs
    assert not result.ok and out.nonfinite_actual == 0  # the outputs alone do not explain it
    origin = result.origin
    assert (origin.node, origin.op, origin.output) == ("sum", "ReduceSum", "sum")
    assert origin.overflow and origin.exact_min > 1.3e5 and origin.oracle_nonfinite == 0
    assert result.layerwise is None
    assert nnbridge.check(rms_norm(), backend="rdu", input_ranges={"x": (20, 25)}).ok  # bf16's range


def test_cli_names_the_overflowing_intermediate_in_its_verdict_line_and_json(cli, tmp_path):
    path = tmp_path / "rmsnorm.onnx"
    onnx.save(rms_norm(), path)
    code, text = cli("check", path, "--backend", "smv", "--input-range", "x=20:25")
    assert code == 1
    last = text.strip().splitlines()[-1]
    assert last == "outputs differ: 'y' — first NaN/inf at node 'sum' (ReduceSum, output 'sum')"
    code, text = cli("check", path, "--backend", "smv", "--input-range", "x=20:25", "--json")
    origin = json.loads(text)["nonfinite_origin"]
    assert code == 1 and origin["node"] == "sum" and origin["output"] == "sum" and origin["overflow"]


def test_a_search_that_cannot_run_leaves_the_verdict_and_says_so(monkeypatch):
    from nnbridge.check import core

    def unavailable(*args, **kwargs):
        raise nnbridge.NNBridgeError("onnxruntime (the oracle) cannot run this model: exposed")

    monkeypatch.setattr(core, "run_layerwise", unavailable)
    result = nnbridge.check(rms_norm(), backend="smv", input_ranges={"x": (20, 25)})
    assert not result.ok and result.origin is None
    assert result.notes[-1] == "no search for NaN/inf inside the model: onnxruntime (the oracle) cannot run this " \
                               "model: exposed"


@pytest.fixture
def faulty_rdu_kernels(monkeypatch):
    """Scale the outputs of some ops' kernels in the RDU's functional simulation only (broken kernels)."""
    from nnbridge.backends.rdu import functional

    real = functional.get_kernel

    def inject(factors: dict[str, float]) -> None:
        def get_kernel(op, domain=""):
            spec = real(op, domain)
            if op not in factors or spec is None:
                return spec
            fn, factor = spec.fn, np.float32(factors[op])
            return dataclasses.replace(spec, fn=lambda ctx, *args, **attrs: fn(ctx, *args, **attrs) * factor)

        monkeypatch.setattr(functional, "get_kernel", get_kernel)

    return inject


def test_rdu_layerwise_shows_the_row_of_the_squeeze_it_names_first_divergent(cli, tmp_path, monkeypatch,
                                                                             faulty_rdu_kernels):
    """A long table shows only the rows that matter; it used to keep the first 40 of them, so nodes
    whose own error leaves the one-node bound while their outputs agree (BatchNormalizations on the
    RDU) pushed out the first divergent node the text below the table names."""
    faulty_rdu_kernels({"Mul": 1.03, "Squeeze": 1.2})  # 3 %: own error only; 20 %: diverges
    monkeypatch.setattr(check_command, "FULL_TABLE_ROWS", 3)  # 5 nodes: a "long" table
    path = tmp_path / "squeeze.onnx"
    onnx.save(scales_then_squeeze(4), path)
    _, text = cli("check", path, "--backend", "rdu", "--layerwise", "--input-range", "x=1.5:1.9")
    assert "first node whose output leaves tolerance: squeeze (Squeeze" in " ".join(text.split())
    table = text.split("layer by layer", 1)[1].split("first node whose output", 1)[0]
    rows = [line.split("│")[1].strip() for line in table.splitlines() if line.count("│") > 2]
    assert "squeeze" in rows and "scale0" in rows  # the node named first divergent, and the culprit
    assert rows == ["scale0", "scale1", "squeeze"]  # the limit of 3, in the model's order


def test_an_agreeing_verdict_whose_outputs_hold_declared_infinities_names_where_they_come_from():
    """Every verdict with NaN/inf names the first node that made them, not only a DIFFER."""
    import warnings

    from onnx import TensorProto, helper

    nodes = [helper.make_node("Div", ["one", "x"], ["r"], name="recip"),
             helper.make_node("Relu", ["r"], ["y"], name="relu")]
    graph = helper.make_graph(nodes, "nf", [helper.make_tensor_value_info("x", TensorProto.FLOAT, [4])],
                              [helper.make_tensor_value_info("y", TensorProto.FLOAT, [4])],
                              [helper.make_tensor("one", TensorProto.FLOAT, [1], [1.0])])
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)])
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", RuntimeWarning)
        result = nnbridge.check(model, inputs={"x": np.array([0.0, 1.0, 2.0, -1.0], np.float32)}, nonfinite=["y"])
    assert result.ok
    assert result.origin is not None and (result.origin.node, result.origin.op) == ("recip", "Div")
