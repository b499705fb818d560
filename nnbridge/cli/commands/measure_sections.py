"""nnbridge measure-sections MODEL|model.pef — per-section (or per-stage) table of the RDU model."""

from __future__ import annotations

from ...reporting.report import Report
from .. import common
from .compile import add_rdu_args, compile_from_args


def register(sub) -> None:
    p = common.add_parser(sub, "measure-sections", "per-section timing and resources on the RDU", """\
  nnbridge measure-sections model.onnx --mode o0
  nnbridge measure-sections model.pef --json
  nnbridge measure-sections model.onnx --stages --plot stages.png
""")
    common.add_model_args(p)
    common.add_backend_args(p, default="rdu")
    add_rdu_args(p)
    p.add_argument("--stages", action="store_true", help="one row per pipeline stage (kernel) instead of per section")
    p.add_argument("--json", action="store_true", help="print the table as JSON")
    p.add_argument("--plot", metavar="PNG", help="write a stacked bar chart of the rows")
    p.set_defaults(func=run)


def run(args) -> int:
    from .. import console

    exe = compile_from_args(args)
    est = exe.measure_performance(args.batch_size, args.micro_batch)
    report = exe.section_report(est, stages=args.stages)
    if args.plot:
        if args.stages:
            report.plot(args.plot, stack=["stage_us"], ylabel="µs per token", note="bottleneck")
        else:
            report.plot(args.plot, stack=["pipeline_us", "reconfig_us", "spill_us", "weight_load_us"],
                        ylabel="µs for the batch", note="bottleneck")
    if args.json:
        console.print(report.to_json(), soft_wrap=True)
        return 0
    what = "stages" if args.stages else "sections"
    title = f"RDU {what}: {exe.graph.name} ({est.machine}, {est.mode}, batch {est.batch_size})"
    console.print(_display(report).to_table(title=title))
    if args.plot:
        console.print(f"plot written to {args.plot}")
    return 0


#: short column headings for the terminal table (JSON keeps the descriptive names)
_SHORT = {"index": "#", "section": "sec", "kernels": "kern", "pcus": "PCU", "pmus": "PMU", "stage_us": "stage µs",
          "pipeline_us": "pipe µs", "reconfig_us": "reconf µs", "spill_us": "spill µs", "weight_load_us": "wload µs",
          "total_us": "total µs", "flops_per_sample": "FLOP", "compute_us": "comp µs", "pmu_us": "PMU µs",
          "network_us": "net µs", "offchip_us": "off-chip µs", "bottleneck": "limit"}
_TOTALS = ("sections", "kernels", "ops", "latency_us", "throughput_samples_per_s", "flops_utilization")


def _display(report: Report) -> Report:
    short = Report(report.backend, report.model, totals={k: report.totals[k] for k in _TOTALS})
    for row in report.rows:
        short.add_row(**{_SHORT.get(k, k): v for k, v in row.items()})
    return short
