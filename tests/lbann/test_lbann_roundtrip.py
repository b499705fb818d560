"""ONNX → LBANN → ONNX agrees with onnxruntime on the original, weights inline and as .npy."""

from __future__ import annotations

import subprocess
import sys

import numpy as np
import onnx
import pytest
from lbann_helpers import assert_fields_in_spec, onnx_outputs, roundtrip_vs_onnxruntime, strict_parse
from onnx import TensorProto, helper, numpy_helper

import nnbridge
import nnbridge.zoo
from nnbridge.base.errors import UnsupportedOpError
from nnbridge.converters.onnx import graph_to_model

EXPRESSIBLE_ZOO = ["mlp", "minerva", "lenet5", "cnn10", "vgg_cifar", "resnet_tiny", "transformer_tiny"]
#: inline weights for the models under the 1 M-parameter default threshold (above it text is
#: ~15 bytes per value and the default is .npy); value: whole-file strict parse (slow for >300 k values)
INLINE_ZOO = {"mlp": True, "minerva": False, "lenet5": False, "resnet_tiny": True, "transformer_tiny": True}
CASES = [(name, "npy", True) for name in EXPRESSIBLE_ZOO] + [(n, "inline", s) for n, s in INLINE_ZOO.items()]


@pytest.mark.parametrize("name, weights, strict", CASES)
def test_zoo_roundtrip(tmp_path, name, weights, strict):
    version = "develop" if name == "transformer_tiny" else "0.104"  # LayerNorm over the last axis: start_dim
    path = tmp_path / f"{name}.prototext"
    roundtrip_vs_onnxruntime(nnbridge.zoo.build(name), path, lbann_weights=weights, lbann_version=version,
                             strict=strict)
    lines = [line.strip() for line in path.read_text().splitlines()]
    init = "value_initializer {" if weights == "inline" else "numpy_initializer {"
    assert lines.count("initializer {") == lines.count(init) > 0  # every weights object carried one way
    npys = list((tmp_path / f"{name}_weights").glob("*.npy"))
    assert (len(npys) > 0) == (weights == "npy")


def test_default_weights_mode_follows_the_size_threshold(tmp_path):
    small, large = tmp_path / "mlp.prototext", tmp_path / "cnn10.prototext"
    nnbridge.convert(nnbridge.zoo.build("mlp"), small)
    nnbridge.convert(nnbridge.zoo.build("cnn10"), large)  # 2.2 M parameters
    assert "value_initializer" in small.read_text() and "numpy_initializer" not in small.read_text()
    assert "numpy_initializer" in large.read_text() and "value_initializer" not in large.read_text()


def test_inexpressible_zoo_models_list_every_offending_node(tmp_path):
    with pytest.raises(UnsupportedOpError) as info:
        nnbridge.convert(nnbridge.zoo.build("lstm_small"), tmp_path / "lstm.prototext")
    assert {i.op for i in info.value.items} >= {"LSTM"}
    assert any("batch" in i.reason for i in info.value.items)  # [seq, batch, …] tensors
    assert not list(tmp_path.iterdir())  # no partial output


def test_layer_norm_over_the_last_axis_is_instance_norm_then_scale_and_bias_before_develop(tmp_path):
    """LBANN 0.104's layer_norm normalizes whole samples; a transformer's LayerNorm over the
    hidden axis is written as instance_norm over [tokens, hidden] rows (ir/decompositions.py)."""
    roundtrip_vs_onnxruntime(nnbridge.zoo.build("transformer_tiny"), tmp_path / "t.prototext", lbann_version="0.104")
    text = (tmp_path / "t.prototext").read_text()
    assert "instance_norm" in text and "layer_norm" not in text
    roundtrip_vs_onnxruntime(nnbridge.zoo.build("transformer_tiny"), tmp_path / "d.prototext",
                             lbann_version="develop")
    assert "layer_norm" in (tmp_path / "d.prototext").read_text()


LIGHT = ["light_squeezenet", "light_shufflenet",
         pytest.param("light_inception_v2", marks=pytest.mark.slow),  # asymmetric max pooling: pre-padded
         pytest.param("light_resnet50", marks=pytest.mark.slow),
         pytest.param("light_densenet121", marks=pytest.mark.slow)]


@pytest.mark.parametrize("name", LIGHT)
def test_light_models_roundtrip(onnx_data, tmp_path, name):
    roundtrip_vs_onnxruntime(onnx_data / "light" / f"{name}.onnx", tmp_path / f"{name}.prototext",
                             lbann_weights="npy")


def test_light_model_with_uncounted_asymmetric_average_pooling_is_refused(onnx_data, tmp_path):
    with pytest.raises(UnsupportedOpError, match="asymmetric pads .* count_include_pad = 0") as info:
        nnbridge.convert(onnx_data / "light" / "light_inception_v1.onnx", tmp_path / "m.prototext")
    assert len(info.value.items) == 1


def _model(nodes, inputs, outputs, inits=()):
    graph = helper.make_graph(nodes, "g", inputs, outputs, list(inits))
    return helper.make_model(graph, opset_imports=[helper.make_opsetid("", 26)])


def _vi(name, shape, dtype=TensorProto.FLOAT):
    return helper.make_tensor_value_info(name, dtype, shape)


def test_operator_and_tensor_mappings(tmp_path):
    """Element-wise operators, constants, scale-bias, slicing, concat, permute, embedding, matmul."""
    rng = np.random.default_rng(1)
    const = lambda name, shape: numpy_helper.from_array(rng.random(shape, dtype=np.float32) + 0.5, name)  # noqa: E731
    inits = [const("chan", [1, 4, 1, 1]), const("full", [4, 3, 2]), const("div", [4, 3, 2]),
             numpy_helper.from_array(np.float32(2.0), "two"), numpy_helper.from_array(np.float32(0.5), "half"),
             const("table", [10, 6]), numpy_helper.from_array(np.array([1, 2], np.int64), "starts"),
             numpy_helper.from_array(np.array([3, 4], np.int64), "ends"),
             numpy_helper.from_array(np.array([2, 3], np.int64), "axes")]
    nodes = [
        helper.make_node("Mul", ["x", "chan"], ["a"]),             # channelwise_scale_bias
        helper.make_node("Sub", ["full", "a"], ["b"]),             # entrywise_scale_bias
        helper.make_node("Div", ["b", "div"], ["c"]),              # weights_layer + Divide
        helper.make_node("Add", ["c", "two"], ["d"]),              # AddConstant
        helper.make_node("Div", ["half", "d"], ["e"]),             # Reciprocal + Scale
        helper.make_node("Sigmoid", ["e"], ["f"]),
        helper.make_node("Clip", ["f", "half", ""], ["g"]),
        helper.make_node("Mul", ["g", "f"], ["h"]),
        helper.make_node("Split", ["h"], ["s1", "s2"], axis=2, num_outputs=2),
        helper.make_node("Concat", ["s2", "s1"], ["cat"], axis=2),
        helper.make_node("Transpose", ["cat"], ["t"], perm=[0, 3, 1, 2]),
        helper.make_node("Slice", ["t", "starts", "ends", "axes"], ["sl"]),
        helper.make_node("Pow", ["sl", "two"], ["sq"]),
        helper.make_node("Gather", ["table", "idx"], ["emb"]),
        helper.make_node("Transpose", ["emb"], ["embT"], perm=[0, 2, 1]),
        helper.make_node("MatMul", ["emb", "embT"], ["mm"]),
        helper.make_node("LeakyRelu", ["mm"], ["lr"], alpha=0.2),
        helper.make_node("Tanh", ["lr"], ["out2"]),
    ]
    model = _model(nodes, [_vi("x", [1, 4, 3, 2]), _vi("idx", [1, 5], TensorProto.INT64)],
                   [_vi("sq", None), _vi("out2", None)], inits)
    roundtrip_vs_onnxruntime(model, tmp_path / "ops.prototext", lbann_weights="inline")
    text = (tmp_path / "ops.prototext").read_text()
    for kind in ("channelwise_scale_bias", "entrywise_scale_bias", "weights_layer", "slice", "permute",
                 "embedding", "matmul", "ReciprocalOperator", "ClampOperator", "AddConstantOperator"):
        assert kind in text, kind


def test_batch_dimension_is_guarded(tmp_path):
    nodes = [helper.make_node("Transpose", ["x"], ["t"], perm=[1, 0, 2]),
             helper.make_node("Flatten", ["x"], ["f"], axis=0),
             helper.make_node("Softmax", ["x"], ["s"], axis=0),
             helper.make_node("ReduceMax", ["x"], ["r"])]
    model = _model(nodes, [_vi("x", [2, 3, 4])], [_vi(n, None) for n in ("t", "f", "s", "r")])
    with pytest.raises(UnsupportedOpError) as info:
        nnbridge.convert(model, tmp_path / "bad.prototext")
    assert sorted(i.op for i in info.value.items) == ["Flatten", "ReduceMax", "Softmax", "Transpose"]
    assert not (tmp_path / "bad.prototext").exists()


def test_symbolic_batch_is_kept_per_sample(tmp_path):
    nodes = [helper.make_node("Relu", ["x"], ["y"])]
    model = _model(nodes, [_vi("x", ["N", 3])], [_vi("y", ["N", 3])])
    path = tmp_path / "relu.prototext"
    nnbridge.convert(model, path)
    assert "nnbridge-input: x 3 float32" in path.read_text()
    graph = nnbridge.load(path)
    assert graph.inputs[0].shape == (1, 3)  # mini_batch_size 1 for a symbolic batch


def test_cli_onnx_to_lbann_and_back(tmp_path):
    src, mid, back = tmp_path / "mlp.onnx", tmp_path / "mlp.prototext", tmp_path / "back.onnx"
    onnx.save(nnbridge.zoo.build("mlp"), src)
    for args in ([str(src), str(mid), "--lbann-weights", "npy", "-o", "lbann_version=develop"],
                 [str(mid), str(back)]):  # the nnbridge header carries the input shape
        run = subprocess.run([sys.executable, "-m", "nnbridge", "convert", *args], capture_output=True, text=True)
        assert run.returncode == 0, run.stderr
    assert "numpy_initializer" in mid.read_text() and (tmp_path / "mlp_weights").is_dir()
    original, restored = onnx.load(src), onnx.load(back)
    x = np.random.default_rng(0).standard_normal(
        [d.dim_value for d in original.graph.input[0].type.tensor_type.shape.dim]).astype(np.float32)
    np.testing.assert_allclose(onnx_outputs(restored, {restored.graph.input[0].name: x})[0],
                               onnx_outputs(original, {original.graph.input[0].name: x})[0], rtol=1e-5, atol=1e-6)


def test_integer_arithmetic_is_refused(tmp_path):
    model = _model([helper.make_node("Add", ["i", "i"], ["j"])], [_vi("i", [1, 3], TensorProto.INT64)],
                   [_vi("j", [1, 3], TensorProto.INT64)])
    with pytest.raises(UnsupportedOpError, match="'j' is int64; LBANN layers compute in floating point"):
        nnbridge.convert(model, tmp_path / "int.prototext")


@pytest.mark.parametrize("op, attrs", [("MaxPool", {}), ("AveragePool", {"count_include_pad": 1})])
def test_asymmetric_pooling_pads_become_constant_slabs(tmp_path, op, attrs):
    node = helper.make_node(op, ["x"], ["y"], kernel_shape=[3, 3], strides=[2, 2], pads=[0, 1, 1, 2], **attrs)
    model = _model([node], [_vi("x", [1, 2, 7, 6])], [_vi("y", None)])
    roundtrip_vs_onnxruntime(model, tmp_path / "pool.prototext")
    assert (tmp_path / "pool.prototext").read_text().count("concatenation {") == 2


def _agrees_with_onnxruntime(model, path, feeds) -> str:
    """``model`` → LBANN file (schema-checked) → nnbridge → ONNX agrees with onnxruntime on ``model``."""
    nnbridge.convert(model, path)
    assert_fields_in_spec(strict_parse(path))
    graph = nnbridge.load(path)
    exported = graph_to_model(graph)
    got = onnx_outputs(exported, {v.name: x for v, x in zip(graph.inputs, feeds.values())})
    for g, w in zip(got, onnx_outputs(model, feeds)):
        np.testing.assert_allclose(g, w, rtol=1e-5, atol=1e-6)
    return path.read_text()


def test_one_hot_of_a_broadcast_index_is_an_equal_operator(tmp_path):
    """(idx.unsqueeze(-1) == arange(C)).float(): the index tiled over the classes, compared with
    a constant range (LBANN's EqualOperator gives 1.0 / 0.0)."""
    nodes = [helper.make_node("Floor", ["x"], ["idx"]), helper.make_node("Equal", ["idx", "classes"], ["hit"]),
             helper.make_node("Cast", ["hit"], ["one_hot"], to=TensorProto.FLOAT),
             helper.make_node("Less", ["x", "two"], ["low"]), helper.make_node("Cast", ["low"], ["mask"], to=1)]
    inits = [numpy_helper.from_array(np.arange(5, dtype=np.float32), "classes"),
             numpy_helper.from_array(np.float32(2.0), "two")]
    model = _model(nodes, [_vi("x", [2, 4, 1])], [_vi("one_hot", None), _vi("mask", None)], inits)
    x = np.array([[[0.5], [3.2], [4.0], [7.0]], [[1.9], [2.0], [-1.0], [0.0]]], np.float32)
    text = _agrees_with_onnxruntime(model, tmp_path / "onehot.prototext", {"x": x})
    assert "EqualOperator" in text and "tessellate" in text and "LessConstantOperator" in text


@pytest.mark.parametrize("op, shape, axes, keepdims", [
    ("ReduceSum", [2, 3, 4], [2], 0), ("ReduceSum", [2, 3, 4, 5], [2], 1), ("ReduceSum", [2, 3, 4, 5], [1], 0),
    ("ReduceSum", [2, 3, 4, 5], [-2, -1], 1), ("ReduceMean", [2, 3, 4, 5], [1], 0)])
def test_reduce_over_some_axes_of_a_sample_is_a_constant_matmul(tmp_path, op, shape, axes, keepdims):
    model = _model([helper.make_node(op, ["x", "axes"], ["y"], keepdims=keepdims)], [_vi("x", shape)],
                   [_vi("y", None)], [numpy_helper.from_array(np.array(axes, np.int64), "axes")])
    x = np.random.default_rng(2).standard_normal(shape).astype(np.float32)
    assert "fully_connected" in _agrees_with_onnxruntime(model, tmp_path / "reduce.prototext", {"x": x})


@pytest.mark.parametrize("attrs, size, kind", [
    ({"mode": "nearest"}, [1, 2, 6, 6], "tessellate"),
    ({"mode": "nearest", "coordinate_transformation_mode": "asymmetric", "nearest_mode": "floor"}, [1, 2, 9, 3],
     "tessellate"),
    ({"mode": "linear"}, [1, 2, 6, 6], "bilinear_resize"),
    ({"mode": "linear", "coordinate_transformation_mode": "pytorch_half_pixel"}, [1, 2, 5, 2], "bilinear_resize")])
def test_nearest_and_bilinear_resize(tmp_path, attrs, size, kind):
    model = _model([helper.make_node("Resize", ["x", "", "", "sizes"], ["y"], **attrs)], [_vi("x", [1, 2, 3, 3])],
                   [_vi("y", None)], [numpy_helper.from_array(np.array(size, np.int64), "sizes")])
    x = np.random.default_rng(3).standard_normal([1, 2, 3, 3]).astype(np.float32)
    assert kind in _agrees_with_onnxruntime(model, tmp_path / "resize.prototext", {"x": x})


def test_transpose_of_unit_dims_is_a_reshape_and_squeeze_without_axes_keeps_the_batch(tmp_path):
    nodes = [helper.make_node("Transpose", ["x"], ["t"], perm=[0, 2, 1, 3]), helper.make_node("Squeeze", ["t"], ["y"])]
    model = _model(nodes, [_vi("x", [2, 1, 3, 4])], [_vi("y", None)])
    x = np.random.default_rng(4).standard_normal([2, 1, 3, 4]).astype(np.float32)
    text = _agrees_with_onnxruntime(model, tmp_path / "squeeze.prototext", {"x": x})
    assert "permute" not in text and "reshape" in text
