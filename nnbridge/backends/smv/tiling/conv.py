"""Convolution tiling (spec §6.1) and its invocation loop (spec §5.5, §6.7)."""

from __future__ import annotations

import math

from ....base.errors import ShapeError
from ..layers import ConvLayer
from .common import (
    TiledTensor,
    TilingDims,
    Window,
    best,
    cut,
    enum_4d,
    find_best_tiling_dims,
    storage_size,
)
from .plan import Invocation, TilingPlan, fp16_bytes

D = TilingDims


def choose_strategies(layer: ConvLayer, max_size: int, align: int) -> tuple[D, D, D]:
    _, _, W, _ = layer.input
    _, _, wo, _ = layer.output
    s_in = find_best_tiling_dims(layer.input, max_size, (1, layer.kh, W, 32), align)
    s_w = find_best_tiling_dims(layer.weights, max_size, (8, layer.kh, layer.kw, 32), align)
    if s_w is D.NH:
        raise ShapeError(f"SMV conv '{layer.name}': weights would need row tiling, which SMAUG does not support")
    s_out = find_best_tiling_dims(layer.output, max_size, (1, 1, wo, 8), align)
    if s_w.has("N"):
        s_out = D.NC
    if s_in.has("H"):
        s_out = D.NCH if s_out.has("C") else D.NH
    return s_in, s_w, s_out


def _input_candidates(layer: ConvLayer, s_in: D, max_size: int, align: int):
    N, H, W, C = layer.input
    sh = layer.stride_h
    table = {
        D.N: ((1, H, W, C), (1, 1, 1, 1)),
        D.NC: ((1, H, W, 32), (1, 1, 1, 32)),
        D.NH: ((1, layer.kh, W, C), (1, sh, 1, 1)),
        D.NCH: ((1, layer.kh, W, 32), (1, sh, 1, 32)),
    }
    if s_in not in table:
        return [layer.input]
    min_shape, steps = table[s_in]
    return list(enum_4d(layer.input, min_shape, steps, max_size, align))


def _weight_candidates(layer: ConvLayer, s_in: D, s_w: D, tile_in, max_size: int, align: int):
    K, kh, kw, C = layer.weights
    chans = tile_in[3] if s_in.has("C") else C
    if s_w is D.NONE:
        return [(K, kh, kw, chans)]
    out = []
    for n in range(min(K, 8), K + 1, 8):
        if s_w is D.N or s_in.has("C"):
            tile = (n, kh, kw, chans)
            if storage_size(tile, align) > max_size:
                break
            out.append(tile)
        else:
            fitted = False
            for c in range(min(C, 32), C + 1, 32):
                tile = (n, kh, kw, c)
                if storage_size(tile, align) > max_size:
                    break
                out.append(tile)
                fitted = True
            if not fitted:
                break
    return out


def _output_candidates(layer: ConvLayer, s_w: D, s_out: D, tile_in, tile_w, max_size: int, align: int):
    K = layer.kernels
    _, ho, wo, _ = layer.output
    out = []
    for c in range(min(tile_w[0], 8), K + 1, 8):
        if s_out.has("H"):
            pad = math.ceil((layer.kh - 1) / 2) if layer.same else 0
            rows = (tile_in[1] - layer.kh + pad) // layer.stride_h + 1
            chans = tile_w[0]
        else:
            rows = ho
            chans = tile_w[0] if s_w is not D.NONE else (c if s_out is not D.NONE else K)
        tile = (tile_in[0], rows, wo, chans)
        if storage_size(tile, align) <= max_size:
            out.append(tile)
        if s_w is not D.NONE or s_out is D.NONE:
            break
    return out


def optimize(layer: ConvLayer, max_size: int = 16384, align: int = 8) -> tuple[tuple[D, D, D], dict]:
    """SMAUG's choice of strategies and maximal input/weight/output tiles."""
    strategies = choose_strategies(layer, max_size, align)
    s_in, s_w, s_out = strategies

    def candidates():
        for ti in _input_candidates(layer, s_in, max_size, align):
            for tw in _weight_candidates(layer, s_in, s_w, ti, max_size, align):
                for to in _output_candidates(layer, s_w, s_out, ti, tw, max_size, align):
                    total = storage_size(ti, align) + storage_size(tw, align) + storage_size(to, align)
                    yield total, (ti, tw, to)

    ti, tw, to = best(candidates())
    return strategies, {"input": ti, "weights": tw, "output": to}


def _output_rows(layer: ConvLayer, tiled_in: TiledTensor, needs_h: bool) -> list[int]:
    """Output row tiles derived from the input row tiles (spec §5.5)."""
    _, ho, _, _ = layer.output
    in_rows = tiled_in.sizes[1]
    if not needs_h or len(in_rows) == 1:
        return [ho]
    top, bottom, _, _ = layer.pads
    count = len(in_rows) - (1 if in_rows[-1] + bottom < layer.kh else 0)
    last = len(in_rows) - 1
    rows = []
    for h in range(count):
        extra = top if h == 0 else bottom if h == last else 0
        rows.append((in_rows[h] + extra - layer.kh) // layer.stride_h + 1)
    return rows


def _starts(sizes) -> tuple[int, ...]:
    return tuple(sum(sizes[:i]) for i in range(len(sizes)))


def plan(layer: ConvLayer, max_size: int = 16384, align: int = 8, num_accels: int = 1) -> TilingPlan:
    strategies, tiles = optimize(layer, max_size, align)
    s_in, s_w, s_out = strategies
    window = Window(layer.kh, layer.kw, layer.stride_h, layer.stride_w, layer.same)
    t_in = cut(layer.input, tiles["input"], window)
    t_w = cut(layer.weights, tiles["weights"])
    on, _, wo, K = layer.output
    rows = _output_rows(layer, t_in, s_out.has("H"))
    chans = t_w.sizes[0] if s_w.has("N") else cut((K,), (tiles["output"][3],)).sizes[0]
    n_sizes = t_in.sizes[0]
    t_out = TiledTensor(layer.output, tiles["output"],
                        (n_sizes, tuple(rows), (wo,), tuple(chans)),
                        (t_in.starts[0], _starts(rows), (0,), _starts(chans)))
    result = TilingPlan(layer, "conv", strategies, tiles, {"input": t_in, "weights": t_w, "output": t_out})
    result.invocations = invocations(result, align, num_accels)
    result.accels = num_accels
    return result


def invocations(plan: TilingPlan, align: int, num_accels: int) -> list[Invocation]:
    """runNHWC's loop with the weight-ofmap tiles dealt round-robin over ``num_accels``
    accelerators (which of them reloads an input or weight tile follows from that)."""
    layer: ConvLayer = plan.layer
    t_in, t_w, t_out = plan.tiled["input"], plan.tiled["weights"], plan.tiled["output"]
    ci_tiles, cw_tiles = t_in.counts[3], t_w.counts[3]
    chan_iters = max(ci_tiles, cw_tiles)
    wk_tiles = t_w.counts[0]
    subtiles = t_out.counts[3] if wk_tiles == 1 else 1
    row_tiles = t_out.counts[1]
    wo = layer.output[2]
    last_in: dict[int, tuple] = {}
    last_w: dict[int, tuple] = {}
    calls: list[Invocation] = []
    group = 0
    for n in range(t_in.counts[0]):
        nsz = t_in.sizes[0][n]
        for h in range(row_tiles):
            out_rows = t_out.sizes[1][h]
            for wk in range(wk_tiles):
                accel = group % num_accels
                for sub in range(subtiles):
                    oc = wk if wk_tiles > 1 else sub
                    ofmaps = t_out.sizes[3][oc]
                    for ch in range(chan_iters):
                        ci = ch if ci_tiles == cw_tiles else 0
                        in_idx, w_idx = (n, h, 0, ci), (wk, 0, 0, ch)
                        read_in = last_in.get(accel) != in_idx
                        read_w = last_w.get(accel) != w_idx
                        last_in[accel], last_w[accel] = in_idx, w_idx
                        c_size = t_w.sizes[3][ch]
                        send = ch == chan_iters - 1
                        work = (-(-ofmaps // 8) * layer.kh * layer.kw * -(-c_size // 32)
                                * out_rows * wo * nsz)
                        calls.append(Invocation(
                            group,
                            fp16_bytes(storage_size(t_in.tile_shape(in_idx), align)) if read_in else 0,
                            fp16_bytes(storage_size(t_w.tile_shape(w_idx[:3] + (ch,)), align)) if read_w else 0,
                            fp16_bytes(storage_size((nsz, out_rows, wo, ofmaps), align)) if send else 0,
                            work, nsz * out_rows * wo * ofmaps * layer.kh * layer.kw * c_size,
                            (ofmaps, c_size, layer.kh * layer.kw * out_rows * wo * nsz)))
                group += 1
    return calls
