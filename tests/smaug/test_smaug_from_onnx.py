"""ONNX → SMAUG → ONNX: the zoo and the light models SMAUG can express agree with onnxruntime on the
original (fp32 tolerance for Reference files, fp16 tolerance for SMV files); the others fail with one
error listing every inexpressible node."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import onnx
import onnxruntime as ort
import pytest

import nnbridge.zoo
from nnbridge.base.errors import UnsupportedOpError
from nnbridge.converters.onnx import graph_to_model, load_onnx
from nnbridge.converters.smaug import load_smaug, read_topology, save_smaug
from nnbridge.protos.smaug import smaug_types_pb2 as pb

LIGHT = Path(onnx.__file__).parent / "backend" / "test" / "data" / "light"
#: relative to the largest output magnitude: fp32 files, and fp16 storage/rounding (SMV)
TOLERANCE = {"Reference": 1e-5, "SMV": 2e-2}
ZOO_CNNS = ["mlp", "minerva", "lenet5", "cnn10", "vgg_cifar", "resnet_tiny", "lstm_small"]


def run_ort(model: onnx.ModelProto, feeds: dict) -> np.ndarray:
    session = ort.InferenceSession(model.SerializeToString(), providers=["CPUExecutionProvider"])
    return session.run(None, feeds)[0]


def through_smaug(model: onnx.ModelProto, backend: str, folder: Path, **options):
    graph = load_onnx(model)
    topo, _ = save_smaug(graph, folder / "model_topo.pbtxt", smaug_backend=backend, **options)
    back = load_smaug(topo, compute_dtype="float32")
    rng = np.random.default_rng(0)
    feeds = {v.name: rng.random(v.type.shape, dtype=np.float32) for v in graph.inputs}
    return read_topology(topo), run_ort(model, feeds), run_ort(graph_to_model(back), as_stored(back, feeds))


def as_stored(graph, feeds: dict) -> dict:
    """NCHW inputs in the layout the SMAUG file stores them (SMV: NHWC, as SMAUG's own models)."""
    layouts = {v.name: v.type.layout.value for v in graph.inputs}
    return {k: v.transpose(0, 2, 3, 1) if v.ndim == 4 and layouts[k] == "NHWC" else v for k, v in feeds.items()}


@pytest.mark.parametrize("backend", ["Reference", "SMV"])
@pytest.mark.parametrize("name", ZOO_CNNS)
def test_zoo_through_smaug_matches_onnxruntime(tmp_path, name, backend):
    topology, expected, got = through_smaug(nnbridge.zoo.build(name), backend, tmp_path)
    scale = np.abs(expected).max()
    np.testing.assert_allclose(got, expected, rtol=0, atol=TOLERANCE[backend] * scale)
    if name == "lstm_small":  # decomposed per time step, as SMAUG's frontend builds LSTMs
        assert sum(n.op == pb.InnerProduct for n in topology.nodes) == 5 + 4 + 1
        assert any(n.name == "lstm:step4:mm_h" for n in topology.nodes)
    reorders = [n for n in topology.nodes if n.op == pb.Reorder]
    flat = any(len(n.input_tensors[0].shape.dims) == 4 for n in reorders)
    # native layouts: weights need no Reorder, SMV stores the input NHWC; only the flatten reorders
    assert len(reorders) == flat
    alignments = {t.shape.alignment for n in topology.nodes for t in [*n.input_tensors, *n.output_tensors]}
    assert alignments == {8 if backend == "SMV" else 0}
    assert topology.backend == backend and topology.mem_policy == pb.AllDma


@pytest.mark.parametrize("backend", ["Reference", "SMV"])
@pytest.mark.parametrize("name", ["light_resnet50", "light_squeezenet"])  # VGG-19 converts too: 140 s
def test_light_models_through_smaug_match_onnxruntime(tmp_path, name, backend):
    """The graph's structure is what is checked: on SMV their stored recipe input overflows fp16,
    which is refused by default (test_real_runtime.py) and allowed here."""
    _, expected, got = through_smaug(onnx.load(LIGHT / f"{name}.onnx"), backend, tmp_path,
                                     smaug_allow_overflow=True)
    np.testing.assert_allclose(got, expected, rtol=0, atol=TOLERANCE[backend] * np.abs(expected).max())


@pytest.mark.parametrize("name, count, ops", [
    ("light_bvlc_alexnet", 6, ["Conv", "LRN"]),  # 2 LRN, 3 grouped convs, an 11x11/4 stem SMV cannot tile
    ("light_zfnet512", 2, ["LRN"]),  # its 302 MB FC weight (a ConstantOfShape) folds under the limit
])
def test_inexpressible_models_list_every_offending_node(tmp_path, name, count, ops):
    graph = load_onnx(onnx.load(LIGHT / f"{name}.onnx"))
    with pytest.raises(UnsupportedOpError) as info:
        save_smaug(graph, tmp_path / "m_topo.pbtxt", smaug_backend="SMV")
    assert len(info.value.items) == count
    assert sorted({i.op for i in info.value.items}) == ops
    assert all(i.node and i.reason for i in info.value.items)
    assert all("NNBRIDGE_FOLD_LIMIT_MB" in i.reason for i in info.value.items if i.op == "ConstantOfShape")
    assert not any(tmp_path.iterdir())


@pytest.mark.parametrize("backend", ["Reference", "SMV"])
def test_graph_after_the_nhwc_layout_pass_converts_too(tmp_path, backend):
    """After the SMV pipeline's layout pass, spatial ops read NHWC values (weights [K, kH, kW, C])."""
    import nnbridge.passes  # noqa: F401 - registers the passes
    from nnbridge.passes import run_passes

    model = nnbridge.zoo.build("resnet_tiny")
    graph = load_onnx(model)
    run_passes(graph, ["fold", "eliminate", "infer-shapes", "layout-nhwc", "cancel-transposes", "infer-shapes"])
    assert any(n.op == "Conv" and n.inputs[0].type.layout.value == "NHWC" for n in graph.nodes)
    topo, _ = save_smaug(graph, tmp_path / "m_topo.pbtxt", smaug_backend=backend)
    back = load_smaug(topo, compute_dtype="float32")
    x = np.random.default_rng(0).random(graph.inputs[0].type.shape, dtype=np.float32)
    expected = run_ort(model, {graph.inputs[0].name: x})
    got = run_ort(graph_to_model(back), as_stored(back, {graph.inputs[0].name: x}))
    np.testing.assert_allclose(got, expected, rtol=0, atol=TOLERANCE[backend] * np.abs(expected).max())
