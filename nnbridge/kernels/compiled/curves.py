"""Elementwise float32 curves in one compiled pass each: the curves of ``_core`` and the
activations built on them (erf, GELU, sigmoid, SiLU, hard sigmoid and hard swish) and Relu.

The numpy kernels run these as four to eight whole-array operators; here each element is read
once and written once. The formulas are the numpy kernels' (``ops/fastmath.py``: erf as
``tanh(x·P(x²))`` with the same fitted P, GELU as ``x·(1 + erf(x/√2))/2``, SiLU as ``x·σ(x)``), with
``_core``'s curves in place of numpy's. Each curve's loop is its own function in the generated
``curve_loops.py`` (``generate.py`` says why); this module runs them over the kernel threads.

The tanh form of GELU (GPT-2's) keeps numpy's own tanh, as its numpy kernel does: the polynomial
and the product are computed around numpy's tanh loop on blocks in cache (``gelu_tanh``).
"""

from __future__ import annotations

import math

import numpy as np
from numba import prange

from ..parallel import CURVE_WORK, alone, share, split
from ._core import F, block_bounds, jit, jit_parallel
from .curve_loops import IN_PLACE, LOOPS, NAMES, SPLITS, one_curve
from .ufuncs import handle, in_place_plan, span


@jit
def overwrite(code, x, first, last, alpha, beta):
    """``x[i] = curve(x[i])`` for the curves that follow convolutions (``IN_PLACE``): one array read
    and written, so the loop vectorises (a curve's loop with ``out`` = ``x`` may alias: LLVM's overlap
    check then takes its scalar loop, twice as slow as a new buffer)."""
    x = x[first:last]
    for i in range(x.size):
        x[i] = one_curve(code, x[i], alpha, beta)


@jit
def bias_rows(code, y, bias, first, last, alpha, beta):
    """Rows ``[first, last)`` of ``y (M, P)``: ``y = curve(y + bias[m])``, in place; the float32 sum
    then the curve, as numpy's ``y += bias`` and ``overwrite`` give them (bit for bit)."""
    for m in range(first, last):
        b = bias[m]
        row = y[m]
        for p in range(row.size):
            row[p] = one_curve(code, row[p] + b, alpha, beta)


@jit
def gate_rows(code, x, s, bias, y, first, last, alpha, beta):
    """A squeeze-excite's gate and scale: ``y[c] = x[c] · curve(s[c] + bias[c])`` for rows
    ``[first, last)`` of ``x (C, P)``, each product the float32 one a ``Mul`` of the map and the
    gate gives."""
    for c in range(first, last):
        g = one_curve(code, s[c] + bias[c], alpha, beta)
        row, out = x[c], y[c]
        for p in range(row.size):
            out[p] = row[p] * g


@jit_parallel
def _overwrite_split(code, x, alpha, beta, count, step, parts):
    for p in prange(parts):
        first, last = block_bounds(count, step, parts, p)
        overwrite(code, x, first, last, alpha, beta)


@jit_parallel
def _bias_rows_split(code, y, bias, alpha, beta, count, step, parts):
    for p in prange(parts):
        first, last = block_bounds(count, step, parts, p)
        bias_rows(code, y, bias, first, last, alpha, beta)


@jit_parallel
def _gate_rows_split(code, x, s, bias, y, alpha, beta, count, step, parts):
    for p in prange(parts):
        first, last = block_bounds(count, step, parts, p)
        gate_rows(code, x, s, bias, y, first, last, alpha, beta)


#: curve name → its code, the index of its loop in ``LOOPS`` (``IN_PLACE``: the codes ``one_curve`` computes)
CODES = {name: code for code, name in enumerate(NAMES)}
#: each curve's cost per value in multiply-adds, for sizing its blocks: about 1 ns a value for the
#: curves built on exp (GELU 1.9), 0.1 for the piecewise-linear ones
COST = tuple(4 if name in ("hard_sigmoid32", "hard_swish32", "relu32") else 32 for name in NAMES)
_ZERO = np.float32(0)


def apply(name: str, x: np.ndarray, alpha: np.float32 = _ZERO, beta: np.float32 = _ZERO,
          out: np.ndarray | None = None) -> np.ndarray:
    """The curve ``name`` of float32 ``x``, elementwise, shared over the kernel threads; ``alpha``
    and ``beta`` (the hard curves') are float32, as the loop computes in float32. ``out``: a
    C-contiguous float32 array of x's size to write (``x`` itself: in place, each element read
    before it is written)."""
    code, a, b = CODES[name], np.float32(alpha), np.float32(beta)
    if out is x and code in IN_PLACE and x.dtype == np.float32 and x.flags.c_contiguous:
        flat = x.reshape(-1)
        if alone(COST[code] * flat.size):  # skips split's closure: 5 of a 2,400-value HardSwish's 6 µs
            overwrite(code, flat, 0, flat.size, a, b)
        else:
            split(flat.size, COST[code], lambda lo, hi: overwrite(code, flat, lo, hi, a, b), _overwrite_split, code,
                  flat, a, b)
        return x
    flat = np.ascontiguousarray(x, np.float32).reshape(-1)
    out = np.empty_like(flat) if out is None else out.reshape(-1)
    loop = LOOPS[code]
    if alone(COST[code] * flat.size):
        loop(flat, out, 0, flat.size, a, b)
    else:
        split(flat.size, COST[code], lambda lo, hi: loop(flat, out, lo, hi, a, b), SPLITS[code], flat, out, a, b)
    return out.reshape(x.shape)


class Epilogue:
    """The passes of one curve over a convolution's result, its name looked up, its parameters made
    float32 and its in-place form checked once (a prepared convolution runs them on every call,
    and on a small map those steps took as long as the loop: 0.9 of a 1.5 µs call)."""

    __slots__ = ("code", "alpha", "beta")

    def __init__(self, name: str, alpha: np.float32 = _ZERO, beta: np.float32 = _ZERO):
        code = CODES[name]
        if code not in IN_PLACE:
            raise ValueError(f"curve {name} has no in-place form")
        self.code, self.alpha, self.beta = code, np.float32(alpha), np.float32(beta)

    def bias_and_curve(self, y: np.ndarray, bias: np.ndarray) -> np.ndarray:
        """``y = curve(y + bias[m])`` in place on the rows of C-contiguous float32 ``y (M, P)`` (a
        convolution's bias and activation as one pass over its result), shared over the kernel
        threads."""
        code, a, b = self.code, self.alpha, self.beta
        if alone(COST[code] * y.size):
            bias_rows(code, y, bias, 0, y.shape[0], a, b)
        else:
            split(y.shape[0], COST[code] * y.shape[1], lambda lo, hi: bias_rows(code, y, bias, lo, hi, a, b),
                  _bias_rows_split, code, y, bias, a, b)
        return y

    def gate(self, x: np.ndarray, s: np.ndarray, bias: np.ndarray) -> np.ndarray:
        """``x[c] · curve(s[c] + bias[c])`` for C-contiguous float32 ``x (C, P)``, ``s`` and ``bias`` C
        values: a squeeze-excite's last convolution's bias and curve and its scaling, in one pass."""
        code, a, b = self.code, self.alpha, self.beta
        y = np.empty_like(x)
        cheap = CODES["relu32"]  # a curve per row, then a product per value
        if alone(COST[cheap] * x.size):
            gate_rows(code, x, s, bias, y, 0, x.shape[0], a, b)
        else:
            split(x.shape[0], COST[cheap] * x.shape[1], lambda lo, hi: gate_rows(code, x, s, bias, y, lo, hi, a, b),
                  _gate_rows_split, code, x, s, bias, y, a, b)
        return y


#: the tanh GELU's constants as the numpy kernel rounds them (``ops/activation.gelu``)
GELU_C, GELU_K = F(math.sqrt(2 / math.pi)), F(0.044715)
#: values of a tanh GELU computed while they are in cache
GELU_BLOCK = 2048


@jit
def gelu_tanh_span(x, out, tanh_loop, first, last):
    """``out = (x·0.5)·(tanh(c·(x + k·((x·x)·x))) + 1)`` on elements ``[first, last)`` of flat ``x``,
    ``GELU_BLOCK`` at a time: the float32 polynomial, numpy's own tanh loop over the block in place
    (``tanh_loop``, from ``ufuncs.handle``), the product; each operation the numpy kernel's, so
    its values bit for bit."""
    plan = in_place_plan(tanh_loop, out)
    for start in range(first, last, GELU_BLOCK):
        stop = min(start + GELU_BLOCK, last)
        values, into = x[start:stop], out[start:stop]  # indices from 0: the loops vectorise
        for i in range(values.size):
            v = values[i]
            into[i] = GELU_C * (v + GELU_K * (v * v * v))
        span(plan, start, stop)
        for i in range(values.size):
            into[i] = (values[i] * F(0.5)) * (into[i] + F(1))


@jit_parallel
def _gelu_tanh_split(x, out, tanh_loop, count, step, parts):
    for p in prange(parts):
        first, last = block_bounds(count, step, parts, p)
        gelu_tanh_span(x, out, tanh_loop, first, last)


def gelu_tanh(x: np.ndarray) -> np.ndarray | None:
    """The tanh GELU of C-contiguous float32 ``x`` in one pass, shared over the kernel threads; None
    when numpy's tanh loop is not to be had (the kernel's numpy form then runs)."""
    tanh_loop = handle(np.tanh, x.dtype)
    if tanh_loop is None:
        return None
    flat = x.reshape(-1)
    out = np.empty_like(flat)
    share(flat.size, CURVE_WORK + 6, gelu_tanh_span, _gelu_tanh_split, flat, out, tanh_loop)
    return out.reshape(x.shape)
