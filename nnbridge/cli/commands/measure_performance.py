"""nnbridge measure-performance MODEL|model.pef — throughput, latency and utilisation (RDU model)."""

from __future__ import annotations

import json

from ..common import add_backend_args, add_model_args, add_parser, styled
from .compile import add_rdu_args, compile_from_args


def register(sub) -> None:
    p = add_parser(sub, "measure-performance", "estimate throughput, latency and utilisation on the RDU", """\
  nnbridge measure-performance model.onnx --batch-size 64
  nnbridge measure-performance model.pef --batch-size 256 --json
  nnbridge measure-performance model.onnx --preset plasticine --set n_pmu=none --plot sections.png
""")
    add_model_args(p)
    add_backend_args(p, default="rdu")
    add_rdu_args(p)
    p.add_argument("--json", action="store_true", help="print the full estimate as JSON")
    p.add_argument("--plot", metavar="PNG", help="write a bar chart of per-section time")
    p.set_defaults(func=run)


def run(args) -> int:
    from .. import console

    exe = compile_from_args(args)
    est = exe.measure_performance(args.batch_size, args.micro_batch)
    if args.plot:
        exe.section_report(est).plot(args.plot, stack=["pipeline_us", "reconfig_us", "spill_us", "weight_load_us"],
                                     label="index", ylabel="µs for the batch")
    if args.json:
        console.print_json(json.dumps(est.to_dict()))
        return 0
    t = est.totals
    lines = [
        f"model: {exe.graph.name}   machine: {est.machine}   mode: {est.mode}   "
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
    if t["unknown_shape_values"]:
        from ...backends.rdu.backend import UNKNOWN_SHAPES

        lines.append(styled(("warning:", "yellow"), " " + UNKNOWN_SHAPES.format(n=t["unknown_shape_values"])))
    for line in lines:
        console.print(line)
    if args.plot:
        console.print(f"plot written to {args.plot}")
    return 0
