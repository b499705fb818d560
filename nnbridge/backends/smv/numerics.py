"""SMV numerics (spec §2, §4.5): fp16 in host memory, fp32 inside a kernel.

Tensors live as float32 arrays that hold fp16-representable values: a load
widens exactly, arithmetic runs in fp32, and a store rounds to the nearest
fp16 (ties to even) — ``store``. Activations use SMAUG's formulas, e.g. tanh
as ``2·sigmoid(2x) − 1``.
"""

from __future__ import annotations

from collections.abc import Callable

import numpy as np

from .flatten import FlatNode


def store(x: np.ndarray) -> np.ndarray:
    """fp32 → fp16 (round to nearest even) → back to an fp32 array, as SMV's result store."""
    with np.errstate(over="ignore"):
        return np.asarray(x, dtype=np.float32).astype(np.float16).astype(np.float32)


def host(x: np.ndarray) -> np.ndarray:
    """A tensor as SMV's host memory holds it: floats rounded to fp16, other dtypes unchanged."""
    x = np.asarray(x)
    return store(x) if x.dtype.kind == "f" else x


def fp16(x: np.ndarray) -> np.ndarray:
    """Any float array (float64 included) rounded once to fp16, held as fp32."""
    with np.errstate(over="ignore"):
        return np.asarray(x).astype(np.float16).astype(np.float32)


def _sigmoid(x: np.ndarray) -> np.ndarray:
    """``1.0 / (1.0 + exp(-x))`` as the kernel's C code computes it: in double, stored as float."""
    with np.errstate(over="ignore"):
        return (1.0 / (1.0 + np.exp(-np.asarray(x, np.float64)))).astype(np.float32)


def _relu(x: np.ndarray) -> np.ndarray:
    return np.where(x > 0, x, np.float32(0))  # a bit mask: NaN and −0 become +0


def activation(fn: FlatNode, consts: dict[str, np.ndarray]) -> Callable[[np.ndarray], np.ndarray]:
    """The fp32 function of an activation node (fused or standalone), in the kernels' arithmetic
    (smv/kernels/activation_functions_simd.h): exp in double, tanh as 2·sigmoid(2x) − 1."""
    node, op = fn.node, fn.op
    if op == "Relu":
        return _relu
    if op == "LeakyRelu":
        slope = np.float32(node.attr("alpha", 0.01))
        zero = np.float32(0)
        return lambda x: np.where(x < 0, slope * x, zero) + np.where(x >= 0, x, zero)
    if op in ("Elu", "Selu"):
        alpha = np.float64(np.float32(node.attr("alpha", 1.0 if op == "Elu" else 1.67326319217681884765625)))
        scale = np.float32(node.attr("gamma", 1.05070102214813232421875))

        def elu(x):
            with np.errstate(over="ignore", invalid="ignore"):
                neg = (alpha * (np.exp(np.minimum(x, 0).astype(np.float64)) - 1.0)).astype(np.float32)
            y = np.where(x < 0, neg, x)
            return scale * y if op == "Selu" else y

        return elu
    if op == "Sigmoid":
        return _sigmoid
    if op == "Tanh":
        return lambda x: np.float32(2) * _sigmoid(np.float32(2) * x) - np.float32(1)
    if op == "Clip":
        bounds = [consts.get(name) if name else None for name in fn.inputs[1:3]]
        lo = -np.inf if len(bounds) < 1 or bounds[0] is None else float(np.asarray(bounds[0]))
        hi = np.inf if len(bounds) < 2 or bounds[1] is None else float(np.asarray(bounds[1]))
        return lambda x: np.clip(x, np.float32(lo), np.float32(hi))
    raise ValueError(f"not an SMV activation: {op}")


def softmax(x: np.ndarray) -> np.ndarray:
    """SMV's softmax of NC rows (smv_softmax_nc_vec_fxp): exp in double stored as float, no max
    subtraction (a logit above ~88.7 overflows to inf and the row becomes NaN), the row summed
    in order in float, then multiplied by ``1 / (sum + 1e-6)`` (computed in double)."""
    with np.errstate(over="ignore", invalid="ignore"):
        e = np.exp(np.asarray(x, np.float64)).astype(np.float32)
        total = np.add.accumulate(e, axis=-1, dtype=np.float32)[..., -1:]
        scale = (1.0 / (total.astype(np.float64) + 1e-6)).astype(np.float32)
        return e * scale


def max_pool(windows: np.ndarray) -> np.ndarray:
    """Window maximum over the last two axes as the kernel keeps it: start at −FLT_MAX, take a
    value only when larger (NaN never is)."""
    best = np.full(windows.shape[:-2], -np.finfo(np.float32).max, np.float32)
    for i in range(windows.shape[-2]):
        for j in range(windows.shape[-1]):
            v = windows[..., i, j]
            best = np.where(best < v, v, best)
    return best


def avg_pool(windows: np.ndarray) -> np.ndarray:
    """Window mean: the window summed in row order in float, times the float ``1.0 / (ph·pw)``."""
    ph, pw = windows.shape[-2:]
    total = np.zeros(windows.shape[:-2], np.float32)
    for i in range(ph):
        for j in range(pw):
            total += windows[..., i, j]
    return total * np.float32(1.0 / (ph * pw))


def batch_norm(x: np.ndarray, mean: np.ndarray, inv_std: np.ndarray, gamma: np.ndarray,
               beta: np.ndarray) -> np.ndarray:
    """``(x − mean) · (var′ · gamma) + beta`` in float, in that order (batch_norm_simd_op)."""
    return (x - mean) * (inv_std * gamma) + beta


BINARY = {
    "Add": np.add, "Mul": np.multiply, "Less": np.less, "LessOrEqual": np.less_equal,
    "Greater": np.greater, "GreaterOrEqual": np.greater_equal,
}
