"""nnbridge sweep-report DIR — plots and a single-file HTML report of a sweep."""

from __future__ import annotations

from .. import common


def register(sub) -> None:
    p = common.add_parser(sub, "sweep-report", "plot a sweep and write a self-contained HTML report", """\
  nnbridge sweep-report sweep-smaug_case_study            # DIR/plots/*.png and DIR/report.html
  nnbridge sweep-report runs/rdu --cost n_pcu --cost sram_bytes
  nnbridge sweep-report runs/rdu --latency latency_ms
""")
    p.add_argument("dir", help="a directory written by 'nnbridge sweep'")
    p.add_argument("--cost", action="append", metavar="FIELD",
                   help="a setting whose product is the Pareto cost; repeatable (default: SMV accelerators × PEs "
                        "× MACs per PE, RDU PCUs)")
    p.add_argument("--latency", default="latency_ms", help="the metric on the Pareto front's other axis")
    p.set_defaults(func=run)


def run(args) -> int:
    from ...sweep.report import write_report
    from .. import console

    written = write_report(args.dir, args.cost, args.latency)
    console.print(f"wrote {len(written) - 1} plots in {written[0].parent} and {written[-1]}")
    return 0
