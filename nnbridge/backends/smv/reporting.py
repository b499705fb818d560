"""The SMV run report: one row per operator, totals, and SMAUG's latency breakdown."""

from __future__ import annotations

from collections.abc import Sequence

from ...reporting.report import Report
from .config import SmvConfig
from .cost import LayerCost
from .lowering import Step
from .tiling import TilingPlan, accumulation, batch_of

#: columns stacked in the PNG (SMAUG's breakdown, spec §8.1)
STACK = ["compute_us", "transfer_us", "cpu_us"]
#: columns of the printed table (the JSON has them all)
DISPLAY = ["name", "op", "where", "invocations", "accels", "calls", "tiles", "latency_us", "compute_us", "transfer_us",
           "cpu_us", "accel_cycles", "macc_util_%"]


def display_view(report: Report) -> Report:
    """The report with the table's columns only, for narrow terminals (the accelerators each layer
    used only when there are several, its sub-batch calls only when some layer made several)."""
    view = Report(report.backend, report.model, totals=dict(report.totals), notes=list(report.notes))
    hidden = {"accels"} if report.totals.get("accels", 1) == 1 else set()
    if all(row.get("calls", 1) == 1 for row in report.rows):
        hidden.add("calls")
    columns = [c for c in DISPLAY if c not in hidden]
    for row in report.rows:
        view.add_row(**{k: row[k] for k in columns if k in row})
    return view


def build_report(model: str, steps: Sequence[Step], plans: Sequence[Sequence[TilingPlan]],
                 costs: Sequence[LayerCost], cfg: SmvConfig) -> Report:
    report = Report("smv", model)
    total = LayerCost()
    regrouped = []  # operators whose sub-batch calls accumulate over other channel tiles than SMAUG's whole batch
    for step, step_plans, cost in zip(steps, plans, costs):
        row = {"name": step.name, "op": step.op, "where": "accel" if step.on_accelerator else "cpu",
               "invocations": cost.invocations}
        if step_plans:
            row["strategy"] = " + ".join(p.strategy_summary() for p in step_plans)
            row["tiles"] = " + ".join(p.tile_summary() for p in step_plans)
            row["accels"] = max(p.accels for p in step_plans)  # the accelerators its tile groups went to
            row["calls"] = max(p.calls for p in step_plans)  # sub-batch calls (1: the whole batch at once, as SMAUG)
            if any(p.calls > 1 and accumulation(p) != accumulation(whole) for p, whole in zip(step_plans, step.plans)):
                regrouped.append(f"{step.name} ({_sub_batches(step_plans[0])})")
                row["numerics"] = (f"{_sub_batches(step_plans[0])}: each output sums the channel tiles of SMAUG's "
                                   f"plan of a sub-batch, not of the whole batch (smaug_schedule=true: SMAUG's)")
        row.update(compute_us=cost.compute_ns / 1e3, transfer_us=cost.transfer_ns / 1e3, cpu_us=cost.cpu_ns / 1e3,
                   tiling_us=cost.tiling_ns / 1e3, latency_us=cost.latency_ns / 1e3,
                   accel_cycles=round(cost.accel_cycles))
        if cost.macs:
            peak = cost.accel_cycles * cfg.peak_maccs
            row["macc_util_%"] = 100.0 * cost.macs / peak if peak else 0.0
        row["dram_kb"] = cost.dram_bytes / 1024
        if step.reason:
            row["note"] = step.reason
        if step.deviation:
            row["deviation"] = step.deviation
        report.add_row(**row)
        for attr in ("compute_ns", "transfer_ns", "cpu_ns", "tiling_ns", "accel_cycles", "compute_cycles",
                     "convert_cycles", "dram_bytes", "invocations", "macs"):
            setattr(total, attr, getattr(total, attr) + getattr(cost, attr))
    latency = total.latency_ns or 1.0
    report.totals.update(
        latency_ms=total.latency_ns / 1e6,
        compute_pct=100 * total.compute_ns / latency,
        transfer_pct=100 * total.transfer_ns / latency,
        cpu_pct=100 * total.cpu_ns / latency,
        tiling_ms=total.tiling_ns / 1e6,
        accel_cycles=round(total.accel_cycles),
        invocations=total.invocations,
        dram_mb=total.dram_bytes / 2**20,
        accels=cfg.num_accels,
        mem_policy=cfg.mem_policy.value,
        tiling_threads=cfg.tiling_threads,
    )
    if total.accel_cycles:  # useful MACs over the peak of the accelerator's busy cycles
        report.totals["macc_util_pct"] = 100 * total.macs / (total.accel_cycles * cfg.peak_maccs)
    if any(row.get("calls", 1) > 1 for row in report.rows):
        report.notes.append("calls: operators run as sub-batch calls where that is faster than SMAUG's whole-batch "
                            "tiling, each sub-batch tiled and computed as SMAUG does that sub-batch; smaug_schedule="
                            "true runs every operator on its whole batch, as SMAUG's runtime does")
    if regrouped:
        report.notes.append("values differ from SMAUG's whole-batch run: its sub-batches accumulate over other channel "
                            "tiles in " + ", ".join(regrouped))
    report.notes.append("energy: not reported — the spec gives only normalized energies (§8.2), no per-op figures")
    return report


def _sub_batches(plan: TilingPlan) -> str:
    """``plan``'s calls as "C calls of S samples"."""
    size = batch_of(plan.layer) // plan.calls
    return f"{plan.calls} calls of {size} sample{'s' if size > 1 else ''}"


def where(row: dict) -> str:
    """Accelerated, or on the CPU and why (the ``where it runs`` roll-up)."""
    if row.get("where") != "cpu":
        return "SMV accelerator"
    return f"CPU: {row['note']}" if row.get("note") else "CPU"


def rollups(report: Report, measure: str) -> dict[str, list[tuple[str, int, float]]]:
    """``measure`` summed by op type and by where it runs, largest first."""
    return {"by_op": report.rollup("op", measure), "by_where": report.rollup(where, measure)}


def write_html(path, report: Report, graph, measure: str = "latency_us", baseline=None) -> None:
    """``simulate --html``'s page: totals, the stacked plot, the roll-ups, the graph coloured by
    ``measure`` and every layer in a sortable table (beside ``baseline``'s, a ``reporting.baseline``
    comparison, when given)."""
    from ...reporting.html_report import write_html_report

    write_html_report(path, report, STACK, measure, rollups(report, measure), graph,
                      {r["name"]: float(r.get(measure) or 0.0) for r in report.rows}, note="op", baseline=baseline)
