"""The reference backend: numpy kernels, the correctness baseline and CPU fallback."""

from __future__ import annotations

from typing import Any

import numpy as np

from ...errors import UnsupportedOpError
from ...ir import Graph, Node
from ...report import Report
from ..base import Backend, Executable
from .executor import Plan, unsupported_nodes
from .registry import get_kernel, registered_ops


class ReferenceExecutable(Executable):
    def __init__(self, graph: Graph, profile: bool = False):
        super().__init__(graph, "reference")
        self.plan = Plan(graph, profile=profile)

    def _run(self, feeds: dict[str, Any]) -> tuple[dict[str, np.ndarray], Report]:
        self.plan.timings.clear()
        values = self.plan.execute(feeds)
        outputs = {v.name: out for v, out in zip(self.graph.outputs, values)}
        report = Report("reference", self.graph.name)
        total = 0.0
        for node, seconds in self.plan.timings:
            report.add_row(name=node.name, op=node.op, time_ms=seconds * 1e3)
            total += seconds
        if self.plan.timings:
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

    def pipeline(self, opt_level: int = 1) -> list[str]:
        from ...passes.pipelines import pipeline_for

        return pipeline_for("reference", opt_level)

    def compile(self, graph: Graph, profile: bool = False, **config: Any) -> ReferenceExecutable:
        bad = unsupported_nodes(graph)
        if bad:
            raise UnsupportedOpError("the reference backend", bad)
        return ReferenceExecutable(graph, profile=profile)

    def supported_ops(self) -> set[str]:
        return {op if not domain else f"{domain}.{op}" for (domain, op) in registered_ops()}


BACKEND = ReferenceBackend()
