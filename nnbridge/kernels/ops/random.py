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


def _like(dtype: int | None, x: np.ndarray) -> int:
    """A *Like op's output type as its base op's ``dtype`` attribute: the given one, else x's."""
    return DType.from_numpy(x.dtype).onnx if dtype is None else dtype


@kernel("RandomNormal")
def random_normal(ctx, *, dtype=1, mean=0.0, scale=1.0, seed=None, shape):
    out = _dtype(dtype)
    draw = _rng(seed).standard_normal(tuple(ints(shape)), dtype=np.float32 if out != np.float64 else np.float64)
    return (draw * scale + mean).astype(out, copy=False)


@kernel("RandomNormalLike")
def random_normal_like(ctx, x, *, dtype=None, mean=0.0, scale=1.0, seed=None):
    """RandomNormal of x's shape (and by default its type), as ONNX defines it."""
    return random_normal(ctx, dtype=_like(dtype, x), mean=mean, scale=scale, seed=seed, shape=x.shape)


@kernel("RandomUniform")
def random_uniform(ctx, *, dtype=1, high=1.0, low=0.0, seed=None, shape):
    return _rng(seed).uniform(low, high, tuple(ints(shape))).astype(_dtype(dtype), copy=False)


@kernel("RandomUniformLike")
def random_uniform_like(ctx, x, *, dtype=None, high=1.0, low=0.0, seed=None):
    """RandomUniform of x's shape (and by default its type), as ONNX defines it."""
    return random_uniform(ctx, dtype=_like(dtype, x), high=high, low=low, seed=seed, shape=x.shape)


@kernel("Bernoulli")
def bernoulli(ctx, p, *, dtype=None, seed=None):
    """1 with probability p (element-wise), else 0, in ``dtype`` (default: p's type)."""
    return (_rng(seed).random(p.shape) < p).astype(_dtype(dtype, p))
