"""Blocks of one kernel split over threads: numpy releases the GIL inside its loops, so the
elementwise curves and row-wise softmax, which process a tensor a cache-sized block at a time,
run their blocks on as many threads as numpy's BLAS uses (``nnbridge.cpu_threads`` sets both).
"""

from __future__ import annotations

import os
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor

_threads: int | None = None  # None: every core this process may run on, as numpy's BLAS does
_pool: ThreadPoolExecutor | None = None
_pool_workers = 0
_pool_pid = 0  # a forked child inherits the pool object but not its threads: it makes its own


def all_cores() -> int:
    """The CPUs this process may run on (the machine's default thread count)."""
    try:
        return len(os.sched_getaffinity(0))
    except AttributeError:  # not Linux
        return os.cpu_count() or 1


def threads_setting() -> int | None:
    """The thread count in force (None: each library's default, all cores here)."""
    return _threads


def threads() -> int:
    """The threads a kernel may split its work over now."""
    return _threads or all_cores()


def set_threads(count: int | None) -> None:
    """``nnbridge.cpu_threads`` is the public switch, which also limits BLAS and onnxruntime."""
    global _threads
    _threads = count


#: the least work worth handing to another thread, in multiply-adds (or element operations): about
#: 0.8 ms of compiled loop. Each split is a fork and a join, and the join waits for the slowest
#: part: a no-op split costs 45-55 µs here (a woken thread's latency), more when OpenBLAS's threads
#: still spin on the other core, and on a busy machine a part can wait a whole scheduler slice, so
#: splits must be few and large (measured at 2 threads in bench_architectures' setting: from 2M to
#: 16M, MobileNetV3-large 8.7 → 8.2 ms, RegNet 12.9 → 11.8, EfficientNet-B0 19.3 → 18.1, Whisper's
#: encoder 214 → 209, none slower; 16k-element blocks once made MobileNetV3 35× slower under load).
#: numba's own parallel loops on its OpenMP layer start in 3 µs, but their threads spin between
#: loops without yielding, and beside OpenBLAS's and onnxruntime's pools in one process they starved
#: the threads being waited for (MobileNetV3-small 3.6 → 60 ms at 2 threads; passive waiting brings
#: back the 50 µs), so kernel threads stay this pool until one pool serves BLAS and the kernels alike
MIN_WORK = 1 << 24


def grain(work_per_item: float) -> int:
    """Items per block so that every block is worth a thread (``run_blocks``'s ``step``)."""
    return max(1, -(-MIN_WORK // max(1, int(work_per_item))))


def run_blocks(count: int, work: Callable[[int, int], None], step: int = 1) -> None:
    """``work(start, stop)`` over ``range(count)`` in one contiguous part per thread, each part a
    whole number of ``step``-sized blocks (the last may be short), the last part in the calling
    thread; the parts must write disjoint outputs. One thread: a single call."""
    global _pool, _pool_workers, _pool_pid
    blocks = -(-count // step)
    count_threads = min(threads(), blocks)
    if count_threads <= 1:
        work(0, count)
        return
    if _pool is None or _pool_workers < count_threads - 1 or _pool_pid != os.getpid():
        _pool = ThreadPoolExecutor(max_workers=count_threads - 1, thread_name_prefix="nnbridge-kernel")
        _pool_workers, _pool_pid = count_threads - 1, os.getpid()
    bounds = [min(count, blocks * i // count_threads * step) for i in range(count_threads + 1)]
    parts = [_pool.submit(work, lo, hi) for lo, hi in zip(bounds[:-2], bounds[1:-1])]
    work(bounds[-2], bounds[-1])
    for part in parts:
        part.result()
