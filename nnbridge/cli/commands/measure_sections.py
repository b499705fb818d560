"""nnbridge measure-sections MODEL|model.pef — per-section (or per-stage) table of the RDU model."""

from __future__ import annotations

from ..common import add_backend_args, add_model_args, add_parser
from .compile import add_rdu_args, compile_from_args


def register(sub) -> None:
    p = add_parser(sub, "measure-sections", "per-section timing and resources on the RDU", """\
  nnbridge measure-sections model.onnx --mode o0
  nnbridge measure-sections model.pef --json
  nnbridge measure-sections model.onnx --stages --plot stages.png
""")
    add_model_args(p)
    add_backend_args(p, default="rdu")
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
            report.plot(args.plot, stack=["stage_us"], label="kernel", ylabel="µs per token")
        else:
            report.plot(args.plot, stack=["pipeline_us", "reconfig_us", "spill_us", "weight_load_us"],
                        label="index", ylabel="µs for the batch")
    if args.json:
        console.print(report.to_json(), soft_wrap=True)
        return 0
    console.print(report.to_table(title=f"RDU sections: {exe.graph.name} ({est.machine}, {est.mode}, "
                                        f"batch {est.batch_size})"))
    if args.plot:
        console.print(f"plot written to {args.plot}")
    return 0
