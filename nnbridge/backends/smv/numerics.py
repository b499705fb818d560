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


def _sigmoid(x: np.ndarray) -> np.ndarray:
    with np.errstate(over="ignore"):
        return (1.0 / (1.0 + np.exp(-x))).astype(np.float32)


def activation(fn: FlatNode, consts: dict[str, np.ndarray]) -> Callable[[np.ndarray], np.ndarray]:
    """The fp32 function of an activation node (fused or standalone)."""
    node, op = fn.node, fn.op
    if op == "Relu":
        return lambda x: np.maximum(x, np.float32(0))
    if op == "LeakyRelu":
        slope = np.float32(node.attr("alpha", 0.01))
        return lambda x: np.where(x < 0, slope * x, x)
    if op in ("Elu", "Selu"):
        alpha = np.float32(node.attr("alpha", 1.0 if op == "Elu" else 1.67326319217681884765625))
        scale = np.float32(node.attr("gamma", 1.05070102214813232421875)) if op == "Selu" else np.float32(1)

        def elu(x):
            with np.errstate(over="ignore"):
                return scale * np.where(x < 0, alpha * (np.exp(np.minimum(x, 0)) - 1), x)

        return elu
    if op == "Sigmoid":
        return _sigmoid
    if op == "Tanh":
        return lambda x: 2 * _sigmoid(2 * x) - 1
    if op == "Clip":
        bounds = [consts.get(name) if name else None for name in fn.inputs[1:3]]
        lo = -np.inf if len(bounds) < 1 or bounds[0] is None else float(np.asarray(bounds[0]))
        hi = np.inf if len(bounds) < 2 or bounds[1] is None else float(np.asarray(bounds[1]))
        return lambda x: np.clip(x, np.float32(lo), np.float32(hi))
    raise ValueError(f"not an SMV activation: {op}")


BINARY = {
    "Add": np.add, "Mul": np.multiply, "Less": np.less, "LessOrEqual": np.less_equal,
    "Greater": np.greater, "GreaterOrEqual": np.greater_equal,
}
