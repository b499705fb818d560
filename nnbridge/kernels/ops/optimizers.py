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
    r = _scalar(rate)
    norm = norm_coefficient
    beta = beta if _scalar(step) > 0 else 1.0  # the first step takes the whole gradient
    nesterov = mode == "nesterov"
    results = []
    for x, g, v in _groups(tensors, 3):
        results.append(_momentum_one(x, g, v, r, alpha, beta, norm, nesterov))
    return _outputs(results)


def _momentum_one(x, g, v, r, alpha, beta, norm, nesterov) -> tuple[np.ndarray, np.ndarray]:
    """One tensor's step in as few passes as numpy allows (a training step spends a quarter of an MLP's
    time here otherwise): every product of a new array is written into it in place."""
    if norm:
        g = g + norm * x
    v_new = np.multiply(v, alpha)
    if beta == 1.0:
        v_new += g
    else:
        v_new += beta * g
    if nesterov:
        change = np.multiply(v_new, alpha)
        change += g
        change *= -r
    else:
        change = np.multiply(v_new, -r)
    change += x
    return change.astype(x.dtype, copy=False), v_new.astype(v.dtype, copy=False)


@kernel("Adam", domain=TRAINING_DOMAIN, dtypes=FLOATS)
def adam(ctx, rate, step, *tensors, alpha=0.9, beta=0.999, epsilon=1e-6, norm_coefficient=0.0,
         norm_coefficient_post=0.0):
    t, r = _scalar(step), _scalar(rate)
    if t > 0:  # bias correction of both running averages
        r = r * np.sqrt(1 - beta**t) / (1 - alpha**t)
    results = []
    for x, g, v, h in _groups(tensors, 4):
        results.append(_adam_one(x, g, v, h, r, alpha, beta, epsilon, norm_coefficient, norm_coefficient_post))
    return _outputs(results)


def _adam_one(x, g, v, h, r, alpha, beta, eps, norm, norm_post) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """One tensor's step written in place into its new arrays, as Momentum's (one temporary: the
    denominator; no zero decay passes)."""
    if norm:
        g = g + norm * x
    v_new = np.multiply(v, alpha)
    v_new += (1 - alpha) * g
    h_new = np.multiply(g, g)
    h_new *= 1 - beta
    h_new += beta * h
    denominator = np.sqrt(h_new)
    denominator += eps
    change = np.divide(v_new, denominator)
    change *= -r
    change += x
    if norm_post:
        change *= 1 - norm_post
    return (change.astype(x.dtype, copy=False), v_new.astype(v.dtype, copy=False),
            h_new.astype(h.dtype, copy=False))
