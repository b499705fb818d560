"""Functional simulation of SMV steps with SMAUG's numerics (spec §2, §4, §9).

Tensors are fp16 in host memory; a kernel widens its tiles to fp32, computes and
accumulates in fp32 (a conv/FC output stays in the fp32 output scratchpad across
all channel tiles), applies the fused activation and stores fp16 once. Tiling
therefore changes SMV's numbers only through the order of fp32 additions (about
1e-7 relative, below fp16's resolution), which is not reproduced: each operator
is one fp32 computation over the whole tensor followed by SMV's rounding. CPU
steps run the reference backend's kernels on the fp16 values.
"""

from __future__ import annotations

from collections.abc import Callable

import numpy as np
from numpy.lib.stride_tricks import sliding_window_view

from ...ir import Layout
from ...passes.layouts import SPATIAL_SLOTS
from ..reference.executor import KernelContext
from ..reference.registry import get_kernel
from .lowering import Step
from .numerics import BINARY, activation, host, store

Arrays = list[np.ndarray | None]


class Simulator:
    """Runs steps; ``consts`` are the graph's fp16-rounded initializers (for Clip bounds)."""

    def __init__(self, consts: dict[str, np.ndarray], layouts: dict[str, Layout]):
        self.consts = consts
        self.layouts = layouts
        self.contexts: dict[int, KernelContext] = {}

    def nhwc(self, name: str | None) -> bool:
        return name is not None and self.layouts.get(name) is Layout.NHWC

    def run(self, step: Step, args: Arrays, env) -> Arrays:
        return RUNNERS[step.family](self, step, args, env)

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


def run_conv(sim: Simulator, step: Step, args: Arrays, env) -> Arrays:
    x, w = args[0], args[1]
    layer = step.layers[0]
    if not sim.nhwc(step.inputs[0]):
        x = x.transpose(0, 2, 3, 1)
    if not sim.nhwc(step.inputs[1]):
        w = w.transpose(0, 2, 3, 1)
    top, bottom, left, right = step.params["pad"] or layer.pads  # halo pads are virtual zeros
    x = np.pad(np.asarray(x, dtype=np.float32), ((0, 0), (top, bottom), (left, right), (0, 0)))
    w = np.asarray(w, dtype=np.float32)
    n, ho, wo, k = layer.output
    win = sliding_window_view(x, (layer.kh, layer.kw), axis=(1, 2))[:, ::layer.stride_h, ::layer.stride_w]
    cols = win[:, :ho, :wo].reshape(n * ho * wo, -1)  # im2col, (channel, kh, kw) per row
    out = (cols @ w.transpose(0, 3, 1, 2).reshape(k, -1).T).reshape(layer.output)  # fp32 over all channels
    bias = step.params["bias"]
    out = _finish(out, sim.act(step)) if bias is None else _bias(store(out), args[2], 3, sim.act(step))
    if not sim.nhwc(step.outputs[0]):
        out = out.transpose(0, 3, 1, 2)
    return [np.ascontiguousarray(out)]


def run_fc(sim: Simulator, step: Step, args: Arrays, env) -> Arrays:
    a, b = args[0], args[1]
    layer = step.layers[0]
    x = a.reshape(layer.batch, layer.inputs).astype(np.float32, copy=False)
    w = b if step.params["trans_b"] else b.T
    acc = x @ w.T  # fp32 over all activation tiles
    bias = step.params["bias"]
    out = _finish(acc, sim.act(step)) if bias is None else _bias(store(acc), args[2].reshape(-1), 1, sim.act(step))
    return [out.reshape(tuple(a.shape[:-1]) + (layer.neurons,))]


def run_pool(sim: Simulator, step: Step, args: Arrays, env) -> Arrays:
    layer = step.layers[0]
    x = args[0] if sim.nhwc(step.inputs[0]) else args[0].transpose(0, 2, 3, 1)
    if step.params.get("pad"):  # ONNX pads: -inf for max (the export pads only non-negative inputs with 0)
        top, bottom, left, right = step.params["pad"]
        fill = -np.inf if layer.kind == "max" else 0.0
        x = np.pad(x, ((0, 0), (top, bottom), (left, right), (0, 0)), constant_values=fill)
    win = sliding_window_view(x, (layer.ph, layer.pw), axis=(1, 2))[:, ::layer.stride_h, ::layer.stride_w]
    if layer.kind == "max":
        y = win.max(axis=(-2, -1))
    else:
        y = win.sum(axis=(-2, -1), dtype=np.float32) * np.float32(1.0 / (layer.ph * layer.pw))
    y = store(y)
    return [y if sim.nhwc(step.outputs[0]) else np.ascontiguousarray(y.transpose(0, 3, 1, 2))]


def run_bn(sim: Simulator, step: Step, args: Arrays, env) -> Arrays:
    x, gamma, beta, mean, var = args[:5]
    eps = np.float32(step.fn.node.attr("epsilon", 1e-5))
    axis = 1 if x.ndim == 2 or not sim.nhwc(step.inputs[0]) else 3
    var_inv = store(1.0 / np.sqrt(var.astype(np.float32) + eps))  # SMAUG stores var′ = 1/sqrt(var+ε) in fp16
    shape = [1] * x.ndim
    shape[axis] = -1
    scale = (var_inv * gamma).reshape(shape)
    y = (x - mean.reshape(shape)) * scale + beta.reshape(shape)
    return [_finish(y.astype(np.float32), sim.act(step))]


def run_vector(sim: Simulator, step: Step, args: Arrays, env) -> Arrays:
    if step.params.get("unary"):
        return [store(activation(step.fn, sim.consts)(args[0]))]
    y = BINARY[step.fn.op](args[0], args[1])
    return [y if y.dtype == bool else store(y)]


def run_softmax(sim: Simulator, step: Step, args: Arrays, env) -> Arrays:
    x = args[0].astype(np.float32)
    with np.errstate(invalid="ignore", over="ignore"):  # inf inputs (fp16 overflow upstream) give nan, as on SMV
        e = np.exp(x - x.max(axis=-1, keepdims=True))
        return [store(e / e.sum(axis=-1, keepdims=True))]


def run_cpu(sim: Simulator, step: Step, args: Arrays, env) -> Arrays:
    """A reference kernel on the host. Reference spatial kernels compute NCHW, so an NHWC
    operand is reordered for them and the result reordered back (SMAUG's CPU Reorders)."""
    spec = get_kernel(step.fn.op, step.fn.domain)
    ctx = sim.contexts.get(id(step))
    if ctx is None:
        ctx = sim.contexts[id(step)] = KernelContext(step.fn.node)
    ctx.env = env
    slots = SPATIAL_SLOTS.get(step.fn.op, ()) if not step.fn.domain else ()
    nhwc = bool(slots) and sim.nhwc(step.inputs[0]) and args[0] is not None and np.ndim(args[0]) == 4
    if nhwc:
        args = [a.transpose(0, 3, 1, 2) if i in slots and a is not None and a.ndim == 4 else a
                for i, a in enumerate(args)]
    result = spec.fn(ctx, *args)
    if not isinstance(result, tuple):
        result = (result,)
    if nhwc:
        result = tuple(np.ascontiguousarray(r.transpose(0, 2, 3, 1)) if isinstance(r, np.ndarray) and r.ndim == 4
                       else r for r in result)
    return [host(r) if isinstance(r, np.ndarray) else r for r in result]


RUNNERS = {"conv": run_conv, "fc": run_fc, "pool": run_pool, "bn": run_bn, "vector": run_vector,
           "softmax": run_softmax, "cpu": run_cpu}
