"""Batch-norm tiling (spec §6.4): post-conv (NHWC) and post-FC (NC)."""

from __future__ import annotations

import itertools

from ....base.errors import ShapeError
from ..layers import BNLayer
from .common import TilingDims, best, cut, enum_2d, enum_4d, find_best_tiling_dims, storage_size
from .plan import Invocation, TilingPlan, fp16_bytes

D = TilingDims


def optimize(layer: BNLayer, max_size: int = 16384, align: int = 8) -> tuple[tuple[D, D, D], dict]:
    C = layer.input[-1]
    s_w = find_best_tiling_dims(layer.weights, max_size, (4, 8), align)
    if len(layer.input) == 4:
        if s_w is not D.NONE:
            raise ShapeError(f"SMV batch norm '{layer.name}': {C} channels do not fit the weight scratchpad")
        s_in = find_best_tiling_dims(layer.input, max_size, (1, 8, 8, 8), align)
        _, H, W, _ = layer.input
        table = {
            D.N: ((1, H, W, C), (1, 1, 1, 1)),
            D.NC: ((1, H, W, 8), (1, 1, 1, 8)),
            D.NH: ((1, 8, W, C), (1, 8, 1, 1)),
            D.NW: ((1, H, 8, C), (1, 1, 8, 1)),
            D.NHW: ((1, 8, 8, C), (1, 8, 8, 1)),
            D.NCH: ((1, 8, W, 8), (1, 8, 1, 8)),
            D.NCW: ((1, H, 8, 8), (1, 1, 8, 8)),
        }
        inputs = list(enum_4d(layer.input, *table[s_in], max_size, align)) if s_in in table else [layer.input]
        weights_for = lambda ti: [layer.weights]  # noqa: E731 - post-conv weights are never tiled
    else:
        s_in = find_best_tiling_dims(layer.input, max_size, (1, 8), align)
        if s_in is D.N:
            inputs = list(enum_2d(layer.input, (1, C), (1, 1), max_size, align))
        elif s_in is D.NC:
            inputs = list(enum_2d(layer.input, (1, 8), (1, 8), max_size, align))
        else:
            inputs = [layer.input]

        def weights_for(ti):
            if s_w is D.NONE:
                return [layer.weights]
            if s_in.has("C"):
                return [(4, ti[1])]
            return [(4, c) for c in range(8, C + 1, 8) if storage_size((4, c), align) <= max_size]

    def candidates():
        for ti in inputs:
            for tw in weights_for(ti):
                if storage_size(tw, align) <= max_size:
                    yield 2 * storage_size(ti, align) + storage_size(tw, align), (ti, tw)

    ti, tw = best(candidates())
    return (s_in, s_w, s_in), {"input": ti, "weights": tw, "output": ti}


def plan(layer: BNLayer, max_size: int = 16384, align: int = 8, num_accels: int = 1) -> TilingPlan:
    strategies, tiles = optimize(layer, max_size, align)
    t_in = cut(layer.input, tiles["input"])
    t_w = cut(layer.weights, tiles["weights"])
    result = TilingPlan(layer, "bn", strategies, tiles, {"input": t_in, "weights": t_w, "output": t_in})
    last_w = None
    for idx in itertools.product(*(range(c) for c in t_in.counts)):
        shape = t_in.tile_shape(idx)
        w_idx = (0, idx[-1] if t_w.counts[1] > 1 else 0)
        w_bytes = fp16_bytes(storage_size(t_w.tile_shape(w_idx), align)) if w_idx != last_w else 0
        last_w = w_idx
        size = storage_size(shape, align)
        result.invocations.append(Invocation(0, fp16_bytes(size), w_bytes, fp16_bytes(size), -(-size // 8),
                                             vector=(size, 1)))
    return result
