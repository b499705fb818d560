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


def best_time(fn: Callable[[], object], threads: int, budget_s: float = 1.5) -> float:
    """Seconds of ``fn()``, the least of several runs after one warm-up (as many, 5 to 25, as fit
    ``budget_s``): on a shared machine a run is only ever slowed by others, so the least is the
    closest to the code's own cost. With one thread the clock is the calling thread's CPU time (both
    runtimes then compute on the calling thread: numpy's BLAS and onnxruntime's single-thread pool),
    which time spent descheduled does not inflate; with more, wall time."""
    clock = time.thread_time if threads == 1 else time.perf_counter
    start = time.perf_counter()
    fn()
    first = time.perf_counter() - start
    runs = max(5, min(25, int(budget_s / max(first, 1e-4))))
    best = float("inf")
    for _ in range(runs):
        start = clock()
        fn()
        best = min(best, clock() - start)
    return best
