"""Neural-network kernels of the reference backend (conv, pooling, linalg, RNNs, resize, attention, ...):
edge cases the ONNX node tests cover thinly, checked against onnxruntime on
single-node models, against naive loop implementations written here, or
against hand computations.
"""

from __future__ import annotations

import math

import numpy as np
import pytest
from single_node import node_model, run_ours

import nnbridge
from nnbridge.base.errors import UnsupportedOpError
from nnbridge.check import run_onnxruntime
from nnbridge.kernels.ops.activation import erf

RNG = np.random.default_rng(11)


def rand(*shape, dtype=np.float32):
    return RNG.standard_normal(shape).astype(dtype)






def assert_matches_ort(op, inputs, attrs=None, outputs=1, inits=(), rtol=1e-4, atol=1e-5, opset=21):
    model, feeds = node_model(op, inputs, attrs, outputs, inits, opset)
    ours = run_ours(model, feeds)
    theirs = run_onnxruntime(model, feeds)
    theirs = [theirs[n] for n in theirs] if isinstance(theirs, dict) else theirs
    assert len(ours) == len(theirs)
    for a, b in zip(ours, theirs):
        assert a.dtype == b.dtype and a.shape == b.shape
        np.testing.assert_allclose(a, b, rtol=rtol, atol=atol)
    return ours


# -- convolution ---------------------------------------------------------------------------------------------


def naive_conv2d(x, w, b, group, strides, dilations, pads):
    """Direct definition: loops over every output element (test-only, tiny shapes)."""
    n, c, h, wd = x.shape
    m, cg, kh, kw = w.shape
    xp = np.pad(x, [(0, 0), (0, 0), (pads[0], pads[2]), (pads[1], pads[3])])
    oh = (h + pads[0] + pads[2] - (kh - 1) * dilations[0] - 1) // strides[0] + 1
    ow = (wd + pads[1] + pads[3] - (kw - 1) * dilations[1] - 1) // strides[1] + 1
    y = np.zeros((n, m, oh, ow), np.float64)
    mg = m // group
    for b_ in range(n):
        for o in range(m):
            g = o // mg
            for i in range(oh):
                for j in range(ow):
                    acc = 0.0
                    for ci in range(cg):
                        for p in range(kh):
                            for q in range(kw):
                                acc += (xp[b_, g * cg + ci, i * strides[0] + p * dilations[0],
                                           j * strides[1] + q * dilations[1]] * w[o, ci, p, q])
                    y[b_, o, i, j] = acc + (b[o] if b is not None else 0)
    return y


def test_conv_grouped_dilated_asymmetric_pads_matches_naive_loops():
    x, w, b = rand(2, 6, 7, 9), rand(4, 3, 3, 2), rand(4)
    attrs = dict(group=2, strides=[2, 1], dilations=[2, 3], pads=[1, 0, 2, 3])
    model, feeds = node_model("Conv", [("x", x), ("w", w), ("b", b)], attrs, inits=("w", "b"))
    (y,) = run_ours(model, feeds)
    expected = naive_conv2d(x, w, b, 2, [2, 1], [2, 3], [1, 0, 2, 3])
    assert y.dtype == np.float32
    np.testing.assert_allclose(y, expected, rtol=1e-4, atol=1e-5)


def test_depthwise_conv_matches_naive_loops():
    x, w = rand(1, 5, 6, 6), rand(5, 1, 3, 3)
    model, feeds = node_model("Conv", [("x", x), ("w", w)], dict(group=5, pads=[1, 1, 1, 1]), inits=("w",))
    (y,) = run_ours(model, feeds)
    np.testing.assert_allclose(y, naive_conv2d(x, w, None, 5, [1, 1], [1, 1], [1, 1, 1, 1]), rtol=1e-4, atol=1e-5)


@pytest.mark.parametrize("auto_pad", ["SAME_UPPER", "SAME_LOWER", "VALID"])
@pytest.mark.parametrize("shape", [(1, 2, 7, 6), (2, 2, 5, 9)])
def test_conv_auto_pad_odd_sizes_stride_two(auto_pad, shape):
    x, w = rand(*shape), rand(3, 2, 4, 3)
    assert_matches_ort("Conv", [("x", x), ("w", w)], dict(auto_pad=auto_pad, strides=[2, 2]), inits=("w",))


@pytest.mark.parametrize("shape,kernel", [((2, 3, 11), (4, 3, 3)), ((1, 2, 5, 6, 4), (3, 2, 2, 3, 2))])
def test_conv_1d_and_3d(shape, kernel):
    x, w, b = rand(*shape), rand(*kernel), rand(kernel[0])
    rank = len(shape) - 2
    assert_matches_ort("Conv", [("x", x), ("w", w), ("b", b)],
                       dict(strides=[2] * rank, pads=[1] * rank + [0] * rank), inits=("w", "b"))


@pytest.mark.parametrize("group", [1, 2])
def test_conv_with_a_kernel_larger_than_its_output(group):
    """A training step's kernel gradient is such a convolution (the batch as channels, the output
    gradient as the kernel): its columns are laid out the other way round."""
    x, w = rand(3, 4, 9, 8), rand(4, 4 // group, 7, 6)
    assert_matches_ort("Conv", [("x", x), ("w", w)], dict(group=group, pads=[1, 1, 0, 1], dilations=[1, 1]),
                       inits=("w",))
    got = run_ours(*node_model("Conv", [("x", x), ("w", w)], {"group": group, "pads": [1, 1, 0, 1]}))[0]
    want = naive_conv2d(x.astype(np.float64), w.astype(np.float64), None, group, [1, 1], [1, 1], [1, 1, 0, 1])
    np.testing.assert_allclose(got, want, rtol=1e-4, atol=1e-5)


@pytest.mark.parametrize("dtype", [np.float16, np.float64])
def test_conv_keeps_fp16_and_fp64(dtype):
    x, w = rand(1, 2, 5, 5, dtype=dtype), rand(3, 2, 3, 3, dtype=dtype)
    model, feeds = node_model("Conv", [("x", x), ("w", w)], dict(pads=[1, 1, 1, 1]), inits=("w",))
    (y,) = run_ours(model, feeds)
    assert y.dtype == dtype
    expected = naive_conv2d(x.astype(np.float64), w.astype(np.float64), None, 1, [1, 1], [1, 1], [1, 1, 1, 1])
    np.testing.assert_allclose(y.astype(np.float64), expected, rtol=1e-2 if dtype == np.float16 else 1e-12,
                               atol=1e-2 if dtype == np.float16 else 1e-12)


def test_conv_and_pool_empty_batch():
    x, w = np.zeros((0, 2, 5, 5), np.float32), rand(3, 2, 3, 3)
    model, feeds = node_model("Conv", [("x", x), ("w", w)], dict(pads=[1, 1, 1, 1]), inits=("w",))
    assert run_ours(model, feeds)[0].shape == (0, 3, 5, 5)
    model, feeds = node_model("MaxPool", [("x", x)], dict(kernel_shape=[2, 2], strides=[2, 2]))
    assert run_ours(model, feeds)[0].shape == (0, 2, 2, 2)


@pytest.mark.parametrize("attrs", [
    dict(group=2, strides=[2, 3], dilations=[2, 1], pads=[1, 0, 0, 2], output_padding=[1, 2]),
    dict(strides=[2, 2], output_shape=[10, 9]),
    dict(strides=[2, 2], auto_pad="SAME_UPPER"),
    dict(strides=[3, 2], auto_pad="SAME_LOWER"),
    # stride 1: a convolution with the flipped kernel (a training step's input gradient)
    dict(pads=[1, 1, 1, 1]),
    dict(group=2, dilations=[2, 1], pads=[1, 0, 0, 2]),
    dict(pads=[3, 0, 0, 1]),  # a crop past the kernel's reach: the general path
    dict(output_shape=[7, 6]),
    dict(auto_pad="SAME_UPPER", dilations=[1, 2]),
])
def test_conv_transpose_variants(attrs):
    x, w, b = rand(2, 4, 5, 5), rand(4, 3, 3, 2), rand(3 * attrs.get("group", 1))
    assert_matches_ort("ConvTranspose", [("x", x), ("w", w), ("b", b)], attrs, inits=("w", "b"))


# -- pooling -------------------------------------------------------------------------------------------------


@pytest.mark.parametrize("attrs", [
    dict(kernel_shape=[3, 3], strides=[2, 2], ceil_mode=1),
    dict(kernel_shape=[3, 2], strides=[2, 2], pads=[1, 0, 1, 1], ceil_mode=1),
    dict(kernel_shape=[2, 2], strides=[1, 2], dilations=[2, 2], pads=[0, 1, 1, 0]),
    dict(kernel_shape=[3, 3], auto_pad="SAME_LOWER", strides=[2, 2]),
    dict(kernel_shape=[2, 2], strides=[2, 2]),
    dict(kernel_shape=[3, 2], strides=[2, 1], dilations=[1, 2]),
])
def test_max_pool_with_indices(attrs):
    x = rand(2, 3, 8, 7)
    for order in (0, 1):
        assert_matches_ort("MaxPool", [("x", x)], dict(attrs, storage_order=order), outputs=2)


@pytest.mark.parametrize(("shape", "kernel", "strides", "dilations"), [
    ((2, 3, 8, 8), (2, 2), (2, 2), (1, 1)), ((1, 2, 10, 9), (2, 3), (1, 2), (2, 1)), ((2, 2, 11), (3,), (2,), (2,)),
    ((1, 1, 4, 5, 6), (2, 2, 2), (1, 2, 2), (1, 1, 1))])
@pytest.mark.parametrize("dtype", [np.float32, np.int32])
def test_max_pool_indices_by_taps_equal_the_window_argmax_with_ties(shape, kernel, strides, dilations, dtype):
    """The unpadded fast path keeps the first greatest tap, as argmax over the window does: inputs
    of a few integer values make ties everywhere."""
    from nnbridge.kernels.ops.pool import (
        PoolGeometry,
        _max_pool_with_indices_by_taps,
        _max_pool_with_indices_by_windows,
    )

    x = np.random.default_rng(0).integers(-3, 3, size=shape).astype(dtype)
    geo = PoolGeometry(x.shape[2:], kernel, "NOTSET", 0, dilations, None, strides)
    fast, general = _max_pool_with_indices_by_taps(x, geo), _max_pool_with_indices_by_windows(x, x, geo, 0)
    assert all(np.array_equal(a, b) for a, b in zip(fast, general))


@pytest.mark.parametrize("include_pad", [0, 1])
@pytest.mark.parametrize("attrs", [
    dict(kernel_shape=[3, 3], strides=[2, 2], pads=[1, 1, 1, 1], ceil_mode=1),
    dict(kernel_shape=[2, 3], strides=[2, 1], pads=[0, 1, 1, 1]),
    dict(kernel_shape=[3, 3], strides=[2, 2], auto_pad="SAME_UPPER"),
])
def test_average_pool_padding_counts(attrs, include_pad):
    assert_matches_ort("AveragePool", [("x", rand(1, 2, 7, 8))], dict(attrs, count_include_pad=include_pad))


def test_global_pools_and_lp_pool():
    x = rand(2, 3, 4, 5, 2)
    for op in ("GlobalAveragePool", "GlobalMaxPool", "GlobalLpPool"):
        assert_matches_ort(op, [("x", x)])
    assert_matches_ort("LpPool", [("x", rand(1, 2, 6, 6))], dict(kernel_shape=[3, 3], p=3, pads=[1, 1, 1, 1]))


# -- linear algebra ------------------------------------------------------------------------------------------


@pytest.mark.parametrize("bias_shape", [(), (1,), (5,), (3, 1), (3, 5)])
def test_gemm_broadcast_bias_and_transposes(bias_shape):
    a, b, c = rand(4, 3), rand(5, 4), rand(*bias_shape)
    model, feeds = node_model("Gemm", [("a", a), ("b", b), ("c", c)], dict(transA=1, transB=1, alpha=0.5, beta=2.0))
    (y,) = run_ours(model, feeds)
    np.testing.assert_allclose(y, 0.5 * a.T @ b.T + 2.0 * c, rtol=1e-5, atol=1e-6)


@pytest.mark.parametrize("shapes", [((3,), (3,)), ((3,), (2, 3, 4)), ((2, 1, 4, 3), (3,)), ((2, 1, 3, 4), (5, 4, 2))])
def test_matmul_broadcast_and_vectors(shapes):
    a, b = rand(*shapes[0]), rand(*shapes[1])
    model, feeds = node_model("MatMul", [("a", a), ("b", b)])
    (y,) = run_ours(model, feeds)
    np.testing.assert_allclose(y, np.matmul(a, b), rtol=1e-5, atol=1e-6)


def test_erf_accuracy_against_math():
    x = np.concatenate([np.linspace(-7, 7, 4001), [0.0, 1e-300, -1e-10, 1.9999999, 2.0, 30.0, -30.0]])
    expected = np.array([math.erf(v) for v in x])
    assert np.max(np.abs(erf(x) - expected)) < 1e-14


@pytest.mark.parametrize("approximate", ["none", "tanh"])
def test_gelu(approximate):
    assert_matches_ort("Gelu", [("x", rand(3, 7) * 3)], dict(approximate=approximate), opset=20)


# -- recurrent -----------------------------------------------------------------------------------------------


def _rnn_inputs(op, seq, batch, inp, hidden, dirs, layout):
    gates = {"RNN": 1, "GRU": 3, "LSTM": 4}[op]
    x = rand(batch, seq, inp) if layout else rand(seq, batch, inp)
    state_shape = (batch, dirs, hidden) if layout else (dirs, batch, hidden)
    inputs = [("x", x), ("w", rand(dirs, gates * hidden, inp)), ("r", rand(dirs, gates * hidden, hidden)),
              ("b", rand(dirs, 2 * gates * hidden)), ("lens", np.array([seq, 1, seq - 2][:batch], np.int32)),
              ("h0", rand(*state_shape))]
    if op == "LSTM":
        inputs += [("c0", rand(*state_shape)), ("p", rand(dirs, 3 * hidden))]
    return inputs


@pytest.mark.parametrize("direction", ["forward", "reverse", "bidirectional"])
@pytest.mark.parametrize("op", ["RNN", "GRU", "LSTM"])
def test_recurrent_directions_with_sequence_lens(op, direction):
    dirs = 2 if direction == "bidirectional" else 1
    outputs = 3 if op == "LSTM" else 2
    inputs = _rnn_inputs(op, 5, 3, 4, 6, dirs, layout=0)
    assert_matches_ort(op, inputs, dict(hidden_size=6, direction=direction), outputs=outputs, inits=("w", "r", "b"))


def test_gru_linear_before_reset_and_lstm_clip_activations():
    inputs = _rnn_inputs("GRU", 4, 2, 3, 5, 1, layout=0)
    assert_matches_ort("GRU", inputs, dict(hidden_size=5, linear_before_reset=1), outputs=2)
    inputs = _rnn_inputs("LSTM", 4, 2, 3, 5, 1, layout=0)
    assert_matches_ort("LSTM", inputs, dict(hidden_size=5, clip=0.7, activations=["HardSigmoid", "Tanh", "Tanh"],
                                            activation_alpha=[0.3], activation_beta=[0.4]), outputs=3)


def test_lstm_batch_first_layout_matches_time_major():
    inputs = _rnn_inputs("LSTM", 4, 2, 3, 5, 2, layout=1)
    model, feeds = node_model("LSTM", inputs, dict(hidden_size=5, direction="bidirectional", layout=1), outputs=3)
    y, h, c = run_ours(model, feeds)
    assert y.shape == (2, 4, 2, 5) and h.shape == (2, 2, 5)
    time_major = [(name, np.swapaxes(a, 0, 1) if name in ("x", "h0", "c0") else a) for name, a in inputs]
    model, feeds = node_model("LSTM", time_major, dict(hidden_size=5, direction="bidirectional"), outputs=3)
    y0, h0, c0 = run_ours(model, feeds)
    np.testing.assert_allclose(y, y0.transpose(2, 0, 1, 3), rtol=1e-6)
    np.testing.assert_allclose(h, np.swapaxes(h0, 0, 1), rtol=1e-6)
    np.testing.assert_allclose(c, np.swapaxes(c0, 0, 1), rtol=1e-6)


# -- normalization, softmax, resize, image -------------------------------------------------------------------


def test_layer_norm_statistics_outputs():
    x, scale, bias = rand(2, 3, 4), rand(3, 4), rand(3, 4)
    model, feeds = node_model("LayerNormalization", [("x", x), ("s", scale), ("b", bias)], dict(axis=1), outputs=3)
    y, mean, inv_std = run_ours(model, feeds)
    m = x.mean(axis=(1, 2), keepdims=True)
    v = x.var(axis=(1, 2), keepdims=True)
    np.testing.assert_allclose(mean, m, rtol=1e-5, atol=1e-6)
    np.testing.assert_allclose(inv_std, 1 / np.sqrt(v + 1e-5), rtol=1e-5)
    np.testing.assert_allclose(y, (x - m) / np.sqrt(v + 1e-5) * scale + bias, rtol=1e-4, atol=1e-5)


def test_batch_norm_instance_norm_lrn():
    x = rand(2, 3, 4, 5)
    stats = [("s", rand(3)), ("b", rand(3)), ("m", rand(3)), ("v", np.abs(rand(3)) + 0.1)]
    assert_matches_ort("BatchNormalization", [("x", x)] + stats, dict(epsilon=1e-3))
    assert_matches_ort("InstanceNormalization", [("x", x), ("s", rand(3)), ("b", rand(3))])
    assert_matches_ort("LRN", [("x", rand(1, 6, 3, 3))], dict(size=3, alpha=0.01, beta=0.6, bias=1.5))


def test_softmax_is_stable_for_large_logits():
    x = np.array([[1000.0, 1001.0, -np.inf], [-1e30, 0.0, 1e30]], np.float32)
    model, feeds = node_model("Softmax", [("x", x)])
    (y,) = run_ours(model, feeds)
    assert np.all(np.isfinite(y))
    np.testing.assert_allclose(y.sum(axis=-1), 1, rtol=1e-6)


@pytest.mark.parametrize("attrs", [
    dict(mode="linear", coordinate_transformation_mode="asymmetric"),
    dict(mode="cubic", exclude_outside=1, cubic_coeff_a=-0.5),
    dict(mode="nearest", nearest_mode="ceil", coordinate_transformation_mode="align_corners"),
    dict(mode="linear", coordinate_transformation_mode="pytorch_half_pixel"),
])
@pytest.mark.parametrize("scales", [[1, 1, 0.6, 1.7], [1, 1, 2.0, 0.5]])
def test_resize_modes(attrs, scales):
    x = rand(1, 2, 5, 6)
    assert_matches_ort("Resize", [("x", x), ("roi", np.zeros(0, np.float32)),
                                  ("scales", np.array(scales, np.float32))], attrs, inits=("roi", "scales"))


def test_depth_space_round_trip():
    x = rand(2, 8, 3, 4)
    for mode in ("DCR", "CRD"):
        model, feeds = node_model("DepthToSpace", [("x", x)], dict(blocksize=2, mode=mode))
        (y,) = run_ours(model, feeds)
        assert y.shape == (2, 2, 6, 8)
        if mode == "DCR":
            model, feeds = node_model("SpaceToDepth", [("x", y)], dict(blocksize=2))
            np.testing.assert_array_equal(run_ours(model, feeds)[0], x)


# -- attention -----------------------------------------------------------------------------------------------


def test_attention_gqa_with_cache_matches_hand_computation():
    q, k, v = rand(1, 4, 2, 8), rand(1, 2, 2, 8), rand(1, 2, 2, 8)
    past_k, past_v = rand(1, 2, 1, 8), rand(1, 2, 1, 8)
    model, feeds = node_model("Attention", [("q", q), ("k", k), ("v", v), None, ("pk", past_k), ("pv", past_v)],
                              dict(is_causal=1), outputs=3, opset=23)
    y, present_k, present_v = run_ours(model, feeds)
    keys = np.repeat(np.concatenate([past_k, k], 2), 2, axis=1)
    values = np.repeat(np.concatenate([past_v, v], 2), 2, axis=1)
    scores = q @ keys.transpose(0, 1, 3, 2) / np.sqrt(8)
    scores[..., np.arange(3)[None, :] > np.arange(2)[:, None] + 1] = -np.inf  # causal after the cached step
    probs = np.exp(scores - scores.max(-1, keepdims=True))
    probs /= probs.sum(-1, keepdims=True)
    np.testing.assert_allclose(y, probs @ values, rtol=1e-5, atol=1e-6)
    assert present_k.shape == (1, 2, 3, 8) and present_v.shape == (1, 2, 3, 8)


# -- refusals ------------------------------------------------------------------------------------------------


@pytest.mark.parametrize("op,inputs,attrs", [
    ("LpNormalization", [("x", rand(2, 3))], dict(p=3)),
    ("Gemm", [("a", np.ones((2, 2), np.int32)), ("b", np.ones((2, 2), np.int32))], dict(alpha=0.5)),
    ("Resize", [("x", np.ones((1, 1, 2, 2), np.int32)), ("roi", np.zeros(0, np.float32)),
                ("scales", np.array([1, 1, 2, 2], np.float32))], dict(mode="linear")),
    ("RNN", [("x", rand(2, 1, 3)), ("w", rand(1, 4, 3)), ("r", rand(1, 4, 4))],
     dict(hidden_size=4, activations=["Gaussian"])),
])
def test_unimplemented_attributes_are_refused_at_compile_time(op, inputs, attrs):
    model, feeds = node_model(op, inputs, attrs)
    with pytest.raises(UnsupportedOpError):
        nnbridge.compile(model, passes=[])


def test_roi_pooling_against_onnxruntime():
    x = rand(2, 3, 12, 10)
    rois = np.array([[0, 1.2, 0.6, 8.4, 9.7], [1, 0, 0, 9, 11], [0, 5, 5, 5, 5]], np.float32)
    assert_matches_ort("MaxRoiPool", [("x", x), ("rois", rois)], dict(pooled_shape=[3, 4], spatial_scale=0.9))
    boxes = np.array([[1.2, 0.6, 8.4, 9.7], [0, 0, 9, 11], [3, 3, 4, 4]], np.float32)
    for mode in ("avg", "max"):
        assert_matches_ort("RoiAlign", [("x", x), ("rois", boxes), ("idx", np.array([0, 1, 0], np.int64))],
                           dict(output_height=3, output_width=2, sampling_ratio=2, mode=mode, spatial_scale=0.8))


def test_softmax_cross_entropy_with_weights_and_ignore_index():
    scores, labels = rand(4, 5, 3), np.array([[0, 1, 4], [2, -1, 3], [-1, -1, 0], [4, 4, 1]], np.int64)
    weights = np.abs(rand(5)) + 0.1
    for reduction in ("mean", "sum", "none"):
        assert_matches_ort("SoftmaxCrossEntropyLoss", [("s", scores), ("l", labels), ("w", weights)],
                           dict(reduction=reduction, ignore_index=-1), outputs=2)


@pytest.mark.parametrize("padding_mode", ["zeros", "border", "reflection"])
@pytest.mark.parametrize("mode", ["linear", "nearest", "cubic"])
def test_grid_sample_out_of_range_points(mode, padding_mode):
    x, grid = rand(2, 3, 5, 6), rand(2, 4, 3, 2) * 1.4
    for align in (0, 1):
        attrs = dict(mode=mode, padding_mode=padding_mode, align_corners=align)
        if (mode, padding_mode) != ("cubic", "border"):
            assert_matches_ort("GridSample", [("x", x), ("g", grid)], attrs, opset=22)
            continue
        # onnxruntime clamps cubic taps differently from the ONNX definition; onnx.reference is the oracle here
        from onnx.reference import ReferenceEvaluator

        model, feeds = node_model("GridSample", [("x", x), ("g", grid)], attrs, opset=22)
        np.testing.assert_allclose(run_ours(model, feeds)[0], ReferenceEvaluator(model).run(None, feeds)[0],
                                   rtol=1e-4, atol=1e-5)


@pytest.mark.parametrize("mode", ["linear", "cubic"])
def test_resize_antialias_downscale(mode):
    x = rand(1, 2, 9, 11)
    assert_matches_ort("Resize", [("x", x), ("roi", np.zeros(0, np.float32)),
                                  ("scales", np.array([1, 1, 0.4, 0.6], np.float32))],
                       dict(mode=mode, antialias=1), inits=("roi", "scales"), opset=18)


def test_batch_norm_training_mode_running_statistics():
    x, scale, bias = rand(3, 2, 4), rand(2), rand(2)
    mean, var = rand(2), np.abs(rand(2)) + 0.5
    model, feeds = node_model("BatchNormalization", [("x", x), ("s", scale), ("b", bias), ("m", mean), ("v", var)],
                              dict(training_mode=1, momentum=0.8), outputs=3, opset=15)
    y, running_mean, running_var = run_ours(model, feeds)
    batch_mean, batch_var = x.mean(axis=(0, 2)), x.var(axis=(0, 2))
    expected = (x - batch_mean[:, None]) / np.sqrt(batch_var[:, None] + 1e-5) * scale[:, None] + bias[:, None]
    np.testing.assert_allclose(y, expected, rtol=1e-4, atol=1e-5)
    np.testing.assert_allclose(running_mean, 0.8 * mean + 0.2 * batch_mean, rtol=1e-5)
    np.testing.assert_allclose(running_var, 0.8 * var + 0.2 * batch_var, rtol=1e-5)


def test_non_max_suppression_of_an_ssd_sized_box_set_runs_in_linear_memory():
    """27,000 boxes × 3 classes (an SSDLite detector's count): an N × N IoU matrix would take
    5.8 GB; selection row by row stays in a few MB and matches onnxruntime exactly."""
    import tracemalloc

    import onnxruntime as ort
    from onnx import TensorProto, helper

    n = 27_000
    rng = np.random.default_rng(0)
    corner = rng.random((1, n, 2)) * 600
    boxes = np.concatenate([corner, corner + rng.random((1, n, 2)) * 60 + 1], -1).astype(np.float32)
    scores = rng.random((1, 3, n)).astype(np.float32)
    graph = helper.make_graph(
        [helper.make_node("NonMaxSuppression", ["b", "s", "m", "i", "t"], ["y"])], "nms",
        [helper.make_tensor_value_info("b", TensorProto.FLOAT, [1, n, 4]),
         helper.make_tensor_value_info("s", TensorProto.FLOAT, [1, 3, n])],
        [helper.make_tensor_value_info("y", TensorProto.INT64, None)],
        [helper.make_tensor("m", TensorProto.INT64, [1], [200]), helper.make_tensor("i", TensorProto.FLOAT, [1], [0.5]),
         helper.make_tensor("t", TensorProto.FLOAT, [1], [0.05])])
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)], ir_version=9)
    tracemalloc.start()
    try:
        ours = nnbridge.run(model, {"b": boxes, "s": scores})["y"]
        peak = tracemalloc.get_traced_memory()[1]
    finally:
        tracemalloc.stop()
    expected = ort.InferenceSession(model.SerializeToString(), providers=["CPUExecutionProvider"]).run(
        None, {"b": boxes, "s": scores})[0]
    assert ours.shape == (600, 3) and np.array_equal(ours, expected)
    assert peak < 64 * 2**20
