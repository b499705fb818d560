"""Pooling tiling (spec §6.3): valid windows, input tiles overlap by ``pool − stride``."""

from __future__ import annotations

import dataclasses
import itertools
from collections.abc import Callable

from ....base.errors import ShapeError
from ..layers import PoolLayer
from .common import TilingDims, Window, best, cut, enum_4d, find_best_tiling_dims, storage_size
from .plan import Invocation, TilingPlan, fp16_bytes

D = TilingDims


def choose_strategies(layer: PoolLayer, max_size: int, align: int) -> tuple[D, D]:
    s_in = find_best_tiling_dims(layer.input, max_size, (1, layer.ph, layer.pw, 8), align)
    s_out = find_best_tiling_dims(layer.output, max_size, (1, 1, 1, 8), align)
    if s_in.has("H"):
        s_out = D.NCH if s_out.has("C") else D.NHW if s_out.has("W") else D.NH
    if s_in.has("W"):
        s_out = D.NCW if s_out.has("C") else D.NHW if s_out.has("H") else D.NW
    return s_in, s_out


def optimize(layer: PoolLayer, max_size: int = 16384, align: int = 8) -> tuple[tuple[D, D], dict]:
    strategies = choose_strategies(layer, max_size, align)
    s_in, s_out = strategies
    _, H, W, C = layer.input
    ph, pw, sh, sw = layer.ph, layer.pw, layer.stride_h, layer.stride_w
    table = {
        D.N: ((1, H, W, C), (1, 1, 1, 1)),
        D.NC: ((1, H, W, 8), (1, 1, 1, 8)),
        D.NH: ((1, ph, W, C), (1, sh, 1, 1)),
        D.NW: ((1, H, pw, C), (1, 1, sw, 1)),
        D.NHW: ((1, ph, pw, C), (1, sh, sw, 1)),
        D.NCH: ((1, ph, W, 8), (1, sh, 1, 8)),
        D.NCW: ((1, H, pw, 8), (1, 1, sw, 8)),
    }
    if s_in in table:
        inputs = list(enum_4d(layer.input, *table[s_in], max_size, align))
    else:
        inputs = [layer.input]
    _, ho, wo, _ = layer.output

    def candidates():
        for ti in inputs:
            rows = (ti[1] - ph) // sh + 1 if s_out.has("H") else ho
            cols = (ti[2] - pw) // sw + 1 if s_out.has("W") else wo
            chans = ti[3] if (s_in.has("C") and s_out.has("C")) else C
            to = (ti[0], rows, cols, chans)
            if storage_size(to, align) <= max_size:
                yield storage_size(ti, align) + storage_size(to, align), (ti, to)

    ti, to = best(candidates())
    return strategies, {"input": ti, "output": to}


def plan(layer: PoolLayer, max_size: int = 16384, align: int = 8, num_accels: int = 1) -> TilingPlan:
    strategies, tiles = optimize(layer, max_size, align)
    t_in = cut(layer.input, tiles["input"], Window(layer.ph, layer.pw, layer.stride_h, layer.stride_w, False))
    t_out = cut(layer.output, tiles["output"])
    if t_in.counts[:3] != t_out.counts[:3]:
        # SMAUG's pooling loop indexes the output tile by the input tile's (n, row, col): more
        # input tiles read past the output tile list (the real runtime segfaults), fewer leave
        # output tiles unwritten
        raise ShapeError(f"SMAUG's SMV pooling tiles the input into {'x'.join(map(str, t_in.counts[:3]))} "
                         f"(n, row, col) tiles but the output into {'x'.join(map(str, t_out.counts[:3]))}, "
                         f"and pairs them by index (the real runtime crashes)")
    result = TilingPlan(layer, "pool", strategies, tiles, {"input": t_in, "output": t_out})
    out_channel_tiled = t_out.counts[3] > 1
    window = layer.ph * layer.pw
    for idx in itertools.product(*(range(c) for c in t_in.counts)):
        n, h, w, c = t_in.tile_shape(idx)
        rows = (h - layer.ph) // layer.stride_h + 1
        cols = (w - layer.pw) // layer.stride_w + 1
        oidx = idx[:3] + ((idx[3],) if out_channel_tiled else (0,))
        oshape = t_out.tile_shape(oidx)
        stored = oshape if out_channel_tiled else oshape[:3] + (c,)
        result.invocations.append(Invocation(
            0, fp16_bytes(storage_size((n, h, w, c), align)), 0, fp16_bytes(storage_size(stored, align)),
            n * rows * cols * -(-c // 8) * window, vector=(c, n * rows * cols * window)))
    return result


def channel_group(layer: PoolLayer, plan_layer: Callable[[PoolLayer], TilingPlan] = plan) -> int:
    """Channels per pooling operator: all of them when SMAUG tiles the layer consistently, else
    the largest multiple of 8 dividing C that it does (the SMAUG writer splits the channels into
    such groups, and the simulator models it the same way); ShapeError when there is none."""
    n, h, w, c = layer.input
    try:
        plan_layer(layer)
        return c
    except ShapeError as exc:
        for group in range(c // 8 * 8, 0, -8):
            if group < c and c % group == 0:
                try:
                    plan_layer(dataclasses.replace(layer, input=(n, h, w, group)))
                    return group
                except ShapeError:
                    continue
        raise exc
