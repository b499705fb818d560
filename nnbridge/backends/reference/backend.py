"""The reference backend: numpy kernels, the correctness baseline and CPU fallback."""

from __future__ import annotations

import functools
from collections.abc import Callable
from typing import Any

import numpy as np

from ...base.errors import NNBridgeError, UnsupportedOpError
from ...ir import Graph, Node
from ...kernels import Plan, get_kernel, kernel_op_names, unsupported_nodes
from ...kernels.allocator import keep_freed_memory
from ...passes.pin_shapes import dynamic_inputs, pin_shapes
from ...reporting.report import Report
from ..base import CLEAN, FOLD, SCALE, Backend, Executable, Setting

#: exporters' decomposed activations and norms back into single ops (one kernel call for five or six)
RECOGNIZE = ["recognize-activations", "recognize-norms"]
#: a dynamic model's input shapes seen this many times get a plan of their own (one seen once, as a
#: generating LLM's growing context is, runs the general plan: pinning costs milliseconds)
SPECIALIZE_AFTER = 2
#: shape-specialised plans kept per executable, and input shapes counted before the count restarts
MAX_SPECIALIZED, MAX_COUNTED = 4, 64


def _rows(plan: Plan) -> list[dict[str, str]]:
    """The rows of an unprofiled run: the nodes the plan runs, named (each run's report gets a copy)."""
    return [{"name": step.ctx.node.name, "op": step.ctx.node.op} for step in plan.steps]


def _unprofiled_report(model: str, rows: list[dict[str, str]]) -> Report:
    """An unprofiled run's report: a row per node run (times only when compiled with profile=True)."""
    return Report("reference", model, [dict(row) for row in rows], notes=["per-node times: compile with profile=True"])


class ReferenceExecutable(Executable):
    """Runs the compiled graph's plan. A model with dynamic input shapes (symbolic or unknown dims)
    also gets, for input shapes it keeps being given, a plan of the graph pinned to them
    (``pin_shapes``): its shape arithmetic folds to constants and every value is static, so the
    kernels' prepared callables apply (BERT's dynamic fixture: 96 steps, 50 pinned). Plans are
    built whole, then published by one dictionary store: runs from other threads see a plan
    complete or not at all."""

    def __init__(self, graph: Graph, profile: bool = False):
        super().__init__(graph, "reference")
        self.plan = Plan(graph, align_weights=True)
        self.profile = profile
        self._rows = _rows(self.plan)
        self._dynamic = [v.name for v in dynamic_inputs(graph)]
        self._pinned: dict[tuple, tuple[Plan, list[dict[str, str]]] | None] = {}  # None: runs the general plan
        self._seen: dict[tuple, int] = {}

    def plan_for(self, feeds: dict[str, Any]) -> tuple[Plan, list[dict[str, str]]]:
        """The plan for these inputs' shapes (and its rows): pinned to them once they recur."""
        if not self._dynamic:
            return self.plan, self._rows
        key = tuple(np.shape(feeds[name]) for name in self._dynamic)
        found = self._pinned.get(key, False)
        if found is not False:
            return found or (self.plan, self._rows)
        seen = self._seen.get(key, 0) + 1
        if len(self._seen) >= MAX_COUNTED:
            self._seen = {}
        self._seen[key] = seen
        if seen < SPECIALIZE_AFTER or len(self._pinned) >= MAX_SPECIALIZED:
            return self.plan, self._rows
        pinned = self._pin(dict(zip(self._dynamic, key)))
        self._pinned[key] = pinned
        return pinned or (self.plan, self._rows)

    def _pin(self, shapes: dict[str, tuple]) -> tuple[Plan, list[dict[str, str]]] | None:
        """A plan of the graph pinned to ``shapes``, or None when they cannot be pinned (a zero or
        an unknown-rank dim): the general plan then runs them, as it runs any shape."""
        graph = self.graph.copy()
        try:
            pin_shapes(graph, shapes)
        except NNBridgeError:
            return None
        if [v.name for v in graph.outputs] != self.output_names:
            return None
        aligned = self.plan.weights  # the general plan's aligned copies, not a second one
        graph.initializers.update({k: aligned[k] for k, v in graph.initializers.items()
                                   if k in aligned and v is self.graph.initializers.get(k)})
        plan = Plan(graph, align_weights=True)
        return plan, _rows(plan)

    def _run(self, feeds: dict[str, Any]) -> tuple[dict[str, np.ndarray], Report | Callable[[], Report]]:
        timings: list[tuple[Node, float]] | None = [] if self.profile else None  # this run's own
        plan, rows = self.plan_for(feeds)
        values = plan.execute(feeds, timings=timings)
        outputs = {v.name: out for v, out in zip(self.graph.outputs, values)}
        if not self.profile:  # one row per node run, made when the report is read
            return outputs, functools.partial(_unprofiled_report, self.graph.name, rows)
        report = Report("reference", self.graph.name)
        total = 0.0
        for node, seconds in timings or ():
            report.add_row(name=node.name, op=node.op, time_ms=seconds * 1e3)
            total += seconds
        if timings:
            report.totals["time_ms"] = total * 1e3
        return outputs, report


class ReferenceBackend(Backend):
    name = "reference"
    description = "numpy kernels (fp32/fp64/ints/bool); the correctness baseline"

    def unsupported_reason(self, node: Node) -> str | None:
        spec = get_kernel(node.op, node.domain)
        if spec is None:
            return "no reference kernel"
        return spec.unsupported_reason(node)

    #: numpy runs a fused body op by op, so fusion here serves kernel counting and inspection,
    #: not speed: it starts at level 2 and level 1 keeps per-node profiles. From level 1 the
    #: exporters' decomposed GELU, SiLU and RMSNorm chains become single ops again (one pass over
    #: the tensor instead of five) and constants are folded, so weights a model computes from
    #: constants (onnx's light models fill theirs with ConstantOfShape) are computed once, and
    #: repeated nodes are merged (``cse``: a dynamic export's shape arithmetic, once per Reshape).
    pipelines = {
        0: ["simplify", "layout-nchw", "cancel-transposes", *CLEAN],
        1: [*FOLD, "cse", "simplify", *RECOGNIZE, "layout-nchw", "cancel-transposes", *CLEAN, "plan-memory"],
        2: [*FOLD, "cse", "simplify", *RECOGNIZE, "layout-nchw", "cancel-transposes", *CLEAN, "fuse", "plan-memory"],
        3: [*FOLD, "cse", "simplify", *RECOGNIZE, *SCALE, "layout-nchw", "cancel-transposes", *CLEAN, "fuse",
            "plan-memory"],
    }

    settings = {"profile": Setting("profile", bool, False, "time every node of each run (run --profile)")}

    def compile(self, graph: Graph, profile: bool = False, **options: Any) -> ReferenceExecutable:
        profile = self.options({"profile": profile, **options})["profile"]
        bad = unsupported_nodes(graph)
        if bad:
            raise UnsupportedOpError("the reference backend", bad)
        keep_freed_memory()
        return ReferenceExecutable(graph, profile=profile)

    def supported_ops(self) -> set[str]:
        return kernel_op_names()


BACKEND = ReferenceBackend()
