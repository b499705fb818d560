"""Activations: the Relu family, sigmoid-like curves, Gelu/Erf, Shrink and Clip.

Each activation is one vectorized expression evaluated in the input precision
(fp16 in fp32) and cast back. float32 erf/GELU/sigmoid go through the chunked
curves of ``fastmath``; float64 ``erf`` is computed from its power series
(small |x|) and the continued fraction of erfc (large |x|).
"""

from __future__ import annotations

import functools
import inspect
import math
from collections.abc import Callable

import numpy as np

from ...ir import Node
from ...ir.dtypes import INT_TYPES
from .. import compiled
from ..registry import kernel
from ._windows import FLOATS, WITH_BF16, compute_dtype
from .elementwise import relu_into
from .fastmath import erf32, gelu32, select, sigmoid32, silu32

_SQRT_PI = math.sqrt(math.pi)
_F32 = np.dtype(np.float32)
_CF_DEPTH = 50  # continued-fraction terms: enough for 1e-15 at |x| >= 2


def erf(x: np.ndarray) -> np.ndarray:
    """Error function in float64 (|error| < 1e-15 vs math.erf)."""
    x = np.asarray(x, dtype=np.float64)
    out = np.empty_like(x)
    mag = np.abs(x)
    small = mag < 2.0
    xs = x[small]
    if xs.size:
        # erf(x) = 2x/sqrt(pi) exp(-x^2) sum_n (2x^2)^n / (1*3*...*(2n+1)): positive terms, no cancellation
        t = 2 * xs * xs
        term = np.ones_like(xs)
        total = np.ones_like(xs)
        n = 0
        while True:
            for _ in range(8):  # test convergence every few terms only: the test costs as much as a term
                n += 1
                term *= t
                term /= 2 * n + 1
                total += term
            if np.all(term <= 1e-17 * total):
                break
        out[small] = 2 / _SQRT_PI * xs * np.exp(-xs * xs) * total
    xl = mag[~small]
    if xl.size:
        # erfc(x) = exp(-x^2)/sqrt(pi) / (x + (1/2)/(x + 1/(x + (3/2)/(x + ...)))), evaluated bottom-up
        frac = xl.copy()
        for k in range(_CF_DEPTH, 0, -1):
            frac = xl + (k / 2) / frac
        erfc = np.exp(-xl * xl) / _SQRT_PI / frac
        out[~small] = np.sign(x[~small]) * (1 - erfc)
    return out


def _activation(op: str, dtypes=WITH_BF16):
    """Register ``fn(ctx, x_in_compute_dtype, *, attributes) -> y`` with the dtype round trip done
    once here; the kernel shows ``fn``'s signature (its attributes) to the registry."""

    def wrap(fn):
        @functools.wraps(fn)
        def run(ctx, x, **attrs):
            if x.dtype == _F32:  # computed as it is: no round trip (a small map's call is a few µs)
                return np.asarray(fn(ctx, x, **attrs))
            return np.asarray(fn(ctx, x.astype(compute_dtype(x.dtype), copy=False), **attrs)).astype(
                x.dtype, copy=False)

        if not any(p.kind is p.KEYWORD_ONLY for p in inspect.signature(fn).parameters.values()):
            @functools.wraps(fn)
            def run(ctx, x):  # no attributes: no keyword forwarding on every call
                if x.dtype == _F32:
                    return np.asarray(fn(ctx, x))
                return np.asarray(fn(ctx, x.astype(compute_dtype(x.dtype), copy=False))).astype(x.dtype, copy=False)

        kernel(op, dtypes=dtypes)(run)
        return fn

    return wrap


@_activation("LeakyRelu")
def leaky_relu(ctx, x, *, alpha=0.01):
    return select(x >= 0, x, x * x.dtype.type(alpha))


def _negative_part(x: np.ndarray) -> np.ndarray:
    """min(x, 0) (a two-sided clip runs numpy's vector loop; see elementwise.relu)."""
    return np.clip(x, x.dtype.type(-np.inf), x.dtype.type(0))


@_activation("Elu")
def elu(ctx, x, *, alpha=1.0):
    return select(x > 0, x, x.dtype.type(alpha) * np.expm1(_negative_part(x)))


@_activation("Selu")
def selu(ctx, x, *, alpha=1.67326319217681884765625, gamma=1.05070102214813232421875):
    alpha, gamma = x.dtype.type(alpha), x.dtype.type(gamma)
    return gamma * select(x > 0, x, alpha * np.expm1(_negative_part(x)))


@_activation("Celu")
def celu(ctx, x, *, alpha=1.0):
    alpha = x.dtype.type(alpha)
    return np.maximum(x, 0) + np.minimum(0, alpha * np.expm1(np.minimum(x, 0) / alpha))


def _hard_sigmoid(x: np.ndarray, alpha, beta, swish: bool = False, out: np.ndarray | None = None) -> np.ndarray:
    """clip(alpha·x + beta, 0, 1) in one buffer (MobileNetV3 applies it to every activation map),
    times x for the hard swish; one compiled pass with numba. ``out``: where to write (``x``:
    in place, as a convolution's epilogue)."""
    fast = compiled.load("curves") if x.dtype == np.float32 else None
    if fast is not None:
        return fast.apply("hard_swish32" if swish else "hard_sigmoid32", x, alpha, beta, out=out)
    if swish and out is x:
        x = x.copy()  # the product needs x after the clip overwrote it
    y = np.multiply(x, alpha, out=np.empty_like(x) if out is None else out)  # an array even for a 0-d x
    y += beta
    np.clip(y, 0, 1, out=y)
    if swish:
        y *= x
    return y


@_activation("HardSigmoid")
def hard_sigmoid(ctx, x, *, alpha=0.2, beta=0.5):
    return _hard_sigmoid(x, x.dtype.type(alpha), x.dtype.type(beta))


_SIXTH = np.float32(1 / 6)


@_activation("HardSwish")
def hard_swish(ctx, x):
    """x·HardSigmoid(x) with the spec's alpha = 1/6, beta = 1/2."""
    return _hard_sigmoid(x, _SIXTH if x.dtype == _F32 else x.dtype.type(1 / 6), x.dtype.type(0.5), swish=True)


def curve_of(node: Node) -> tuple[str, np.float32, np.float32] | None:
    """The compiled curve (``compiled/curves.py``: its name, alpha, beta) an activation node
    computes on float32 values, for the activations that may follow a convolution in its buffer
    (Relu, HardSigmoid, HardSwish, Sigmoid, Swish of alpha 1), else None."""
    zero = _F32.type(0)
    if node.op == "Relu":
        return "relu32", zero, zero
    if node.op == "HardSwish":
        return "hard_swish32", _SIXTH, _F32.type(0.5)
    if node.op == "HardSigmoid":
        return "hard_sigmoid32", _F32.type(node.attr("alpha", 0.2)), _F32.type(node.attr("beta", 0.5))
    if node.op == "Sigmoid":
        return "sigmoid32", zero, zero
    if node.op == "Swish" and node.attr("alpha", 1.0) == 1:
        return "silu32", zero, zero
    return None


def in_place(node: Node) -> Callable[[np.ndarray], np.ndarray] | None:
    """The activation ``node`` computes as a function overwriting a float32 array with its result
    (the same values its kernel returns), or None: the reference plan runs it as the epilogue of
    the convolution that made the array, which nothing else reads (no call, no new buffer)."""
    curve = curve_of(node)
    if curve is None:
        return None
    name, alpha, beta = curve
    if name == "relu32":
        return lambda y: relu_into(y, y)
    if name in ("hard_swish32", "hard_sigmoid32"):
        swish = name == "hard_swish32"
        return lambda y: _hard_sigmoid(y, alpha, beta, swish=swish, out=y)
    fast = compiled.load("curves")  # the kernels' numpy forms of the others have no in-place path
    if fast is not None:
        return lambda y: fast.apply(name, y, out=y)
    return None


@_activation("Softplus")
def softplus(ctx, x):
    return np.logaddexp(x.dtype.type(0), x)


@_activation("Softsign")
def softsign(ctx, x):
    return x / (1 + np.abs(x))


@_activation("Mish")
def mish(ctx, x):
    return x * np.tanh(np.logaddexp(x.dtype.type(0), x))


def sigmoid(x: np.ndarray) -> np.ndarray:
    if x.dtype == np.float32:
        return sigmoid32(x)
    e = np.exp(-np.abs(x))  # exp of a non-positive number never overflows
    return np.where(x >= 0, 1 / (1 + e), e / (1 + e))


@_activation("Sigmoid", dtypes=FLOATS)
def sigmoid_kernel(ctx, x):
    return sigmoid(x)


@_activation("Swish")
def swish(ctx, x, *, alpha=1.0):
    alpha = x.dtype.type(alpha)
    if alpha == 1 and x.dtype == np.float32:
        return silu32(x)
    return x * sigmoid(alpha * x)


@_activation("ThresholdedRelu")
def thresholded_relu(ctx, x, *, alpha=1.0):
    return select(x > x.dtype.type(alpha), x, 0)


@_activation("Erf")
def erf_kernel(ctx, x):
    return erf32(x) if x.dtype == np.float32 else erf(x)


def _check_gelu(node, *, approximate="none") -> str | None:
    return None if approximate in ("none", "tanh") else f"approximate={approximate} is not implemented"


@kernel("Gelu", dtypes=FLOATS, check=_check_gelu)
def gelu(ctx, x, *, approximate="none"):
    """The tanh form as ONNX's function body and torch compute it, ``(x·0.5)·(tanh(√(2/π)·(x +
    0.044715·x³)) + 1)``, its float32 form in one compiled pass once numba is in (the same values)."""
    dt = compute_dtype(x.dtype)
    if approximate == "tanh" and x.dtype == _F32 and x.flags.c_contiguous:
        fast = compiled.loaded("curves")
        y = None if fast is None else fast.gelu_tanh(x)
        if y is not None:
            return y
    xc = x.astype(dt, copy=False)
    if approximate == "tanh":
        inner = dt.type(math.sqrt(2 / math.pi)) * (xc + dt.type(0.044715) * (xc * xc * xc))
        y = (xc * dt.type(0.5)) * (np.tanh(inner) + 1)
    elif dt == np.float32:
        y = gelu32(xc)
    else:
        y = 0.5 * xc * (1 + erf(xc / math.sqrt(2)))
    return y.astype(x.dtype, copy=False)


@kernel("PRelu", dtypes=FLOATS | {t for t in INT_TYPES})
def prelu(ctx, x, slope):
    return select(x >= 0, x, x * slope.astype(x.dtype, copy=False))


@kernel("Shrink", dtypes=FLOATS | INT_TYPES)
def shrink(ctx, x, *, bias=0.0, lambd=0.5):
    bias, lambd = float(bias), float(lambd)
    xf = x.astype(np.float64)
    y = np.where(xf < -lambd, xf + bias, np.where(xf > lambd, xf - bias, 0))
    return y.astype(x.dtype)


@kernel("Clip", dtypes=FLOATS | INT_TYPES)
def clip(ctx, x, low=None, high=None):
    if x.dtype.kind == "f":  # one clip with both bounds runs numpy's vector loop (see elementwise.relu)
        finite = np.finfo(x.dtype)  # the spec's defaults: lowest() and max(), so ±inf clip to them
        bounds = [np.asarray(bound if bound is not None else default).astype(x.dtype)
                  for bound, default in ((low, finite.min), (high, finite.max))]
        return np.clip(x, *bounds)
    y = x
    if low is not None:
        y = np.maximum(y, np.asarray(low).astype(x.dtype))
    if high is not None:
        y = np.minimum(y, np.asarray(high).astype(x.dtype))
    return x.copy() if y is x else np.asarray(y, dtype=x.dtype)
