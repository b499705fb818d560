"""Latency measurement shared by the benchmarks: a warm-up run, then the median of several."""

from __future__ import annotations

import statistics
import time
from collections.abc import Callable


def median_time(fn: Callable[[], object], repeats: int | None = None, budget_s: float = 1.5) -> float:
    """Median seconds of ``fn()`` over ``repeats`` runs after one warm-up; without ``repeats``,
    as many runs (3 to 15) as fit ``budget_s`` at the warm-up's pace."""
    start = time.perf_counter()
    fn()
    first = time.perf_counter() - start
    if repeats is None:
        repeats = max(3, min(15, int(budget_s / max(first, 1e-4))))
    samples = []
    for _ in range(repeats):
        start = time.perf_counter()
        fn()
        samples.append(time.perf_counter() - start)
    return statistics.median(samples)
