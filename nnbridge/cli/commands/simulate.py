"""nnbridge simulate MODEL — SMV accelerator simulation: per-layer latency breakdown."""

from __future__ import annotations

from .. import common


def register(sub) -> None:
    p = common.add_parser(sub, "simulate", "simulate a model on SMAUG's SMV accelerator (timing and fp16 "
                                           "numerics)", """\
  nnbridge simulate lenet5_smv_topo.pbtxt                     # per-layer table: compute / transfer / CPU
  nnbridge simulate resnet_smv_topo.pbtxt --perf-only         # timing only, large models in well under 1 s
  nnbridge simulate model.onnx --accels 8 --mem-policy acp --set tiling_threads=8
  nnbridge simulate model.onnx --json report.json --plot layers.png
  nnbridge simulate model.onnx --perf-only --top 10 --sort transfer   # the 10 most transfer-bound layers
  nnbridge simulate model.onnx --perf-only --html report.html --trace timeline.json
  nnbridge simulate model.onnx --config smv.toml --set dma_setup_cycles=50
  nnbridge simulate model.onnx --perf-only --accels 4 --baseline one-accel.json   # per-layer deltas
""")
    common.add_model_args(p)
    p.add_argument("--backend", "-b", default="smv", choices=["smv"], help="the simulator (default: smv)")
    p.add_argument("--accels", type=int, help="number of accelerators, 1..8 (default 1)")
    p.add_argument("--mem-policy", choices=["dma", "acp", "acp-dma-weights"],
                   help="host-memory interface (default dma, as SMAUG's shipped models)")
    p.add_argument("--threads", type=int, help="CPU threads for tiling copies (default 1)")
    p.add_argument("--perf-only", action="store_true", help="skip the numerics (timing only)")
    p.add_argument("--config", metavar="FILE.toml", help="settings from a TOML file ([smv] table or top level)")
    common.add_set_arg(p, ("smv",), "set")
    p.add_argument("--show-config", action="store_true", help="print every setting with its provenance")
    p.add_argument("--json", metavar="FILE", help="write the report as JSON ('-': standard output)")
    common.add_report_args(p, "layer", "per-layer stacked bars (compute/transfer/CPU)",
                           "the layers on the host CPU and on each accelerator")
    p.add_argument("--top", type=int, default=20, metavar="N",
                   help="print the N most expensive layers (default 20; 0: every layer in graph order)")
    p.add_argument("--sort", choices=["latency", "compute", "transfer", "cpu", "tiling"], default="latency",
                   help="what --top ranks by (default latency)")
    p.add_argument("--passes", help="comma-separated pass list instead of the SMV pipeline")
    p.add_argument("--opt-level", type=int, choices=[0, 1, 2, 3], help="pass pipeline level (default 1)")
    common.add_input_args(p)
    p.set_defaults(func=run)


def run(args) -> int:
    from ...backends.smv import make_config
    from ...backends.smv.reporting import STACK, rollups
    from ...reporting.baseline import compare, read_baseline, same_model
    from .. import console

    if args.passes is not None and args.opt_level is not None:
        from ...base.errors import OptionError

        raise OptionError("--opt-level picks the SMV pipeline and --passes replaces it: give one of them")
    config = make_config(args.config, **_settings(args))
    if args.show_config:
        console.print(_config_table(config))
    if config.perf_only:
        common.refuse_unread(args, "with --perf-only (timing only: no values are computed)",
                             {"input": "--input", "seed": "--seed"})
    baseline = read_baseline(args.baseline, "smv") if args.baseline else None
    graph = common.load_model_from_args(args)
    if baseline is not None:  # another model's report is refused before simulating
        same_model(baseline, args.baseline, graph.name)
    exe = _simulate(args, graph, config)
    report = exe.report
    if args.trace:
        from ...reporting.trace import smv_trace, write_trace

        write_trace(smv_trace(report.rows, exe.config.num_accels, report.model), args.trace)
    measure = f"{args.sort}_us"
    groups_by = rollups(report, measure)
    against = compare(baseline, args.baseline, "smv", report.to_dict()) if baseline else None
    _write_reports(args, exe, measure, groups_by, against)
    json_alone = args.json == "-"  # standard output carries the JSON alone
    if not json_alone:
        _print_report(args, report, measure, groups_by, against)
    if args.plot:
        report.plot(args.plot, STACK, ylabel="latency (µs)", note="op")
        if not json_alone:
            console.print(f"plot written to {args.plot}")
    return 0


def _config_table(config):
    """Every SMV setting with its value, provenance and meaning."""
    from rich.table import Table

    table = Table(title="SMV settings")
    for col in ("setting", "value", "provenance", "meaning"):
        table.add_column(col)
    for name, value, provenance, doc in config.describe():
        table.add_row(name, str(getattr(value, "value", value)), provenance, doc)
    return table


def _simulate(args, graph, config):
    """The compiled SMV executable, run on the inputs (unless timing only), with a progress bar per
    compilation phase."""
    from rich.progress import BarColumn, MofNCompleteColumn, Progress, TextColumn, TimeElapsedColumn

    import nnbridge

    from ...api.inputs import random_inputs
    from .. import console

    given = {**graph.input_values, **common.load_inputs(args.input)}  # a SMAUG file runs its stored input
    feeds = {} if config.perf_only else random_inputs(graph, seed=args.seed, dims=common.parse_dims(args.dim),
                                                      given=given)
    with Progress(TextColumn("{task.description}"), BarColumn(), MofNCompleteColumn(), TimeElapsedColumn(),
                  console=console, transient=True) as bar:
        tasks: dict[str, int] = {}

        def progress(phase: str, done: int, total: int) -> None:
            if phase not in tasks:
                tasks[phase] = bar.add_task(phase, total=total)
            bar.update(tasks[phase], completed=done)

        exe = nnbridge.compile(graph, backend="smv", passes=common.parse_passes(args.passes),
                               opt_level=common.opt_level(args), config=config, progress=progress)
        exe.run(feeds) if not config.perf_only else None
    return exe


def _write_reports(args, exe, measure: str, rollups: dict, against) -> None:
    """The HTML page and the JSON report, if asked for."""
    from ...backends.smv.reporting import write_html

    report = exe.report
    if args.html:
        write_html(args.html, report, exe.graph, measure, baseline=against)
    if args.json:
        extra = {"rollups": {k: [{"group": g, "layers": n, measure: v} for g, n, v in groups]
                             for k, groups in rollups.items()}}
        report.to_json(args.json, extra | ({"baseline": against.to_dict()} if against else {}))


def _print_report(args, report, measure: str, rollups: dict, against) -> None:
    """The layer table (the --top slowest, or every layer), the roll-ups, the baseline's deltas,
    the report's notes and the files written (but the plot)."""
    from ...backends.smv.reporting import STACK, display_view
    from .. import console

    total = sum(value for _, _, value in rollups["by_op"])
    if args.top and args.top < len(report.rows):
        console.print(display_view(report.top(measure, args.top)).to_table(
            title=f"smv report: {report.model} — the {args.top} layers with the most {args.sort} time"))
        rest = sorted((float(r.get(measure) or 0.0) for r in report.rows), reverse=True)[args.top:]
        console.print(f"… and {len(rest)} more layers: {sum(rest):,.1f} µs of {args.sort} "
                      f"({common.share(sum(rest), total)})")
    else:
        console.print(display_view(report).to_table())
    for title, groups in (("op type", rollups["by_op"]), ("where it runs", rollups["by_where"])):
        console.print(common.rollup_table(f"{args.sort} by {title}", title, groups, total, unit=f"{args.sort} µs"))
    if against:
        common.print_baseline(console, against, measure, STACK, args.top)
    for note in report.notes:
        console.print(common.styled((note, "dim")))
    common.print_written(console, ((args.json, "report"), (args.html, "HTML report"), (args.trace, "trace")))


def _settings(args) -> dict:
    """--set and the flags that name SMV settings, checked against what the backend declares; a
    setting given both ways is refused (one of the two would be ignored)."""
    from ...backends import get_backend
    from ...backends.smv.config import ALIASES
    from ...base.errors import OptionError

    smv = get_backend("smv")
    out = smv.options(common.parse_assignments(args.set, "--set"), "--set")
    flags = {"num_accels": ("--accels", args.accels), "mem_policy": ("--mem-policy", args.mem_policy),
             "tiling_threads": ("--threads", args.threads), "perf_only": ("--perf-only", args.perf_only or None)}
    for name, (flag, value) in flags.items():
        if value is None:
            continue
        aliases = [k for k in out if k == name or ALIASES.get(k) == name]
        if aliases:
            raise OptionError(f"{flag} and --set {aliases[0]}=…: give one of them")
        out.update(smv.options({name: value}))
    return out

