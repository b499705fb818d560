"""nnbridge sweep SPEC.toml — a design-space sweep of the SMV or RDU simulator on Ray."""

from __future__ import annotations

from pathlib import Path

from .. import common


def register(sub) -> None:
    p = common.add_parser(sub, "sweep", "sweep simulator settings over models (Ray tasks; CSV + Parquet results)", """\
  nnbridge sweep smaug_case_study.toml                   # Ray on this machine, results in sweep-smaug_case_study/
  nnbridge sweep rdu.toml --out runs/rdu --resume        # continue an interrupted sweep
  nnbridge sweep rdu.toml --address ray-head:6379        # join an existing Ray cluster
  nnbridge sweep smv.toml --serial                       # no Ray: one process (small sweeps, debugging)
  nnbridge sweep-report sweep-smaug_case_study           # then: plots and report.html

a spec (TOML):
  backend = "smv"
  models = ["minerva", "lenet5", "cnn10"]
  metrics = ["latency_ms", "dram_bytes", "utilisation_pct"]
  [space]
  mem_policy = ["dma", "acp"]
  num_accels = [1, 2, 4, 8]
  tiling_threads = [1, 8]
""")
    p.add_argument("spec", help="the sweep specification (TOML)")
    p.add_argument("--out", "-o", help="results directory (default: sweep-<spec name>)")
    p.add_argument("--address", help="join the Ray cluster at this address instead of starting Ray locally")
    p.add_argument("--resume", action="store_true", help="skip points already in the results directory")
    p.add_argument("--workers", type=int, help="CPUs of the local Ray instance (default: all)")
    p.add_argument("--serial", action="store_true", help="evaluate in this process, without Ray")
    p.set_defaults(func=run)


def run(args) -> int:
    from rich.progress import BarColumn, MofNCompleteColumn, Progress, TextColumn, TimeRemainingColumn

    from ...base.errors import InputError
    from ...sweep import load_spec, run_sweep
    from .. import console

    if args.workers is not None and args.workers < 1:
        raise InputError(f"--workers must be at least 1, got {args.workers}")
    spec = load_spec(args.spec)
    out = Path(args.out or f"sweep-{Path(args.spec).stem}")
    columns = (TextColumn("sweep"), BarColumn(), MofNCompleteColumn(), TextColumn("{task.fields[rate]}"),
               TextColumn("ETA"), TimeRemainingColumn())
    with Progress(*columns, console=console, transient=True) as bar:
        task = bar.add_task("sweep", total=None, rate="")

        def progress(done: int, total: int) -> None:
            elapsed = bar.tasks[0].elapsed or 0.0
            bar.update(task, completed=done, total=total, rate=f"{done / elapsed:,.1f} points/s" if elapsed else "")

        summary = run_sweep(spec, out, address=args.address, resume=args.resume, workers=args.workers,
                            serial=args.serial, on_progress=progress)
    where = "this process" if args.serial else (f"Ray at {args.address}" if args.address else "local Ray")
    console.print(f"{summary.computed} points computed on {where} in {summary.seconds:.1f} s "
                  f"({summary.points_per_second:,.1f} points/s), {summary.skipped} already recorded, "
                  f"{summary.failed} failed")
    console.print(f"results: {out / 'results.parquet'} and {out / 'results.csv'}")
    return 0
