"""Chrome traces (the JSON that Perfetto and chrome://tracing open) of the simulators' timelines.

SMV: the layers run one after another (spec §8.1's composition: a layer's latency is its CPU
time — tiling copies and host operators — then its data transfer, then its compute), so each
layer is a slice on the host track followed by slices on every accelerator's track. RDU: the
sections run one after another (reconfiguration, weight loads, the pipelined batch, spills);
inside a section every stage is a track of its own, busy for the batch at its own speed from
when the first token reaches it (the pipeline's fill along the heaviest chain before it).
"""

from __future__ import annotations

import json
import os
from collections.abc import Mapping, Sequence
from typing import Any

from ..base.fileio import atomic_write


def _slice(name: str, cat: str, start: float, dur: float, pid: int, tid: int, args: Mapping | None = None) -> dict:
    return {"name": name, "cat": cat, "ph": "X", "ts": start, "dur": dur, "pid": pid, "tid": tid,
            "args": dict(args or {})}


def _names(pid: int, process: str, threads: Mapping[int, str]) -> list[dict]:
    events = [{"name": "process_name", "ph": "M", "pid": pid, "tid": 0, "args": {"name": process}}]
    events += [{"name": "thread_name", "ph": "M", "pid": pid, "tid": t, "args": {"name": n}}
               for t, n in threads.items()]
    events += [{"name": "thread_sort_index", "ph": "M", "pid": pid, "tid": t, "args": {"sort_index": t}}
               for t in threads]
    return events


def smv_trace(rows: Sequence[Mapping[str, Any]], accels: int, model: str) -> dict:
    """One slice per layer phase: host CPU (tiling copies, CPU operators), then on each accelerator
    the layer used (its row's ``accels``) the transfer and the compute of the layer's invocations."""
    events = _names(1, f"SMV: {model}", {0: "host CPU", **{1 + a: f"accelerator {a}" for a in range(accels)}})
    clock = 0.0
    for row in rows:
        cpu, transfer, compute = (float(row.get(k) or 0.0) for k in ("cpu_us", "transfer_us", "compute_us"))
        args = {k: row[k] for k in ("op", "where", "invocations", "tiles", "note") if row.get(k) not in (None, "")}
        if cpu:
            events.append(_slice(f"{row['name']} (cpu)", "cpu", clock, cpu, 1, 0, args))
        for a in range(int(row.get("accels") or accels) if row.get("where") == "accel" else 0):
            if transfer:
                events.append(_slice(f"{row['name']} (transfer)", "transfer", clock + cpu, transfer, 1, 1 + a, args))
            if compute:
                events.append(_slice(f"{row['name']} (compute)", "compute", clock + cpu + transfer, compute, 1, 1 + a,
                                     args))
        clock += float(row.get("latency_us") or cpu + transfer + compute)
    return {"traceEvents": events, "displayTimeUnit": "ms", "otherData": {"model": model, "total_us": clock}}


def rdu_trace(estimate: Mapping[str, Any], model: str) -> dict:
    """Sections on one track (reconfiguration, weight loads, pipeline, spills), each stage of a
    section on a track of its own while the section runs; ``estimate`` is ``Estimate.to_dict()``."""
    stages_by_section: dict[int, list[Mapping]] = {}
    for stage in estimate["stages"]:
        stages_by_section.setdefault(stage["section"], []).append(stage)
    depth = max((len(s) for s in stages_by_section.values()), default=0)
    events = _names(1, f"RDU: {model} ({estimate['machine']}, batch {estimate['batch_size']})",
                    {0: "sections", **{1 + k: f"stage {k}" for k in range(depth)}})
    tokens = max(1, estimate["batch_size"] // max(1, estimate["micro_batch"]))
    clock = 0.0
    for section in estimate["sections"]:
        index = section["index"]
        for phase in ("reconfig_us", "weight_load_us", "pipeline_us", "spill_us"):
            dur = float(section[phase])
            if dur <= 0:
                continue
            name = f"section {index}: {phase[:-3].replace('_', ' ')}"
            events.append(_slice(name, phase[:-3], clock, dur, 1, 0, {"bottleneck": section["bottleneck"]}))
            if phase == "pipeline_us":
                for k, stage in enumerate(stages_by_section.get(index, [])):
                    busy = min(dur - stage["start_us"], tokens * float(stage["stage_us"]))
                    if busy > 0:
                        events.append(_slice(stage["kernel"], stage["bottleneck"], clock + stage["start_us"],
                                             busy, 1, 1 + k, {"anchor": stage["anchor"], "pcus": stage["pcus"],
                                                              "bound": stage["bottleneck"]}))
            clock += dur
    return {"traceEvents": events, "displayTimeUnit": "ms", "otherData": {"model": model, "total_us": clock}}


def write_trace(trace: Mapping[str, Any], path: str | os.PathLike) -> None:
    with atomic_write(path, "w") as fh:
        json.dump(trace, fh)
