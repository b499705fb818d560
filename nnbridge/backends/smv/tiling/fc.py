"""Inner-product tiling (spec §6.2) and its invocation loop (spec §6.7, runNWA)."""

from __future__ import annotations

from ....base.errors import ShapeError
from ..layers import FCLayer
from .common import TilingDims, best, cut, enum_2d, find_best_tiling_dims, storage_size
from .plan import Invocation, TilingPlan, fp16_bytes

D = TilingDims


def choose_strategies(layer: FCLayer, max_size: int, align: int) -> tuple[D, D, D]:
    s_in = find_best_tiling_dims(layer.input, max_size, (1, 32), align)
    s_w = find_best_tiling_dims(layer.weights, max_size, (8, 32), align)
    s_out = find_best_tiling_dims(layer.output, max_size, (1, 8), align)
    if s_w.has("N") and s_out is not D.NONE:
        s_out = D.NC
    return s_in, s_w, s_out


def _weight_candidates(layer: FCLayer, s_in: D, s_w: D, tile_in, max_size: int, align: int):
    K, C = layer.weights
    chans = tile_in[1] if s_in.has("C") else C
    if s_w is D.NONE:
        return [(K, chans)]
    out = []
    for n in range(min(K, 8), K + 1, 8):
        if s_w is D.N or s_in.has("C"):
            if storage_size((n, chans), align) > max_size:
                break
            out.append((n, chans))
        else:
            fitted = False
            for c in range(min(C, 32), C + 1, 32):
                if storage_size((n, c), align) > max_size:
                    break
                out.append((n, c))
                fitted = True
            if not fitted:
                break
    return out


def optimize(layer: FCLayer, max_size: int = 16384, align: int = 8) -> tuple[tuple[D, D, D], dict]:
    strategies = choose_strategies(layer, max_size, align)
    s_in, s_w, s_out = strategies
    if s_in is D.N:
        inputs = list(enum_2d(layer.input, (1, layer.inputs), (1, 1), max_size, align))
    elif s_in is D.NC:
        inputs = list(enum_2d(layer.input, (1, 32), (1, 32), max_size, align))
    else:
        inputs = [layer.input]

    def candidates():
        for ti in inputs:
            for tw in _weight_candidates(layer, s_in, s_w, ti, max_size, align):
                to = (ti[0], tw[0]) if (s_w is not D.NONE and s_out is not D.NONE) else (ti[0], layer.neurons)
                if storage_size(to, align) > max_size:
                    continue
                yield storage_size(ti, align) + storage_size(tw, align) + storage_size(to, align), (ti, tw, to)

    ti, tw, to = best(candidates())
    return strategies, {"input": ti, "weights": tw, "output": to}


def plan(layer: FCLayer, max_size: int = 16384, align: int = 8, num_accels: int = 1) -> TilingPlan:
    strategies, tiles = optimize(layer, max_size, align)
    t_in = cut(layer.input, tiles["input"])
    t_w = cut(layer.weights, tiles["weights"])
    t_out = cut(layer.output, (tiles["output"][0], layer.neurons))
    if t_out.counts[1] > 1:
        raise ShapeError(f"SMV inner product '{layer.name}': output tiling is not implemented by SMAUG")
    result = TilingPlan(layer, "fc", strategies, tiles, {"input": t_in, "weights": t_w, "output": t_out})
    result.invocations = invocations(result, align, num_accels)
    result.accels = num_accels
    return result


def invocations(plan: TilingPlan, align: int, num_accels: int) -> list[Invocation]:
    """runNWA's loop with the neuron tiles dealt round-robin over ``num_accels`` accelerators (which
    of them reloads an activation tile follows from that)."""
    layer, t_in, t_w = plan.layer, plan.tiled["input"], plan.tiled["weights"]
    a_in, a_w = t_in.counts[1], t_w.counts[1]
    iters = max(a_in, a_w)
    last_in: dict[int, tuple] = {}
    group = 0
    calls: list[Invocation] = []
    for n in range(t_in.counts[0]):
        nsz = t_in.sizes[0][n]
        for k in range(t_w.counts[0]):
            accel = group % num_accels
            for a in range(iters):
                ai = a if a_in == a_w else 0
                read_in = last_in.get(accel) != (n, ai)
                last_in[accel] = (n, ai)
                last = k == t_w.counts[0] - 1 and a == iters - 1
                ksz, csz = t_w.sizes[0][k], t_w.sizes[1][a]
                calls.append(Invocation(
                    group,
                    fp16_bytes(storage_size(t_in.tile_shape((n, ai)), align)) if read_in else 0,
                    fp16_bytes(storage_size((ksz, csz), align)),
                    fp16_bytes(storage_size((nsz, layer.neurons), align)) if last else 0,
                    nsz * -(-ksz // 8) * -(-csz // 32), nsz * ksz * csz, (ksz, csz, nsz)))
            group += 1
    return calls
