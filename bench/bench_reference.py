"""Reference backend latency and peak memory vs onnxruntime and onnx.reference
on the nine light models (onnx's shipped test data), measured in one run.

Each runtime compiles/prepares once, runs once to warm up, then the median of
``REPEATS`` runs is taken (onnx.reference, being ~100× slower, runs fewer times).
onnxruntime uses its default settings (all graph optimisations, all cores).
Peak memory is the tracemalloc peak during one run (numpy allocations are traced).
"""

from __future__ import annotations

import math
import os
import platform
import statistics
import tracemalloc

from bench.timing import median_time

REPEATS = int(os.environ.get("NNBRIDGE_BENCH_REPEATS", 7))
SLOW_REPEATS = 2


def _peak_bytes(fn) -> int:
    tracemalloc.start()
    try:
        fn()
        return tracemalloc.get_traced_memory()[1]
    finally:
        tracemalloc.stop()


def _measure(name: str) -> tuple[float, float, float, int, int]:
    """(nnbridge s, onnxruntime s, onnx.reference s, nnbridge peak B, onnx.reference peak B)."""
    import onnxruntime as ort
    from onnx.reference import ReferenceEvaluator

    import nnbridge
    from nnbridge.zoo.corpus import light_case

    case = light_case(name)
    feeds = case.inputs[0]
    exe = nnbridge.compile(str(case.model_path), backend="reference")
    options = ort.SessionOptions()
    options.log_severity_level = 3  # the light models carry unused initializers; don't warn
    session = ort.InferenceSession(str(case.model_path), options, providers=["CPUExecutionProvider"])
    evaluator = ReferenceEvaluator(str(case.model_path))
    return (
        median_time(lambda: exe.run(feeds), REPEATS),
        median_time(lambda: session.run(None, feeds), REPEATS),
        median_time(lambda: evaluator.run(None, feeds), SLOW_REPEATS),
        _peak_bytes(lambda: exe.run(feeds)),
        _peak_bytes(lambda: evaluator.run(None, feeds)),
    )


def main() -> int:
    import onnx
    import onnxruntime as ort

    from nnbridge.zoo.corpus import LIGHT_MODELS

    print(f"machine: {platform.processor() or platform.machine()}, {os.cpu_count()} cores, "
          f"python {platform.python_version()}, onnxruntime {ort.__version__}, onnx {onnx.__version__}")
    print("| model | nnbridge ms | onnxruntime ms | onnx.reference ms | nnbridge/ort | onnx.ref/nnbridge "
          "| nnbridge peak MB | onnx.ref peak MB |")
    print("|---|---|---|---|---|---|---|---|")
    ratios, speedups = [], []
    for name in LIGHT_MODELS:
        t_nb, t_ort, t_ref, m_nb, m_ref = _measure(name)
        ratios.append(t_nb / t_ort)
        speedups.append(t_ref / t_nb)
        print(f"| {name} | {t_nb * 1e3:.1f} | {t_ort * 1e3:.1f} | {t_ref * 1e3:.0f} | {t_nb / t_ort:.2f} | "
              f"{t_ref / t_nb:.1f} | {m_nb / 2**20:.0f} | {m_ref / 2**20:.0f} |", flush=True)
    geo_ratio = math.exp(statistics.mean(math.log(r) for r in ratios))
    geo_speedup = math.exp(statistics.mean(math.log(s) for s in speedups))
    print(f"\ngeometric mean latency ratio nnbridge/onnxruntime: {geo_ratio:.2f} (target ≤ 3.0)")
    print(f"geometric mean speed-up of nnbridge over onnx.reference: {geo_speedup:.1f}× (target ≥ 10×)")
    return 0 if geo_ratio <= 3.0 and geo_speedup >= 10 else 1


if __name__ == "__main__":
    raise SystemExit(main())
