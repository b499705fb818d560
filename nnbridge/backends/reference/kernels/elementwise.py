"""Elementwise unary ops and broadcasting binary/variadic arithmetic and comparisons."""

from __future__ import annotations

import numpy as np

from ....ir import DType
from ....ir.dtypes import FLOAT_TYPES, NUMERIC_TYPES
from ..registry import kernel

FLOATS = FLOAT_TYPES
NUMERIC = NUMERIC_TYPES


def _unary(op: str, fn, dtypes=FLOATS) -> None:
    kernel(op, dtypes=dtypes)(lambda ctx, x: fn(x).astype(x.dtype, copy=False))


for _op, _fn in {
    "Exp": np.exp, "Log": np.log, "Sqrt": np.sqrt, "Sin": np.sin, "Cos": np.cos, "Tan": np.tan,
    "Asin": np.arcsin, "Acos": np.arccos, "Atan": np.arctan, "Sinh": np.sinh, "Cosh": np.cosh,
    "Tanh": np.tanh, "Asinh": np.arcsinh, "Acosh": np.arccosh, "Atanh": np.arctanh,
    "Reciprocal": np.reciprocal, "Floor": np.floor, "Ceil": np.ceil, "Round": np.rint,
}.items():
    _unary(_op, _fn)

_unary("Abs", np.abs, NUMERIC)
_unary("Neg", np.negative, NUMERIC - {DType.UINT8, DType.UINT16, DType.UINT32, DType.UINT64})
_unary("Sign", np.sign, NUMERIC)


@kernel("Relu", dtypes=FLOATS | {DType.INT8, DType.INT16, DType.INT32, DType.INT64})
def relu(ctx, x):
    return np.maximum(x, x.dtype.type(0))


@kernel("Sigmoid", dtypes=FLOATS)
def sigmoid(ctx, x):
    # split by sign so that exp never overflows
    out = np.empty_like(x)
    pos = x >= 0
    out[pos] = 1 / (1 + np.exp(-x[pos]))
    e = np.exp(x[~pos])
    out[~pos] = e / (1 + e)
    return out


_BINARY = {
    "Add": np.add, "Sub": np.subtract, "Mul": np.multiply,
    "Equal": np.equal, "Less": np.less, "LessOrEqual": np.less_equal,
    "Greater": np.greater, "GreaterOrEqual": np.greater_equal,
    "And": np.logical_and, "Or": np.logical_or, "Xor": np.logical_xor,
    "BitwiseAnd": np.bitwise_and, "BitwiseOr": np.bitwise_or, "BitwiseXor": np.bitwise_xor,
}


def _binary(fn):
    def run(ctx, a, b):
        out = fn(a, b)
        return out if out.dtype == np.bool_ else out.astype(a.dtype, copy=False)

    return run


for _op, _fn in _BINARY.items():
    kernel(_op)(_binary(_fn))


@kernel("Div")
def div(ctx, a, b):
    if np.issubdtype(a.dtype, np.integer):
        # ONNX integer division truncates toward zero (C semantics), numpy floors
        return np.trunc(np.true_divide(a, b)).astype(a.dtype)
    return np.divide(a, b).astype(a.dtype, copy=False)
