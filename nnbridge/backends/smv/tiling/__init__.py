"""SMAUG's tiling optimizers, one module per operator family; ``plan_layer`` dispatches."""

from __future__ import annotations

import dataclasses

from ..layers import BNLayer, ConvLayer, FCLayer, Layer, PoolLayer, SoftmaxLayer, VectorLayer
from . import bn, conv, fc, pool, softmax, vector
from .common import TiledTensor, TilingDims, find_best_tiling_dims, storage_size
from .plan import Invocation, TilingPlan

_PLANNERS = {ConvLayer: conv.plan, FCLayer: fc.plan, PoolLayer: pool.plan, BNLayer: bn.plan,
             VectorLayer: vector.plan, SoftmaxLayer: softmax.plan}


#: families whose invocation groups are dealt over the accelerators (the others run as one group)
_DEALT = {"conv": conv.invocations, "fc": fc.invocations}


def plan_layer(layer: Layer, max_size: int = 16384, align: int = 8, num_accels: int = 1) -> TilingPlan:
    """Tiles and the kernel-invocation sequence of one accelerated operator."""
    return _PLANNERS[type(layer)](layer, max_size, align, num_accels)


def batch_of(layer: Layer) -> int:
    """The samples (rows) an operator works on independently: what a sub-batch call divides."""
    return layer.batch if isinstance(layer, FCLayer) else layer.input[0]


def with_batch(layer: Layer, batch: int) -> Layer:
    """``layer`` on ``batch`` of its samples."""
    if isinstance(layer, FCLayer):
        return dataclasses.replace(layer, batch=batch)
    return dataclasses.replace(layer, input=(batch, *layer.input[1:]))


def accumulation(plan: TilingPlan) -> tuple[int, ...]:
    """What fixes a plan's numbers beyond SMAUG's kernels: the channel (activation) tiles a conv or
    FC output accumulates over in order, in fp32 (``arithmetic``). Pooling, batch norm,
    element-wise ops and softmax compute each element (row) alone, whatever the tiles."""
    if plan.family == "conv":
        return tuple(plan.tiled["weights"].sizes[3])
    if plan.family == "fc":
        return tuple(plan.tiled["weights"].sizes[1])
    return ()


def spread(plan: TilingPlan, accels: int, align: int = 8) -> TilingPlan:
    """The same tiles with the invocation groups dealt round-robin over ``accels`` accelerators:
    SMAUG's tiling does not depend on the accelerator count, only which accelerator runs which
    group, and so which input and weight tiles an accelerator still holds, does."""
    if plan.accels == accels:
        return plan
    deal = _DEALT.get(plan.family)
    calls = deal(plan, align, accels) if deal else plan.invocations
    return dataclasses.replace(plan, invocations=calls, accels=accels)


__all__ = ["Invocation", "TiledTensor", "TilingDims", "TilingPlan", "find_best_tiling_dims", "plan_layer",
           "accumulation", "batch_of", "spread", "storage_size", "with_batch"]
