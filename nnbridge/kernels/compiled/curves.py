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
    """``x[i] = curve(x[i])`` for the curves that follow convolutions (3, 4, 7, 8, 9): one array read and
    written, so the loops vectorise (``_loop`` with ``out`` = ``x`` may alias: LLVM's overlap check
    then takes its scalar loop, twice as slow as a new buffer)."""
    x = x[first:last]
    if code == 3:
        for i in range(x.size):
            x[i] = sigmoid32(x[i])
    elif code == 4:
        for i in range(x.size):
            x[i] = x[i] * sigmoid32(x[i])
    elif code == 7:
        for i in range(x.size):
            x[i] = hard_sigmoid32(x[i], alpha, beta)
    elif code == 8:
        for i in range(x.size):
            x[i] = x[i] * hard_sigmoid32(x[i], alpha, beta)
    else:
        for i in range(x.size):
            x[i] = relu32(x[i])


#: the curves ``apply`` can run in place
IN_PLACE = frozenset({3, 4, 7, 8, 9})


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
