"""The numba pieces every compiled module shares: the decorator and float32 curves whose loops
LLVM can vectorise (a call into the C library's ``expf`` or ``tanhf`` would run element by element).

``exp32`` reduces ``x = n·ln2 + r`` (|r| ≤ ln2/2, Cody and Waite's two-part ln2) and sums the Taylor
series of ``e^r`` to degree 7 (the first term left out is below 2⁻²⁷ of the result); ``2^n`` is
made from its IEEE bits. ``expm1_32`` sums the same series without its leading 1, so that small
arguments keep their relative precision; ``tanh32`` and ``sigmoid32`` are built on them.
Measured against float64 on every 7th float32 of magnitude below 100, subnormals included
(``tests/reference/test_compiled.py`` holds them to these on a sparser sweep): exp32 ≤ 1.22 ulp,
expm1_32 ≤ 2.33, tanh32 ≤ 3.21, sigmoid32 ≤ 2.82 (numpy's own float32 tanh: 1.38).
"""

from __future__ import annotations

import math

import numpy as np
from llvmlite import ir
from numba import njit, types
from numba.extending import intrinsic

from ..ops.fastmath import ERF_P, ERF_XMAX2, INV_SQRT2

F = np.float32

#: every compiled kernel: cached on disk, releases the GIL (kernel threads run it in parallel), and
#: numpy's error model (a float division by zero gives inf as in numpy, and leaves the loop
#: vectorisable: Python's model would test and raise)
jit = njit(cache=True, nogil=True, error_model="numpy")
#: a kernel's block loop over the kernel threads (``prange`` on numba's TBB layer, which
#: ``compiled.kernel_threads`` sets up; only called when it did)
jit_parallel = njit(cache=True, nogil=True, parallel=True, error_model="numpy")
inline = njit(inline="always", error_model="numpy", cache=True)
#: a curve's loop (the generated ``curve_loops.py``): ``jit`` without the C-callable wrapper numba
#: builds for passing a function as a first-class value, which nothing does with these loops (it was
#: 0.02 of each loop's 0.1 to 0.9 CPU-s cold compile)
jit_loop = njit(cache=True, nogil=True, error_model="numpy", no_cfunc_wrapper=True)


@inline
def block_bounds(count, step, parts, p):
    """Part ``p`` of ``parts`` of ``range(count)`` in whole ``step``-sized blocks, as
    ``parallel.run_blocks`` cuts it (a ``prange`` twin's part)."""
    blocks = (count + step - 1) // step
    last = count if p == parts - 1 else min(count, blocks * (p + 1) // parts * step)
    return min(count, blocks * p // parts * step), last


@intrinsic
def _float_from_bits(typingctx, bits):
    """The float32 whose IEEE bits are the int32 ``bits``."""
    def codegen(context, builder, signature, args):
        return builder.bitcast(args[0], ir.FloatType())
    return types.float32(types.int32), codegen


_LOG2E = F(1.4426950408889634)
_LN2_HI = F(0.693359375)  # ln 2 in two parts: n·_LN2_HI is exact for |n| < 2¹¹
_LN2_LO = F(-2.12194440e-4)
_C = tuple(F(1 / math.factorial(k)) for k in range(8))


@inline
def _reduce(x):
    """(n, r) with x = n·ln2 + r, |r| ≤ ln2/2 (n a float32 holding an integer)."""
    n = np.floor(x * _LOG2E + F(0.5))
    return n, x - n * _LN2_HI - n * _LN2_LO


@inline
def _expm1_reduced(r):
    """e^r - 1 for |r| ≤ ln2/2, without the cancellation of subtracting 1 from e^r."""
    return r * (_C[1] + r * (_C[2] + r * (_C[3] + r * (_C[4] + r * (_C[5] + r * (_C[6] + r * _C[7]))))))


@inline
def _pow2(n):
    return _float_from_bits((np.int32(n) + np.int32(127)) << np.int32(23))


@inline
def exp32(x):
    """e^x for float32 x, subnormal results included: 2^n is applied in two halves, each a
    normal float32, so that n may reach -150."""
    xc = min(max(x, F(-104.0)), F(89.0))  # beyond 88.7228 (ln of float32's max) the product overflows
    n, r = _reduce(xc)
    half = np.floor(n * F(0.5))
    y = (F(1) + _expm1_reduced(r)) * _pow2(half) * _pow2(n - half)
    y = F(np.inf) if x > F(89.0) else y
    return x if x != x else y  # NaN


@inline
def expm1_32(x):
    """e^x - 1 for float32 x, relative precision kept near 0 (-1 below -88, inf above 88.7)."""
    xc = min(max(x, F(-88.0)), F(89.0))
    n, r = _reduce(xc)
    half = np.floor(n * F(0.5))
    scale = _pow2(half) * _pow2(n - half)  # inf where e^x is near float32's top: the far form then
    near = _expm1_reduced(r) * scale + (scale - F(1))
    far = (F(1) + _expm1_reduced(r)) * _pow2(half) * _pow2(n - half) - F(1)
    y = near if n < F(25) else far
    y = F(np.inf) if x > F(89.0) else y
    return x if x != x or x == F(0) else y  # NaN, and the sign of zero


@inline
def tanh32(x):
    """e/(e + 2) with e = e^{2|x|} - 1: near 0 without cancellation (expm1 keeps e's relative
    precision), and further out the same value as 1 - 2/(e^{2|x|} + 1) in one division (two forms
    from an expm1 and an exp cost 1.23 ns a value, this 0.73, within the same 3.21 ulp)."""
    a = abs(x)
    e = expm1_32(F(2) * min(a, F(20)))
    t = e / (e + F(2))
    return t if x > F(0) else (-t if x < F(0) else x)  # ±0 and NaN are their own tanh


@inline
def sigmoid32(x):
    """1 / (1 + e^-x), as e^x / (1 + e^x) below 0 so that the far negative tail keeps its
    relative precision; NaN stays NaN."""
    e = exp32(-abs(x))
    s = F(1) / (F(1) + e)
    return s if x >= F(0) else (e * s if x < F(0) else x)


_P = tuple(F(c) for c in ERF_P)
_XMAX2 = F(ERF_XMAX2)
_R2 = F(INV_SQRT2)
_HALF = F(0.5)


@inline
def erf32(x):
    """erf as ``tanh(x·P(x²))`` with ``ops/fastmath.py``'s fitted P (its numpy ``erf32``)."""
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
