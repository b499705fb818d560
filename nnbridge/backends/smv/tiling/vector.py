"""Unary activations, element-wise ops and comparisons (spec §6.5): flat tiles of
the padded storage, at most one scratchpad (16 384 elements) each."""

from __future__ import annotations

from ....base.errors import ShapeError
from ..layers import VectorLayer
from .common import TilingDims, cut, storage_size
from .plan import Invocation, TilingPlan, fp16_bytes


def flat_tiles(total: int, max_size: int) -> list[int]:
    return [min(max_size, total - start) for start in range(0, total, max_size)]


def plan(layer: VectorLayer, max_size: int = 16384, align: int = 8, num_accels: int = 1) -> TilingPlan:
    total = storage_size(layer.input, align)
    if total <= 0:
        raise ShapeError(f"layer '{layer.name}': an empty tensor (SMV kernels need at least one element)")
    sizes = flat_tiles(total, max_size)
    strategy = TilingDims.NONE if len(sizes) == 1 else TilingDims.NC
    flat = cut((1, total), (1, sizes[0]))
    result = TilingPlan(layer, "vector", (strategy, strategy), {"input": (1, sizes[0]), "output": (1, sizes[0])},
                        {"input": flat, "output": flat})
    for size in sizes:
        result.invocations.append(Invocation(0, fp16_bytes(size) * layer.arity, 0, fp16_bytes(size),
                                             -(-size // 8) * layer.arity, vector=(size, layer.arity)))
    return result
