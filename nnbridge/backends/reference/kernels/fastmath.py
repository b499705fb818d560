"""Vectorised float32 transcendental curves (erf, GELU, sigmoid, SiLU) with in-place operators.

Every curve is a fixed sequence of whole-array numpy operators writing into
preallocated buffers: no temporaries per operator and no float64 detour.
``erf`` is tanh(x·P(x²)) with P fitted by ``tools/fit_erf.py`` (at most 4 float32
ulp from the exact value); float64 inputs keep the exact
series in ``activation.erf``.
"""

from __future__ import annotations

from collections.abc import Callable

import numpy as np

_ERF_XMAX2 = np.float32(3.925 * 3.925)  # float32(erf(x)) rounds to ±1 beyond |x| = 3.925
_ERF_P = np.array([1.1283793449401855, 0.1027684286236763, -0.00018969133088830858, -0.0006221237708814442,
                   8.866644202498719e-05, -5.856496954947943e-06, 1.5357097993273783e-07], np.float32)
_INV_SQRT2 = np.float32(0.7071067811865476)


def _horner(coef: np.ndarray, t: np.ndarray, out: np.ndarray) -> np.ndarray:
    out.fill(coef[-1])
    for c in coef[-2::-1]:
        out *= t
        out += c
    return out


def _erf_into(x: np.ndarray, out: np.ndarray, t: np.ndarray) -> None:
    np.multiply(x, x, out=t)
    np.minimum(t, _ERF_XMAX2, out=t)
    _horner(_ERF_P, t, out)
    out *= x
    np.tanh(out, out=out)


def _whole(x: np.ndarray, body: Callable[..., None], scratch: int) -> np.ndarray:
    """Apply ``body(x, out, *scratch_buffers)`` to a float32 array with preallocated buffers.

    Chunking into cache-sized pieces was measured slower: numpy's per-call overhead
    outweighs the memory traffic at these sizes.
    """
    x = np.asarray(x, dtype=np.float32)
    out = np.empty_like(x)
    with np.errstate(over="ignore", invalid="ignore"):
        body(x, out, *(np.empty_like(x) for _ in range(scratch)))
    return out


def erf32(x: np.ndarray) -> np.ndarray:
    return _whole(x, _erf_into, 1)


def _gelu_into(x, out, u, t):
    np.multiply(x, _INV_SQRT2, out=u)
    _erf_into(u, out, t)
    out += 1
    out *= x
    out *= np.float32(0.5)


def gelu32(x: np.ndarray) -> np.ndarray:
    """0.5·x·(1 + erf(x/√2))."""
    return _whole(x, _gelu_into, 2)


def sigmoid_into(x: np.ndarray, out: np.ndarray) -> None:
    """out = 1/(1+e^-x), in place allowed; e^-x overflowing to inf gives exactly 0, the right limit.

    The caller silences numpy's overflow warning (``np.errstate(over="ignore")``)."""
    np.negative(x, out=out)
    np.exp(out, out=out)
    out += 1
    np.reciprocal(out, out=out)


def sigmoid32(x: np.ndarray) -> np.ndarray:
    return _whole(x, sigmoid_into, 0)


def _silu_into(x, out):
    sigmoid_into(x, out)
    out *= x


def silu32(x: np.ndarray) -> np.ndarray:
    """x·sigmoid(x) (Swish with alpha 1, the SiLU of EfficientNet-style networks)."""
    return _whole(x, _silu_into, 0)
