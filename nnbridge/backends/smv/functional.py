"""Functional simulation of SMV steps with SMAUG's numerics.

Conv and FC replay their tiling plan invocation by invocation: each call reads
its input/weight tiles (with halo pads), computes in fp32 and accumulates into
the fp32 output scratchpad across channel tiles; the last call of an output
tile applies the fused activation and stores fp16 (spec §4.1–4.2, §9). For
pool, BN, element-wise and softmax every output element depends on one tile
only, so they are computed over the whole tensor at once — the same numbers
the tile loop would give. CPU steps run the reference backend's kernels.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence

import numpy as np
from numpy.lib.stride_tricks import sliding_window_view

from ...ir import Layout
from ..reference.executor import KernelContext
from ..reference.registry import get_kernel
from .lowering import Step
from .numerics import BINARY, activation, host, store
from .tiling import TilingPlan

Arrays = list[np.ndarray | None]


class Simulator:
    """Runs steps; ``consts`` are the graph's fp16-rounded initializers (for Clip bounds)."""

    def __init__(self, consts: dict[str, np.ndarray], layouts: dict[str, Layout]):
        self.consts = consts
        self.layouts = layouts
        self.contexts: dict[int, KernelContext] = {}

    def nhwc(self, name: str | None) -> bool:
        return name is not None and self.layouts.get(name) is Layout.NHWC

    def run(self, step: Step, plans: Sequence[TilingPlan], args: Arrays, env) -> Arrays:
        return RUNNERS[step.family](self, step, plans, args, env)

    def act(self, step: Step) -> Callable[[np.ndarray], np.ndarray] | None:
        fn = step.params.get("act")
        return None if fn is None else activation(fn, self.consts)


def _finish(y: np.ndarray, act) -> np.ndarray:
    return store(act(y) if act is not None else y)


def _bias(y: np.ndarray, bias: np.ndarray, axis: int, act) -> np.ndarray:
    """SMAUG's bias carrier: a batch norm with mean 0, var′ 1, gamma 1, beta = bias."""
    shape = [1] * y.ndim
    shape[axis] = -1
    return _finish(y + bias.reshape(shape).astype(np.float32), act)


def run_conv(sim: Simulator, step: Step, plans, args: Arrays, env) -> Arrays:
    x, w = args[0], args[1]
    layer, plan = step.layers[0], plans[0]
    if not sim.nhwc(step.inputs[0]):
        x = x.transpose(0, 2, 3, 1)
    if not sim.nhwc(step.inputs[1]):
        w = w.transpose(0, 2, 3, 1)
    if step.params["pad"] is not None:
        t, b, left, r = step.params["pad"]
        x = np.pad(x, ((0, 0), (t, b), (left, r), (0, 0)))
    x = np.ascontiguousarray(x, dtype=np.float32)
    w = np.asarray(w, dtype=np.float32)
    kh, kw, sh, sw = layer.kh, layer.kw, layer.stride_h, layer.stride_w
    _, _, wo, _ = layer.output
    out = np.zeros(layer.output, dtype=np.float32)
    bias = step.params["bias"]
    act = None if bias is not None else sim.act(step)
    columns: dict[tuple, np.ndarray] = {}
    for inv in plan.invocations:
        (n0, nn), (r0, rr), (c0, cc), (o0, oo), (q0, qq), (pt, pb, pl, pr), accumulate, send = inv.region
        key = (n0, r0, rr, c0, cc, pt, pb)
        cols = columns.get(key)
        if cols is None:
            tile = np.pad(x[n0:n0 + nn, r0:r0 + rr, :, c0:c0 + cc], ((0, 0), (pt, pb), (pl, pr), (0, 0)))
            win = sliding_window_view(tile, (kh, kw), axis=(1, 2))[:, ::sh, ::sw][:, :qq, :wo]
            cols = columns[key] = win.transpose(0, 1, 2, 4, 5, 3).reshape(nn * qq * wo, kh * kw * cc)
        part = (cols @ w[o0:o0 + oo, :, :, c0:c0 + cc].reshape(oo, -1).T).reshape(nn, qq, wo, oo)
        region = (slice(n0, n0 + nn), slice(q0, q0 + qq), slice(None), slice(o0, o0 + oo))
        if accumulate:
            out[region] += part
        else:
            out[region] = part
        if send:
            out[region] = _finish(out[region], act)
    if bias is not None:
        out = _bias(out, args[2], 3, sim.act(step))
    if not sim.nhwc(step.outputs[0]):
        out = out.transpose(0, 3, 1, 2)
    return [np.ascontiguousarray(out)]


def run_fc(sim: Simulator, step: Step, plans, args: Arrays, env) -> Arrays:
    a, b = args[0], args[1]
    layer, plan = step.layers[0], plans[0]
    x = a.reshape(layer.batch, layer.inputs).astype(np.float32, copy=False)
    w = b if step.params["trans_b"] else b.T
    acc = np.zeros(layer.output, dtype=np.float32)
    for inv in plan.invocations:
        (n0, nn), (k0, kk), (c0, cc) = inv.region
        acc[n0:n0 + nn, k0:k0 + kk] += x[n0:n0 + nn, c0:c0 + cc] @ w[k0:k0 + kk, c0:c0 + cc].T
    bias = step.params["bias"]
    out = _finish(acc, sim.act(step)) if bias is None else _bias(store(acc), args[2].reshape(-1), 1, sim.act(step))
    return [out.reshape(tuple(a.shape[:-1]) + (layer.neurons,))]


def run_pool(sim: Simulator, step: Step, plans, args: Arrays, env) -> Arrays:
    layer = step.layers[0]
    x = args[0] if sim.nhwc(step.inputs[0]) else args[0].transpose(0, 2, 3, 1)
    win = sliding_window_view(x, (layer.ph, layer.pw), axis=(1, 2))[:, ::layer.stride_h, ::layer.stride_w]
    if layer.kind == "max":
        y = win.max(axis=(-2, -1))
    else:
        y = win.sum(axis=(-2, -1), dtype=np.float32) * np.float32(1.0 / (layer.ph * layer.pw))
    y = store(y)
    return [y if sim.nhwc(step.outputs[0]) else np.ascontiguousarray(y.transpose(0, 3, 1, 2))]


def run_bn(sim: Simulator, step: Step, plans, args: Arrays, env) -> Arrays:
    x, gamma, beta, mean, var = args[:5]
    eps = np.float32(step.fn.node.attr("epsilon", 1e-5))
    axis = 1 if x.ndim == 2 or not sim.nhwc(step.inputs[0]) else 3
    var_inv = store(1.0 / np.sqrt(var.astype(np.float32) + eps))  # SMAUG stores var′ = 1/sqrt(var+ε) in fp16
    shape = [1] * x.ndim
    shape[axis] = -1
    scale = (var_inv * gamma).reshape(shape)
    y = (x - mean.reshape(shape)) * scale + beta.reshape(shape)
    return [_finish(y.astype(np.float32), sim.act(step))]


def run_vector(sim: Simulator, step: Step, plans, args: Arrays, env) -> Arrays:
    if step.params.get("unary"):
        return [store(activation(step.fn, sim.consts)(args[0]))]
    y = BINARY[step.fn.op](args[0], args[1])
    return [y if y.dtype == bool else store(y)]


def run_softmax(sim: Simulator, step: Step, plans, args: Arrays, env) -> Arrays:
    x = args[0].astype(np.float32)
    e = np.exp(x - x.max(axis=-1, keepdims=True))
    return [store(e / e.sum(axis=-1, keepdims=True))]


def run_cpu(sim: Simulator, step: Step, plans, args: Arrays, env) -> Arrays:
    spec = get_kernel(step.fn.op, step.fn.domain)
    ctx = sim.contexts.get(id(step))
    if ctx is None:
        ctx = sim.contexts[id(step)] = KernelContext(step.fn.node)
    ctx.env = env
    result = spec.fn(ctx, *args)
    if not isinstance(result, tuple):
        result = (result,)
    return [host(r) if isinstance(r, np.ndarray) else r for r in result]


RUNNERS = {"conv": run_conv, "fc": run_fc, "pool": run_pool, "bn": run_bn, "vector": run_vector,
           "softmax": run_softmax, "cpu": run_cpu}
