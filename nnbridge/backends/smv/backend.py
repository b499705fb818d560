"""The SMV backend: compile = lower + tile + cost; run = fp16 functional simulation."""

from __future__ import annotations

import dataclasses
import math
from collections.abc import Callable
from typing import Any

import numpy as np

from ...base.errors import ShapeError, Unsupported, UnsupportedOpError
from ...base.smaug_runtime import DEVIATIONS_KEY
from ...ir import DType, Graph, Node
from ...kernels import get_kernel
from ...reporting.report import Report
from ..base import CLEAN, FOLD, ChipSimulator, Executable, Setting
from .config import ALIASES, SmvConfig, config_settings
from .cost import LayerCost, cost_cpu_op, fastest_schedule
from .cost.cpu import cpu_op_ns
from .cost.layout import reorder_bytes
from .flatten import FlatGraph, FlatNode, flatten
from .functional import Simulator
from .layers import Layer, PoolLayer
from .lowering import FLOATS, LOWERERS, Step, lower
from .numerics import host
from .reporting import build_report
from .scratchpads import Scratchpads
from .tiling import TilingPlan, accumulation, batch_of, plan_layer, with_batch
from .tiling.pool import channel_group

#: progress(phase, done, total): a hook for progress bars on long models
Progress = Callable[[str, int, int], None]


def _cpu_refusal(fn: FlatNode) -> str | None:
    spec = get_kernel(fn.op, fn.domain)
    if spec is None:
        return "neither an SMV kernel nor a reference (CPU) kernel"
    return spec.unsupported_reason(fn.node)


def make_config(config: SmvConfig | str | None = None, **options: Any) -> SmvConfig:
    """A config from a base (object or TOML path) plus keyword settings; ``accels`` is ``num_accels``."""
    cfg = config if isinstance(config, SmvConfig) else (SmvConfig.from_toml(config) if config else SmvConfig())
    values = {ALIASES.get(k, k): v for k, v in options.items() if v is not None}
    settings = values.pop("set", None) or {}
    return cfg.with_overrides({**values, **settings})


class Planner:
    """SMAUG's tiling plans, computed once per distinct layer shape (ResNet repeats blocks), and
    each run the fastest way that keeps SMAUG's numbers, with its cost."""

    def __init__(self, cfg: SmvConfig):
        self.cfg = cfg
        self.plans: dict[Layer, TilingPlan] = {}
        self.chosen: dict[int, tuple[TilingPlan, LayerCost]] = {}

    def plan(self, layer: Layer) -> TilingPlan:
        key = dataclasses.replace(layer, name="")
        if key not in self.plans:  # the tiles do not depend on the accelerators (SMAUG's tile())
            self.plans[key] = plan_layer(key, self.cfg.max_tile_elems, self.cfg.alignment)
        return dataclasses.replace(self.plans[key], layer=layer)

    def schedule(self, plan: TilingPlan) -> tuple[TilingPlan, LayerCost]:
        """How ``plan``'s operator runs (``fastest_schedule`` over ``calls``), and its cost."""
        key = id(plan.invocations)  # shared by every plan of the same shape
        if key not in self.chosen:
            self.chosen[key] = fastest_schedule(self.calls(plan), self.cfg)
        chosen, cost = self.chosen[key]
        return dataclasses.replace(chosen, layer=plan.layer), dataclasses.replace(cost)

    def calls(self, plan: TilingPlan) -> list[tuple[TilingPlan, int]]:
        """SMAUG's plan of the whole operator, and for every sub-batch size dividing its batch the
        plan of a sub-batch issued once per sub-batch — when its numbers are SMAUG's: the same
        channel tiles accumulate each conv/FC output in the same order (``accumulation``)."""
        found = [(plan, 1)]
        batch = batch_of(plan.layer)
        if self.cfg.smaug_schedule or batch == 1:
            return found
        for size in range(1, batch):
            if batch % size:
                continue
            try:
                sub = self.plan(with_batch(plan.layer, size))
            except ShapeError:  # a sub-batch SMAUG's tiler cannot cut is no candidate
                continue
            if accumulation(sub) == accumulation(plan):
                found.append((sub, batch // size))
        return found


class SmvExecutable(Executable):
    def __init__(self, graph: Graph, flat: FlatGraph, steps: list[Step], cfg: SmvConfig, planner: Planner,
                 progress: Progress | None = None):
        super().__init__(graph, "smv")
        self.flat, self.steps, self.config = flat, steps, cfg
        self.progress = progress
        self._host_consts: dict[str, np.ndarray] | None = None
        chosen = [[planner.schedule(p) for p in step.plans] for step in steps]
        self.plans: list[list[TilingPlan]] = [[p for p, _ in step] for step in chosen]
        self.costs = self._cost([[c for _, c in step] for step in chosen])
        self.performance = build_report(graph.name, steps, self.plans, self.costs, cfg)
        self.report = self.performance

    # ------------------------------------------------------------------ timing
    def _bytes(self, name: str | None) -> int:
        if not name:
            return 0
        t = self.flat.types.get(name)
        if t is None or t.shape is None or not all(isinstance(d, int) for d in t.shape):
            return 0
        item = 2 if t.dtype is None or t.dtype in FLOATS else t.dtype.itemsize
        return math.prod(t.shape) * item

    def _cost(self, accelerated: list[list[LayerCost]]) -> list[LayerCost]:
        cfg = self.config
        reorders = reorder_bytes(self.steps, self.flat.types, self.flat.outputs, self._bytes)
        costs = []
        for i, (step, parts) in enumerate(zip(self.steps, accelerated)):
            extra = cpu_op_ns(2 * reorders[i], 0, cfg) if i in reorders else 0.0
            if step.on_accelerator:
                repeat = sum(self._bytes(step.outputs[0]) for _ in step.params.get("repeat", ()))
                if repeat:  # SMAUG materialises a broadcast with a CPU Repeat node
                    extra += cpu_op_ns(2 * repeat, 0, cfg)
                cost = parts[0]
                for more in parts[1:]:
                    for f in dataclasses.fields(LayerCost):
                        setattr(cost, f.name, getattr(cost, f.name) + getattr(more, f.name))
                cost.cpu_ns += extra
            else:
                moved = sum(self._bytes(n) for n in step.inputs) + sum(self._bytes(n) for n in step.outputs)
                cost = cost_cpu_op(moved, _cpu_macs(step, self.flat), cfg)
                cost.cpu_ns += extra
            costs.append(cost)
        return costs

    # ------------------------------------------------------------ functional
    def _run(self, feeds: dict[str, Any]) -> tuple[dict[str, np.ndarray], Report]:
        if self.config.perf_only:
            return {}, self.performance
        if self._host_consts is None:  # weights live in host memory as fp16, rounded once
            self._host_consts = {name: host(np.asarray(a)) for name, a in self.flat.consts.items()}
        consts = self._host_consts
        layouts = {name: t.layout for name, t in self.flat.types.items()}
        stale = any(s.deviation and s.family in ("softmax", "bn") for s in self.steps)
        sim = Simulator(consts, layouts, self.flat.consts, Scratchpads() if stale else None)
        env: dict[str, Any] = dict(consts)
        env.update({k: host(v) if isinstance(v, np.ndarray) else v for k, v in feeds.items()})
        self._simulate(sim, env)
        return self._outputs(env), self._noted(sim.notes)

    def _simulate(self, sim: Simulator, env: dict[str, Any]) -> None:
        """Every step on ``sim``, its outputs into ``env``; a value is dropped after its last use
        unless it is a graph output or a constant."""
        last_use = {}
        for i, step in enumerate(self.steps):
            captured = [v.name for v in step.fn.node.captured()]  # values an If/Loop body reads
            for name in [*step.inputs, *captured]:
                if name:
                    last_use[name] = i
        keep = set(self.flat.outputs) | set(self._host_consts or ())
        for i, step in enumerate(self.steps):
            args = [env[n] if n else None for n in step.inputs]
            for name, value in zip(step.outputs, sim.run(step, args, env)):
                if name:
                    env[name] = value
            for name in [*step.inputs, *(v.name for v in step.fn.node.captured())]:
                if name and last_use.get(name) == i and name not in keep:
                    env.pop(name, None)
            if self.progress:
                self.progress("simulating", i + 1, len(self.steps))

    def _noted(self, notes: dict[str, str]) -> Report:
        """The compiled report, or a copy with this run's notes added to its steps' deviations."""
        report = self.performance  # compiled with the static notes; this run's are added to a copy
        if not notes:
            return report
        report = dataclasses.replace(report, rows=[dict(row) for row in report.rows],
                                     totals=dict(report.totals), notes=list(report.notes))
        for row, step in zip(report.rows, self.steps):
            if step.name in notes:
                row["deviation"] = "; ".join(t for t in (step.deviation, notes[step.name]) if t)
        return report

    def _outputs(self, env: dict[str, Any]) -> dict[str, Any]:
        """The graph's outputs from ``env``, tensors in their declared dtypes."""
        outputs = {}
        for v in self.graph.outputs:
            value = env[v.name]
            if isinstance(value, np.ndarray) and v.type.dtype is not None and v.type.dtype is not DType.STRING:
                value = value.astype(v.type.dtype.numpy, copy=False)
            outputs[v.name] = value
        return outputs


def _cpu_macs(step: Step, flat: FlatGraph) -> int:
    """Multiply-accumulates of a CPU fallback op (matrix products and convolutions), else 0."""
    shapes = [flat.types[n].shape if n in flat.types else None for n in step.inputs[:2]]
    out = flat.types.get(step.outputs[0]) if step.outputs else None
    if out is None or out.shape is None or any(s is None for s in shapes) or not all(
            isinstance(d, int) for d in out.shape):
        return 0
    if step.fn.op in ("MatMul", "Gemm") and shapes[0]:
        inner = shapes[0][-1]
        return math.prod(out.shape) * inner if isinstance(inner, int) else 0
    if step.fn.op == "Conv" and shapes[1] and all(isinstance(d, int) for d in shapes[1]):
        return math.prod(out.shape) * math.prod(shapes[1][1:])
    return 0


def pool_channel_group(input_nhwc: tuple[int, int, int, int], kernel: list[int], stride: list[int],
                       kind: str) -> int:
    """Channels per SMV pooling operator for the SMAUG writer (tiling.pool.channel_group)."""
    return channel_group(PoolLayer(name="", input=tuple(input_nhwc), ph=kernel[0], pw=kernel[1], stride_h=stride[0],
                                   stride_w=stride[1], kind=kind))


def file_deviations(graph: Graph) -> dict[str, str]:
    lines = graph.metadata.get(DEVIATIONS_KEY, "")
    return dict(line.split("\t", 1) for line in lines.splitlines() if "\t" in line)


def tiling_refusals(graph: Graph, config: SmvConfig | str | None = None) -> list[Unsupported]:
    """The nodes of ``graph`` whose shapes SMAUG's SMV tiler cannot run (the SMAUG writer refuses them)."""
    planner = Planner(make_config(config))
    _, refused = lower(flatten(graph), lambda fn: None, planner.plan)
    return [Unsupported(fn.op, fn.name, reason, fn.domain) for fn, reason in refused]


class SmvBackend(ChipSimulator):
    name = "smv"
    description = "SMAUG's SMV accelerator: fp16 functional simulation + tiling-level performance model"
    precision = DType.FLOAT16  # host memory and scratchpads hold fp16 (spec §4)

    def unsupported_reason(self, node: Node) -> str | None:
        if node.domain == "" and node.op in LOWERERS:
            return None
        return _cpu_refusal(FlatNode(node, [], []))

    #: SMV folds constants at every level (its weights must be constants to be stored in SMV
    #: layouts), keeps BatchNormalization (SMAUG's only bias carrier, specs §4) and does no
    #: generic fusion (SMAUG fuses activations itself); constants are folded again after the
    #: NHWC rewrite so weight transposes become stored weights
    pipelines = {
        0: [*FOLD, "layout-nhwc", *CLEAN],
        1: [*FOLD, "layout-nhwc", "cancel-transposes", *CLEAN],
        2: [*FOLD, "layout-nhwc", "cancel-transposes", *FOLD],
        3: [*FOLD, "layout-nhwc", "cancel-transposes", *FOLD],
    }

    settings = {
        **config_settings(),
        "config": Setting("config", object, None, "an SmvConfig, or a TOML file of settings", cli=False),
        "progress": Setting("progress", object, None, "called (phase, done, total) while compiling", cli=False),
        "set": Setting("set", object, None, "settings by name as text, as in a TOML file", cli=False),
    }

    def compile(self, graph: Graph, config: SmvConfig | str | None = None,
                progress: Progress | None = None, **options: Any) -> SmvExecutable:
        """``options``: any ``SmvConfig`` field (``accels``, ``mem_policy``, ``perf_only``, …) or ``set={...}``."""
        cfg = make_config(config, **self.options(options))
        flat = flatten(graph)
        planner = Planner(cfg)
        steps, refused = lower(flat, _cpu_refusal, planner.plan, file_deviations(graph))
        if refused:
            raise UnsupportedOpError("the smv backend",
                                     [Unsupported(fn.op, fn.name, reason, fn.domain) for fn, reason in refused])
        return SmvExecutable(graph, flat, steps, cfg, planner, progress)

    def supported_ops(self) -> set[str]:
        return set(LOWERERS)


BACKEND = SmvBackend()
