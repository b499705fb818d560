"""The reference backend: numpy kernels, the correctness baseline and CPU fallback."""

from __future__ import annotations

from typing import Any

import numpy as np

from ...base.errors import UnsupportedOpError
from ...ir import Graph, Node
from ...kernels import Plan, get_kernel, kernel_op_names, unsupported_nodes
from ...kernels.allocator import keep_freed_memory
from ...reporting.report import Report
from ..base import CLEAN, FOLD, SCALE, Backend, Executable, Setting


class ReferenceExecutable(Executable):
    def __init__(self, graph: Graph, profile: bool = False):
        super().__init__(graph, "reference")
        self.plan = Plan(graph, align_weights=True)
        self.profile = profile
        # the rows of an unprofiled run name the nodes only: made once, each run's report gets a copy
        self._rows = [{"name": step.ctx.node.name, "op": step.ctx.node.op} for step in self.plan.steps]

    def _run(self, feeds: dict[str, Any]) -> tuple[dict[str, np.ndarray], Report]:
        timings: list[tuple[Node, float]] | None = [] if self.profile else None  # this run's own
        values = self.plan.execute(feeds, timings=timings)
        outputs = {v.name: out for v, out in zip(self.graph.outputs, values)}
        report = Report("reference", self.graph.name)
        if not self.profile:  # one row per node run; times only when compiled with profile=True
            report.rows = [dict(row) for row in self._rows]
            report.notes.append("per-node times: compile with profile=True")
            return outputs, report
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
    #: exporters' decomposed GELU and SiLU chains become single ops again (one pass over the
    #: tensor instead of five) and constants are folded, so weights a model computes from
    #: constants (onnx's light models fill theirs with ConstantOfShape) are computed once, and
    #: repeated nodes are merged (``cse``: a dynamic export's shape arithmetic, once per Reshape).
    pipelines = {
        0: ["simplify", "layout-nchw", "cancel-transposes", *CLEAN],
        1: [*FOLD, "cse", "simplify", "recognize-activations", "layout-nchw", "cancel-transposes", *CLEAN,
            "plan-memory"],
        2: [*FOLD, "cse", "simplify", "recognize-activations", "layout-nchw", "cancel-transposes", *CLEAN, "fuse",
            "plan-memory"],
        3: [*FOLD, "cse", "simplify", "recognize-activations", *SCALE, "layout-nchw", "cancel-transposes", *CLEAN,
            "fuse", "plan-memory"],
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
