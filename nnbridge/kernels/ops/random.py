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


def _rng(ctx) -> np.random.Generator:
    seed = ctx.attr("seed")
    return np.random.default_rng(None if seed is None else int(np.float32(seed).view(np.uint32)))


def _dtype(ctx, like: np.ndarray | None = None) -> np.dtype:
    code = ctx.attr("dtype")
    if code is not None:
        return DType.from_onnx(code).numpy
    return like.dtype if like is not None else np.dtype(np.float32)


def _normal(ctx, shape, dtype) -> np.ndarray:
    draw = _rng(ctx).standard_normal(shape, dtype=np.float32 if dtype != np.float64 else np.float64)
    return (draw * ctx.attr("scale", 1.0) + ctx.attr("mean", 0.0)).astype(dtype, copy=False)


def _uniform(ctx, shape, dtype) -> np.ndarray:
    low, high = ctx.attr("low", 0.0), ctx.attr("high", 1.0)
    return _rng(ctx).uniform(low, high, shape).astype(dtype, copy=False)


@kernel("RandomNormal")
def random_normal(ctx):
    return _normal(ctx, tuple(ints(ctx.attr("shape"))), _dtype(ctx))


@kernel("RandomNormalLike")
def random_normal_like(ctx, x):
    return _normal(ctx, x.shape, _dtype(ctx, x))


@kernel("RandomUniform")
def random_uniform(ctx):
    return _uniform(ctx, tuple(ints(ctx.attr("shape"))), _dtype(ctx))


@kernel("RandomUniformLike")
def random_uniform_like(ctx, x):
    return _uniform(ctx, x.shape, _dtype(ctx, x))


@kernel("Bernoulli")
def bernoulli(ctx, p):
    """1 with probability p (element-wise), else 0, in ``dtype`` (default: p's type)."""
    return (_rng(ctx).random(p.shape) < p).astype(_dtype(ctx, p))
