"""Outputs of the shipped models (data README §1.3 item 9) on the reference backend and, exported
to ONNX, in onnxruntime. Relative tolerances: the outputs are ~1e-4..1e-3."""

from __future__ import annotations

import numpy as np
import onnxruntime as ort
import pytest
from smaug_data import EXPECTED, SCALE

import nnbridge
from nnbridge.converters.onnx import graph_to_model
from nnbridge.converters.smaug import load_inputs, load_smaug

#: The README prints 4-5 significant digits: fp32 paths must round to them; fp16 paths within 1 %.
RTOL = {"ref": 6e-4, "smv": 1e-2}


def run_file(path, **options) -> np.ndarray:
    graph = load_smaug(path, **options)
    feeds = {k: v.astype(graph.inputs[0].type.dtype.numpy) for k, v in load_inputs(path, graph).items()}
    (out,) = nnbridge.run(graph, feeds).values()
    return np.asarray(out, dtype=np.float64).reshape(-1)


@pytest.mark.parametrize("rel", sorted(EXPECTED))
def test_outputs_on_the_reference_backend(smaug_dir, rel):
    out = run_file(smaug_dir / rel)
    rtol = RTOL["smv" if "_smv_" in rel else "ref"]
    np.testing.assert_allclose(out, EXPECTED[rel], rtol=rtol, atol=0)


@pytest.mark.parametrize("network", ["minerva/minerva", "lenet5/lenet5"])
def test_reference_and_smv_files_agree_within_fp16_tolerance(smaug_dir, network):
    ref = run_file(smaug_dir / f"{network}_ref_topo.pbtxt")
    smv = run_file(smaug_dir / f"{network}_smv_topo.pbtxt")
    np.testing.assert_allclose(smv, ref, rtol=1e-2, atol=0)
    assert not np.allclose(smv, ref, rtol=1e-7, atol=0)  # fp16 really was used on one side


@pytest.mark.parametrize("rel", sorted(EXPECTED))
def test_onnx_export_matches_in_onnxruntime(smaug_dir, rel):
    """Each export keeps its own file's semantics (LeNet-5 SMV: HWC flatten; Reference: CHW)."""
    path = smaug_dir / rel
    graph = load_smaug(path, compute_dtype="float32")
    model = graph_to_model(graph)
    session = ort.InferenceSession(model.SerializeToString(), providers=["CPUExecutionProvider"])
    feeds = {k: v.astype(np.float32) for k, v in load_inputs(path, graph).items()}
    (out,) = session.run(None, feeds)
    np.testing.assert_allclose(out.reshape(-1), EXPECTED[rel], rtol=RTOL["ref"], atol=0)
    assert model.graph.input[0].type.tensor_type.shape.dim[3].dim_value == 1  # NHWC input kept


@pytest.mark.parametrize("rel", ["cifar10-cnn/cnn_smv_topo.pbtxt", "imagenet-resnet/resnet_smv_topo.pbtxt"])
def test_topology_only_models_run_like_onnxruntime(smaug_dir, rel):
    graph = load_smaug(smaug_dir / rel, compute_dtype="float32", synthetic_scale=SCALE.get(rel, 0.005))
    x = np.random.default_rng(0).random(graph.inputs[0].type.shape, dtype=np.float32)
    session = ort.InferenceSession(graph_to_model(graph).SerializeToString(), providers=["CPUExecutionProvider"])
    (expected,) = session.run(None, {graph.inputs[0].name: x})
    (out,) = nnbridge.run(graph, {graph.inputs[0].name: x}).values()
    np.testing.assert_allclose(out, expected, rtol=1e-4, atol=1e-6 * np.abs(expected).max())
