"""LBANN operators without a one-op ONNX twin, built from several ONNX ops on import.

Semantics follow LBANN's own operator implementations (src/operators/math, src/operators/loss):
comparisons and logical ops give 1.0/0.0 in the data type; a value is "true" when it is neither
zero nor NaN; Boolean metrics threshold both inputs at 0.5; SafeDivide/SafeReciprocal give 0
where the quotient is not finite; Mod is C's fmod.
"""

from __future__ import annotations

from collections.abc import Callable

import numpy as np

from ...ir import DType
from .import_context import ImportContext, Tensor


class Builder:
    """Emits the ONNX nodes of one operator; the last node carries the layer's name."""

    def __init__(self, ctx: ImportContext, dims: tuple[int, ...], last: bool):
        self.ctx, self.dims, self.last = ctx, dims, last

    def op(self, name: str, *inputs, attrs: dict | None = None, dtype: DType = DType.FLOAT32) -> Tensor:
        return self.ctx.emit(name, list(inputs), self.dims, attrs, dtype=dtype)

    def const(self, value: float) -> Tensor:
        return Tensor(self.ctx.const(np.float32(value), "constant"), ())

    def truth(self, x: Tensor) -> Tensor:
        """LBANN's truth of a value: not zero and not NaN (bool)."""
        zero = self.op("Equal", x, self.const(0.0), dtype=DType.BOOL)
        return self.op("Not", self.op("Or", zero, self.op("IsNaN", x, dtype=DType.BOOL), dtype=DType.BOOL),
                       dtype=DType.BOOL)

    def at_least_half(self, x: Tensor) -> Tensor:
        return self.op("GreaterOrEqual", x, self.const(0.5), dtype=DType.BOOL)

    def finite_or_zero(self, y: Tensor) -> Tensor:
        bad = self.op("Or", self.op("IsNaN", y, dtype=DType.BOOL), self.op("IsInf", y, dtype=DType.BOOL),
                      dtype=DType.BOOL)
        return self.done("Where", bad, self.const(0.0), y)

    def done(self, name: str, *inputs, attrs: dict | None = None) -> Tensor:
        """The operator's float result (the layer's output when it is the layer's last operator)."""
        return self.ctx.emit(name, list(inputs), self.dims, attrs, final=self.last)

    def as_float(self, flag: Tensor) -> Tensor:
        return self.done("Cast", flag, attrs={"to": DType.FLOAT32.onnx})


Composed = Callable[[Builder, list[Tensor], object], Tensor]


def _compare(onnx_op: str, negate: bool = False, constant: bool = False) -> Composed:
    """LBANN's comparison as 0/1 floats: of its two inputs, or (``constant``) of its input and
    the layer's ``constant``."""
    def build(b: Builder, xs: list[Tensor], message) -> Tensor:
        y = b.const(message.constant) if constant else xs[1]
        flag = b.op(onnx_op, xs[0], y, dtype=DType.BOOL)
        return b.as_float(b.op("Not", flag, dtype=DType.BOOL) if negate else flag)
    return build


#: LBANN's comparisons → (ONNX comparison, negated); each is an operator of two inputs (``Less``:
#: ``LessOperator``) and one of an input and a constant (``LessConstantOperator``)
_COMPARISONS = {
    "Equal": ("Equal", False), "NotEqual": ("Equal", True), "Less": ("Less", False),
    "LessEqual": ("LessOrEqual", False), "Greater": ("Greater", False), "GreaterEqual": ("GreaterOrEqual", False),
}


def _logical(onnx_op: str) -> Composed:
    def build(b: Builder, xs: list[Tensor], _message) -> Tensor:
        return b.as_float(b.op(onnx_op, b.truth(xs[0]), b.truth(xs[1]), dtype=DType.BOOL))
    return build


def _boolean_metric(kind: str) -> Composed:
    def build(b: Builder, xs: list[Tensor], _message) -> Tensor:
        p, t = b.at_least_half(xs[0]), b.at_least_half(xs[1])
        if kind == "accuracy":
            flag = b.op("Equal", p, t, dtype=DType.BOOL)
        elif kind == "false_negative":
            flag = b.op("And", b.op("Not", p, dtype=DType.BOOL), t, dtype=DType.BOOL)
        else:
            flag = b.op("And", p, b.op("Not", t, dtype=DType.BOOL), dtype=DType.BOOL)
        return b.as_float(flag)
    return build


def _squared_difference(b: Builder, xs: list[Tensor], _message) -> Tensor:
    d = b.op("Sub", *xs)
    return b.done("Mul", d, d)


def _safe_divide(b: Builder, xs: list[Tensor], _message) -> Tensor:
    return b.finite_or_zero(b.op("Div", *xs))


def _safe_reciprocal(b: Builder, xs: list[Tensor], _message) -> Tensor:
    return b.finite_or_zero(b.op("Reciprocal", xs[0]))


def _mod(b: Builder, xs: list[Tensor], _message) -> Tensor:
    return b.done("Mod", *xs, attrs={"fmod": 1})


def _logical_not(b: Builder, xs: list[Tensor], _message) -> Tensor:
    return b.as_float(b.op("Not", b.truth(xs[0]), dtype=DType.BOOL))


def _binary_cross_entropy(b: Builder, xs: list[Tensor], _message) -> Tensor:
    """-y log(p) where y > 0, plus -(1 - y) log(1 - p) where y < 1 (p prediction, y label)."""
    p, y = xs
    zero, one = b.const(0.0), b.const(1.0)
    first = b.op("Where", b.op("Greater", y, zero, dtype=DType.BOOL), b.op("Neg", b.op("Mul", y, b.op("Log", p))),
                 zero)
    rest = b.op("Mul", b.op("Sub", one, y), b.op("Log", b.op("Sub", one, p)))
    second = b.op("Where", b.op("Less", y, one, dtype=DType.BOOL), b.op("Neg", rest), zero)
    return b.done("Add", first, second)


def _sigmoid_binary_cross_entropy(b: Builder, xs: list[Tensor], _message) -> Tensor:
    """On logits x with label z clipped to [0, 1]: max(x, 0) − x·z + log(1 + e^−|x|)."""
    x, y = xs
    z = b.op("Clip", y, b.const(0.0), b.const(1.0))
    tail = b.op("Softplus", b.op("Neg", b.op("Abs", x)))
    return b.done("Add", b.op("Sub", b.op("Relu", x), b.op("Mul", x, z)), tail)


def _gelu(b: Builder, xs: list[Tensor], _message) -> Tensor:
    """x/2 · (1 + tanh(√(2/π) (x + 0.044715 x³))): LBANN's Gelu is the tanh approximation
    (src/operators/math/unary.cpp), ONNX's Gelu with approximate='tanh'."""
    return b.done("Gelu", xs[0], attrs={"approximate": "tanh"})


def _select(b: Builder, xs: list[Tensor], message) -> Tensor:
    """``|predicate − value| < epsilon`` picks the true input (or constant), else the false one."""
    predicate, *rest = xs
    close = b.op("Less", b.op("Abs", b.op("Sub", predicate, b.const(message.value))), b.const(message.epsilon),
                 dtype=DType.BOOL)
    rest = list(rest)
    if_true = b.const(message.value_if_true) if message.constant_if_true else rest.pop(0)
    if_false = b.const(message.value_if_false) if message.constant_if_false else rest.pop(0)
    return b.done("Where", close, if_true, if_false)


#: erfinv's polynomials in w = −log((1 − x)(1 + x)) (M. Giles, "Approximating the erfinv function",
#: GPU Computing Gems Jade Edition, 2011; single precision): highest power first
_ERFINV_CENTRAL = (2.81022636e-08, 3.43273939e-07, -3.5233877e-06, -4.39150654e-06, 0.00021858087,
                   -0.00125372503, -0.00417768164, 0.246640727, 1.50140941)  # in w − 2.5, for w < 5
_ERFINV_TAIL = (-0.000200214257, 0.000100950558, 0.00134934322, -0.00367342844, 0.00573950773,
                -0.0076224613, 0.00943887047, 1.00167406, 2.83297682)  # in sqrt(w) − 3


def _horner(b: Builder, w: Tensor, coefficients: tuple[float, ...]) -> Tensor:
    p = b.const(coefficients[0])
    for c in coefficients[1:]:
        p = b.op("Add", b.op("Mul", p, w), b.const(c))
    return p


def _erfinv(b: Builder, xs: list[Tensor], _message) -> Tensor:
    """The inverse error function: LBANN iterates Newton's method in double precision from x
    (src/operators/math/unary.cpp) and gives −inf / inf for x ≤ −1 / x ≥ 1; in float32 Giles'
    approximation is within 2.3 ulp of the exact value (tests/lbann: against scipy)."""
    (x,) = xs
    one = b.const(1.0)
    w = b.op("Neg", b.op("Log", b.op("Mul", b.op("Sub", one, x), b.op("Add", one, x))))
    central = _horner(b, b.op("Sub", w, b.const(2.5)), _ERFINV_CENTRAL)
    tail = _horner(b, b.op("Sub", b.op("Sqrt", w), b.const(3.0)), _ERFINV_TAIL)
    inner = b.op("Mul", b.op("Where", b.op("Less", w, b.const(5.0), dtype=DType.BOOL), central, tail), x)
    edge = b.op("GreaterOrEqual", b.op("Abs", x), one, dtype=DType.BOOL)
    return b.done("Where", edge, b.op("Mul", b.op("Sign", x), b.const(np.inf)), inner)


#: LBANN operator → (number of inputs, builder)
COMPOSED: dict[str, tuple[int | None, Composed]] = {
    "SquaredDifferenceOperator": (2, _squared_difference),
    "SafeDivideOperator": (2, _safe_divide),
    "SafeReciprocalOperator": (1, _safe_reciprocal),
    "ModOperator": (2, _mod),
    **{f"{name}Operator": (2, _compare(op, negate)) for name, (op, negate) in _COMPARISONS.items()},
    **{f"{name}ConstantOperator": (1, _compare(op, negate, constant=True))
       for name, (op, negate) in _COMPARISONS.items()},
    "LogicalAndOperator": (2, _logical("And")),
    "LogicalOrOperator": (2, _logical("Or")),
    "LogicalXorOperator": (2, _logical("Xor")),
    "LogicalNotOperator": (1, _logical_not),
    "BinaryCrossEntropyOperator": (2, _binary_cross_entropy),
    "SigmoidBinaryCrossEntropyOperator": (2, _sigmoid_binary_cross_entropy),
    "BooleanAccuracyOperator": (2, _boolean_metric("accuracy")),
    "BooleanFalseNegativeOperator": (2, _boolean_metric("false_negative")),
    "BooleanFalsePositiveOperator": (2, _boolean_metric("false_positive")),
    "SelectOperator": (None, _select),
    "ErfInvOperator": (1, _erfinv),
    "GeluOperator": (1, _gelu),
}
