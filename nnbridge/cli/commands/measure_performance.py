"""nnbridge measure-performance MODEL|model.pef — throughput, latency and utilisation (RDU model)."""

from __future__ import annotations

from ...backends.rdu.reporting import by_cause, by_op
from .. import common
from .compile import add_rdu_args, compile_from_args


def register(sub) -> None:
    p = common.add_parser(sub, "measure-performance", "estimate throughput, latency and utilisation on the RDU", """\
  nnbridge measure-performance model.onnx --batch-size 64
  nnbridge measure-performance model.pef --batch-size 256 --json
  nnbridge measure-performance model.onnx --preset plasticine --set n_pmu=none --plot sections.png
  nnbridge measure-performance model.onnx --top 5 --trace rdu.json   # slowest stages; a Perfetto timeline
  nnbridge measure-performance llama-3.1-70b --sockets 16            # an LLM decode step, weights as shapes
  nnbridge measure-performance model.onnx --config machine.toml --set hbm_capacity_bytes=8e9
  nnbridge measure-performance model.onnx --batch-size 64 --baseline batch16.json   # per-stage deltas
""")
    common.add_model_args(p)
    common.add_backend_args(p, default="rdu")
    add_rdu_args(p)
    p.add_argument("--json", nargs="?", const="-", metavar="FILE",
                   help="write the full estimate and its roll-ups as JSON (no FILE or '-': standard output, alone)")
    p.add_argument("--top", type=int, default=10, metavar="N", help="print the N slowest pipeline stages (default 10)")
    common.add_report_args(p, "stage", "a bar chart of per-section time", "the sections and their stages")
    p.set_defaults(func=run)


def run(args) -> int:
    from ...reporting.baseline import compare, read_baseline
    from .. import console

    baseline = read_baseline(args.baseline, "rdu") if args.baseline else None
    exe = compile_from_args(args)
    est = exe.measure_performance(args.batch_size, args.micro_batch)
    data = {"model": exe.graph.name, **est.to_dict()}
    against = compare(baseline, args.baseline, "rdu", data) if baseline else None
    if args.plot:
        exe.section_report(est).plot(args.plot, stack=["pipeline_us", "reconfig_us", "spill_us", "weight_load_us"],
                                     ylabel="µs for the batch", note="bottleneck")
    rollups = {"by_cause": by_cause(data), "by_op": by_op(data)}
    if args.trace:
        from ...reporting.trace import rdu_trace, write_trace

        write_trace(rdu_trace(data, exe.graph.name), args.trace)
    if args.html:
        from ...backends.rdu.reporting import write_html

        write_html(args.html, exe, est, baseline=against)
    if args.json:
        common.write_json({**data, "rollups": {k: [{"group": g, "sections": n, "us": v} for g, n, v in groups]
                                               for k, groups in rollups.items()},
                           **({"baseline": against.to_dict()} if against else {})}, args.json)
        if args.json == "-":
            return 0
    for line in _summary_lines(exe.graph, est):
        console.print(line)
    total = sum(v for _, _, v in rollups["by_cause"])
    if args.top:
        console.print(_slowest_stages(data, args.top, total))
    console.print(common.rollup_table("batch latency by what bounds it", "bound", rollups["by_cause"], total,
                                      "sections"))
    console.print(common.rollup_table("batch latency by the slowest stage's op", "op", rollups["by_op"], total,
                                      "sections"))
    if against:
        common.print_baseline(console, against, "stage_us",
                              ["compute_us", "pmu_us", "network_us", "offchip_us", "pcus"], args.top)
    common.print_written(console, ((args.plot, "plot"), (args.trace, "trace"), (args.html, "HTML report"),
                                   (args.json, "JSON")))
    return 0


def _summary_lines(graph, est) -> list:
    """The estimate in a few lines: throughput, latency, utilisation, units, memory, where the
    weights live, tokens for an LLM, the split of a training step, and unknown shapes."""
    t = est.totals
    lines = [
        f"model: {graph.name}   machine: {est.machine}   mode: {est.mode}   "
        f"batch: {est.batch_size} (micro-batch {est.micro_batch})",
        f"throughput: {t['throughput_samples_per_s']:,.1f} samples/s "
        f"(steady state {t['steady_throughput_samples_per_s']:,.1f})",
        f"latency: {t['latency_us'] / 1e3:,.3f} ms for the batch; stage latency {t['stage_latency_us']:,.2f} µs",
        f"FLOPS utilization: {100 * t['flops_utilization']:.2f} % "
        f"(steady state {100 * t['steady_flops_utilization']:.2f} %), {t['flop_per_sample'] / 1e6:,.1f} MFLOP/sample",
        f"compute units used: {t['compute_units_used']} of {t['compute_units']}; sections {t['sections']}, "
        f"kernels {t['kernels']}, max depth {t['max_depth']}",
        f"memory: {t['memory_bytes'] / 2**20:,.2f} MiB in {t['memory_units']} units "
        f"({100 * t['memory_utilization']:.1f} %)",
    ]
    if "weights_by_tier" in t:  # a .pef written before the tiers were modelled has no placement
        lines.append(_weights_line(t))
    lines[1:1] = _training_lines(t) + _llm_lines(graph, est)
    if t["unknown_shape_values"]:
        from ...backends.rdu.backend import UNKNOWN_SHAPES

        lines.append(common.styled(("warning:", "yellow"), " " + UNKNOWN_SHAPES.format(n=t["unknown_shape_values"])))
    return lines


def _weights_line(t: dict) -> str:
    """Where the weights live off chip, and what is read from each tier per batch."""
    homes = ", ".join(f"{tier} {b / 2**20:,.2f} MiB" for tier, b in t["weights_by_tier"].items())
    moved = ", ".join(f"{tier} {b / 2**20:,.2f} MiB" for tier, b in t["offchip_bytes_by_tier"].items())
    kept = "resident on chip once loaded" if t["weights_resident"] else "read every call"
    return f"weights off chip: {homes} ({kept}); read from each tier per batch: {moved}"


def _llm_lines(graph, est) -> list[str]:
    """A zoo LLM's tokens per second (none for another model)."""
    if "llm" not in graph.metadata:
        return []
    t = est.totals
    tokens = int(graph.metadata.get("llm.tokens", "1")) * est.batch_size
    return [f"{graph.metadata['llm']}: {tokens / (t['latency_us'] * 1e-6):,.1f} tokens/s "
            f"({1e6 / t['latency_us']:,.2f} batches/s)"]


def _training_lines(t: dict) -> list[str]:
    """A training program's (compile --optimizer) split of a step into SambaFlow's section types."""
    kinds = t.get("latency_us_by_kind", {})
    if len(kinds) <= 1:
        return []
    split = ", ".join(f"{kind} {us / 1e3:,.3f} ms ({100 * us / t['latency_us']:.0f} %)"
                      for kind, us in kinds.items())
    return [f"training: {t['throughput_samples_per_s']:,.1f} samples/s per step; {split}"]


def _slowest_stages(estimate: dict, n: int, total: float):
    from rich.table import Table

    stages = sorted(estimate["stages"], key=lambda s: -s["stage_us"])
    table = Table(title=f"the {min(n, len(stages))} slowest of {len(stages)} pipeline stages (µs per token)")
    for col in ("section", "stage", "anchor", "PCUs", "compute", "on-chip", "network", "off-chip", "stage", "bound"):
        table.add_column(col, justify="left" if col in ("stage", "anchor", "bound") else "right")
    for s in stages[:n]:
        table.add_row(str(s["section"]), s["kernel"], s["anchor"], str(s["pcus"]),
                      *(f"{s[k]:,.2f}" for k in ("compute_us", "pmu_us", "network_us", "offchip_us", "stage_us")),
                      s["bottleneck"])
    return table
