"""The cost column: SMV's latency breakdown (``simulate --perf-only``) and the RDU's throughput at
batch 1 and where the chip is compute-bound (``compile`` + ``measure-performance``)."""

from __future__ import annotations

from typing import Any

from ..api.compiler import compile as compile_model
from ..backends.rdu.reporting import COMPUTE_BOUND, by_cause
from ..ir import Graph
from .report import RduCost, RduThroughput, SmvCost

#: the batches tried for a compute-bound one (powers of two), on the batch-1 placement
MAX_SEARCH_BATCH = 1024


def smv_cost(graph: Graph, priced: str) -> tuple[SmvCost, Any]:
    """SMAUG's breakdown of ``graph`` on one SMV accelerator (timing only, no values) and its executable."""
    exe = compile_model(graph, backend="smv", perf_only=True)
    t = exe.report.totals
    cpu = sum(1 for row in exe.report.rows if row.get("where") == "cpu")
    return SmvCost(priced=priced, latency_ms=t["latency_ms"], compute_pct=t["compute_pct"],
                   transfer_pct=t["transfer_pct"], cpu_pct=t["cpu_pct"], cpu_layers=cpu), exe


def rdu_cost(graph: Graph, batch1: Any, progress: Any = None) -> tuple[RduCost, Any, Any]:
    """Throughput of ``batch1`` (the program compiled for batch 1) and of a program compiled for the
    smallest batch whose time goes mostly to compute-bound stages; that batch is found on
    ``batch1``'s placement (an analytical estimate per batch, no compile), then compiled for, as
    ``measure-performance MODEL --batch-size B`` does (when no batch up to ``MAX_SEARCH_BATCH`` is, the
    largest is estimated on ``batch1``, as ``measure-performance FILE.pef --batch-size B`` does).
    Returns the cost, the program it priced and its estimate."""
    first = _throughput(batch1.estimate, batch1)
    batch, bound = 1, first.bound == COMPUTE_BOUND
    while not bound and batch < MAX_SEARCH_BATCH:
        batch *= 2
        bound = _throughput(batch1.measure_performance(batch)).bound == COMPUTE_BOUND
    busy_exe, est = batch1, batch1.estimate
    if bound and batch > 1:
        if progress:
            progress(f"compiling for batch {batch}")
        busy_exe = compile_model(graph.copy(), backend="rdu", batch_size=batch)
        est = busy_exe.estimate
    elif batch > 1:  # none found: the largest batch tried, on the batch-1 program (no compile that large)
        est = batch1.measure_performance(batch)
    busy = _throughput(est, batch1 if busy_exe is batch1 else None)
    t = est.totals
    return RduCost(batch1=first, busy=busy, compute_bound=busy.bound == COMPUTE_BOUND, sections=t["sections"],
                   machine=est.machine, on_chip_bytes=t["memory_bytes"],
                   weights_by_tier=dict(t.get("weights_by_tier", {}))), busy_exe, est


def _throughput(est: Any, batch1: Any = None) -> RduThroughput:
    """``est``'s throughput and its largest cause; ``batch1``: the batch-1 program it was estimated on."""
    causes = by_cause(est.to_dict())
    total = sum(v for _, _, v in causes)
    cause, _, value = causes[0] if causes else ("nothing", 0, 0.0)
    program = "the batch-1 program" if batch1 is not None else f"compiled for batch {est.batch_size}"
    return RduThroughput(batch=est.batch_size, micro_batch=est.micro_batch,
                         samples_per_s=est.totals["throughput_samples_per_s"], bound=cause,
                         bound_share=value / total if total else 0.0, program=program)
