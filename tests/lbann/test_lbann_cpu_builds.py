"""What nnbridge writes runs on LBANN's CPU builds as on its GPU builds: no average_no_pad pooling
where pads are zero (CPU pooling aborts on it), permute only with a note (it needs cuTENSOR), LRN
as layers both builds compute alike, absolute .npy paths (LBANN resolves relative ones against its
working directory), data fields a stock reader provides, and no inline weights too large to read."""

from __future__ import annotations

import subprocess
import sys

import numpy as np
import onnx
import pytest
from lbann_helpers import roundtrip_vs_onnxruntime, strict_parse
from onnx import TensorProto, helper

import nnbridge
import nnbridge.zoo
from nnbridge.base.errors import InputError, SecurityError, UnsupportedOpError
from nnbridge.converters.lbann import graph_to_lbann, textio
from nnbridge.converters.lbann.writer import text_notes

LIGHT = ["light_bvlc_alexnet", "light_densenet121", "light_inception_v1", "light_inception_v2", "light_resnet50",
         "light_shufflenet", "light_squeezenet", "light_vgg19", "light_zfnet512"]


def _layers(graph):
    try:
        message, _, _ = graph_to_lbann(graph)
    except UnsupportedOpError:
        return []  # refused as a whole: nothing is written
    permutes = [layer for layer in message.model.layer if layer.WhichOneof("layer_type") == "permute"]
    notes = text_notes(textio.to_text(message).splitlines())
    assert bool(permutes) == bool(notes)  # a permute never goes without the note on GPU builds
    return list(message.model.layer)


@pytest.mark.slow
@pytest.mark.parametrize("name", LIGHT + [f"zoo:{m}" for m in nnbridge.zoo.names()])
def test_no_average_no_pad_without_pads_no_lrn_layer_and_no_unnoted_permute(onnx_data, name):
    graph = nnbridge.load(nnbridge.zoo.build(name[4:]) if name.startswith("zoo:") else
                          onnx_data / "light" / f"{name}.onnx")
    for layer in _layers(graph):
        kind = layer.WhichOneof("layer_type")
        assert kind != "local_response_normalization", layer.name
        if kind == "pooling" and layer.pooling.pool_mode == "average_no_pad":
            assert any(layer.pooling.pool_pads), f"{layer.name}: average_no_pad without pads"


def _lrn_model(size: int) -> onnx.ModelProto:
    node = helper.make_node("LRN", ["x"], ["y"], size=size, alpha=0.02, beta=0.6, bias=1.5)
    graph = helper.make_graph([node], "lrn", [helper.make_tensor_value_info("x", TensorProto.FLOAT, [2, 7, 3, 4])],
                              [helper.make_tensor_value_info("y", TensorProto.FLOAT, [2, 7, 3, 4])])
    return helper.make_model(graph, opset_imports=[helper.make_opsetid("", 26)])


@pytest.mark.parametrize("size", [1, 3, 5])
def test_lrn_is_written_as_layers_that_match_onnxruntime(tmp_path, size):
    path = tmp_path / "lrn.prototext"
    roundtrip_vs_onnxruntime(_lrn_model(size), path, rtol=1e-5)
    kinds = {layer.WhichOneof("layer_type") for layer in strict_parse(path).model.layer}
    assert "local_response_normalization" not in kinds and "convolution" in kinds


def test_an_even_lrn_window_matches_the_onnx_formula(tmp_path):
    """onnxruntime refuses even sizes and onnx.reference's LRN loops over the batch instead of the
    channels; the judge is the formula of ONNX's operator text, in numpy: channels
    max(0, c − ⌊(size−1)/2⌋) … min(C−1, c + ⌈(size−1)/2⌉)."""
    x = np.random.default_rng(0).normal(size=(2, 7, 3, 4)).astype(np.float32)
    squares = np.zeros_like(x)
    for c in range(7):
        squares[:, c] = (x[:, max(0, c - 1):min(6, c + 2) + 1] ** 2).sum(1)
    want = x / (1.5 + 0.02 / 4 * squares) ** 0.6
    nnbridge.convert(_lrn_model(4), tmp_path / "lrn.prototext")
    got = nnbridge.run(nnbridge.load(tmp_path / "lrn.prototext"), {"x": x})
    np.testing.assert_allclose(next(iter(got.values())), want, rtol=1e-5, atol=1e-6)


def test_a_permute_is_written_with_a_note_about_gpu_builds(tmp_path):
    node = helper.make_node("Transpose", ["x"], ["y"], perm=[0, 2, 1])
    graph = helper.make_graph([node], "t", [helper.make_tensor_value_info("x", TensorProto.FLOAT, [1, 3, 5])],
                              [helper.make_tensor_value_info("y", TensorProto.FLOAT, [1, 5, 3])])
    source = tmp_path / "t.onnx"
    onnx.save(helper.make_model(graph, opset_imports=[helper.make_opsetid("", 26)]), source)
    done = subprocess.run([sys.executable, "-m", "nnbridge", "convert", str(source), str(tmp_path / "t.prototext")],
                          capture_output=True, text=True)
    assert done.returncode == 0, done.stderr
    assert "permute" in (tmp_path / "t.prototext").read_text()
    assert "1 permute layer (transposes): LBANN builds permute only with GPUs and cuTENSOR" in done.stdout


def test_npy_paths_are_absolute_by_default_and_relative_on_request(tmp_path):
    graph = nnbridge.zoo.build("cnn10")
    nnbridge.convert(graph, tmp_path / "a.prototext", lbann_weights="npy")
    files = [w.initializer.numpy_initializer.file for w in strict_parse(tmp_path / "a.prototext").model.weights]
    assert files and all(f.startswith(str(tmp_path.resolve())) for f in files)
    nnbridge.convert(graph, tmp_path / "b.prototext", lbann_weights="npy", lbann_npy_paths="relative")
    files = [w.initializer.numpy_initializer.file for w in strict_parse(tmp_path / "b.prototext").model.weights]
    assert all(f.startswith("b_weights/") for f in files)


def test_weights_outside_the_model_directory_need_trust(tmp_path):
    nnbridge.convert(nnbridge.zoo.build("mlp"), tmp_path / "m.prototext", lbann_weights="npy")
    moved = tmp_path / "elsewhere"
    moved.mkdir()
    (tmp_path / "m.prototext").rename(moved / "m.prototext")  # its absolute .npy paths now point outside
    with pytest.raises(SecurityError, match="--lbann-trust-paths"):
        nnbridge.load(moved / "m.prototext")
    trusted = nnbridge.load(moved / "m.prototext", lbann_trust_paths=True)
    assert trusted.initializers


def test_inputs_get_data_fields_stock_readers_provide(tmp_path):
    inputs = [helper.make_tensor_value_info(n, TensorProto.FLOAT, [1, 3]) for n in ("a", "b", "c")]
    graph = helper.make_graph([helper.make_node("Sum", ["a", "b", "c"], ["y"])], "three", inputs,
                              [helper.make_tensor_value_info("y", TensorProto.FLOAT, [1, 3])])
    nnbridge.convert(helper.make_model(graph, opset_imports=[helper.make_opsetid("", 26)]), tmp_path / "s.prototext")
    fields = [layer.input.data_field for layer in strict_parse(tmp_path / "s.prototext").model.layer
              if layer.WhichOneof("layer_type") == "input"]
    assert fields == ["samples", "labels", "responses"]


@pytest.mark.slow
@pytest.mark.memory
def test_inline_vgg19_is_refused_while_the_default_writes_npy(onnx_data, tmp_path):
    source = onnx_data / "light" / "light_vgg19.onnx"
    with pytest.raises(InputError, match=r"inline weights: 143,667,240 values .* write them as \.npy"):
        nnbridge.convert(source, tmp_path / "inline.prototext", lbann_weights="inline")
    assert not list(tmp_path.iterdir())
    nnbridge.convert(source, tmp_path / "vgg.prototext")
    assert "numpy_initializer" in (tmp_path / "vgg.prototext").read_text()
    assert len(list((tmp_path / "vgg_weights").glob("*.npy"))) == 38
    got = nnbridge.run(nnbridge.load(tmp_path / "vgg.prototext"), {"data_0": np.zeros((1, 3, 224, 224), np.float32)})
    assert np.isfinite(next(iter(got.values()))).all()
