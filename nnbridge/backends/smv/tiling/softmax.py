"""Softmax tiling (spec §6.6): whole rows only, as many as fit one scratchpad."""

from __future__ import annotations

from ....base.errors import ShapeError
from ..layers import SoftmaxLayer
from .common import TilingDims, ceil_to, cut
from .plan import Invocation, TilingPlan, fp16_bytes

#: vector passes over a row: max, exp + sum, scale
PASSES = 3


def plan(layer: SoftmaxLayer, max_size: int = 16384, align: int = 8, num_accels: int = 1) -> TilingPlan:
    batch, classes = layer.input
    row = ceil_to(classes, align)
    if row > max_size:
        raise ShapeError(f"SMV softmax '{layer.name}': a row of {classes} classes exceeds one scratchpad")
    rows = min(max_size // row, batch)
    tiled = cut(layer.input, (rows, classes))
    strategy = TilingDims.NONE if tiled.num_tiles == 1 else TilingDims.N
    result = TilingPlan(layer, "softmax", (strategy, strategy), {"input": (rows, classes),
                                                                 "output": (rows, classes)},
                        {"input": tiled, "output": tiled})
    for n in tiled.sizes[0]:
        result.invocations.append(Invocation(0, fp16_bytes(n * row), 0, fp16_bytes(n * row),
                                             PASSES * -(-(n * row) // 8), vector=(n * row, PASSES)))
    return result
