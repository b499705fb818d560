"""The public API: load, save, convert, compile, run, check on models of every kind."""

from __future__ import annotations

import numpy as np
import onnx
import pytest

import nnbridge
from nnbridge.api.inputs import random_inputs
from nnbridge.converters.onnx import graph_to_model
from nnbridge.zoo import build


@pytest.fixture(scope="module")
def mlp() -> onnx.ModelProto:
    return build("mlp")


def test_model_may_be_path_proto_or_graph(tmp_path, mlp):
    path = tmp_path / "mlp.onnx"
    onnx.save(mlp, path)
    graph = nnbridge.load(path)
    feeds = random_inputs(graph, seed=1)
    results = [nnbridge.run(m, feeds) for m in (path, mlp, graph)]
    for r in results[1:]:
        np.testing.assert_array_equal(r["prob"], results[0]["prob"])
    assert len(graph) == 4  # the caller's graph was not mutated by compile


def test_compile_once_run_many_with_report(mlp):
    exe = nnbridge.compile(mlp, profile=True)
    graph = nnbridge.load(mlp)
    for seed in range(3):
        out = exe.run(random_inputs(graph, seed=seed))
        assert out["prob"].shape == (1, 10)
        np.testing.assert_allclose(out["prob"].sum(), 1.0, rtol=1e-5)
    assert exe.report is not None and len(exe.report.rows) == 4
    assert exe.report.totals["time_ms"] > 0


def test_check_agrees_and_reports_each_output(mlp):
    result = nnbridge.check(mlp, seed=3)
    assert result.ok
    assert [o.name for o in result.outputs] == ["prob"]
    assert result.outputs[0].max_abs_err < 1e-6


def test_save_round_trip_passes_checker_and_keeps_numerics(tmp_path, mlp):
    graph = nnbridge.load(mlp)
    out = tmp_path / "copy.onnx"
    nnbridge.save(graph, out)
    onnx.checker.check_model(onnx.load(out))
    feeds = random_inputs(graph)
    np.testing.assert_array_equal(nnbridge.run(out, feeds)["prob"], nnbridge.run(mlp, feeds)["prob"])
    converted = nnbridge.convert(out, tmp_path / "again.onnx")
    assert len(converted) == len(graph)


@pytest.mark.parametrize("name", ["mlp", "minerva", "lenet5", "cnn10", "resnet_tiny", "lstm_small",
                                  "transformer_tiny"])
def test_zoo_models_agree_with_onnxruntime(name):
    result = nnbridge.check(build(name))
    assert result.ok, result.outputs


def test_graph_export_is_valid_onnx(mlp):
    model = graph_to_model(nnbridge.load(mlp))
    onnx.checker.check_model(model, full_check=True)
