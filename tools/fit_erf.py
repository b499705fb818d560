"""Fit the float32 erf of the reference kernels: erf(x) ≈ tanh(x·P(x²)) on |x| ≤ XMAX.

``atanh(erf(x))/x`` is smooth and even, so a degree-6 polynomial in x² fits it;
numpy's tanh is a fast SIMD loop, so this costs about half the operators of a
rational x·P(x²)/Q(x²) of the same accuracy. The fit is weighted so that the
least-squares error is the relative error of erf itself. Run
``python tools/fit_erf.py`` to reproduce the coefficients in
``nnbridge/kernels/ops/fastmath.py`` and the float32 error bound.
"""

import math

import numpy as np

XMAX = 3.925  # float32(erf(x)) == 1 beyond this
DEGREE = 6


def fit() -> np.ndarray:
    x = np.linspace(1e-4, XMAX, 40000)
    y = np.array([math.erf(v) for v in x])
    target = np.arctanh(np.minimum(y, 1 - 1e-16)) / x
    weight = (1 - y * y) * x / y  # d erf / d P, relative to erf
    powers = np.stack([(x * x) ** k for k in range(DEGREE + 1)], 1)
    coef, *_ = np.linalg.lstsq(powers * weight[:, None], target * weight, rcond=None)
    return coef.astype(np.float32)


def evaluate(coef: np.ndarray, x: np.ndarray) -> np.ndarray:
    t = np.minimum(x * x, np.float32(XMAX * XMAX))
    p = np.full_like(x, coef[-1])
    for c in coef[-2::-1]:
        p = p * t + c
    return np.tanh(x * p)


if __name__ == "__main__":
    coef = fit()
    print("P =", [float(c) for c in coef])
    xs = np.linspace(-4.5, 4.5, 2_000_001, dtype=np.float32)
    exact = np.array([math.erf(v) for v in xs.astype(np.float64)], dtype=np.float32)
    err = np.abs(evaluate(coef, xs).astype(np.float64) - exact)
    ulp = err / np.spacing(np.abs(exact)).clip(np.finfo(np.float32).tiny)
    print(f"max error: {ulp.max():.1f} float32 ulp")
