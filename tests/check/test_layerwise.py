"""check --layerwise: the broken layer is found; NaN/inf are traced to the node that made them."""

from __future__ import annotations

import numpy as np
import onnx
import pytest
from models import deep_cnn, overflowing

import nnbridge


@pytest.fixture
def faulty_weight(monkeypatch):
    """Scale one weight by 5 % on the backend side only.

    ``nnbridge.compiler.compile`` is the entry every backend run of ``check`` goes through (the
    layerwise run included); onnxruntime keeps reading the original model, so the backend
    really computes a different function in that one layer, as a broken kernel would.
    """
    real = nnbridge.compiler.compile

    def inject(weight: str, factor: float = 1.05) -> None:
        def compile_with_fault(model, backend="reference", **options):
            graph = nnbridge.load(model).copy()
            graph.initializers[weight] = graph.initializers[weight] * np.float32(factor)
            return real(graph, backend=backend, **options)

        monkeypatch.setattr(nnbridge.compiler, "compile", compile_with_fault)

    return inject


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
