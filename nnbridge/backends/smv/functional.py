"""Functional simulation of SMV steps with SMAUG's numerics (spec §2, §4, §9).

Tensors are fp16 in host memory; a kernel widens its tiles to fp32, computes in fp32
in the order of SMAUG's kernels (``arithmetic``: a conv/FC output stays in the fp32
output scratchpad across all channel tiles), applies the fused activation and stores
fp16 once, so results are bit-identical to the real SMV runtime's. CPU steps run the
reference backend's kernels on the fp16 values. For SMAUG files holding forms the
runtime computes differently (``Step.deviation``, see ``scratchpads``), the simulator
reproduces the runtime: row tails from the scratchpads, SMAUG's padded-row copies, and
NaN for values nothing defines (memory never written).

A step's ``plans`` are the schedule the compiler chose (``Planner.calls``): an operator run as
sub-batch calls accumulates each conv/FC output over the channel tiles of SMAUG's plan of that
sub-batch, so its numbers are what SMAUG computes running the sub-batches. (A graph some step of
which reads scratchpad leftovers runs whole batches, as SMAUG does: ``Step.reads_leftovers``.)
"""

from __future__ import annotations

from collections.abc import Callable

import numpy as np
from numpy.lib.stride_tricks import sliding_window_view

from ...ir import Layout, op_traits
from ...kernels import KernelContext, get_kernel
from . import arithmetic
from .lowering import Step
from .numerics import BINARY, activation, avg_pool, batch_norm, fp16, host, max_pool, softmax, store
from .scratchpads import Scratchpads, concat_rows, last_tile, padded, raw_reshape, repeat_rows, storage

Arrays = list[np.ndarray | None]


class Simulator:
    """Runs steps; ``consts`` are the graph's fp16-rounded initializers (for Clip bounds), ``raw``
    the initializers themselves (a batch norm's variance, stored by SMAUG as var′). ``spads``
    tracks the scratchpads when some step reads what an earlier kernel left there."""

    def __init__(self, consts: dict[str, np.ndarray], layouts: dict[str, Layout],
                 raw: dict[str, np.ndarray] | None = None, spads: Scratchpads | None = None):
        self.consts = consts
        self.raw = raw or {}  # the initializers as the graph holds them (before fp16 rounding)
        self.notes: dict[str, str] = {}  # step name → how this run's numbers left ONNX semantics
        self.layouts = layouts
        self.spads = spads

    def nhwc(self, name: str | None) -> bool:
        return name is not None and self.layouts.get(name) is Layout.NHWC

    def run(self, step: Step, args: Arrays, env) -> Arrays:
        return RUNNERS[step.family](self, step, args, env)

    def act(self, step: Step) -> Callable[[np.ndarray], np.ndarray] | None:
        fn = step.params.get("act")
        return None if fn is None else activation(fn, self.consts)

    def remember(self, loads: list[tuple[int, np.ndarray]], result_pad: int, result: np.ndarray) -> None:
        if self.spads is not None:
            self.spads.kernel(loads, result_pad, result)


def _activate(y: np.ndarray, act) -> np.ndarray:
    return act(y) if act is not None else y


def _undefined(step: Step, out: np.ndarray) -> np.ndarray:
    """A result the runtime computes from memory nothing wrote (see Step.deviation): NaN."""
    return np.full_like(out, np.nan) if step.params.get("undefined") else out


def _bias_kernel(sim: Simulator, y16: np.ndarray, bias: np.ndarray, axis: int, act) -> np.ndarray:
    """SMAUG's bias carrier: a batch norm with mean 0, var′ 1, gamma 1, beta = bias (fp32 result)."""
    shape = [1] * y16.ndim
    shape[axis] = -1
    res = _activate(y16 + bias.reshape(shape).astype(np.float32), act)
    if sim.spads is not None:
        c = bias.size
        weights = np.stack([np.zeros(c), np.ones(c), np.ones(c), bias.reshape(-1)]).astype(np.float32)
        sim.remember([(0, storage(y16)), (1, storage(weights))], 2, storage(res))
    return res


def run_conv(sim: Simulator, step: Step, args: Arrays, env) -> Arrays:
    x, w = args[0], args[1]
    layer = step.layers[0]
    if not sim.nhwc(step.inputs[0]):
        x = x.transpose(0, 2, 3, 1)
    if not sim.nhwc(step.inputs[1]):
        w = w.transpose(0, 2, 3, 1)
    top, bottom, left, right = step.params["pad"] or layer.pads  # halo pads are virtual zeros
    xp = np.pad(np.asarray(x, dtype=np.float32), ((0, 0), (top, bottom), (left, right), (0, 0)))
    _, ho, wo, _ = layer.output
    plan = step.plans[0]
    acc = arithmetic.conv(xp, np.asarray(w, dtype=np.float32), (ho, wo), (layer.stride_h, layer.stride_w),
                          plan.tiled["weights"].sizes[3])  # channel tiles accumulate in order
    bias = step.params["bias"]
    res = _activate(acc, sim.act(step) if bias is None else None)
    if sim.spads is not None:
        sim.remember([(0, last_tile(np.asarray(xp if step.params["pad"] else x), plan.tiled["input"])),
                      (1, last_tile(np.asarray(w), plan.tiled["weights"]))], 2, last_tile(res, plan.tiled["output"]))
    if bias is not None:
        res = _bias_kernel(sim, store(res), args[2], 3, sim.act(step))
    out = _undefined(step, store(res))
    if not sim.nhwc(step.outputs[0]):
        out = out.transpose(0, 3, 1, 2)
    return [np.ascontiguousarray(out)]


def run_fc(sim: Simulator, step: Step, args: Arrays, env) -> Arrays:
    a, b = args[0], args[1]
    layer = step.layers[0]
    x = a.reshape(layer.batch, layer.inputs).astype(np.float32, copy=False)
    w = np.ascontiguousarray(b if step.params["trans_b"] else b.T, dtype=np.float32)
    plan = step.plans[0]
    acc = arithmetic.matmul(x, w, plan.tiled["weights"].sizes[1])
    bias = step.params["bias"]
    res = _activate(acc, sim.act(step) if bias is None else None)
    if sim.spads is not None:
        rows = plan.tiled["input"]
        last_rows = slice(rows.starts[0][-1], rows.starts[0][-1] + rows.sizes[0][-1])
        sim.remember([(0, last_tile(x, rows)), (1, last_tile(w, plan.tiled["weights"]))], 2, storage(res[last_rows]))
    if bias is not None:
        res = _bias_kernel(sim, store(res), args[2].reshape(-1), 1, sim.act(step))
    out = _undefined(step, store(res))
    return [out.reshape(tuple(a.shape[:-1]) + (layer.neurons,))]


def run_pool(sim: Simulator, step: Step, args: Arrays, env) -> Arrays:
    layer = step.layers[0]
    x = args[0] if sim.nhwc(step.inputs[0]) else args[0].transpose(0, 2, 3, 1)
    if step.params.get("pad"):  # ONNX pads: -inf for max (the export pads only non-negative inputs with 0)
        top, bottom, left, right = step.params["pad"]
        fill = -np.inf if layer.kind == "max" else 0.0
        x = np.pad(x, ((0, 0), (top, bottom), (left, right), (0, 0)), constant_values=fill)
    win = sliding_window_view(x, (layer.ph, layer.pw), axis=(1, 2))[:, ::layer.stride_h, ::layer.stride_w]
    res = max_pool(win) if layer.kind == "max" else avg_pool(win)
    if sim.spads is not None and len(step.plans) == 1:
        plan = step.plans[0]
        sim.remember([(0, last_tile(x, plan.tiled["input"]))], 1, last_tile(res, plan.tiled["output"]))
    y = store(res)
    return [y if sim.nhwc(step.outputs[0]) else np.ascontiguousarray(y.transpose(0, 3, 1, 2))]


def run_bn(sim: Simulator, step: Step, args: Arrays, env) -> Arrays:
    x, gamma, beta, mean = args[:4]
    var = sim.raw.get(step.inputs[4], args[4])  # SMAUG stores var′ = 1/sqrt(var+ε), rounded once to fp16
    eps = float(step.fn.node.attr("epsilon", 1e-5))
    inv_std = fp16(1.0 / np.sqrt(np.asarray(var, np.float64) + eps))
    axis = 1 if x.ndim == 2 or not sim.nhwc(step.inputs[0]) else 3
    shape = [1] * x.ndim
    shape[axis] = -1
    y = batch_norm(x, *(a.reshape(shape) for a in (mean, inv_std, gamma, beta))).astype(np.float32)
    weights = storage(np.stack([a.reshape(-1) for a in (mean, inv_std, gamma, beta)]))
    if x.ndim == 2 and step.deviation and sim.spads is not None:  # SMAUG's post-FC kernel (scratchpads)
        res = post_fc_rows(sim.spads.region(2, x.size // x.shape[1] * padded(x.shape[1])), y)
        res = _activate(res, sim.act(step))
        sim.remember([(0, storage(x)), (1, weights)], 2, res)
        return [store(res.reshape(x.shape[0], -1)[:, :x.shape[1]])]
    res = _activate(y, sim.act(step))
    if sim.spads is not None:
        sim.remember([(0, storage(x)), (1, weights)], 2, storage(res))
    return [store(res)]


def post_fc_rows(stale: np.ndarray, y: np.ndarray) -> np.ndarray:
    """The post-FC batch-norm kernel's result region: row 0's whole vectors computed, the rest of
    it (row 0's tail, every later row) as the scratchpad held it."""
    width = padded(y.shape[1])
    res = stale.copy()
    done = y.shape[1] // 8 * 8
    res[:done] = y[0, :done]
    return res.reshape(-1)[:y.shape[0] * width]


def run_vector(sim: Simulator, step: Step, args: Arrays, env) -> Arrays:
    flat = step.plans[0].tiled["input"] if step.plans else None

    def tile(a: np.ndarray) -> np.ndarray:  # the last flat tile of the padded storage
        return last_tile(storage(a).reshape(1, -1), flat) if flat is not None else storage(a)

    if step.params.get("unary"):
        res = activation(step.fn, sim.consts)(args[0])
        sim.remember([(0, tile(args[0]))], 1, tile(res))
        return [store(res)]
    y = BINARY[step.fn.op](args[0], args[1])
    if y.dtype == bool:
        return [y]
    sim.remember([(0, tile(args[0])), (1, tile(np.broadcast_to(args[1], y.shape)))], 2, tile(y))
    return [store(y)]


#: exp() of a float above this overflows the float the kernel stores it in
EXP_LIMIT = np.float32(np.log(np.finfo(np.float32).max))


def run_softmax(sim: Simulator, step: Step, args: Arrays, env) -> Arrays:
    x = args[0].astype(np.float32)
    if np.any(x > EXP_LIMIT):
        sim.notes[step.name] = (f"SMV's softmax does not subtract the row maximum: exp of a value above "
                                f"{EXP_LIMIT:.2f} overflows and its row becomes NaN")
    rows, width = int(np.prod(x.shape[:-1])), x.shape[-1]
    done = width // 8 * 8
    if step.deviation and sim.spads is not None:  # whole vectors only; the tail is the scratchpad's
        res = sim.spads.region(1, rows * padded(width)).reshape(rows, padded(width))
        res[:, :done] = softmax(x.reshape(rows, width)[:, :done])
        sim.remember([(0, storage(x))], 1, res)
        return [store(res[:, :width].reshape(x.shape))]
    res = softmax(x)
    sim.remember([(0, storage(x))], 1, storage(res))
    return [store(res)]


def run_cpu(sim: Simulator, step: Step, args: Arrays, env) -> Arrays:
    """A reference kernel on the host. Reference spatial kernels compute NCHW, so an NHWC
    operand is reordered for them and the result reordered back (SMAUG's CPU Reorders).
    SMAUG files' padded-row copies and undefined results are reproduced (Step.deviation)."""
    if step.deviation:
        if step.fn.op == "Concat":
            return [concat_rows([np.asarray(a) for a in args])]
        if step.fn.op == "Reshape":
            return [raw_reshape(np.asarray(args[0]), tuple(int(d) for d in args[1]))]
        if step.fn.op == "Tile" and args[0].ndim and all(int(r) == 1 for r in args[1][:-1]):
            return [repeat_rows(np.asarray(args[0]), int(args[1][-1]))]
    spec = get_kernel(step.fn.op, step.fn.domain)
    ctx = KernelContext(step.fn.node, env)  # this run's: it sees this run's values
    slots = op_traits(step.fn.op, step.fn.domain).spatial_slots
    nhwc = bool(slots) and sim.nhwc(step.inputs[0]) and args[0] is not None and np.ndim(args[0]) == 4
    if nhwc:
        args = [a.transpose(0, 3, 1, 2) if i in slots and a is not None and a.ndim == 4 else a
                for i, a in enumerate(args)]
    result = spec.fn(ctx, *args, **spec.bind(step.fn.node))
    if not isinstance(result, tuple):
        result = (result,)
    if nhwc:
        result = tuple(np.ascontiguousarray(r.transpose(0, 2, 3, 1)) if isinstance(r, np.ndarray) and r.ndim == 4
                       else r for r in result)
    return [_undefined(step, host(r)) if isinstance(r, np.ndarray) else r for r in result]


RUNNERS = {"conv": run_conv, "fc": run_fc, "pool": run_pool, "bn": run_bn, "vector": run_vector,
           "softmax": run_softmax, "cpu": run_cpu}
