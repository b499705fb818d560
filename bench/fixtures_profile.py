"""The small-graph fixtures alone, for work on per-operator overhead (issue 33): each fixture's
reference/onnxruntime ratio at one or more thread counts, measured as bench_architectures'
fixtures group measures it (same process, same inputs, ``timing.best_time``), and with
``--nodes`` where the time goes: per op, the nodes the plan runs and their µs (least of several
profiled runs, so the figures are each kernel's own cost without the profiler's).

``python -m bench.fixtures_profile [--threads 1,2] [--nodes] [--budget S] [NAME ...]``
"""

from __future__ import annotations

import argparse
import math
import statistics
import sys
from collections import defaultdict

import numpy as np

from bench.bench_architectures import FIXTURES, _agree, _load
from bench.timing import best_time


def _profile(exe, feeds: dict, runs: int = 30) -> dict[str, tuple[int, float]]:
    """op → (nodes the plan runs, least µs per run summed over them) from ``runs`` profiled runs."""
    best: dict[int, float] = {}
    ops: dict[int, str] = {}
    given = {k: v for k, v in feeds.items() if k in {v.name for v in exe.graph.inputs}}
    plan, _ = exe.plan_for(given)  # a dynamic model's plan pinned to these shapes, as its runs use
    for _ in range(runs):
        timings: list = []
        plan.execute(given, timings=timings)
        for node, seconds in timings:
            key = id(node)
            ops[key] = node.op
            best[key] = min(best.get(key, math.inf), seconds)
    per_op: dict[str, list] = defaultdict(lambda: [0, 0.0])
    for key, seconds in best.items():
        per_op[ops[key]][0] += 1
        per_op[ops[key]][1] += seconds * 1e6
    return {op: (n, us) for op, (n, us) in per_op.items()}


def _measure(path, feeds: dict, threads: int, budget: float):
    """(compiled executable, nnbridge s, onnxruntime s, outputs agree) at ``threads`` threads."""
    import nnbridge
    from nnbridge.check import ort_session

    with nnbridge.cpu_threads(threads):
        exe = nnbridge.compile(str(path), backend="reference")
        session = ort_session(_load(path), level="ORT_ENABLE_ALL")
        names = [o.name for o in session.get_outputs()]
        ort_feeds = {k: v for k, v in feeds.items() if k in {i.name for i in session.get_inputs()}}
        agree = _agree(exe.run(feeds), session.run(names, ort_feeds), names)
        ours = best_time(lambda: exe.run(feeds), threads, budget_s=budget)
        theirs = best_time(lambda: session.run(names, ort_feeds), threads, budget_s=budget)
    return exe, ours, theirs, agree


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m bench.fixtures_profile")
    parser.add_argument("names", nargs="*", help="fixtures to measure (default: all)")
    parser.add_argument("--threads", default="1", help="comma-separated thread counts (default 1)")
    parser.add_argument("--nodes", action="store_true", help="print each fixture's time per op")
    parser.add_argument("--budget", type=float, default=1.0, help="seconds of measuring per model and runtime")
    args = parser.parse_args(argv)
    from nnbridge.kernels import compiled

    compiled.load("curves")  # as in bench_architectures, where the first fixture brings numba in for all
    paths = sorted(FIXTURES.glob("*.onnx"))
    unknown = set(args.names) - {p.stem for p in paths}
    if unknown:
        parser.error(f"no fixture {', '.join(sorted(unknown))} (they are {', '.join(p.stem for p in paths)})")
    paths = [p for p in paths if not args.names or p.stem in args.names]
    threads = [int(t) for t in args.threads.split(",")]
    ratios: dict[int, list[float]] = defaultdict(list)
    for path in paths:
        with np.load(path.with_suffix(".npz")) as data:
            feeds = {k: data[k] for k in data.files}
        for t in threads:
            exe, ours, theirs, agree = _measure(path, feeds, t, args.budget)
            ratios[t].append(ours / theirs)
            print(f"{path.stem:22s} {t}t  nnbridge {ours * 1e3:6.3f} ms  onnxruntime {theirs * 1e3:6.3f} ms  "
                  f"ratio {ours / theirs:5.2f}  steps {len(exe.plan_for(feeds)[0].steps):4d}"
                  f"{'' if agree else '  OUTPUTS DIFFER'}", flush=True)
        if args.nodes:
            per_op = _profile(exe, feeds)
            total = sum(us for _, us in per_op.values())
            for op, (n, us) in sorted(per_op.items(), key=lambda kv: -kv[1][1]):
                print(f"    {op:28s} {n:4d} nodes {us:8.1f} µs  ({us / n:5.1f} µs/node, {100 * us / total:4.1f}%)")
    for t, values in ratios.items():
        geo = math.exp(statistics.mean(math.log(v) for v in values))
        print(f"geometric mean at {t} thread{'s' if t > 1 else ''}: {geo:.2f} over {len(values)} fixtures")
    return 0


if __name__ == "__main__":
    sys.exit(main())
