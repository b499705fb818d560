"""Elementwise unary math and broadcasting binary/variadic arithmetic, comparisons
and logic, with ONNX's exact integer semantics (Div truncates, Mod's sign rules).
"""

from __future__ import annotations

import numpy as np

from ...ir import DType
from .. import compiled
from ..parallel import ufunc
from ..registry import kernel
from ._common import FLOATS, INTS, NUMERIC, SIGNED_INTS, dtypes_of
from .fastmath import select

BOOL = frozenset({DType.BOOL})


#: unary functions that raise no floating-point flag on any input (NaN and ±inf included), so they
#: run without np.errstate, which costs as much as the function itself on a small tensor
_QUIET = frozenset({np.negative, np.abs, np.sign, np.floor, np.ceil, np.rint, np.tanh, np.logical_not, np.invert})


def _unary(op: str, fn, dtypes) -> None:
    def run(ctx, x):
        with np.errstate(invalid="ignore", divide="ignore", over="ignore"):  # NaN/inf results are ONNX's too
            return np.asarray(ufunc(fn, x)).astype(x.dtype, copy=False)

    def quiet(ctx, x):
        return np.asarray(ufunc(fn, x)).astype(x.dtype, copy=False)

    kernel(op, dtypes=dtypes)(quiet if fn in _QUIET else run)


for _op, _fn in {
    "Exp": np.exp, "Log": np.log, "Sqrt": np.sqrt, "Sin": np.sin, "Cos": np.cos, "Tan": np.tan,
    "Asin": np.arcsin, "Acos": np.arccos, "Atan": np.arctan, "Sinh": np.sinh, "Cosh": np.cosh,
    "Tanh": np.tanh, "Asinh": np.arcsinh, "Acosh": np.arccosh, "Atanh": np.arctanh,
    "Reciprocal": np.reciprocal, "Floor": np.floor, "Ceil": np.ceil,
    "Round": np.rint,  # rint rounds half to even, as ONNX requires
}.items():
    _unary(_op, _fn, FLOATS)

_unary("Abs", np.abs, NUMERIC)
_unary("Neg", np.negative, FLOATS | SIGNED_INTS)
_unary("Sign", np.sign, NUMERIC)
_unary("Not", np.logical_not, BOOL)
_unary("BitwiseNot", np.invert, INTS)


@kernel("Relu", dtypes=FLOATS | SIGNED_INTS)
def relu(ctx, x):
    """max(x, 0) as a clip to [0, inf] for floats: numpy's maximum against a scalar has no vector
    loop in this build (124 against 34 µs on 400k float32); the clip keeps NaN and -0.0 as
    maximum and onnxruntime do."""
    if x.dtype.kind == "f":
        return relu_into(x, None)
    return np.maximum(x, x.dtype.type(0))


def relu_into(x: np.ndarray, out: np.ndarray | None) -> np.ndarray:
    """``relu`` of float ``x`` into ``out`` (None: a new array; ``x``: in place)."""
    if x.dtype == np.float32:
        fast = compiled.loaded("curves")  # a third of the clip's cost on small maps, when numba is in already
        if fast is not None:
            return fast.apply("relu32", x, out=out)
    return np.clip(x, x.dtype.type(0), x.dtype.type(np.inf), out=out)


@kernel("IsNaN", dtypes=FLOATS)
def isnan(ctx, x):
    return np.isnan(x)


@kernel("IsInf", dtypes=FLOATS)
def isinf(ctx, x, *, detect_negative=1, detect_positive=1):
    pos, neg = detect_positive, detect_negative
    if pos and neg:
        return np.isinf(x)
    if pos:
        return np.isposinf(x)
    if neg:
        return np.isneginf(x)
    return np.zeros(x.shape, dtype=bool)


# -- binary ---------------------------------------------------------------------------

def _same_type(fn):
    """Binary ops whose inputs share one type: keep that type exactly."""

    def run(ctx, a, b):
        return np.asarray(ufunc(fn, a, b)).astype(a.dtype, copy=False)

    return run


def _predicate(fn):
    def run(ctx, a, b):
        return np.asarray(fn(a, b)).astype(bool, copy=False)

    return run


for _op, _fn in {"Add": np.add, "Sub": np.subtract, "Mul": np.multiply}.items():
    kernel(_op, dtypes=NUMERIC)(_same_type(_fn))
for _op, _fn in {"BitwiseAnd": np.bitwise_and, "BitwiseOr": np.bitwise_or, "BitwiseXor": np.bitwise_xor}.items():
    kernel(_op, dtypes=INTS)(_same_type(_fn))
for _op, _fn in {"And": np.logical_and, "Or": np.logical_or, "Xor": np.logical_xor}.items():
    kernel(_op, dtypes=BOOL)(_predicate(_fn))
for _op, _fn in {"Less": np.less, "LessOrEqual": np.less_equal,
                 "Greater": np.greater, "GreaterOrEqual": np.greater_equal}.items():
    kernel(_op, dtypes=NUMERIC | BOOL)(_predicate(_fn))


@kernel("Equal", dtypes=NUMERIC | BOOL | {DType.STRING})
def equal(ctx, a, b):
    return np.asarray(np.equal(a, b)).astype(bool, copy=False)


@kernel("Div", dtypes=NUMERIC)
def div(ctx, a, b):
    if a.dtype.kind in "iu":
        return truncated_divide(a, b)
    return np.asarray(ufunc(np.divide, a, b)).astype(a.dtype, copy=False)


def truncated_divide(a: np.ndarray, b: np.ndarray) -> np.ndarray:
    """Integer division rounding toward zero (C semantics), exactly in integers."""
    with np.errstate(divide="ignore"):
        q = np.floor_divide(a, b)
        if a.dtype.kind == "u":
            return q.astype(a.dtype, copy=False)
        inexact = np.remainder(a, b) != 0
    # floor and trunc differ only for inexact quotients of mixed signs
    fix = inexact & ((a < 0) != (b < 0))
    return np.asarray(q + fix.astype(q.dtype)).astype(a.dtype, copy=False)


@kernel("Mod", dtypes=NUMERIC)
def mod(ctx, a, b, *, fmod=0):
    with np.errstate(divide="ignore", invalid="ignore"):
        fn = np.fmod if fmod else np.mod  # fmod: sign of dividend; mod: of divisor
        return np.asarray(fn(a, b)).astype(a.dtype, copy=False)


@kernel("Pow", dtypes=NUMERIC, check=dtypes_of(1, NUMERIC, "the exponent"))
def power(ctx, a, b):
    """The result has the base's type; an integer base with negative exponents goes through floats."""
    with np.errstate(invalid="ignore", divide="ignore", over="ignore"):
        return _power(a, b)


_SMALL_POWERS = {2: lambda a: ufunc(np.multiply, a, a), 3: lambda a: ufunc(np.multiply, ufunc(np.multiply, a, a), a),
                 1: lambda a: a.copy(), 0.5: lambda a: ufunc(np.sqrt, a), -1: lambda a: ufunc(np.reciprocal, a)}


def _power(a: np.ndarray, b: np.ndarray) -> np.ndarray:
    if b.size == 1 and a.dtype.kind == "f" and b.item() in _SMALL_POWERS and b.ndim <= a.ndim:
        return _SMALL_POWERS[b.item()](a)  # pow() is a slow libm call per element; these are exact or 0.5 ulp
    if a.dtype.kind in "iu" and b.dtype.kind in "iu" and not (b < 0).any():
        return np.power(a, b.astype(a.dtype, copy=False))
    if a.dtype.kind in "iu":
        return np.trunc(np.power(a.astype(np.float64), b.astype(np.float64))).astype(a.dtype)
    if b.dtype.kind in "iu" or b.dtype.itemsize <= a.dtype.itemsize:
        return np.power(a, b.astype(a.dtype, copy=False))
    return np.power(a.astype(b.dtype), b).astype(a.dtype)


def _bitshift_direction(node, *, direction):
    return None if direction in ("LEFT", "RIGHT") else f"direction {direction!r} is not LEFT or RIGHT"


@kernel("BitShift", dtypes=INTS, check=_bitshift_direction)
def bitshift(ctx, a, b, *, direction):
    """Right shifts of signed types are arithmetic; a shift outside [0, bits) leaves
    only the sign fill (-1 for a right shift of a negative value, else 0)."""
    shift = np.asarray(b).astype(np.int64)
    valid = (shift >= 0) & (shift < a.dtype.itemsize * 8)
    amount = np.where(valid, shift, 0).astype(a.dtype)
    if direction == "LEFT":
        shifted, fill = np.left_shift(a, amount), 0
    else:
        shifted, fill = np.right_shift(a, amount), np.where(a < 0, -1, 0)
    return np.where(valid, shifted, fill).astype(a.dtype, copy=False)


# -- variadic (multidirectional broadcasting) -------------------------------------------

def _fold(fn):
    def run(ctx, *xs):
        xs = [x for x in xs if x is not None]
        out = xs[0]
        for x in xs[1:]:
            out = fn(out, x)
        return np.asarray(out).astype(xs[0].dtype, copy=False)

    return run


# maximum/minimum propagate NaN like ONNX Max/Min
kernel("Max", dtypes=NUMERIC)(_fold(np.maximum))
kernel("Min", dtypes=NUMERIC)(_fold(np.minimum))
kernel("Sum", dtypes=NUMERIC)(_fold(np.add))


@kernel("Mean", dtypes=FLOATS)
def mean(ctx, *xs):
    xs = [x for x in xs if x is not None]
    return (_fold(np.add)(ctx, *xs) / len(xs)).astype(xs[0].dtype, copy=False)


@kernel("Where", check=dtypes_of(0, BOOL, "the condition"))
def where(ctx, cond, x, y):
    return select(cond, x, y)
