"""SMAUG's tiling optimizers, one module per operator family; ``plan_layer`` dispatches."""

from __future__ import annotations

from ..layers import BNLayer, ConvLayer, FCLayer, Layer, PoolLayer, SoftmaxLayer, VectorLayer
from . import bn, conv, fc, pool, softmax, vector
from .common import TiledTensor, TilingDims, find_best_tiling_dims, storage_size
from .plan import Invocation, TilingPlan

_PLANNERS = {ConvLayer: conv.plan, FCLayer: fc.plan, PoolLayer: pool.plan, BNLayer: bn.plan,
             VectorLayer: vector.plan, SoftmaxLayer: softmax.plan}


def plan_layer(layer: Layer, max_size: int = 16384, align: int = 8, num_accels: int = 1) -> TilingPlan:
    """Tiles and the kernel-invocation sequence of one accelerated operator."""
    return _PLANNERS[type(layer)](layer, max_size, align, num_accels)


__all__ = ["Invocation", "TiledTensor", "TilingDims", "TilingPlan", "find_best_tiling_dims", "plan_layer",
           "storage_size"]
