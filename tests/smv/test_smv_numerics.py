"""SMV numerics: fp16 storage, fp32 accumulation over tiles, SMAUG's padding and tiling —
checked against an independent float64 computation, onnxruntime (zoo, light models) and the
data README's outputs of SMAUG's own example files."""

from __future__ import annotations

import numpy as np
import onnx
import pytest
from numpy.lib.stride_tricks import sliding_window_view
from onnx import TensorProto, helper, numpy_helper

import nnbridge
from nnbridge import zoo

F16 = np.float16


def fp16(x):
    return np.asarray(x, dtype=np.float32).astype(F16).astype(np.float64)


def conv_model(x_shape, w, pads, stride):
    graph = helper.make_graph(
        [helper.make_node("Conv", ["x", "w"], ["y"], pads=list(pads), strides=[stride, stride])], "conv",
        [helper.make_tensor_value_info("x", TensorProto.FLOAT, list(x_shape))],
        [helper.make_tensor_value_info("y", TensorProto.FLOAT, None)], [numpy_helper.from_array(w, "w")])
    return helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)])


def conv64(x, w, pads, stride):
    """Direct float64 convolution of NCHW x with OIHW w; pads = [top, left, bottom, right]."""
    xp = np.pad(x, ((0, 0), (0, 0), (pads[0], pads[2]), (pads[1], pads[3])))
    win = sliding_window_view(xp, w.shape[2:], axis=(2, 3))[:, :, ::stride, ::stride]
    return np.einsum("nchwij,kcij->nkhw", win, w)


# multi-tile convolutions from spec §7.1 (smaller K where the tile pattern is kept)
CONVS = [  # (C, H, W, K, k, stride, pads), why
    ((192, 32, 32, 32, 4, 1, (2, 2, 1, 1)), "NCH inputs, channel tiles, even kernel 'same' (extra top/left)"),
    ((256, 8, 8, 256, 3, 1, (1, 1, 1, 1)), "56-ofmap x 32-channel weight tiles, accumulation over 8 tiles"),
    ((3, 225, 225, 64, 7, 2, (3, 3, 3, 3)), "ResNet stem: 56 row tiles with halo, stride 2"),
    ((32, 64, 64, 16, 5, 3, (0, 0, 0, 0)), "valid, stride 3, row tiles"),
    ((32, 64, 64, 16, 4, 1, (1, 1, 2, 2)), "padding SMAUG cannot express: CPU Padding + valid conv"),
]


@pytest.mark.parametrize("case", [c for c, _ in CONVS], ids=[why for _, why in CONVS])
def test_tiled_conv_matches_float64_within_one_fp16_rounding(case):
    c, h, wd, k, ks, stride, pads = case
    rng = np.random.default_rng(7)
    x = rng.standard_normal((1, c, h, wd)).astype(np.float32)
    w = (rng.standard_normal((k, c, ks, ks)) / np.sqrt(c * ks * ks)).astype(np.float32)
    exe = nnbridge.compile(conv_model(x.shape, w, pads, stride), backend="smv")
    conv_steps = [s for s in exe.steps if s.family == "conv"]
    assert len(conv_steps) == 1 and conv_steps[0].params["act"] is None
    assert sum(p.num_invocations for p in exe.plans[exe.steps.index(conv_steps[0])]) > 1
    got = exe.run({"x": x})["y"].astype(np.float64)
    want = conv64(fp16(x), fp16(w), pads, stride)
    assert got.shape == want.shape
    np.testing.assert_allclose(got, fp16(want), rtol=2**-10, atol=1e-6)  # one fp16 rounding, fp32 sums


def test_fp16_storage_is_observable_where_fp32_numerics_would_not_be():
    """Values between fp16 neighbours come back as exactly their fp16 rounding: a simulator
    computing in fp32 fails this test (the tolerance tests above would also pass in fp32)."""
    x = (1 + np.arange(1, 65, dtype=np.float32) * 2**-14).reshape(1, 4, 4, 4)  # fp16 spacing at 1 is 2**-10
    graph = helper.make_graph([helper.make_node("Relu", ["x"], ["y"])], "relu",
                              [helper.make_tensor_value_info("x", TensorProto.FLOAT, list(x.shape))],
                              [helper.make_tensor_value_info("y", TensorProto.FLOAT, None)])
    exe = nnbridge.compile(helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)]), backend="smv")
    got = exe.run({"x": x})["y"]
    assert np.array_equal(got, x.astype(F16).astype(np.float32))
    assert float(np.max(np.abs(got - x))) >= 2**-12  # fp32 storage would give 0


def test_fc_accumulates_activation_tiles_in_fp32_and_rounds_once():
    rng = np.random.default_rng(3)
    x = rng.standard_normal((1, 4608)).astype(np.float32)
    w = (rng.standard_normal((4608, 128)) / 68).astype(np.float32)
    graph = helper.make_graph([helper.make_node("MatMul", ["x", "w"], ["y"])], "fc",
                              [helper.make_tensor_value_info("x", TensorProto.FLOAT, [1, 4608])],
                              [helper.make_tensor_value_info("y", TensorProto.FLOAT, None)],
                              [numpy_helper.from_array(w, "w")])
    exe = nnbridge.compile(helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)]), backend="smv")
    assert exe.plans[0][0].tiled["weights"].counts == (16, 3)  # 8x2048 tiles, 3 activation tiles
    got = exe.run({"x": x})["y"].astype(np.float64)
    np.testing.assert_allclose(got, fp16(fp16(x) @ fp16(w)), rtol=2**-10, atol=1e-6)


def test_outputs_are_fp16_values_and_fused_activation_runs_before_the_store():
    model = zoo.build("cnn10")
    exe = nnbridge.compile(model, backend="smv")
    assert any("+Relu" in s.op for s in exe.steps)
    out = next(iter(exe.run(nnbridge.api.inputs.random_inputs(exe.graph)).values()))
    assert np.array_equal(out, out.astype(F16).astype(out.dtype))


@pytest.mark.parametrize("name", zoo.names())
def test_zoo_agrees_with_onnxruntime_within_fp16_tolerance(name):
    result = nnbridge.check(zoo.build(name), backend="smv")
    assert result.ok, [(o.name, o.max_abs_err, o.err_vs_scale) for o in result.outputs]
    assert result.rule.name == "fp16"  # the verdict table's row for SMV (docs/check.md)


def test_light_shufflenet_stops_where_smaugs_pooling_tiler_crashes(onnx_data):
    """Its stem max pool (24 channels, 114x114 padded, 3x3/2) makes SMAUG pair 29 input row tiles
    with 28 output tiles, and no channel group avoids it: the real runtime segfaults, so the
    simulator refuses the node in one line instead of inventing a schedule or a CPU fallback."""
    with pytest.raises(nnbridge.UnsupportedOpError) as info:
        nnbridge.compile(str(onnx_data / "light" / "light_shufflenet.onnx"), backend="smv")
    assert [(i.op, i.node) for i in info.value.items] == [("MaxPool", "n3")]
    assert "crashes" in info.value.items[0].reason and len(info.value.lines()) == 1


def test_fp16_overflow_is_faithful():
    """Values beyond fp16's range become inf, as in SMV's host memory."""
    graph = helper.make_graph([helper.make_node("Mul", ["x", "x"], ["y"])], "sq",
                              [helper.make_tensor_value_info("x", TensorProto.FLOAT, [1, 8])],
                              [helper.make_tensor_value_info("y", TensorProto.FLOAT, [1, 8])])
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)])
    y = nnbridge.run(model, {"x": np.full((1, 8), 300.0, np.float32)}, backend="smv")["y"]
    assert np.isinf(y).all()


# data/README.md §1.3 item 9: outputs for the shipped inputs
README_OUTPUTS = {
    "minerva/minerva_smv_topo.pbtxt": [0.0013542, 0.0013657, 0.0012493, 0.0013380, 0.0012674, 0.0012264, 0.0012150,
                                       0.0013733, 0.0013552, 0.0012598],
    "lenet5/lenet5_smv_topo.pbtxt": [1.744e-4, 1.700e-4, 1.767e-4, 1.708e-4, 1.502e-4, 1.675e-4, 1.725e-4, 1.680e-4,
                                     1.538e-4, 1.693e-4],
    "minerva/minerva_ref_topo.pbtxt": [0.0013545, 0.0013653, 0.0012493, 0.0013382, 0.0012670, 0.0012264, 0.0012154,
                                       0.0013733, 0.0013554, 0.0012599],
    "lenet5/lenet5_ref_topo.pbtxt": [1.745e-4, 1.700e-4, 1.767e-4, 1.708e-4, 1.502e-4, 1.675e-4, 1.725e-4, 1.680e-4,
                                     1.538e-4, 1.692e-4],
}


@pytest.mark.parametrize("path", list(README_OUTPUTS))
def test_real_smaug_files_give_the_documented_outputs(shared_data, path):
    graph = nnbridge.load(shared_data / "smaug" / path)
    x = np.random.RandomState(1234).rand(1, 28, 28, 1) * 0.005  # the generator's recipe (data README §1)
    (name,) = [v.name for v in graph.inputs]
    out = nnbridge.run(graph, {name: x.astype(graph.inputs[0].type.dtype.numpy)}, backend="smv")
    np.testing.assert_allclose(next(iter(out.values())).ravel(), README_OUTPUTS[path], rtol=2e-3)


# ResNet-50 (5 CPU-s) in make bench (matrix); CIFAR's CNN and VGG keep topology-only files in make test
@pytest.mark.parametrize("model", ["cnn10", "vgg", pytest.param("resnet50", marks=pytest.mark.matrix)])
def test_topology_only_smaug_files_run_and_match_the_reference_backend(smaug_graphs, model):
    graph = smaug_graphs[model]
    feeds = nnbridge.api.inputs.random_inputs(graph, seed=1)
    feeds = {k: (v * 0.1).astype(v.dtype) for k, v in feeds.items()}
    got = nnbridge.run(graph, feeds, backend="smv")
    want = nnbridge.run(graph, feeds, backend="reference")
    for name, value in want.items():
        ref = value.astype(np.float64)
        assert np.abs(got[name].astype(np.float64) - ref).max() <= 2e-2 * np.abs(ref).max()


def test_onnx_model_is_untouched():
    model = zoo.build("lenet5")
    before = model.SerializeToString()
    nnbridge.compile(model, backend="smv")
    assert model.SerializeToString() == before and onnx.checker.check_model(model) is None
