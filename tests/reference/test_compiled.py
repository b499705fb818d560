"""The compiled kernels (numba, ``nnbridge/kernels/compiled``) against the numpy kernels they stand
in for, which stay the reference: bit for bit where both add the same terms in the same order,
otherwise within a bound stated and justified here; and the numpy fallback when numba is off.

Shapes are few and small: each distinct argument type compiles once per process (the compiled
code is cached on disk, but the first test process of a fresh machine pays for compiling)."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest

from nnbridge.kernels import compiled
from nnbridge.kernels.ops.conv import conv_nd

RNG = np.random.default_rng(11)
U = 2.0**-24  # float32's unit roundoff

pytestmark = pytest.mark.skipif(compiled.load("conv") is None, reason="numba is not available")


def _numpy(monkeypatch, fn, *args, **kwargs):
    """``fn`` with the compiled kernels switched off (the numpy reference)."""
    with compiled.numpy_only():
        return fn(*args, **kwargs)


# -- the float32 curves every compiled module shares ------------------------------------------

def _sweep() -> np.ndarray:
    """Every 1021st float32 up to 100 in magnitude (subnormals included), both signs, and the
    edges of the ranges."""
    bits = np.arange(0, np.float32(100).view(np.int32), 1021, dtype=np.int32)
    positive = bits.view(np.float32)
    edges = np.float32([88.7, 88.72, 88.7228, 88.72284, 88.7229, 88.8, 89.0, 89.1, -87.3, -88.0, -103.9, -104.5,
                        1e30, -1e30])
    return np.concatenate([positive, -positive, edges])


def _ulps(actual: np.ndarray, exact: np.ndarray) -> np.ndarray:
    """Distance in float32 ulps of the exact value (subnormal results in ulps of the smallest normal)."""
    spacing = np.spacing(np.abs(exact).astype(np.float32)).clip(np.finfo(np.float32).tiny)
    return np.abs(actual.astype(np.float64) - exact) / spacing.astype(np.float64)


@pytest.mark.parametrize(("name", "exact", "bound"), [
    ("exp32", np.exp, 1.5),
    ("expm1_32", np.expm1, 2.5),
    ("tanh32", np.tanh, 3.5),
    ("sigmoid32", lambda x: 1 / (1 + np.exp(-x)), 3.0),
])
def test_compiled_curves_are_within_their_stated_ulps_of_float64(name, exact, bound):
    """The bounds of compiled/_core.py's docstring (measured there on a denser sweep) with a
    margin; where float64's result is beyond float32's range the curve must overflow to ±inf or
    flush to zero like numpy's; NaN, ±0 and ±inf come through as numpy's float32 curves give them."""
    curves = compiled.load("curves")
    x = _sweep()
    with np.errstate(over="ignore"):
        want = exact(x.astype(np.float64))
    got = curves.apply(name, x)
    finite = np.abs(want) < float(np.finfo(np.float32).max)
    assert _ulps(got[finite], want[finite]).max() <= bound
    assert np.all(np.isinf(got[~finite]) & (np.sign(got[~finite]) == np.sign(want[~finite])))
    special = np.float32([np.nan, np.inf, -np.inf, 0.0, -0.0])
    reference = {"exp32": np.exp, "expm1_32": np.expm1, "tanh32": np.tanh,
                 "sigmoid32": lambda v: np.float32(1) / (np.float32(1) + np.exp(-v))}[name](special)
    np.testing.assert_array_equal(curves.apply(name, special), reference)
    assert np.array_equal(np.signbit(curves.apply(name, special)), np.signbit(reference))


def test_compiled_activations_equal_the_numpy_forms(monkeypatch):
    """Hard sigmoid, hard swish and Relu are the same operations in the same order: bit for bit. The
    transcendental ones (erf, GELU, sigmoid, SiLU) differ in their tanh/exp (≤ 3.2 ulp here, ≤ 1.4
    for numpy's); each is held to its bound against float64 in test_fast_paths, which runs the
    compiled forms when numba is on, so here they only need to be the numpy forms' near twins:
    within 8 ulp of them plus the bounds' absolute slack (2⁻²³·|x| for GELU and SiLU)."""
    from nnbridge.kernels.ops import activation, fastmath

    x = np.concatenate([_sweep()[::16], np.float32([np.nan, np.inf, -np.inf, 0.0, -0.0, 3.0, -3.0])])
    for alpha, beta, swish in ((np.float32(0.2), np.float32(0.5), False), (np.float32(1 / 6), np.float32(0.5), True)):
        ours = activation._hard_sigmoid(x, alpha, beta, swish)
        theirs = _numpy(monkeypatch, activation._hard_sigmoid, x, alpha, beta, swish)
        np.testing.assert_array_equal(ours, theirs)
    from nnbridge.kernels.ops.elementwise import relu

    assert compiled.loaded("curves") is not None  # relu uses them once another kernel has loaded them
    ours, theirs = relu(None, x), _numpy(monkeypatch, relu, None, x)  # a select: bit for bit, signs of zero too
    np.testing.assert_array_equal(ours, theirs)
    assert np.array_equal(np.signbit(ours), np.signbit(theirs))
    finite = x[np.isfinite(x)]
    with np.errstate(all="ignore"):
        for curve in (fastmath.erf32, fastmath.gelu32, fastmath.sigmoid32, fastmath.silu32):
            ours, theirs = curve(finite), _numpy(monkeypatch, curve, finite)
            slack = np.spacing(np.abs(theirs)) * 8 + np.abs(finite) * 2.0**-23 + 2.0**-24
            assert np.all(np.abs(ours.astype(np.float64) - theirs) <= slack), curve.__name__


@pytest.mark.parametrize("pixels", [1, 5, 7, 8, 12, 49, 127, 128, 136, 260, 576, 784, 1015, 1024])
def test_compiled_means_equal_numpy_bit_for_bit(monkeypatch, pixels):
    """ReduceMean over trailing axes and GlobalAveragePool sum each row of up to 1,024 values as
    numpy's pairwise sum does (halves down to blocks of 128, each 8 partial sums) and divide in
    float32: the same terms in the same order, so bit for bit, at every row length around the
    edges (longer rows run numpy's own)."""
    from nnbridge.kernels.ops.pool import global_average_pool
    from nnbridge.kernels.ops.reduce import _reduction

    compiled.load("reduce")
    height = 7 if pixels % 7 == 0 else 1
    x = (RNG.standard_normal((2, 5, height, pixels // height)) * 30).astype(np.float32)
    x[0, 0] = -0.0  # a row of negative zeros sums to +0 from numpy's 0 start
    mean = _reduction("ReduceMean")
    for axes, keep in ((np.array([2, 3]), 1), (np.array([-1]), 0), (np.array([3, 1, 2]), 1)):
        ours, theirs = mean(None, x, axes, keepdims=keep), _numpy(monkeypatch, mean, None, x, axes, keepdims=keep)
        assert ours.shape == theirs.shape
        np.testing.assert_array_equal(ours, theirs)
        assert np.array_equal(np.signbit(ours), np.signbit(theirs))
    np.testing.assert_array_equal(global_average_pool(None, x), _numpy(monkeypatch, global_average_pool, None, x))


@pytest.mark.parametrize("shape", [(3, 5), (2, 4, 8), (7, 32), (2, 3, 4, 11), (5, 128), (3, 136), (4, 197),
                                   (2, 240), (3, 256), (2, 5, 768), (4, 1000), (1, 8192)])
def test_compiled_layer_norm_equals_the_numpy_kernel_bit_for_bit(monkeypatch, shape):
    """Rows of one block of numpy's pairwise sums, two, or a deeper tree (BERT's 768, up to
    ``NORM_ROW``): its sums, then the kernel's float32 operations one by one in its order (centre,
    square, mean, + ε, 1/√, × scale, + bias): bit for bit."""
    from types import SimpleNamespace

    from nnbridge.kernels.ops.normalization import layer_norm

    compiled.load("reduce")
    ctx = SimpleNamespace(node=SimpleNamespace(outputs=[None]))
    axis = -2 if len(shape) == 4 else -1
    x = (RNG.standard_normal(shape) * 4 + 3).astype(np.float32)
    scale = RNG.standard_normal(shape[axis:]).astype(np.float32)
    for bias in (RNG.standard_normal(shape[axis:]).astype(np.float32), None):
        ours = layer_norm(ctx, x, scale, bias, axis=axis)
        theirs = _numpy(monkeypatch, layer_norm, ctx, x, scale, bias, axis=axis)
        np.testing.assert_array_equal(ours, theirs)
    assert compiled.load("reduce").layer_norm(x, scale[None], None, len(shape) + axis, np.float32(1e-5)) is None


@pytest.mark.parametrize("shape", [(3, 5), (2, 4, 8), (7, 32), (2, 3, 4, 11), (5, 128), (3, 136), (4, 197),
                                   (2, 240), (3, 256), (2, 5, 768), (4, 1000), (1, 8192)])
def test_compiled_rms_norm_equals_the_numpy_kernel_bit_for_bit(monkeypatch, shape):
    """Rows of any length up to ``NORM_ROW``: the squares, numpy's pairwise sum / n, + ε, √, x ÷ it, × scale,
    each in float32 in the numpy kernel's order: bit for bit, a zero row and infinities too."""
    from nnbridge.kernels.ops.normalization import rms_norm

    compiled.load("reduce")
    axis = -2 if len(shape) == 4 else -1
    x = (RNG.standard_normal(shape) * 4 + 3).astype(np.float32)
    x.reshape(-1)[:3] = 0, np.inf, -np.inf
    x[0, ...] = 0 if len(shape) == 2 else x[0, ...]
    scale = RNG.standard_normal(shape[axis:]).astype(np.float32)
    with np.errstate(invalid="ignore"):
        ours = rms_norm(None, x, scale, axis=axis, epsilon=1e-6)
        theirs = _numpy(monkeypatch, rms_norm, None, x, scale, axis=axis, epsilon=1e-6)
    np.testing.assert_array_equal(ours, theirs)
    assert compiled.load("reduce").rms_norm(x, scale[None], len(shape) + axis, np.float32(1e-5)) is None


def test_a_norm_of_rows_longer_than_norm_row_stays_numpys():
    fast = compiled.load("reduce")
    x = np.ones((2, fast.NORM_ROW + 8), np.float32)
    assert fast.layer_norm(x, x[0], None, 1, np.float32(1e-5)) is None
    assert fast.rms_norm(x, x[0], 1, np.float32(1e-5)) is None


@pytest.mark.parametrize("shape", [(1, 1, 1024), (2, 3, 5, 7), (1, 4, 8), (1, 16, 17, 300), (3, 2, 1)])
def test_compiled_instance_norm_equals_the_numpy_kernel_bit_for_bit(monkeypatch, shape):
    """Rows of any length, numpy's pairwise sums term for term (one block, two, a deeper tree), then
    the kernel's float32 operations in its order (centre, square, mean, + ε, √, ÷, × scale, + bias):
    bit for bit, infinities and a constant row too."""
    from nnbridge.kernels.ops.normalization import instance_norm

    compiled.load("reduce")
    x = (RNG.standard_normal(shape) * 4 + 3).astype(np.float32)
    x.reshape(-1)[:2] = np.inf, -np.inf
    x[-1, -1] = 2.5
    scale, bias = RNG.standard_normal(shape[1]).astype(np.float32), RNG.standard_normal(shape[1]).astype(np.float32)
    with np.errstate(invalid="ignore"):
        ours = instance_norm(None, x, scale, bias, epsilon=1e-3)
        theirs = _numpy(monkeypatch, instance_norm, None, x, scale, bias, epsilon=1e-3)
    np.testing.assert_array_equal(ours, theirs)


def test_compiled_softmax_of_small_rows_equals_the_numpy_kernel_bit_for_bit(monkeypatch):
    """The shift (the row's max, 0 where it is not finite) and the sums compiled, numpy's exp
    between them: the same operations in the same order, so bit for bit, NaN and infinities too."""
    from nnbridge.kernels.ops.softmax import softmax

    compiled.load("reduce")
    for width in (37, 7, 64, 128, 136, 197, 240):  # the max's lanes and tail; one block of sums, two
        x = (RNG.standard_normal((2, 3, 8, width)) * 5).astype(np.float32)
        x[0, 0, 0, 5], x[0, 0, 1, 0], x[0, 0, 2, 3], x[0, 0, 3, :] = np.nan, np.inf, -np.inf, -np.inf
        x[0, 0, 4, 0], x[0, 0, 5, -1] = np.nan, np.nan  # a NaN first, a NaN in the tail
        x[0, 0, 6, :], x[0, 0, 6, ::3] = 0.0, -0.0  # a tie of zeros
        with np.errstate(invalid="ignore"):
            ours, theirs = softmax(None, x), _numpy(monkeypatch, softmax, None, x)
        np.testing.assert_array_equal(ours, theirs)


@pytest.mark.parametrize("threads", [1, 2, 3])
def test_compiled_tanh_gelu_equals_the_numpy_kernel_bit_for_bit(monkeypatch, threads):
    """The polynomial and the product compiled around numpy's own tanh loop: the same float32
    operations in the same order, so bit for bit, NaN, infinities and signed zeros too, on sizes
    around its blocks and split over the kernel threads."""
    import nnbridge
    from nnbridge.kernels.ops.activation import gelu

    compiled.load("curves")
    for size in (1, 7, 2047, 2049, 5000, 300_001):
        x = (RNG.standard_normal(size) * 4).astype(np.float32)
        specials = np.float32([np.nan, np.inf, -np.inf, 0.0, -0.0, 1e-40, 20.0, -20.0])
        x[::97] = np.resize(specials, x[::97].size)
        with np.errstate(invalid="ignore"), nnbridge.cpu_threads(threads):
            ours = gelu(None, x.reshape(1, -1), approximate="tanh")
            theirs = _numpy(monkeypatch, gelu, None, x.reshape(1, -1), approximate="tanh")
        np.testing.assert_array_equal(ours, theirs)
        assert np.array_equal(np.signbit(ours), np.signbit(theirs))


# -- depthwise and grouped convolution ---------------------------------------------------------

GEOMETRIES = [  # (channels, multiplier or group width, size, kernel, strides, dilations, pads begin+end)
    (24, 1, (30, 30), (3, 3), (1, 1), (1, 1), (1, 1, 1, 1)),    # the numpy flat path: same order, bit for bit
    (16, 1, (13, 17), (5, 3), (2, 1), (1, 2), (2, 0, 1, 3)),   # asymmetric everything
    (12, 1, (9, 9), (3, 3), (3, 2), (2, 1), (0, 2, 3, 0)),     # stride 3
    (6, 1, (40, 47), (3, 3), (2, 3), (1, 1), (1, 2, 0, 1)),    # column stride 3: the general phase rows
    (10, 1, (31, 30), (5, 5), (2, 2), (1, 1), (2, 1, 2, 2)),   # stride 2, left pad odd: the pair rows' edges
    (6, 1, (32, 33), (3, 3), (2, 2), (2, 2), (0, 0, 1, 1)),    # stride 2, dilated, no left pad
    (5, 1, (19, 22), (3, 3), (2, 2), (1, 1), (3, 4, 3, 4)),    # pads past the kernel: whole padding columns
    (40, 1, (7, 7), (5, 5), (1, 1), (1, 1), (2, 2, 2, 2)),     # a small map: channels last in one call
    (24, 1, (12, 48), (3, 3), (2, 2), (1, 1), (1, 1, 1, 1)),   # planes, strided (the OCR classifier's)
    (448, 1, (28, 28), (5, 5), (1, 1), (1, 1), (2, 2, 2, 2)),  # work for threads: planes in blocks
    (8, 2, (11, 10), (3, 3), (2, 2), (1, 1), (1, 1, 1, 1)),    # channel multiplier 2
    (12, 4, (10, 10), (3, 3), (1, 2), (1, 1), (1, 0, 1, 2)),   # grouped: 4 channels per group
    (96, 16, (7, 9), (3, 3), (2, 1), (1, 1), (1, 1, 1, 0)),    # RegNet's 16 per group: four filters a pass
    (3, 16, (224, 224), (3, 3), (2, 2), (1, 1), (1, 1, 1, 1)),  # one group of 3 channels: a mobile stem
    (40, 10, (30, 29), (3, 3), (1, 1), (1, 1), (1, 1, 1, 1)),  # one group, few filters (DenseNet's), not fours
]
ONE_GROUP = GEOMETRIES[-2:]


def _conv(x, w, b, groups, strides, dilations, pads):
    from nnbridge.kernels.ops.conv import _compiled_grouped

    rank = x.ndim - 2
    begin, end = list(pads[:rank]), list(pads[rank:])
    fast = _compiled_grouped(x, w, b, groups, list(strides), list(dilations), begin, end)
    if fast is not None:
        return fast
    y = conv_nd(x, w, groups, list(strides), list(dilations), begin, end)
    return y + b.reshape(1, -1, *[1] * rank) if b is not None else y


@pytest.mark.parametrize("geometry", GEOMETRIES, ids=lambda g: f"c{g[0]}x{g[1]}-{g[2][0]}x{g[2][1]}-k{g[3][0]}"
                                                               f"{g[3][1]}-s{g[4][0]}{g[4][1]}-d{g[5][0]}{g[5][1]}")
def test_compiled_grouped_convolution_equals_the_numpy_kernel(monkeypatch, geometry):
    """Each output is a sum of (input channels per group)·KH·KW products. The compiled loops add them
    one by one in kernel order, as the numpy flat and tap-by-tap paths do (there: bit for bit); the
    numpy einsum and im2col paths leave the order to einsum or BLAS. Two sums of the same n products
    in different orders are each within γₙ·Σ|products| of the exact sum (γₙ = n·u/(1 - n·u), u = 2⁻²⁴,
    the product's own rounding included by counting n + 1), so they are within twice that of each
    other; the exact sum is float64's."""
    channels, width, size, kernel, strides, dilations, pads = geometry
    grouped = width > 1 and channels % width == 0 and geometry in GEOMETRIES[-4:-2]
    stem = geometry in ONE_GROUP
    groups = 1 if stem else channels // width if grouped else channels
    outs = width if stem else channels if grouped else channels * width
    x = RNG.standard_normal((2, channels, *size)).astype(np.float32)
    w = RNG.standard_normal((outs, channels // groups, *kernel)).astype(np.float32)
    b = RNG.standard_normal(outs).astype(np.float32)
    ours = _conv(x, w, b, groups, strides, dilations, pads)
    theirs = _numpy(monkeypatch, _conv, x, w, b, groups, strides, dilations, pads)
    assert ours.shape == theirs.shape and ours.dtype == np.float32
    rank = len(size)
    from nnbridge.kernels.ops.conv import _compiled_grouped

    assert _compiled_grouped(x, w, b, groups, list(strides), list(dilations), list(pads[:rank]),
                             list(pads[rank:])) is not None  # the compiled loops ran
    exact = conv_nd(x.astype(np.float64), w.astype(np.float64), groups, list(strides), list(dilations),
                    list(pads[:rank]), list(pads[rank:])) + b.reshape(1, -1, 1, 1)
    magnitude = conv_nd(np.abs(x).astype(np.float64), np.abs(w).astype(np.float64), groups, list(strides),
                        list(dilations), list(pads[:rank]), list(pads[rank:])) + np.abs(b).reshape(1, -1, 1, 1)
    n = (channels // groups) * int(np.prod(kernel)) + 2  # products, their roundings and the bias's add
    gamma = n * U / (1 - n * U)
    assert np.all(np.abs(ours - exact) <= gamma * magnitude)
    assert np.all(np.abs(ours - theirs) <= 2 * gamma * magnitude)
    if geometry is GEOMETRIES[0]:  # the numpy kernel's flat path adds in the same order
        np.testing.assert_array_equal(ours, theirs)


def test_a_one_group_convolution_split_over_threads_by_filters_equals_one_thread_bit_for_bit():
    """One image of one group leaves nothing to split but the filters: each thread takes whole
    fours of them (the last part short, 10 = 8 + 2), adding each output's terms in the same order."""
    import nnbridge

    x = RNG.standard_normal((1, 24, 33, 30)).astype(np.float32)
    w = RNG.standard_normal((10, 24, 3, 3)).astype(np.float32)
    b = RNG.standard_normal(10).astype(np.float32)
    runs = []
    for threads in (1, 2, 3):
        with nnbridge.cpu_threads(threads):
            runs.append(_conv(x, w, b, 1, (1, 1), (1, 1), (1, 1, 1, 1)))
    np.testing.assert_array_equal(runs[0], runs[1])
    np.testing.assert_array_equal(runs[0], runs[2])
    exact = conv_nd(x.astype(np.float64), w.astype(np.float64), 1, [1, 1], [1, 1], [1, 1], [1, 1])
    assert np.abs(runs[0] - exact - b.reshape(1, -1, 1, 1)).max() < 1e-3


def test_a_one_dimensional_depthwise_convolution_runs_as_one_row_of_the_two_dimensional_loops(monkeypatch):
    x = RNG.standard_normal((1, 6, 40)).astype(np.float32)
    w = RNG.standard_normal((6, 1, 5)).astype(np.float32)
    ours = _conv(x, w, None, 6, (2,), (2,), (3, 1))
    theirs = _numpy(monkeypatch, _conv, x, w, None, 6, (2,), (2,), (3, 1))
    np.testing.assert_array_equal(ours, theirs)  # the numpy tap-by-tap path: the same order


@pytest.mark.parametrize(("channels", "size", "kernel", "strides", "dilations", "pads"), [
    (3, (40, 36), (3, 3), (1, 1), (1, 1), (1, 1, 1, 1)),
    (4, (37, 53), (7, 5), (2, 3), (1, 2), (3, 0, 2, 4)),  # asymmetric everything, a row's end dropped
    (2, (20, 64), (3, 3), (2, 2), (2, 2), (0, 0, 0, 0)),  # no padding, dilated and strided
])
@pytest.mark.parametrize("group", [1, 2])
def test_compiled_columns_make_the_numpy_kernels_convolution(monkeypatch, channels, size, kernel, strides, dilations,
                                                             pads, group):
    """Wide maps' convolutions take their columns from the compiled im2col (the padding read as
    zeros) and then the same matrix product as the numpy path: bit for bit."""
    from nnbridge.kernels.ops import conv as ops

    compiled.load("conv")
    x = RNG.standard_normal((1, channels * group, *size)).astype(np.float32)
    w = RNG.standard_normal((3 * group, channels, *kernel)).astype(np.float32)
    begin, end = list(pads[:2]), list(pads[2:])
    ours = conv_nd(x, w, group, list(strides), list(dilations), begin, end)
    assert ours.shape[-1] >= ops.IM2COL_MIN_WIDTH  # the compiled columns ran
    theirs = _numpy(monkeypatch, conv_nd, x, w, group, list(strides), list(dilations), begin, end)
    np.testing.assert_array_equal(ours, theirs)


# -- MaxPool with its Indices ---------------------------------------------------------------------

@pytest.mark.parametrize(("size", "kernel", "strides", "dilations"), [
    ((28, 28), (2, 2), (2, 2), (1, 1)),  # a training CNN's pool
    ((13, 11), (3, 2), (1, 2), (2, 1)),  # overlapping windows, dilation, a dropped edge
    ((9, 9), (3, 3), (2, 2), (1, 1)),
])
@pytest.mark.parametrize("dtype", [np.float32, np.float64])
def test_compiled_max_pool_indices_equal_the_numpy_kernel(monkeypatch, size, kernel, strides, dilations, dtype):
    """Both keep each window's first greatest value and its flat position (argmax's choice): ties
    (small integers repeat often) and NaN (the first NaN of a window wins) included."""
    from single_node import node_model, run_ours

    x = RNG.integers(-3, 4, (2, 3, *size)).astype(dtype)
    x[0, 0, 1, 1], x[1, 2, 4, 0:3] = np.nan, np.nan
    model, feeds = node_model("MaxPool", [("x", x)], dict(kernel_shape=list(kernel), strides=list(strides),
                                                         dilations=list(dilations)), outputs=2)
    ours = run_ours(model, feeds)
    theirs = _numpy(monkeypatch, run_ours, model, feeds)
    assert compiled.load("pool") is not None
    for a, b in zip(ours, theirs):
        np.testing.assert_array_equal(a, b)


@pytest.mark.parametrize("attrs", [
    dict(kernel_shape=[3, 3], strides=[1, 1], pads=[1, 1, 1, 1]),  # PoolFormer's token mixer
    dict(kernel_shape=[3, 3], strides=[2, 2], pads=[1, 1, 1, 1]),  # a ResNet's or DenseNet's stem pool
    dict(kernel_shape=[3, 2], strides=[2, 3], pads=[1, 0, 1, 1], ceil_mode=1),  # ceil mode's extra row
    dict(kernel_shape=[3, 3], strides=[1, 2], dilations=[2, 1], pads=[2, 2, 2, 2]),
    dict(kernel_shape=[2, 2], strides=[2, 2]),
])
@pytest.mark.parametrize("op", ["MaxPool", "AveragePool"])
def test_compiled_max_and_average_pools_equal_the_numpy_kernel_bit_for_bit(monkeypatch, op, attrs):
    """Each value's taps in row-major order, the first assigned, each next one combined as numpy's
    ``y op= tap``: maxima with NaN winning and a tie of -0 and +0 keeping the tap (np.maximum's
    choice), sums then divided by the same divisors, with and without the pads counted."""
    from single_node import node_model, run_ours

    x = RNG.standard_normal((2, 6, 23, 21)).astype(np.float32)
    x[0, 0, :2], x[0, 1, :2, :3], x[1, 2, 5, 5] = -0.0, 0.0, np.nan
    x[1, 3, 3:5, 3:5] = np.array([[0.0, -0.0], [-0.0, 0.0]], np.float32)
    compiled.load("pool")
    for include_pad in ((0, 1) if op == "AveragePool" else (None,)):
        given = attrs if include_pad is None else {**attrs, "count_include_pad": include_pad}
        model, feeds = node_model(op, [("x", x)], given)
        (ours,), (theirs,) = run_ours(model, feeds), _numpy(monkeypatch, run_ours, model, feeds)
        np.testing.assert_array_equal(ours, theirs)
        assert np.array_equal(np.signbit(ours), np.signbit(theirs))


# -- the switch, the fallback and the cache ----------------------------------------------------

def test_nnbridge_no_numba_runs_the_numpy_kernels_and_says_so():
    """The variable is read as the process starts (a fresh one here); ``numpy_only`` switches within one."""
    code = ("from nnbridge.kernels import compiled\n"
            "print(compiled.load('conv') is None, compiled.describe())\n")
    root = Path(__file__).resolve().parents[2]
    for value, off in (("1", True), ("0", False)):
        env = {**os.environ, compiled.DISABLE: value, "PYTHONPATH": str(root)}
        done = subprocess.run([sys.executable, "-c", code], env=env, capture_output=True, text=True, check=True,
                              cwd=root)
        if off:
            assert done.stdout.strip() == f"True numpy kernels only ({compiled.DISABLE} is set)"
        else:
            assert done.stdout.startswith("False numba ")
    with compiled.numpy_only():
        assert compiled.load("conv") is None and compiled.describe().startswith("numpy kernels only")
    assert compiled.load("conv") is not None


@pytest.mark.slow
def test_compiled_code_is_cached_in_the_per_user_directory(tmp_path):
    """A fresh process with an empty cache home compiles a kernel and leaves it there, outside the
    installed package (so a read-only install caches too), in a directory named by a hash of the
    compiled modules' sources (numba would not notice a change to a helper in another module);
    NUMBA_CACHE_DIR, numba's own setting, wins over the home."""
    code = ("import numpy as np\n"
            "from nnbridge.kernels import compiled\n"
            "curves = compiled.load('curves')\n"
            "curves.apply('exp32', np.zeros(4, np.float32))\n"
            "print(compiled.cache_dir())\n")
    env = {k: v for k, v in os.environ.items() if k not in ("NUMBA_CACHE_DIR", compiled.DISABLE)}
    env["XDG_CACHE_HOME"] = str(tmp_path / "home")
    root = Path(__file__).resolve().parents[2]
    env["PYTHONPATH"] = str(root)
    done = subprocess.run([sys.executable, "-c", code], env=env, capture_output=True, text=True, check=True, cwd=root)
    where = Path(done.stdout.strip())
    assert where.parent == tmp_path / "home" / "nnbridge" / "numba"  # then a hash of the compiled modules
    assert any(where.rglob("*.nbi")) and any(where.rglob("*.nbc"))
    env["NUMBA_CACHE_DIR"] = str(tmp_path / "own")
    done = subprocess.run([sys.executable, "-c", code], env=env, capture_output=True, text=True, check=True, cwd=root)
    assert Path(done.stdout.strip()).parent == tmp_path / "own" and any((tmp_path / "own").rglob("*.nbi"))


def test_the_curve_loops_are_what_their_generator_writes():
    """``curve_loops.py`` is generated from ``generate.py``'s one table of curves: a hand edit, or a
    table row without ``make curves``, fails here."""
    from nnbridge.kernels.compiled import generate

    assert generate.TARGET.read_text() == generate.source(), "stale curve_loops.py: run make curves"
    assert generate.main(["--check"]) == 0


def test_a_second_process_loads_the_curve_loops_from_the_disk_cache(tmp_path):
    """Each curve's loop is a plain function of its own module, so numba's cache index finds it again
    in a new process (a loop made per curve by a factory is keyed by its dispatcher and compiled anew
    in every process): the second run loads exp32's and gelu32's loops and saves nothing."""
    code = ("import numpy as np\n"
            "from nnbridge.kernels import compiled\n"
            "curves = compiled.load('curves')\n"
            "curves.apply('exp32', np.zeros(4, np.float32))\n"
            "curves.apply('gelu32', np.zeros(4, np.float32))\n")
    env = {k: v for k, v in os.environ.items() if k != compiled.DISABLE}
    env.update(NUMBA_CACHE_DIR=str(tmp_path), NUMBA_DEBUG_CACHE="1",
               PYTHONPATH=str(Path(__file__).resolve().parents[2]))
    runs = [subprocess.run([sys.executable, "-c", code], env=env, capture_output=True, text=True, check=True)
            for _ in range(2)]
    first, second = (run.stdout + run.stderr for run in runs)
    assert "exp32_loop" in first and "data saved" in first
    assert "data saved" not in second
    for loop in ("exp32_loop", "gelu32_loop"):
        assert any("data loaded" in line and loop in line for line in second.splitlines()), second


def test_the_compiled_means_compile_in_seconds_from_a_cold_cache(tmp_path):
    """The first ReduceMean after an install compiles ``row_means`` for its three row lengths (one
    block, two, longer): a few CPU-seconds. A function per pairwise level, inlined into each
    other, took 33 and made a fresh checkout's fuzz run report hangs; CPU time, not the clock, so
    a loaded machine does not fail it."""
    import resource

    code = ("import numpy as np\n"
            "from nnbridge.kernels import compiled\n"
            "reduce = compiled.load('reduce')\n"
            "for n in (100, 200, 1000):\n"
            "    x = np.ones((3, n), np.float32)\n"
            "    assert (reduce.trailing_mean(x, 1) == 1).all()\n")
    env = {k: v for k, v in os.environ.items() if k != compiled.DISABLE}
    env["NUMBA_CACHE_DIR"] = str(tmp_path)
    env["PYTHONPATH"] = str(Path(__file__).resolve().parents[2])
    before = resource.getrusage(resource.RUSAGE_CHILDREN)
    subprocess.run([sys.executable, "-c", code], env=env, capture_output=True, text=True, check=True)
    after = resource.getrusage(resource.RUSAGE_CHILDREN)
    cpu = after.ru_utime + after.ru_stime - before.ru_utime - before.ru_stime
    assert cpu < 12, f"compiling the means took {cpu:.1f} CPU-s"


# -- recurrences -------------------------------------------------------------------------------

RECURRENCES = [  # (op, attributes, with sequence_lens, with peepholes and initial states)
    ("RNN", {"direction": "bidirectional", "clip": 0.5}, True, False),
    ("GRU", {}, False, False),
    ("GRU", {"linear_before_reset": 1, "direction": "reverse"}, True, False),
    ("LSTM", {"direction": "bidirectional"}, False, False),
    ("LSTM", {"input_forget": 1, "clip": 1.0}, True, True),
]


@pytest.mark.parametrize(("op", "attrs", "lens", "peep"), RECURRENCES, ids=[f"{r[0]}-{i}" for i, r in
                                                                             enumerate(RECURRENCES)])
def test_compiled_recurrences_agree_with_the_numpy_kernel(monkeypatch, op, attrs, lens, peep):
    """The compiled loop and the numpy kernel differ in three ways: the recurrent products' order
    and fusion (k order with fused multiply-adds against BLAS's own), the curves (compiled/_core's,
    ≤ 3.2 ulp, against numpy's tanh-based ones, ≤ 1.4 ulp plus 2⁻²⁴ absolute for the sigmoid) and
    nothing else: the elementwise algebra is the same, in the same order. Over 9 steps of hidden
    size 8, weights of scale 0.3 and |x| ≲ 3, the states are O(1) and each step's error is a
    few ulps of O(1) values carried forward through gates below 1 in slope, so the outputs agree
    within 1e-6 absolute (measured: 1.5e-7, as far apart as numpy's kernel is from onnxruntime's);
    sequence ends, clips and peepholes change which terms exist, not how they are rounded."""
    from single_node import node_model, run_ours

    rng = np.random.default_rng(3)
    gates, hidden, seq, batch, dirs = {"RNN": 1, "GRU": 3, "LSTM": 4}[op], 8, 9, 5, 1
    dirs = 2 if attrs.get("direction") == "bidirectional" else 1
    inputs = [("x", rng.standard_normal((seq, batch, 6)).astype(np.float32)),
              ("w", (0.3 * rng.standard_normal((dirs, gates * hidden, 6))).astype(np.float32)),
              ("r", (0.3 * rng.standard_normal((dirs, gates * hidden, hidden))).astype(np.float32)),
              ("b", (0.3 * rng.standard_normal((dirs, 2 * gates * hidden))).astype(np.float32)),
              ("lens", np.array([9, 3, 9, 1, 6], np.int32)) if lens else None]
    outputs = 3 if op == "LSTM" else 2
    if peep:
        inputs += [("h0", rng.standard_normal((dirs, batch, hidden)).astype(np.float32)),
                   ("c0", rng.standard_normal((dirs, batch, hidden)).astype(np.float32)),
                   ("p", (0.3 * rng.standard_normal((dirs, 3 * hidden))).astype(np.float32))]
    model, feeds = node_model(op, inputs, dict(hidden_size=hidden, **attrs), outputs=outputs)
    ours = run_ours(model, feeds)
    theirs = _numpy(monkeypatch, run_ours, model, feeds)
    for a, b in zip(ours, theirs):
        assert a.shape == b.shape and a.dtype == b.dtype
        np.testing.assert_allclose(a, b, rtol=0, atol=1e-6)
    if lens:  # past a sequence's end: zeros, exactly
        y = ours[0]
        assert not y[3:, :, 1].any() and not y[1:, :, 3].any()


def test_a_script_shadowing_a_module_numba_imports_is_named_not_hung(tmp_path):
    """numba's import does ``import timeit``; a script named timeit.py is then imported again inside
    it and asks for the compiled kernels while the first ask holds the lock (it hung forever): now
    the second ask fails at once, naming the cause."""
    script = tmp_path / "timeit.py"
    script.write_text("from nnbridge.kernels import compiled\ncompiled.load('conv')\nprint('loaded')\n")
    env = {**os.environ, "PYTHONPATH": str(Path(__file__).resolve().parents[2]), "NUMBA_CACHE_DIR": str(tmp_path)}
    done = subprocess.run([sys.executable, str(script)], cwd=tmp_path, env=env, capture_output=True, text=True,
                          timeout=300)
    assert done.returncode != 0 and "shadows a standard module numba imports" in done.stderr


def test_a_model_without_compiled_kernels_never_imports_numba():
    """numba's import and first call cost about a second; LeNet-5 (plain convolutions, pooling,
    matrix products) must not pay it, so that ``nnbridge run`` on it stays quick."""
    code = ("import sys, numpy as np, nnbridge\n"
            "from nnbridge.zoo import build\n"
            "exe = nnbridge.compile(build('lenet5'))\n"
            "exe.run({v.name: np.zeros([d if isinstance(d, int) else 1 for d in v.type.shape], np.float32)"
            " for v in exe.graph.inputs})\n"
            "print('numba' in sys.modules)\n")
    root = Path(__file__).resolve().parents[2]
    done = subprocess.run([sys.executable, "-c", code], env=dict(os.environ, PYTHONPATH=str(root)), cwd=root,
                          capture_output=True, text=True, check=True)
    assert done.stdout.strip() == "False"
