"""Elementwise float32 curves in one compiled pass each: the curves of ``_core`` and the
activations built on them (erf, GELU, sigmoid, SiLU, hard sigmoid and hard swish) and Relu.

The numpy kernels run these as four to eight whole-array operators; here each element is read
once and written once. The formulas are the numpy kernels' (``ops/fastmath.py``: erf as
``tanh(x·P(x²))`` with the same fitted P, GELU as ``x·(1 + erf(x/√2))/2``, SiLU as ``x·σ(x)``), with
``_core``'s curves in place of numpy's.
"""

from __future__ import annotations

import numpy as np

from ..ops.fastmath import ERF_P, ERF_XMAX2, INV_SQRT2
from ..parallel import grain, run_blocks
from ._core import F, exp32, expm1_32, inline, jit, sigmoid32, tanh32

_P = tuple(F(c) for c in ERF_P)
_XMAX2 = F(ERF_XMAX2)
_R2 = F(INV_SQRT2)
_HALF = F(0.5)


@inline
def erf32(x):
    t = min(max(x * x, F(0)), _XMAX2)
    p = _P[6]
    p = p * t + _P[5]
    p = p * t + _P[4]
    p = p * t + _P[3]
    p = p * t + _P[2]
    p = p * t + _P[1]
    p = p * t + _P[0]
    return tanh32(p * x)


@inline
def gelu32(x):
    return (erf32(x * _R2) + F(1)) * _HALF * x  # halved before x: 2·x overflows near float32's top


@inline
def hard_sigmoid32(x, alpha, beta):
    return min(max(x * alpha + beta, F(0)), F(1))


@inline
def relu32(x):
    """max(x, 0) as numpy's maximum and clip give it: -0.0 and NaN are their own result."""
    return x if x >= F(0) or x != x else F(0)


@jit
def _loop(code, x, out, first, last, alpha, beta):
    """``out[i] = curve(x[i])`` for i in [first, last); ``code`` picks the curve (one compiled
    loop for all, each branch its own vectorised loop; indices from 0 over views, so numba's
    wrap-around test on a signed index cannot turn the loads into gathers)."""
    x, out = x[first:last], out[first:last]
    if code == 0:
        for i in range(x.size):
            out[i] = exp32(x[i])
    elif code == 1:
        for i in range(x.size):
            out[i] = expm1_32(x[i])
    elif code == 2:
        for i in range(x.size):
            out[i] = tanh32(x[i])
    elif code == 3:
        for i in range(x.size):
            out[i] = sigmoid32(x[i])
    elif code == 4:
        for i in range(x.size):
            out[i] = x[i] * sigmoid32(x[i])
    elif code == 5:
        for i in range(x.size):
            out[i] = erf32(x[i])
    elif code == 6:
        for i in range(x.size):
            out[i] = gelu32(x[i])
    elif code == 7:
        for i in range(x.size):
            out[i] = hard_sigmoid32(x[i], alpha, beta)
    elif code == 8:
        for i in range(x.size):
            out[i] = x[i] * hard_sigmoid32(x[i], alpha, beta)
    else:
        for i in range(x.size):
            out[i] = relu32(x[i])


@jit
def _overwrite(code, x, first, last, alpha, beta):
    """``x[i] = curve(x[i])`` for the curves that follow convolutions (``IN_PLACE``): one array read
    and written, so the loop vectorises (``_loop`` with ``out`` = ``x`` may alias: LLVM's overlap
    check then takes its scalar loop, twice as slow as a new buffer)."""
    x = x[first:last]
    for i in range(x.size):
        x[i] = one_curve(code, x[i], alpha, beta)


#: the curves ``apply`` can run in place
IN_PLACE = frozenset({3, 4, 7, 8, 9})


@inline
def one_curve(code, v, alpha, beta):
    """The curve ``code`` (one of ``IN_PLACE``) of one value, as ``_overwrite`` computes it (in a
    loop over values LLVM takes the branch out of the loop: each curve its own vector loop)."""
    if code == 3:
        return sigmoid32(v)
    if code == 4:
        return v * sigmoid32(v)
    if code == 7:
        return hard_sigmoid32(v, alpha, beta)
    if code == 8:
        return v * hard_sigmoid32(v, alpha, beta)
    return relu32(v)


@jit
def _bias_rows(code, y, bias, first, last, alpha, beta):
    """Rows ``[first, last)`` of ``y (M, P)``: ``y = curve(y + bias[m])``, in place; the float32 sum
    then the curve, as numpy's ``y += bias`` and ``_overwrite`` give them (bit for bit)."""
    for m in range(first, last):
        b = bias[m]
        row = y[m]
        for p in range(row.size):
            row[p] = one_curve(code, row[p] + b, alpha, beta)


@jit
def _gate_rows(code, x, s, bias, y, first, last, alpha, beta):
    """A squeeze-excite's gate and scale: ``y[c] = x[c] · curve(s[c] + bias[c])`` for rows
    ``[first, last)`` of ``x (C, P)``, each product the float32 one a ``Mul`` of the map and the
    gate gives."""
    for c in range(first, last):
        g = one_curve(code, s[c] + bias[c], alpha, beta)
        row, out = x[c], y[c]
        for p in range(row.size):
            out[p] = row[p] * g


CODES = {"exp32": 0, "expm1_32": 1, "tanh32": 2, "sigmoid32": 3, "silu32": 4, "erf32": 5, "gelu32": 6,
         "hard_sigmoid32": 7, "hard_swish32": 8, "relu32": 9}
#: elements up to which one block is the whole job (no other thread could take one): such maps
#: skip the block split's closure and pool (5 of a 2,400-element HardSwish's 6 µs)
SERIAL = grain(32)
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
        if flat.size <= SERIAL:
            _overwrite(code, flat, 0, flat.size, a, b)
        else:
            run_blocks(flat.size, lambda lo, hi: _overwrite(code, flat, lo, hi, a, b), grain(32))
        return x
    flat = np.ascontiguousarray(x, np.float32).reshape(-1)
    out = np.empty_like(flat) if out is None else out.reshape(-1)
    if flat.size <= SERIAL:
        _loop(code, flat, out, 0, flat.size, a, b)
    else:
        run_blocks(flat.size, lambda lo, hi: _loop(code, flat, out, lo, hi, a, b), grain(32))
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
        if y.size <= SERIAL:
            _bias_rows(code, y, bias, 0, y.shape[0], a, b)
        else:
            run_blocks(y.shape[0], lambda lo, hi: _bias_rows(code, y, bias, lo, hi, a, b), grain(32 * y.shape[1]))
        return y

    def gate(self, x: np.ndarray, s: np.ndarray, bias: np.ndarray) -> np.ndarray:
        """``x[c] · curve(s[c] + bias[c])`` for C-contiguous float32 ``x (C, P)``, ``s`` and ``bias`` C
        values: a squeeze-excite's last convolution's bias and curve and its scaling, in one pass."""
        code, a, b = self.code, self.alpha, self.beta
        y = np.empty_like(x)
        if x.size <= SERIAL:
            _gate_rows(code, x, s, bias, y, 0, x.shape[0], a, b)
        else:
            run_blocks(x.shape[0], lambda lo, hi: _gate_rows(code, x, s, bias, y, lo, hi, a, b),
                       grain(32 * x.shape[1]))
        return y
