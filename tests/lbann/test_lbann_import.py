"""Reading real LBANN files: the Era C and Era A LeNets run end to end; stale files fail clearly."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import numpy as np
import onnx
import pytest
from lbann_helpers import lbann_file, onnx_outputs, strict_parse

import nnbridge
from nnbridge.base.errors import FormatError, InputError, ShapeError
from nnbridge.converters.lbann import textio
from nnbridge.converters.onnx import graph_to_model

LENET_SHAPES = {"conv1": [20, 24, 24], "pool1": [20, 12, 12], "conv2": [50, 8, 8], "pool2": [50, 4, 4],
                "ip1": [500], "relu1": [500], "ip2": [10], "prob": [10]}


def _params(graph) -> int:
    return sum(a.size for a in graph.initializers.values() if a.dtype == np.float32)


def test_era_c_lenet_structure(shared_data):
    pb = strict_parse(lbann_file(shared_data, "model_lenet_mnist_ckpt.prototext"))
    kinds = [layer.WhichOneof("layer_type") for layer in pb.model.layer]
    assert len(kinds) == 12
    assert sorted(kinds) == sorted(["input", "input", "convolution", "convolution", "pooling", "pooling",
                                    "fully_connected", "fully_connected", "relu", "softmax", "cross_entropy",
                                    "categorical_accuracy"])
    conv1 = next(layer for layer in pb.model.layer if layer.name == "conv1").convolution
    assert list(conv1.kernel_size) == [5] and conv1.has_bias.value  # broadcast; BoolValue set
    ip1 = next(layer for layer in pb.model.layer if layer.name == "ip1").fully_connected
    assert ip1.has_bias  # plain bool


@pytest.mark.parametrize("name, image", [("model_lenet_mnist_ckpt.prototext", "image"),
                                         ("legacy/model_lenet_mnist.prototext", "images")])
def test_lenet_loads_and_runs_on_reference(shared_data, name, image):
    graph = nnbridge.load(lbann_file(shared_data, name), input_shapes={image: (1, 28, 28)})
    shapes = {v.name: list(v.shape[1:]) for n in graph.nodes for v in n.outputs if v.name in LENET_SHAPES}
    assert shapes == LENET_SHAPES
    assert _params(graph) == 431_080
    assert [v.name for v in graph.inputs] == [image] and graph.inputs[0].shape == (64, 1, 28, 28)
    x = np.random.default_rng(0).random((64, 1, 28, 28), dtype=np.float32)
    got = nnbridge.run(graph, {image: x})["prob"]
    want = onnx_outputs(graph_to_model(graph), {image: x})[0]
    assert got.shape == (64, 10)
    np.testing.assert_allclose(got, want, rtol=1e-4, atol=1e-6)
    np.testing.assert_allclose(got.sum(axis=1), 1.0, rtol=1e-5)


def test_era_a_and_era_c_give_the_same_network(shared_data):
    a = nnbridge.load(lbann_file(shared_data, "legacy/model_lenet_mnist.prototext"),
                      input_shapes={"images": (1, 28, 28)})
    c = nnbridge.load(lbann_file(shared_data, "model_lenet_mnist_ckpt.prototext"),
                      input_shapes={"image": (1, 28, 28)})
    assert [(n.op, n.attrs, [o.shape for o in n.outputs]) for n in a.nodes] == \
        [(n.op, n.attrs, [o.shape for o in n.outputs]) for n in c.nodes]


def test_era_detection(shared_data):
    for name, era in (("model_lenet_mnist_ckpt.prototext", "C"), ("legacy/model_lenet_mnist.prototext", "A")):
        assert textio.parse(lbann_file(shared_data, name).read_text(), name)[1] == era


@pytest.mark.parametrize("name, field, line", [("mnist_cnn.prototext", '"type"', "line 2"),
                                               ("model_dnn_chem_ecfp.prototext", '"mini_batch_size"', "line 8")])
def test_stale_files_fail_naming_field_and_line(shared_data, name, field, line, tmp_path):
    path = lbann_file(shared_data, name)
    with pytest.raises(FormatError) as info:
        nnbridge.load(path, input_shapes={"x": (1,)})
    message = str(info.value)
    assert name in message and "lbann_data.Model" in message and field in message and line in message
    assert "Era A" in message  # the legacy diagnostic is given too
    run = subprocess.run([sys.executable, "-m", "nnbridge", "convert", str(path), str(tmp_path / "x.onnx"),
                          "--input-shape", "x=1"], capture_output=True, text=True)
    assert run.returncode == 1 and "Traceback" not in run.stderr and field in run.stderr + run.stdout
    assert not (tmp_path / "x.onnx").exists()


def test_missing_or_wrong_input_shapes(shared_data):
    path = lbann_file(shared_data, "model_lenet_mnist_ckpt.prototext")
    with pytest.raises(ShapeError, match="image=1x28x28"):
        nnbridge.load(path)
    with pytest.raises(InputError, match="image, label"):
        nnbridge.load(path, input_shapes={"data": (1, 28, 28)})
    with pytest.raises(ShapeError, match="conv1.*without the batch dim"):
        nnbridge.load(path, input_shapes={"image": (64, 1, 28, 28)})  # batch included by mistake


def test_cli_converts_lenet_to_onnx(shared_data, tmp_path):
    out = tmp_path / "lenet.onnx"
    run = subprocess.run([sys.executable, "-m", "nnbridge", "convert",
                          str(lbann_file(shared_data, "model_lenet_mnist_ckpt.prototext")), str(out),
                          "--input-shape", "image=1x28x28"], capture_output=True, text=True)
    assert run.returncode == 0, run.stderr
    model = onnx.load(out)
    onnx.checker.check_model(model)
    assert [d.dim_value for d in model.graph.input[0].type.tensor_type.shape.dim] == [64, 1, 28, 28]
    assert sum(int(np.prod(t.dims)) for t in model.graph.initializer if t.data_type == 1) == 431_080


def test_era_a_weights_and_column_major_values(tmp_path):
    """Era A: space-separated lists, initializers inside weights, has_bias omitted → no bias."""
    path = tmp_path / "a.prototext"
    path.write_text("""model {
  mini_batch_size: 2
  layer { name: "data" children: "x y" input { io_buffer: "partitioned" } }
  layer { name: "x" parents: "data" split {} }
  layer { name: "y" parents: "data" split {} }
  layer { name: "fc" parents: "x" weights: "w" fully_connected { num_neurons: 2 } }
  layer { name: "sig" parents: "fc" sigmoid {} }
  layer { name: "loss" parents: "sig y" mean_squared_error {} }
  weights { name: "w" value_initializer { values: "1 2 3 4 5 6 7 8" } }
}
""")
    graph = nnbridge.load(path, input_shapes={"x": (4,)})
    assert [n.op for n in graph.nodes] == ["Gemm", "Sigmoid"] and graph.inputs[0].shape == (2, 4)
    x = np.eye(4, dtype=np.float32)[:2]
    linear = np.array([[1, 3, 5, 7], [2, 4, 6, 8]], np.float32)  # out × in, filled column-major
    np.testing.assert_allclose(nnbridge.run(graph, {"x": x})["sig"], 1 / (1 + np.exp(-x @ linear.T)), rtol=1e-6)


def _era_a(tmp_path, layers: str, weights: str = "") -> Path:
    path = tmp_path / "a.prototext"
    path.write_text(f"model {{\n  mini_batch_size: 2\n{layers}\n{weights}\n}}\n")
    return path


def test_an_era_a_input_may_feed_any_layer(tmp_path):
    """v0.99 gives an input layer's first child the samples and its second the labels, whatever
    their type: a pass-through child becomes the input layer, another reads ``<input>_<field>``."""
    path = _era_a(tmp_path, """
  layer { name: "data" children: "images labels" input {} }
  layer { name: "images" parents: "data" identity {} }
  layer { name: "labels" parents: "data" identity {} }
  layer { name: "in2" children: "shaped dummy" input {} }
  layer { name: "shaped" parents: "in2" reshape { dims: "2 3" } }
  layer { name: "dummy" parents: "in2" dummy {} }
  layer { name: "s" parents: "images shaped" sum {} }""")
    graph = nnbridge.load(path, input_shapes={"images": (2, 3), "in2_samples": (6,)})
    assert [v.name for v in graph.inputs] == ["images", "in2_samples"]
    x, y = np.ones((2, 2, 3), np.float32), np.arange(12, dtype=np.float32).reshape(2, 6)
    np.testing.assert_array_equal(nnbridge.run(graph, {"images": x, "in2_samples": y})["s"], x + y.reshape(2, 2, 3))


def test_era_a_weights_layer_variance_operators_and_float_lists(tmp_path):
    path = _era_a(tmp_path, """
  layer { name: "data" children: "x y" input {} }
  layer { name: "x" parents: "data" split {} }
  layer { name: "y" parents: "data" split {} }
  layer { name: "w" weights: "wv" weights_layer { dims: "1 3" } }
  layer { name: "t" parents: "w" hint_layer: "x" tessellate {} }
  layer { name: "d" parents: "x t" subtract {} }
  layer { name: "a" parents: "d" abs {} }
  layer { name: "ws" parents: "a x" weighted_sum { scaling_factors: "0.5 -1.5" } }
  layer { name: "v" parents: "ws" variance { biased: true } }
  layer { name: "mae" parents: "ws y" mean_absolute_error {} }""",
                  '  weights { name: "wv" value_initializer { values: "1 2 3" } }')
    graph = nnbridge.load(path, input_shapes={"x": (2, 3)})
    x = np.random.default_rng(0).normal(size=(2, 2, 3)).astype(np.float32)
    ws = 0.5 * np.abs(x - np.array([1, 2, 3], np.float32)) - 1.5 * x
    np.testing.assert_allclose(nnbridge.run(graph, {"x": x})["v"], ws.reshape(2, -1).var(1, keepdims=True), rtol=1e-5)
    assert "mean_absolute_error" in path.read_text()  # a training layer: kept aside


def test_era_a_sizes_from_the_data_reader(tmp_path):
    """``num_neurons_from_data_reader`` (an autoencoder's reconstruction) is the samples' size;
    jag's ``get_num_neurons_of_slice_from_reader`` needs the reader, and is named."""
    layers = """
  layer { name: "input" children: "data dummy" input {} }
  layer { name: "data" parents: "input" split {} }
  layer { name: "dummy" parents: "input" dummy {} }
  layer { name: "enc" parents: "data" fully_connected { num_neurons: 3 has_bias: true } }
  layer { name: "dec" parents: "enc" num_neurons_from_data_reader: true fully_connected { has_bias: true } }"""
    graph = nnbridge.load(_era_a(tmp_path, layers), input_shapes={"data": (7,)})
    assert nnbridge.run(graph, {"data": np.ones((2, 7), np.float32)})["dec"].shape == (2, 7)
    bad = layers.replace("num_neurons_from_data_reader: true fully_connected {",
                         "fully_connected { get_num_neurons_of_slice_from_reader: 1")
    with pytest.raises(FormatError, match="get_num_neurons_of_slice_from_reader 'independent': its size comes from "
                                          "LBANN's data reader.*--lbann-slice-points independent="):
        nnbridge.load(_era_a(tmp_path, bad), input_shapes={"data": (7,)})


def test_era_a_jag_sizes_from_the_readers_slice_points(tmp_path):
    """v0.99's JAG models slice their samples at the points the reader gives and size layers by
    slices (get_num_neurons_of_slice_from_reader: the summed sizes of the listed slices); v0.99's
    reader gives the independent points for 'dependent' too."""
    layers = """
  layer { name: "input" children: "data dummy" input {} }
  layer { name: "data" parents: "input" split {} }
  layer { name: "dummy" parents: "input" dummy {} }
  layer { name: "cut" parents: "data" children: "img par" slice { get_slice_points_from_reader: "dependent" } }
  layer { name: "img" parents: "cut" identity {} }
  layer { name: "par" parents: "cut" identity {} }
  layer { name: "dec" parents: "par" fully_connected {
    get_slice_points_from_reader: "independent" get_num_neurons_of_slice_from_reader: [1, 2] } }"""
    graph = nnbridge.load(_era_a(tmp_path, layers), input_shapes={"data": (7,)},
                          lbann_slice_points={"independent": (0, 5, 7)})
    x = np.arange(14, dtype=np.float32).reshape(2, 7)
    out = nnbridge.run(graph, {"data": x})
    np.testing.assert_array_equal(out["img"], x[:, :5])
    assert out["dec"].shape == (2, 7)  # slices 1 and 2: 5 + 2
    with pytest.raises(FormatError, match=r"get_num_neurons_of_slice_from_reader \[1, 2\] names a slice the "
                                          r"reader's 2 slice points \[0, 7\] do not have"):
        nnbridge.load(_era_a(tmp_path, layers), input_shapes={"data": (7,)}, lbann_slice_points={"independent": (0, 7)})



def test_a_model_of_training_layers_only_says_how_to_import_them(tmp_path):
    """LBANN's loss unit tests are an input and the loss: nothing is left at inference."""
    path = tmp_path / "m.prototext"
    path.write_text('model {\n  layer { name: "x" input { data_field: "samples" } }\n'
                    '  layer { name: "l" parents: "x" l2_norm2 {} }\n}\n')
    with pytest.raises(FormatError, match=r"losses, metrics .*\(--lbann-training-layers"):
        nnbridge.load(path, input_shapes={"x": (3,)})
    graph = nnbridge.load(path, input_shapes={"x": (3,)}, lbann_training_layers=True, batch_size=2)
    x = np.arange(6, dtype=np.float32).reshape(2, 3)
    np.testing.assert_allclose(nnbridge.run(graph, {"x": x})["l"].reshape(-1), (x ** 2).sum(1), rtol=1e-6)


def test_cli_reads_lbann_slice_points_and_refuses_bad_ones(tmp_path, cli):
    """``--lbann-slice-points CATEGORY=P0,P1,…``: used for a file whose layers ask the reader,
    refused in one line (exit 2) when misspelt, malformed or given for another format."""
    body = """model {
  layer { name: "x" input { data_field: "samples" } }
  layer { name: "s" parents: "x" children: "a" children: "b" slice { get_slice_points_from_reader: "independent" } }
  layer { name: "a" parents: "s" identity {} }
  layer { name: "b" parents: "s" identity {} }
}
"""
    path = tmp_path / "jag.prototext"
    path.write_text(body)
    out = tmp_path / "out"
    code, text = cli("run", path, "--input-shape", "x=5", "--lbann-slice-points", "independent=0,2,5", "--out", out)
    assert code == 0, text
    assert np.load(out / "b.npy").shape == (1, 3)
    for bad, why in (("independant=0,2,5", "give independent= or dependent="),
                     ("independent=0,5,2", "increasing points"), ("independent=0;2", "write increasing integers")):
        code, text = cli("run", path, "--input-shape", "x=5", "--lbann-slice-points", bad)
        assert code == 2 and why in text and text.strip().count("\n") == 0, text
    code, text = cli("run", path, "--input-shape", "x=5")
    assert code == 1 and "--lbann-slice-points independent=" in text
    onnx_file = tmp_path / "m.onnx"
    nnbridge.convert(path, onnx_file, input_shapes={"x": (5,)}, lbann_slice_points={"independent": (0, 2, 5)})
    code, text = cli("run", onnx_file, "--lbann-slice-points", "independent=0,2,5")
    assert code == 2 and "lbann_slice_points: not read when reading the onnx file" in text
