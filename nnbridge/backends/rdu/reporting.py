"""What an RDU estimate says in roll-ups (batch latency by what bounds it, by op) and as
``measure-performance --html``'s page; shared by that command and ``port``."""

from __future__ import annotations

import os
from collections.abc import Callable
from typing import Any

from .pipeline_model import Estimate

#: a section's time besides its pipelined batch, by cause
OVERHEADS = {"reconfig_us": "reconfiguration", "weight_load_us": "weight loads", "spill_us": "spills and fills"}
#: the by_cause group of the time spent in stages bound by their PCUs' arithmetic
COMPUTE_BOUND = "stage bound: compute"


def by_cause(estimate: dict) -> list[tuple[str, int, float]]:
    """Batch latency by cause: each section's pipelined time goes to the bound of its slowest
    stage (compute, on-chip memory, network, off-chip); its other time to reconfiguration,
    weight loads and spills. The groups sum to the batch latency."""
    return _group(estimate, lambda s: f"stage bound: {_bound(s['bottleneck'])}")


def by_op(estimate: dict) -> list[tuple[str, int, float]]:
    """Batch latency by the anchor op of each section's slowest stage (overheads as in by_cause)."""
    anchors = {(st["section"], st["kernel"]): st["anchor"] for st in estimate["stages"]}

    def op(section: dict) -> str:
        kernel = section["bottleneck"].split(" (")[0]
        return anchors.get((section["index"], kernel)) or kernel

    return _group(estimate, op)


def _bound(bottleneck: str) -> str:
    return bottleneck.rsplit("(", 1)[-1].rstrip(")") if "(" in bottleneck else bottleneck or "?"


def _group(estimate: dict, key: Callable[[dict], str]) -> list[tuple[str, int, float]]:
    sums: dict[str, list] = {}
    for section in estimate["sections"]:
        parts = {key(section): section["pipeline_us"], **{name: section[k] for k, name in OVERHEADS.items()}}
        for name, value in parts.items():
            if value > 0:
                entry = sums.setdefault(name, [0, 0.0])
                entry[0] += 1
                entry[1] += value
    return sorted(((k, n, v) for k, (n, v) in sums.items()), key=lambda item: -item[2])


def write_html(path: str | os.PathLike, exe: Any, est: Estimate, baseline: Any = None) -> None:
    """``measure-performance --html``'s page: totals, the sections plot, roll-ups, the graph coloured
    by its stages' time and every stage in a sortable table (beside ``baseline``'s, a
    ``reporting.baseline`` comparison, when given)."""
    from ...reporting.html_report import write_html_report

    data = est.to_dict()
    stages = exe.section_report(est, stages=True)
    ops = {(s.index, k.name): k.ops for s in exe.sections for k in s.kernels}
    times = {op: st["stage_us"] for st in data["stages"] for op in ops.get((st["section"], st["kernel"]), [])}
    rollups = {"by_cause": by_cause(data), "by_op": by_op(data)}
    write_html_report(path, stages, ["stage_us"], "stage_us", rollups, exe.graph, times, note="bottleneck",
                      baseline=baseline)
