"""One optimiser step of the ``ai.onnx.preview.training`` ops Adagrad, Momentum and
Adam, for any number of tensors: inputs are R, T, then the tensors grouped by role
(X..., G..., state...), outputs are grouped the same way (X_new..., state_new...)."""

from __future__ import annotations

import numpy as np

from ...ir import TRAINING_DOMAIN
from ..registry import kernel
from ._common import FLOATS


def _groups(tensors, roles: int) -> list[tuple]:
    if len(tensors) % roles:
        raise ValueError(f"{len(tensors)} tensors do not split into {roles} roles")
    n = len(tensors) // roles
    return list(zip(*(tensors[i * n:(i + 1) * n] for i in range(roles))))


def _outputs(per_tensor: list[tuple]) -> tuple:
    """[(X1_new, S1_new), (X2_new, S2_new)] → (X1_new, X2_new, S1_new, S2_new)."""
    return tuple(value for role in zip(*per_tensor) for value in role)


def _scalar(value) -> float:
    return float(np.asarray(value).reshape(-1)[0])


@kernel("Adagrad", domain=TRAINING_DOMAIN, dtypes=FLOATS)
def adagrad(ctx, rate, step, *tensors, decay_factor=0.0, epsilon=1e-6, norm_coefficient=0.0):
    r = _scalar(rate) / (1 + _scalar(step) * decay_factor)
    norm, eps = norm_coefficient, epsilon
    results = []
    for x, g, h in _groups(tensors, 3):
        g = norm * x + g
        h_new = h + g * g
        x_new = x - r * g / (np.sqrt(h_new) + eps)
        results.append((x_new.astype(x.dtype), h_new.astype(h.dtype)))
    return _outputs(results)


def _check_momentum(node, *, mode):
    return None if mode in ("standard", "nesterov") else f"mode {mode!r} is not standard or nesterov"


@kernel("Momentum", domain=TRAINING_DOMAIN, dtypes=FLOATS, check=_check_momentum)
def momentum(ctx, rate, step, *tensors, alpha, beta, mode, norm_coefficient):
    """Each result is built in place in one new array (no temporaries, no zero terms): a step is
    memory-bound, and fresh temporaries of every weight's size made it 25× slower than torch's."""
    beta = beta if _scalar(step) > 0 else 1.0  # the first step takes the whole gradient
    results = []
    for x, g, v in _groups(tensors, 3):
        kind = x.dtype.type
        g = _regularized(g, x, norm_coefficient)
        v_new = np.multiply(v, kind(alpha), dtype=v.dtype)
        v_new += g if beta == 1.0 else g * kind(beta)
        x_new = np.multiply(v_new, kind(-_scalar(rate)), dtype=x.dtype)
        if mode == "nesterov":
            x_new *= kind(alpha)
            x_new -= g * kind(_scalar(rate))
        x_new += x
        results.append((x_new, v_new))
    return _outputs(results)


def _regularized(g: np.ndarray, x: np.ndarray, norm: float) -> np.ndarray:
    """g + norm·x (L2 regularization), or g itself when norm is 0."""
    return g + x * x.dtype.type(norm) if norm else g


@kernel("Adam", domain=TRAINING_DOMAIN, dtypes=FLOATS)
def adam(ctx, rate, step, *tensors, alpha=0.9, beta=0.999, epsilon=1e-6, norm_coefficient=0.0,
         norm_coefficient_post=0.0):
    """In place on new arrays, as Momentum (one temporary, the denominator)."""
    t, r = _scalar(step), _scalar(rate)
    if t > 0:  # bias correction of both running averages
        r = r * np.sqrt(1 - beta**t) / (1 - alpha**t)
    results = []
    for x, g, v, h in _groups(tensors, 4):
        kind = x.dtype.type
        g = _regularized(g, x, norm_coefficient)
        v_new = np.multiply(v, kind(alpha), dtype=v.dtype)
        v_new += g * kind(1 - alpha)
        h_new = np.multiply(g, g, dtype=h.dtype)
        h_new *= kind(1 - beta)
        h_new += h * kind(beta)
        denominator = np.sqrt(h_new)
        denominator += kind(epsilon)
        x_new = np.divide(v_new, denominator, dtype=x.dtype)
        x_new *= kind(-r)
        x_new += x
        if norm_coefficient_post:
            x_new *= kind(1 - norm_coefficient_post)
        results.append((x_new, v_new, h_new))
    return _outputs(results)
