"""The reference backend's fast paths against exact values and onnxruntime: float32 curves
(erf, GELU, sigmoid, SiLU) across the whole float32 range and chunk boundaries, Pow by small
constant exponents, stacked MatMul against one matrix (and its bias added in place), and both
depthwise-convolution paths."""

from __future__ import annotations

import math

import numpy as np
import pytest
from onnx import TensorProto
from single_node import node_model, run_ours

from nnbridge.check import run_onnxruntime
from nnbridge.kernels.ops import fastmath

RNG = np.random.default_rng(5)


def _ulps(actual: np.ndarray, exact: np.ndarray) -> np.ndarray:
    """Distance in float32 ulps of the exact value (subnormal results count in ulps of the smallest normal)."""
    spacing = np.spacing(np.abs(exact).astype(np.float32)).clip(np.finfo(np.float32).tiny)
    return np.abs(actual.astype(np.float64) - exact) / spacing.astype(np.float64)


def _sweep() -> np.ndarray:
    """Every 1009th float32 in [-6, 6] (all magnitudes, subnormal to 6) plus the edges of the curves' regimes."""
    bits = np.arange(0, np.float32(6).view(np.int32), 1009, dtype=np.int32)
    positive = bits.view(np.float32)
    edges = np.array([0.0, 1e-38, 1e-20, 3.925, 3.9250002, 3.92, 10, 88.7, 89, 1e30, 3.4e38], np.float32)
    return np.concatenate([positive, -positive, edges, -edges])


def test_float32_erf_is_within_six_ulps_everywhere():
    x = _sweep()
    exact = np.array([math.erf(v) for v in x.astype(np.float64)])
    assert _ulps(fastmath.erf32(x), exact).max() <= 6


def test_float32_gelu_sigmoid_and_silu_match_float64_and_are_no_worse_than_onnxruntime():
    x = _sweep()
    x64 = x.astype(np.float64)
    with np.errstate(over="ignore"):
        sig = 1 / (1 + np.exp(-x64))
    # sigmoid is (1 + tanh(x/2))/2: a few ulps, plus at most 2⁻²⁴ absolute where 1 + tanh cancels
    # (tails below 1e-7); onnxruntime's own float32 Sigmoid has that kind of error too, and larger.
    sig_err = np.abs(fastmath.sigmoid32(x).astype(np.float64) - sig)
    assert (sig_err <= 4 * np.spacing(sig.astype(np.float32)) + 2.0**-24).all()
    model, feeds = node_model("Sigmoid", [("x", x)])
    theirs = run_onnxruntime(model, feeds)["y0"].astype(np.float64)
    assert sig_err.max() <= np.abs(theirs - sig).max()
    # x·Φ(x) with Φ rounded to float32 (as onnxruntime computes GELU): a few ulps plus |x|·2⁻²³
    # where Φ is near 0 (large negative x), the cancellation every float32 GELU has.
    gelu = np.array([0.5 * v * (1 + math.erf(v / math.sqrt(2))) for v in x64])
    err = np.abs(fastmath.gelu32(x).astype(np.float64) - gelu)
    assert (err <= 4 * np.spacing(np.abs(gelu).astype(np.float32)) + np.abs(x64) * 2.0**-23).all()
    silu = x64 * sig  # the same two bounds, the absolute one scaled by |x|
    silu_err = np.abs(fastmath.silu32(x).astype(np.float64) - silu)
    with np.errstate(over="ignore"):
        assert (silu_err <= 4 * np.spacing(np.abs(silu).astype(np.float32)) + np.abs(x64) * 2.0**-24).all()


def test_float32_curves_keep_nan_infinity_and_shape_across_chunks():
    x = RNG.standard_normal(fastmath.CHUNK * 2 + 3).astype(np.float32).reshape(-1, 1)
    x[[0, fastmath.CHUNK, -1]] = [np.nan], [np.inf], [-np.inf]
    # GELU(-inf) is -inf·0 = NaN, as onnxruntime computes it too.
    for curve, at_inf, at_minus_inf in ((fastmath.erf32, 1, -1), (fastmath.sigmoid32, 1, 0),
                                        (fastmath.gelu32, np.inf, np.nan), (fastmath.silu32, np.inf, np.nan)):
        with np.errstate(all="raise"):
            y = curve(x)
        assert y.shape == x.shape and y.dtype == np.float32
        np.testing.assert_array_equal(y[[0, fastmath.CHUNK, -1], 0], [np.nan, at_inf, at_minus_inf], curve.__name__)


def _agrees(op, inputs, attrs=None, inits=(), rtol=1e-5, atol=1e-6):
    model, feeds = node_model(op, inputs, attrs, inits=inits)
    (ours,) = run_ours(model, feeds)
    theirs = next(iter(run_onnxruntime(model, feeds).values()))
    assert ours.dtype == theirs.dtype and ours.shape == theirs.shape
    np.testing.assert_allclose(ours, theirs, rtol=rtol, atol=atol)


@pytest.mark.parametrize("exponent", [2.0, 3.0, 1.0, 0.5, -1.0, 2.5])
@pytest.mark.parametrize("dtype", [np.float32, np.float16, np.float64])
def test_pow_by_a_small_constant_exponent(exponent, dtype):
    x = np.array([[0.0, 1.5, -2.0, 3.0], [1e-3, 7.0, -0.5, 100.0]], dtype)
    if exponent in (0.5, 2.5):
        x = np.abs(x)
    with np.errstate(divide="ignore"):
        _agrees("Pow", [("x", x), ("e", np.array(exponent, dtype))], inits=("e",),
                rtol=2e-3 if dtype == np.float16 else 1e-6)


@pytest.mark.parametrize("shapes", [((2, 3, 5, 4), (4, 6)), ((7, 1, 4), (4, 3)), ((2, 0, 4), (4, 3)),
                                    ((1, 2, 4), (3, 4, 5))])
def test_stacked_matmul_against_one_matrix(shapes):
    a, b = (RNG.standard_normal(s).astype(np.float32) for s in shapes)
    _agrees("MatMul", [("a", a), ("b", b)], rtol=1e-5)


# stride 1, ≤ 9 taps, ≥ 28×28 outputs: flat rows (conv.FLAT_DEPTHWISE_*); otherwise ≤ 32 channels:
# one matmul over the windows of a small map, per-tap NCHW on a larger one; more channels:
# channels-last einsum (conv.SMALL_DEPTHWISE: channels × output pixels ≤ 4096 is small)
@pytest.mark.parametrize("channels, size", [(8, (11, 9)), (24, (40, 36)), (48, (11, 9)), (40, (31, 30))])
@pytest.mark.parametrize("attrs", [dict(pads=[1, 1, 1, 1]), dict(strides=[2, 2], pads=[2, 1, 0, 2]),
                                   dict(dilations=[2, 3], pads=[2, 3, 2, 3]),
                                   dict(strides=[2, 1], kernel_shape=[5, 5]), dict(pads=[0, 2, 1, 0])])
def test_depthwise_convolution_paths(channels, size, attrs):
    k = attrs.get("kernel_shape", [3, 3])
    x = RNG.standard_normal((2, channels, *size)).astype(np.float32)
    w = RNG.standard_normal((channels, 1, *k)).astype(np.float32)
    b = RNG.standard_normal(channels).astype(np.float32)
    _agrees("Conv", [("x", x), ("w", w), ("b", b)], dict(group=channels, **attrs), inits=("w", "b"),
            rtol=1e-4, atol=1e-5)


def test_a_constant_left_unfolded_is_computed_once_not_on_every_run(monkeypatch):
    """A weight made by ConstantOfShape above the fold limit stays an op (writers must not expand
    it); the reference backend computes it on the first run and keeps it, as it keeps weights."""
    import tracemalloc

    from onnx import TensorProto, helper

    import nnbridge

    monkeypatch.setenv("NNBRIDGE_FOLD_LIMIT_MB", "1")
    shape = helper.make_tensor("shape", TensorProto.INT64, [2], [1024, 512])  # 2 MB of float32
    nodes = [helper.make_node("ConstantOfShape", ["shape"], ["w"],
                              value=helper.make_tensor("v", TensorProto.FLOAT, [1], [0.5])),
             helper.make_node("MatMul", ["x", "w"], ["y"])]
    graph = helper.make_graph(nodes, "cos", [helper.make_tensor_value_info("x", TensorProto.FLOAT, [1, 1024])],
                              [helper.make_tensor_value_info("y", TensorProto.FLOAT, None)], [shape])
    exe = nnbridge.compile(helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)]), "reference")
    assert [n.op for n in exe.graph.nodes] == ["ConstantOfShape", "MatMul"]
    x = np.ones((1, 1024), np.float32)
    first = exe.run({"x": x})["y"]
    tracemalloc.start()
    second = exe.run({"x": x})["y"]
    peak = tracemalloc.get_traced_memory()[1]
    tracemalloc.stop()
    assert np.array_equal(first, second) and np.allclose(second, 512.0)
    assert peak < 256 * 1024  # the 2 MB weight is not made again


def test_misaligned_weights_run_from_one_aligned_copy_and_aligned_ones_are_not_copied():
    from onnx import helper, numpy_helper

    from nnbridge.converters.onnx import load_onnx
    from nnbridge.kernels import Plan

    table, head = RNG.standard_normal((50, 8)).astype(np.float32), RNG.standard_normal((8, 3)).astype(np.float32)
    graph = helper.make_graph(
        [helper.make_node("Gather", ["table", "ids"], ["rows"]), helper.make_node("MatMul", ["rows", "head"], ["y"])],
        "g", [helper.make_tensor_value_info("ids", 7, [5])], [helper.make_tensor_value_info("y", 1, [5, 3])],
        [numpy_helper.from_array(table, "table"), numpy_helper.from_array(head, "head")])
    ir = load_onnx(helper.make_model(graph, opset_imports=[helper.make_opsetid("", 20)]))
    raw = np.zeros(table.nbytes + 1, np.uint8)  # as a weight read in place from a file lies: at any byte offset
    misaligned = raw[1:].view(np.float32).reshape(table.shape)
    misaligned[...] = table
    assert not misaligned.flags.aligned
    ir.initializers["table"] = misaligned
    plan = Plan(ir, align_weights=True)
    assert plan.weights["table"].flags.aligned
    assert plan.weights["head"] is ir.initializers["head"]
    ids = np.array([0, 49, 7, 7, 3])
    np.testing.assert_array_equal(plan.execute({"ids": ids})[0], table[ids] @ head)
    assert Plan(ir).weights["table"] is misaligned  # a one-off run (a converter's) keeps weights in place


@pytest.mark.parametrize("dtype", [np.float16, np.float32, np.float64])
@pytest.mark.parametrize("op, bounds", [("Relu", ()), ("Clip", ()), ("Clip", (-1, None)), ("Clip", (None, 6)),
                                        ("Clip", (0, 6)), ("Clip", (3, 1))])
def test_relu_and_clip_match_onnxruntime_bit_for_bit_on_special_values(dtype, op, bounds):
    """Both run as one np.clip: NaN stays NaN, -0.0 stays -0.0, and Clip's absent bounds are the
    spec's lowest()/max(), so ±inf clip to the largest finite values, as onnxruntime gives."""
    x = np.tile(np.array([np.nan, -np.inf, np.inf, -0.0, 0.0, -1, 2, 5, 7], dtype), 3)
    inputs = [("x", x)] + [None if b is None else (name, dtype(b)) for name, b in zip(("lo", "hi"), bounds)]
    model, feeds = node_model(op, inputs)
    (ours,) = run_ours(model, feeds)
    theirs = run_onnxruntime(model, feeds)["y0"]
    assert ours.dtype == theirs.dtype
    np.testing.assert_array_equal(ours, theirs)
    np.testing.assert_array_equal(np.signbit(ours), np.signbit(theirs))


@pytest.mark.parametrize("to, dtype", [(7, np.int64), (6, np.int32)])
def test_cast_of_non_finite_floats_to_integers_matches_onnxruntime_without_a_warning(to, dtype):
    """T5's relative-position buckets cast log(0) = -inf to int64 on every run."""
    import warnings

    x = np.array([np.nan, -np.inf, np.inf, 1e30, -3.7, 2.5], np.float32)
    model, feeds = node_model("Cast", [("x", x)], dict(to=to))
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        (ours,) = run_ours(model, feeds)
    assert ours.dtype == dtype
    np.testing.assert_array_equal(ours, run_onnxruntime(model, feeds)["y0"])


def _select_cases():
    size = 96  # 96 × 96 and more: above fastmath.SELECT_MIN_ELEMENTS, so the bitwise blend runs
    special = np.array([np.nan, -0.0, np.inf, -np.inf, 1.5], np.float32)[RNG.integers(0, 5, (size, size))]
    coin = RNG.random((size, size)) > 0.5
    return [
        (np.tril(np.ones((size, size), bool)), RNG.standard_normal((4, size, size)).astype(np.float32),
         np.float32(-np.inf)),  # a causal mask
        (coin, special, -special),
        (coin, special.astype(np.float16), np.float16(-0.0)),
        (coin, RNG.standard_normal((size, size)), RNG.standard_normal((1, size))),
        (RNG.random((size, 1)) > 0.5, RNG.integers(-9, 9, (size, size)).astype(np.int64), np.int64(-7)),
        (coin, RNG.random((size, size)) > 0.5, np.bool_(True)),
        (np.bool_(False), special, np.float32(2)),
        (coin, np.float32(2), special.T),
        (coin, np.array(["a", "bb"] * (size * size // 2)).reshape(size, size), np.array("zz")),  # np.where
        (coin[:8, :8], special[:8, :8], np.float32(0)),  # small: np.where
    ]


@pytest.mark.parametrize("case", range(len(_select_cases())))
def test_select_is_np_where_bit_for_bit(case):
    condition, a, b = _select_cases()[case]
    want = np.where(condition, a, b).astype(np.asarray(a).dtype)
    got = fastmath.select(condition, a, b)
    assert got.shape == want.shape and got.dtype == want.dtype
    if want.dtype.kind in "biuf":
        np.testing.assert_array_equal(got.view(np.uint8), want.view(np.uint8))  # NaN payloads, -0.0 too
    else:
        np.testing.assert_array_equal(got, want)


def test_a_large_where_with_a_causal_mask_matches_onnxruntime():
    scores = RNG.standard_normal((2, 4, 64, 64)).astype(np.float32)
    mask = np.tril(np.ones((64, 64), bool))
    _agrees("Where", [("c", mask), ("x", scores), ("y", np.float32(-np.inf))], rtol=0, atol=0)


def test_softmax_in_row_blocks_equals_the_whole_tensor_form_and_onnxruntime():
    """Rows span several blocks (fastmath.CHUNK elements each); masked rows (all -inf), a row
    with +inf and one with NaN keep the whole-tensor form's values, NaN included."""
    x = RNG.standard_normal((3, 200, 1500)).astype(np.float32) * 4
    x[0, 3] = -np.inf
    x[1, 7, 5] = np.inf
    x[2, 11, 9] = np.nan
    x[2, 12, :700] = -np.inf  # a half-masked row
    peak = x.max(axis=-1, keepdims=True)
    e = np.exp(x - np.where(np.isfinite(peak), peak, 0))
    whole = e / e.sum(axis=-1, keepdims=True)
    model, feeds = node_model("Softmax", [("x", x)], dict(axis=-1))
    (ours,) = run_ours(model, feeds)
    np.testing.assert_array_equal(ours, whole)
    finite = np.isfinite(x).all(axis=-1)
    theirs = run_onnxruntime(model, feeds)["y0"]
    np.testing.assert_allclose(ours[finite], theirs[finite], rtol=1e-5, atol=1e-7)


@pytest.mark.parametrize(("equation", "shapes"), [
    ("bqhd,bkhd->bhqk", [(2, 5, 3, 4), (2, 6, 3, 4)]),   # attention scores: batch b, h; contracted d
    ("bhqk,bkhd->bqhd", [(2, 3, 5, 6), (2, 6, 3, 4)]),   # attention output, the result transposed
    ("ij,kj->ikj", [(3, 4), (5, 4)]),                   # j kept: a batch letter
    ("ijk,jl->il", [(3, 4, 5), (4, 6)]),                # k summed within the first operand alone
    ("i,i->", [(7,), (7,)]),                            # a scalar result
    ("ij,kl->ijkl", [(2, 3), (4, 5)]),                  # an outer product
    ("ii,ij->ij", [(3, 3), (3, 4)]),                    # a diagonal: np.einsum's path
    ("...ij,...jk->...ik", [(2, 3, 4), (2, 4, 5)]),     # an ellipsis: np.einsum's path
])
def test_two_operand_einsum_is_one_batched_matmul_and_agrees_with_onnxruntime(equation, shapes):
    """Two-operand equations without ellipsis or repeated letters run as one matmul between
    transposes; the rest keep np.einsum. Both agree with onnxruntime and float64 within the
    rounding of a dot product of their length."""
    from nnbridge.kernels.ops.linalg import _einsum_matmul

    operands = [RNG.standard_normal(s).astype(np.float32) for s in shapes]
    simple = _einsum_matmul(equation, *operands)
    assert (simple is None) == (equation.startswith(("ii", "...")))
    exact = np.einsum(equation, *(o.astype(np.float64) for o in operands))
    scale = np.einsum(equation, *(np.abs(o).astype(np.float64) for o in operands))
    _agrees("Einsum", [(f"x{i}", o) for i, o in enumerate(operands)], {"equation": equation}, rtol=1e-5, atol=1e-5)
    ours = run_ours(*node_model("Einsum", [(f"x{i}", o) for i, o in enumerate(operands)], {"equation": equation}))[0]
    assert ours.shape == exact.shape
    assert np.all(np.abs(ours - exact) <= 8 * 2.0**-24 * scale + 1e-30)


def _joined(model, feeds: dict, kind: type, numba: bool = True) -> list[str]:
    """The ops of the fast program's ``kind`` entries (joined steps, named by their first node),
    once the fast run's outputs are checked bit for bit against the watched run's, which runs one
    kernel per node (numba on or off)."""
    import nnbridge
    from nnbridge.kernels import compiled

    with compiled.numpy_only(not numba):
        exe = nnbridge.compile(model, backend="reference")
        joined = [entry[1].node.op for entry in exe.plan._program if type(entry[0]) is kind]
        fast = exe.run(feeds)
        watched = exe.plan.execute(feeds, timings=[])
    for (name, got), want in zip(fast.items(), watched):
        np.testing.assert_array_equal(got, want, err_msg=name)
    return joined


@pytest.mark.parametrize("numba", [True, False], ids=["compiled", "numpy"])
def test_an_activation_that_alone_reads_a_convolution_runs_in_its_buffer(numba):
    """Conv followed by Relu, HardSwish, HardSigmoid, Sigmoid or Swish is one entry of the fast
    program, the activation overwriting the convolution's result; its values are the unfused
    program's bit for bit (the watched run keeps one step per node, each kernel judged against
    onnxruntime by the kernel tests; onnxruntime has no Swish). A convolution whose result is also
    read elsewhere, or is a graph output, keeps its own step."""
    from nnbridge.kernels.evaluator import _Epilogue
    from nnbridge.zoo import OnnxBuilder

    b = OnnxBuilder("epilogues", seed=0)
    x = b.input("x", [1, 8, 9, 9])
    acts = ["Relu", "HardSwish", "HardSigmoid", "Sigmoid", "Swish"]
    for i, act in enumerate(acts):
        x = b.op(act, [b.conv(x, 8, 8, 3, hint=f"c{i}")], **({"alpha": 0.3} if act == "HardSigmoid" else {}))
    shared = b.conv(x, 8, 8, 1, hint="shared")  # read twice: stays its own step
    kept = b.conv(x, 8, 8, 1, hint="kept")  # a graph output too: stays its own step
    b.output(b.op("Add", [b.op("Relu", [shared]), shared]))
    b.output(b.op("Relu", [kept]))
    b.output(kept)
    feeds = {"x": RNG.standard_normal((1, 8, 9, 9)).astype(np.float32)}
    fused = len(_joined(b.model(), feeds, _Epilogue, numba))
    expected_fused = len(acts) if numba else 3  # Sigmoid's and Swish's numpy forms have no in-place path
    assert fused == expected_fused


@pytest.mark.parametrize("numba", [True, False], ids=["compiled", "numpy"])
def test_an_activation_that_alone_reads_a_sum_or_product_runs_in_its_buffer(numba):
    """A residual Add then Relu, a per-channel Mul (a folded BatchNorm's scale) then Relu, a Sub
    then HardSigmoid: each one entry, the activation overwriting the arithmetic's new result, bit
    for bit the watched run's; an integer sum's Relu runs its own kernel inside the entry, and a
    sum also read elsewhere keeps its own step."""
    from nnbridge.kernels.evaluator import _Epilogue
    from nnbridge.zoo import OnnxBuilder

    b = OnnxBuilder("arithmetic-epilogues", seed=1)
    x = b.input("x", [1, 8, 9, 9])
    r = b.input("r", [1, 8, 9, 9])
    i = b.input("i", [2, 5], dtype=TensorProto.INT32)
    y = b.op("Relu", [b.op("Add", [x, r])])
    y = b.op("Relu", [b.op("Mul", [y, b.weight("scale", (1, 8, 1, 1))])])
    y = b.op("HardSigmoid", [b.op("Sub", [y, r])], alpha=0.3)
    shared = b.op("Add", [y, x])
    b.output(b.op("Add", [b.op("Relu", [shared]), shared]))
    b.output(b.op("Relu", [b.op("Add", [i, i])]))
    feeds = {"x": RNG.standard_normal((1, 8, 9, 9)).astype(np.float32),
             "r": RNG.standard_normal((1, 8, 9, 9)).astype(np.float32),
             "i": RNG.integers(-9, 9, (2, 5)).astype(np.int32)}
    assert sorted(_joined(b.model(), feeds, _Epilogue, numba)) == ["Add", "Add", "Mul", "Sub"]


@pytest.mark.parametrize("numba", [True, False], ids=["compiled", "numpy"])
def test_a_convolutions_residual_sum_runs_in_its_buffer_with_the_watched_runs_values(numba):
    """A projecting 1×1 convolution then the block's residual Add (either operand order), a
    convolution with its activation then an Add, a gate then an Add, and ResNet's convolution,
    sum and Relu: each one entry, the sum (and its activation) written into the convolution's
    result, bit for bit the watched run's; an Add that widens the
    shape, of an integer value, or of a result another node also reads keeps its own entry."""
    from nnbridge.kernels.evaluator import _Biased
    from nnbridge.zoo import OnnxBuilder

    b = OnnxBuilder("residuals", seed=3)
    x = b.input("x", [1, 8, 6, 6])
    y = b.op("Add", [b.conv(x, 8, 8, 1, hint="project"), x])
    y = b.op("Add", [y, b.op("Relu", [b.conv(y, 8, 8, 3, hint="activated")])])
    squeezed = b.op("GlobalAveragePool", [y])
    gate = b.op("HardSigmoid", [b.conv(squeezed, 8, 8, 1, hint="gate")])
    y = b.op("Add", [b.op("Mul", [y, gate]), x])
    y = b.op("Relu", [b.op("Add", [b.conv(y, 8, 8, 3, hint="resnet"), y])])  # the sum's own activation
    shared = b.conv(y, 8, 8, 1, hint="shared")
    y = b.op("Add", [shared, shared])
    widened = b.op("Add", [b.conv(y, 8, 8, 1, hint="widened"), b.input("wide", [2, 8, 6, 6])])
    b.output(widened)
    feeds = {"x": RNG.standard_normal((1, 8, 6, 6)).astype(np.float32),
             "wide": RNG.standard_normal((2, 8, 6, 6)).astype(np.float32)}
    summed = _joined(b.model(), feeds, _Biased, numba)
    assert summed == ["Conv", "Conv"] + (["Conv"] if numba else []) + ["Conv"]  # no gate without numba


@pytest.mark.parametrize("bias_first", [True, False])
def test_a_linear_layers_matmul_and_bias_run_as_one_entry_with_the_watched_runs_values(bias_first):
    """MatMul then the Add of a bias weight (each Linear of a small transformer): one ``_Biased``
    entry whose sum is written into the product, bit for bit the watched run's (one kernel per node);
    a product another node also reads, or a bias that widens the shape, keeps its two entries."""
    from nnbridge.kernels.evaluator import _Biased
    from nnbridge.zoo import OnnxBuilder

    b = OnnxBuilder("linear", seed=2)
    x = b.input("x", [1, 6, 8])
    first = b.op("MatMul", [x, b.weight("w1", (8, 16))])
    bias = b.weight("b1", (16,))
    h = b.op("Add", [bias, first] if bias_first else [first, bias])
    shared = b.op("MatMul", [h, b.weight("w2", (16, 8))])
    kept = b.op("Add", [shared, b.weight("b2", (8,))])
    widened = b.op("Add", [b.op("MatMul", [kept, b.weight("w3", (8, 8))]), b.weight("b3", (2, 1, 8))])
    b.output(b.op("Mul", [kept, shared]))
    b.output(widened)
    feeds = {"x": RNG.standard_normal((1, 6, 8)).astype(np.float32)}
    assert len(_joined(b.model(), feeds, _Biased)) == 1
