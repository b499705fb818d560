"""Elementwise math and reduction kernels of the reference backend: ONNX's exact
integer semantics (Div truncation, Mod sign rules, shifts), dtype preservation,
broadcasting, NaN propagation and empty-tensor identities, checked against
onnxruntime on single-node models or hand-computed values.
"""

from __future__ import annotations

import numpy as np
import pytest
from single_node import node_model, run_ours

import nnbridge
from nnbridge.base.errors import UnsupportedOpError
from nnbridge.check import run_onnxruntime

RNG = np.random.default_rng(11)
I64 = np.int64




def ours(op, inputs, attrs=None, outputs=1, opset=21):
    values = run_ours(*node_model(op, inputs, attrs, outputs, opset=opset))
    return values if outputs > 1 else values[0]


def agree(op, inputs, attrs=None, outputs=1, rtol=1e-5, opset=21):
    model, feeds = node_model(op, inputs, attrs, outputs, opset=opset)
    exe = nnbridge.compile(model, passes=[])
    actual = exe.run(feeds)
    expected = run_onnxruntime(model, feeds)
    for name in exe.output_names:
        a, e = np.asarray(actual[name]), np.asarray(expected[name])
        assert a.shape == e.shape and a.dtype == e.dtype, (name, a.dtype, e.dtype, a.shape, e.shape)
        if e.dtype.kind == "f":
            np.testing.assert_allclose(a.astype(np.float64), e.astype(np.float64), rtol=rtol, atol=1e-6)
        else:
            np.testing.assert_array_equal(a, e)
    return actual


def exact(actual, expected, dtype):
    assert actual.dtype == np.dtype(dtype)
    np.testing.assert_array_equal(actual, np.asarray(expected, dtype))


A = np.array([-7, 7, -7, 7, 0, -1, 6], dtype=np.int32)
B = np.array([2, 2, -2, -2, 3, 4, -3], dtype=np.int32)


# -- integer arithmetic ----------------------------------------------------------------

@pytest.mark.parametrize("dtype", [np.int8, np.int32, np.int64])
def test_integer_div_truncates_toward_zero(dtype):
    exact(ours("Div", [("a", A.astype(dtype)), ("b", B.astype(dtype))]), [-3, 3, 3, -3, 0, 0, -2], dtype)


def test_integer_div_is_exact_beyond_float_precision():
    a = np.array([2**62 + 1, -(2**62) - 3], I64)
    b = np.array([1, 1], I64)
    exact(ours("Div", [("a", a), ("b", b)]), a, I64)
    agree("Div", [("a", a), ("b", np.array([3, -7], I64))])


def test_unsigned_div_and_float_div_keep_dtype():
    agree("Div", [("a", np.array([7, 255], np.uint8)), ("b", np.array([2, 16], np.uint8))])
    agree("Div", [("a", RNG.standard_normal((2, 3)).astype(np.float16)), ("b", np.array([2.0, -4, 8], np.float16))],
          rtol=1e-3)


def test_mod_sign_rules():
    exact(ours("Mod", [("a", A), ("b", B)]), [1, 1, -1, -1, 0, 3, 0], np.int32)  # sign of the divisor
    exact(ours("Mod", [("a", A), ("b", B)], {"fmod": 1}), [-1, 1, -1, 1, 0, -1, 0], np.int32)  # of the dividend
    agree("Mod", [("a", A.astype(I64)), ("b", B.astype(I64))])
    x = np.array([-4.5, 4.5, -4.5, 3.0], np.float32)
    agree("Mod", [("a", x), ("b", np.array([2.0, -2.0, -2.0, 1.5], np.float32))], {"fmod": 1})


@pytest.mark.parametrize("base, exponent", [
    (np.float32, np.int64), (np.float32, np.float32), (np.int32, np.int32), (np.int64, np.int64),
    (np.float64, np.float32), (np.int64, np.float32),
])
def test_pow_output_has_the_base_type(base, exponent):
    x = np.array([[1, 2, 3], [-2, 4, 5]]).astype(base)
    y = np.array([2, 3, 0]).astype(exponent)
    agree("Pow", [("x", x), ("y", y)])


def test_bitshift_unsigned_and_signed():
    agree("BitShift", [("x", np.array([16, 4, 1], np.uint8)), ("y", np.array([1, 2, 3], np.uint8))],
          {"direction": "RIGHT"})
    agree("BitShift", [("x", np.array([16, 4, 1], np.uint64)), ("y", np.array([1, 2, 3], np.uint64))],
          {"direction": "LEFT"})
    x = np.array([-16, -1, 64, 5, -8], np.int8)
    exact(ours("BitShift", [("x", x), ("y", np.array([2, 3, 1, 9, -1], np.int8))], {"direction": "RIGHT"}),
          [-4, -1, 32, 0, -1], np.int8)
    exact(ours("BitShift", [("x", x), ("y", np.array([1, 0, 1, 8, -1], np.int8))], {"direction": "LEFT"}),
          [-32, -1, -128, 0, 0], np.int8)


@pytest.mark.parametrize("op", ["Abs", "Neg", "Sign"])
@pytest.mark.parametrize("dtype", [np.int8, np.int32, np.int64, np.float16, np.float64])
def test_integer_and_float_unary_keep_dtype(op, dtype):
    agree(op, [("x", np.array([[-3, 0, 5], [7, -1, 2]]).astype(dtype))])


def test_round_half_to_even_and_float_unary():
    x = np.array([0.5, 1.5, 2.5, -0.5, -1.5, -2.5, 2.4, 2.6], np.float32)
    exact(ours("Round", [("x", x)]), [0, 2, 2, -0.0, -2, -2, 2, 3], np.float32)
    p = RNG.uniform(0.1, 0.9, (3, 4)).astype(np.float32)
    for op in ("Exp", "Log", "Sqrt", "Reciprocal", "Floor", "Ceil", "Sin", "Cos", "Tan", "Asin", "Acos",
               "Atan", "Sinh", "Cosh", "Tanh", "Asinh", "Atanh", "Sigmoid"):
        agree(op, [("x", p)])
    agree("Acosh", [("x", p + 1)])


def test_isnan_isinf_not_bitwise_not():
    x = np.array([np.nan, np.inf, -np.inf, 0.0, 1.0], np.float32)
    agree("IsNaN", [("x", x)])
    for pos, neg in ((1, 1), (1, 0), (0, 1)):
        agree("IsInf", [("x", x)], {"detect_positive": pos, "detect_negative": neg})
    agree("Not", [("x", np.array([True, False]))])
    agree("BitwiseNot", [("x", np.array([0, 5, -3], np.int32))])
    agree("BitwiseNot", [("x", np.array([0, 5, 255], np.uint8))])


# -- comparisons, logic, variadic -------------------------------------------------------

def test_comparisons_broadcast_and_equal_strings():
    a = RNG.integers(0, 3, (2, 3, 1)).astype(np.int32)
    b = RNG.integers(0, 3, (4,)).astype(np.int32)
    for op in ("Equal", "Less", "LessOrEqual", "Greater", "GreaterOrEqual"):
        agree(op, [("a", a), ("b", b)])
    s = np.array(["x", "yy", ""], dtype=object)
    exact(ours("Equal", [("a", s), ("b", np.array(["x", "y", ""], dtype=object))]), [True, False, True], bool)


def test_logical_and_bitwise_binary():
    p, q = np.array([[True], [False]]), np.array([True, False, True])
    for op in ("And", "Or", "Xor"):
        agree(op, [("a", p), ("b", q)])
    m, n = np.array([12, 10, -1], np.int16), np.array([10], np.int16)
    for op in ("BitwiseAnd", "BitwiseOr", "BitwiseXor"):
        agree(op, [("a", m), ("b", n)])


def test_variadic_max_min_propagate_nan_and_broadcast():
    a = np.array([[1.0, np.nan, 3.0]], np.float32)
    b = np.array([[2.0], [np.nan]], np.float32)
    c = np.array(0.5, np.float32)
    for op in ("Max", "Min", "Sum", "Mean"):
        out = agree(op, [("a", a), ("b", b), ("c", c)])["y0"]
        assert out.shape == (2, 3)
    exact(ours("Max", [("a", a), ("b", b)]), [[2.0, np.nan, 3.0], [np.nan] * 3], np.float32)
    agree("Max", [("a", np.array([1, 9], np.uint8))])
    agree("Min", [("a", np.array([1, 9], np.int64)), ("b", np.array([[3], [0]], np.int64))])


def test_where_broadcasts_and_keeps_strings():
    cond = np.array([[True, False, True]])
    agree("Where", [("c", cond), ("x", np.array([[1], [2]], np.int64)), ("y", np.array([7, 8, 9], np.int64))])
    exact(ours("Where", [("c", cond), ("x", np.array(["a"], dtype=object)), ("y", np.array(["b"], dtype=object))]),
          [["a", "b", "a"]], object)


def test_unsupported_dtypes_are_refused():
    for op, inputs in [
        ("Neg", [("x", np.array([1], np.uint32))]),
        ("Add", [("a", np.array(["a"], dtype=object)), ("b", np.array(["b"], dtype=object))]),
        ("Exp", [("x", np.array([1], np.int32))]),
        ("Where", [("c", np.array([1], np.int32)), ("x", np.array([1.0])), ("y", np.array([2.0]))]),
    ]:
        model, feeds = node_model(op, inputs)
        model.graph.ClearField("value_info")
        with pytest.raises(UnsupportedOpError):
            nnbridge.compile(model, passes=[])


# -- reductions ----------------------------------------------------------------------

REDUCE_OPS = ["ReduceSum", "ReduceMean", "ReduceMax", "ReduceMin", "ReduceProd", "ReduceL1", "ReduceL2",
              "ReduceLogSum", "ReduceLogSumExp", "ReduceSumSquare"]


@pytest.mark.parametrize("op", REDUCE_OPS)
@pytest.mark.parametrize("axes, keepdims", [([1], 1), ([-1, 0], 0), (None, 1), (None, 0)])
def test_reductions_against_onnxruntime(op, axes, keepdims):
    x = RNG.uniform(0.5, 2.0, (3, 4, 5)).astype(np.float32)
    inputs = [("x", x)] + ([] if axes is None else [("a", np.array(axes, I64))])
    agree(op, inputs, {"keepdims": keepdims}, opset=18, rtol=1e-4)


@pytest.mark.parametrize("op", ["ReduceSum", "ReduceMax", "ReduceMin", "ReduceProd", "ReduceSumSquare", "ReduceL1"])
@pytest.mark.parametrize("dtype", [np.int32, np.int64])
def test_integer_reductions_keep_dtype(op, dtype):
    x = RNG.integers(-4, 5, (3, 4)).astype(dtype)
    agree(op, [("x", x), ("a", np.array([0], I64))], {"keepdims": 0}, opset=18)


def test_noop_with_empty_axes_returns_the_input():
    x = RNG.standard_normal((2, 3)).astype(np.float32)
    out = ours("ReduceSum", [("x", x), ("a", np.array([], I64))], {"noop_with_empty_axes": 1}, opset=18)
    exact(out, x, np.float32)
    agree("ReduceMax", [("x", x), ("a", np.array([], I64))], {"noop_with_empty_axes": 0}, opset=18)


@pytest.mark.parametrize("op, dtype, identity", [
    ("ReduceMax", np.float32, -np.inf), ("ReduceMax", np.int32, np.iinfo(np.int32).min),
    ("ReduceMin", np.float32, np.inf), ("ReduceMin", np.int64, np.iinfo(np.int64).max),
    ("ReduceProd", np.float32, 1), ("ReduceProd", np.int32, 1), ("ReduceSum", np.float32, 0),
    ("ReduceSumSquare", np.int64, 0), ("ReduceL1", np.float32, 0), ("ReduceL2", np.float32, 0),
    ("ReduceLogSum", np.float32, -np.inf), ("ReduceLogSumExp", np.float64, -np.inf),
])
def test_empty_reductions_give_identity_values(op, dtype, identity):
    x = np.zeros((2, 0, 3), dtype)
    out = ours(op, [("x", x), ("a", np.array([1], I64))], {"keepdims": 1}, opset=18)
    exact(out, np.full((2, 1, 3), identity), dtype)


def test_float16_reductions_stay_float16():
    x = RNG.uniform(-1, 1, (4, 64)).astype(np.float16)
    for op in ("ReduceSum", "ReduceMean", "ReduceLogSumExp", "ReduceL2"):
        assert ours(op, [("x", x), ("a", np.array([1], I64))], opset=18).dtype == np.float16


@pytest.mark.parametrize("op", ["ArgMax", "ArgMin"])
@pytest.mark.parametrize("axis", [0, -1])
@pytest.mark.parametrize("last", [0, 1])
@pytest.mark.parametrize("keepdims", [0, 1])
def test_argmax_argmin_ties(op, axis, last, keepdims):
    x = np.array([[2, 5, 5, 1], [1, 1, 0, 0], [2, 5, 0, 1]], np.int32)
    agree(op, [("x", x)], {"axis": axis, "select_last_index": last, "keepdims": keepdims})


def test_argmax_hand_computed_last_index():
    x = np.array([[2, 5, 5, 1]], np.float32)
    exact(ours("ArgMax", [("x", x)], {"axis": 1, "select_last_index": 1}), [[2]], I64)
    exact(ours("ArgMax", [("x", x)], {"axis": 1, "keepdims": 0}), [1], I64)


@pytest.mark.parametrize("exclusive", [0, 1])
@pytest.mark.parametrize("reverse", [0, 1])
@pytest.mark.parametrize("axis", [0, -1])
def test_cumsum_exclusive_reverse(exclusive, reverse, axis):
    x = np.arange(1, 13, dtype=np.int32).reshape(3, 4)
    agree("CumSum", [("x", x), ("a", np.array(axis, I64))], {"exclusive": exclusive, "reverse": reverse})
    agree("CumSum", [("x", x.astype(np.float32)), ("a", np.array(axis, np.int32))],
          {"exclusive": exclusive, "reverse": reverse})


def test_cumprod_hand_computed():
    x = np.array([1, 2, 3, 4], np.int64)
    a = ("a", np.array(0, I64))
    exact(ours("CumProd", [("x", x), a], opset=26), [1, 2, 6, 24], I64)
    exact(ours("CumProd", [("x", x), a], {"exclusive": 1}, opset=26), [1, 1, 2, 6], I64)
    exact(ours("CumProd", [("x", x), a], {"exclusive": 1, "reverse": 1}, opset=26), [24, 12, 4, 1], I64)
