"""Compile-time scaling: each backend's full pass pipeline plus its compile step on generated
graphs of 1k, 10k and 100k nodes (``nnbridge/zoo/generated.py``), time per node printed.

Targets (issue 17): < 10 s per pipeline at 100k nodes, and time per node at 100k within 2× of
that at 1k (linear scaling). Loading the ONNX file is timed separately.
"""

from __future__ import annotations

import os
import time

SIZES = [int(s) for s in os.environ.get("NNBRIDGE_BENCH_PASS_SIZES", "1000,10000,100000").split(",")]
BACKENDS = ["reference", "smv", "rdu"]
TARGET_S, TARGET_GROWTH = 10.0, 2.0


def _pipeline_seconds(model, backend: str) -> tuple[int, float, float, dict[str, float]]:
    """(nodes, load s, passes + compile s, slowest passes) for one backend."""
    import nnbridge
    from nnbridge.backends import get_backend
    from nnbridge.ir.graph import paused_gc
    from nnbridge.passes import PassManager

    start = time.perf_counter()
    graph = nnbridge.load(model)
    loaded = time.perf_counter() - start
    nodes = len(graph.nodes)
    per_pass: dict[str, float] = {}
    mark = [time.perf_counter()]

    def after(name, _graph):
        now = time.perf_counter()
        per_pass[name] = per_pass.get(name, 0.0) + now - mark[0]
        mark[0] = now

    chosen = get_backend(backend)
    start = mark[0] = time.perf_counter()
    PassManager(chosen.pipeline(1), after_each=after).run(graph)
    with paused_gc():  # as nnbridge.compile does
        chosen.compile(graph)
    return nodes, loaded, time.perf_counter() - start, per_pass


def main() -> int:
    from nnbridge.zoo.generated import generated_model

    print("| backend | nodes | load s | passes + compile s | µs per node | slowest passes |")
    print("|---|---|---|---|---|---|")
    ok = True
    for backend in BACKENDS:
        per_node = {}
        for size in SIZES:
            nodes, loaded, seconds, per_pass = _pipeline_seconds(generated_model(size), backend)
            per_node[size] = seconds / nodes
            slowest = ", ".join(f"{n} {t:.2f}" for n, t in sorted(per_pass.items(), key=lambda kv: -kv[1])[:3])
            print(f"| {backend} | {nodes} | {loaded:.2f} | {seconds:.2f} | {per_node[size] * 1e6:.1f} | {slowest} |",
                  flush=True)
            if size == max(SIZES):
                ok &= seconds < TARGET_S
        growth = per_node[max(SIZES)] / per_node[min(SIZES)]
        ok &= growth <= TARGET_GROWTH
        print(f"{backend}: time per node at {max(SIZES)} nodes is {growth:.2f}× that at {min(SIZES)} "
              f"(target ≤ {TARGET_GROWTH}); pipeline target < {TARGET_S:.0f} s at {max(SIZES)} nodes")
    return 0 if ok else 1


if __name__ == "__main__":
    raise SystemExit(main())
