"""Random ops: RandomNormal(Like), RandomUniform(Like), Bernoulli.

ONNX fixes the distribution, not the generator: with a ``seed`` every run of a node draws the
same values (numpy's PCG64 seeded with it), without one every run draws fresh ones. No two
runtimes agree value for value, so checks compare such outputs by their statistics.
"""

from __future__ import annotations

import numpy as np

from ...ir import DType
from ..registry import kernel
from ._common import ints


def _rng(seed: float | None) -> np.random.Generator:
    return np.random.default_rng(None if seed is None else int(np.float32(seed).view(np.uint32)))


def _dtype(code: int | None, like: np.ndarray | None = None) -> np.dtype:
    if code is not None:
        return DType.from_onnx(code).numpy
    return like.dtype if like is not None else np.dtype(np.float32)


def _normal(shape, dtype, mean: float, scale: float, seed: float | None) -> np.ndarray:
    draw = _rng(seed).standard_normal(shape, dtype=np.float32 if dtype != np.float64 else np.float64)
    return (draw * scale + mean).astype(dtype, copy=False)


def _uniform(shape, dtype, low: float, high: float, seed: float | None) -> np.ndarray:
    return _rng(seed).uniform(low, high, shape).astype(dtype, copy=False)


@kernel("RandomNormal")
def random_normal(ctx, *, dtype=1, mean=0.0, scale=1.0, seed=None, shape):
    return _normal(tuple(ints(shape)), _dtype(dtype), mean, scale, seed)


@kernel("RandomNormalLike")
def random_normal_like(ctx, x, *, dtype=None, mean=0.0, scale=1.0, seed=None):
    return _normal(x.shape, _dtype(dtype, x), mean, scale, seed)


@kernel("RandomUniform")
def random_uniform(ctx, *, dtype=1, high=1.0, low=0.0, seed=None, shape):
    return _uniform(tuple(ints(shape)), _dtype(dtype), low, high, seed)


@kernel("RandomUniformLike")
def random_uniform_like(ctx, x, *, dtype=None, high=1.0, low=0.0, seed=None):
    return _uniform(x.shape, _dtype(dtype, x), low, high, seed)


@kernel("Bernoulli")
def bernoulli(ctx, p, *, dtype=None, seed=None):
    """1 with probability p (element-wise), else 0, in ``dtype`` (default: p's type)."""
    return (_rng(seed).random(p.shape) < p).astype(_dtype(dtype, p))
