"""Blocks of one kernel split over threads, and matrix products with them.

Two ways to run the blocks. When numba's TBB layer loaded (``compiled.kernel_threads``), a compiled
kernel's ``prange`` twin shares them: a loop starts in about 2 µs, idle workers yield the core, and
a part no worker came for runs in the calling thread; and every large float matrix product is cut
into blocks over the same threads (``dot``, ``compiled/blas.py``), so that OpenBLAS's own pool,
whose workers spin for a tenth of a second after each call, never holds the core a kernel's block
waits for. Otherwise numpy's loops and the compiled kernels (which release the GIL) run their
blocks on a Python thread pool, whose fork and join costs 45-55 µs here. Either way as many
threads as numpy's BLAS uses (``nnbridge.cpu_threads`` sets both), each block's values the same
as one call's.
"""

from __future__ import annotations

import os
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor

import numpy as np

from . import compiled

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


#: the least work worth a block on the Python pool (no TBB), in multiply-adds (or element
#: operations): about 0.8 ms of compiled loop. Each split is a fork and a join, and the join waits
#: for the slowest part: a no-op split costs 45-55 µs here (a woken thread's latency), more when
#: OpenBLAS's threads still spin on the other core, so splits must be few and large (measured at 2
#: threads in bench_architectures' setting: from 2M to 16M, MobileNetV3-large 8.7 → 8.2 ms, RegNet
#: 12.9 → 11.8, none slower). numba's OpenMP layer starts a loop in 3 µs too, but its threads spin
#: between loops without yielding and starved OpenBLAS's and onnxruntime's threads in the same
#: process (MobileNetV3-small 3.6 → 60 ms at 2 threads), hence TBB for the twins
MIN_WORK = 1 << 24


#: the least work worth a block of a compiled kernel's ``prange`` twin (TBB's ~2 µs start): about
#: 30 µs of loop
TWIN_MIN_WORK = 1 << 17
#: multiply-adds from which a float product goes through ``dot``'s blocks at more than one thread
#: (smaller ones OpenBLAS runs on the calling thread anyway, and ``dot``'s checks cost 2-3 µs)
DOT_MIN_WORK = 1 << 18


def least_work() -> int:
    """The least work worth a block of ``split`` in this process."""
    return TWIN_MIN_WORK if compiled.kernel_threads() else MIN_WORK


def alone(work: float) -> bool:
    """True when ``work`` multiply-adds are too few to split, or this is one thread's run: a caller
    then calls its kernel once without building ``split``'s closure (a small graph's row kernels
    pay a microsecond for that)."""
    return work < TWIN_MIN_WORK or _threads == 1


def _grain(work_per_item: float, least: int) -> int:
    return max(1, -(-least // max(1, int(work_per_item))))


def grain(work_per_item: float) -> int:
    """Items per block so that every block is worth a pool thread (``run_blocks``'s ``step``)."""
    return _grain(work_per_item, MIN_WORK)


def split(count: int, work_per_item: float, serial: Callable[[int, int], None], twin: Callable, *args) -> None:
    """``serial(start, stop)`` over ``range(count)`` (each item ``work_per_item`` multiply-adds), as
    ``run_blocks`` shares it; or, when the compiled kernels share their own blocks, as
    ``twin(*args, count, step, parts)``: the kernel's ``prange`` loop over the parts."""
    step = _grain(work_per_item, least_work())
    parts = min(threads(), -(-count // step))
    if parts <= 1:
        serial(0, count)
    elif compiled.kernel_threads():
        twin(*args, count, step, parts)
    else:
        run_blocks(count, serial, step)


def share(count: int, work_per_item: float, kernel: Callable, twin: Callable, *args) -> None:
    """``kernel(*args, first, last)`` over ``range(count)`` as ``split`` shares it, with its ``prange``
    twin ``twin(*args, count, step, parts)``; one call, without ``split``'s closure, when ``alone``."""
    if alone(count * work_per_item):
        kernel(*args, 0, count)
    else:
        split(count, work_per_item, lambda lo, hi: kernel(*args, lo, hi), twin, *args)


#: numpy loops that stream memory (an add is 0.16 ns an element on float32, a multiply-add's
#: worth ``STREAM_WORK``); any other (exp, tanh, sin, power…: 1.3 to 10 ns) is ``CURVE_WORK``. With
#: ``ufunc``'s 10-15 µs of Python, a streaming op gains from two threads from about 0.5 M elements
_STREAMING = frozenset({np.add, np.subtract, np.multiply, np.divide, np.maximum, np.minimum,
                        np.fmax, np.fmin, np.abs, np.negative, np.positive, np.sign, np.floor, np.ceil,
                        np.rint, np.trunc, np.sqrt, np.reciprocal, np.square, np.copysign})
STREAM_WORK, CURVE_WORK = 0.25, 4


def ufunc(fn: np.ufunc, *inputs: np.ndarray, out: np.ndarray | None = None) -> np.ndarray:
    """``fn(*inputs, out=out)``, bit for bit: numpy's own loop, on large operands at more than one
    thread in blocks over the kernel threads (``compiled/ufuncs.py``)."""
    work = STREAM_WORK if fn in _STREAMING else CURVE_WORK
    if not all(type(a) is np.ndarray for a in inputs) or alone(max(a.size for a in inputs) * work):
        return fn(*inputs, out=out)
    shared = compiled.load("ufuncs")
    y = None if shared is None else shared.apply(fn, inputs, out, work, split)
    return fn(*inputs, out=out) if y is None else y


class BlasInThisThread:
    """``with BlasInThisThread():`` a plan's run at more than one thread, when the compiled kernels
    share their own blocks: every BLAS call the run makes outside ``dot`` and ``matmul`` (a vector
    product, a recurrence's step) runs in the calling thread, so OpenBLAS's pool is never woken (a
    woken pool's workers then spin for a tenth of a second on the core the kernels' blocks need:
    MobileNetV3's squeeze-excite products made every later block of the network wait)."""

    __slots__ = ("saved",)

    def __enter__(self) -> None:
        blas = _blas() if threads() > 1 else None
        self.saved = None if blas is None else blas.one_thread(1)

    def __exit__(self, *exc) -> None:
        if self.saved is not None:
            _blas().one_thread(self.saved)


def _blas():
    """``compiled/blas.py`` when the kernel threads run on TBB and numpy's OpenBLAS was bound, else None."""
    if not compiled.kernel_threads():
        return None
    blas = compiled.load("blas")
    return blas if blas is not None and blas.READY else None


def _split_product(a: np.ndarray, b: np.ndarray, work: int, kind: str) -> np.ndarray | None:
    """``compiled/blas.py``'s ``kind`` (``dot`` or ``matmul``) of ``a`` and ``b`` over the kernel
    threads when it is worth it and they can take it: ``work`` multiply-adds, float operands of one
    dtype, more than one thread (at one, a product ``blas.dot`` cuts at every thread count); else None."""
    if work < DOT_MIN_WORK or a.dtype != b.dtype or a.dtype.kind != "f" or a.dtype.itemsize not in (4, 8):
        return None
    blas = _blas()
    if blas is None or (threads() == 1 and (kind != "dot" or not blas.cut_alone(a, b))):
        return None  # at one thread only the products ``blas.dot`` cuts at every thread count go there
    return getattr(blas, kind)(a, b, threads())


def matmul(a: np.ndarray, b: np.ndarray) -> np.ndarray:
    """``np.matmul`` of two stacks of matrices with the same leading axes, bit for bit; at more than
    one thread, with large enough float items of one dtype, the items over the kernel threads."""
    y = (_split_product(a, b, a.size * b.shape[-1], "matmul")
         if a.ndim == b.ndim >= 3 and a.shape[:-2] == b.shape[:-2] else None)
    return np.matmul(a, b) if y is None else y


def dot(a: np.ndarray, b: np.ndarray, product: Callable = np.dot) -> np.ndarray:
    """``product(a, b)`` (``np.dot`` or ``np.matmul``) of 2-D arrays, bit for bit; a large float
    product of one dtype, at more than one thread, in blocks over the kernel threads
    (``compiled/blas.py``: BLAS's own pool stays idle)."""
    y = _split_product(a, b, a.size * b.shape[1], "dot") if a.ndim == 2 == b.ndim else None
    return product(a, b) if y is None else y


def bounds(count: int, step: int, parts: int) -> list[int]:
    """Where ``parts`` contiguous parts of ``range(count)`` start, and the end: each part a whole
    number of ``step``-sized blocks, the last part taking what remains (``compiled._core.block_bounds``
    is the same cut inside a compiled twin)."""
    blocks = -(-count // step)
    return [min(count, blocks * i // parts * step) for i in range(parts)] + [count]


def run_blocks(count: int, work: Callable[[int, int], None], step: int = 1) -> None:
    """``work(start, stop)`` over ``range(count)`` in one contiguous part per thread, each part a
    whole number of ``step``-sized blocks (the last may be short), the last part in the calling
    thread; the parts must write disjoint outputs. One thread: a single call."""
    global _pool, _pool_workers, _pool_pid
    count_threads = min(threads(), -(-count // step))
    if count_threads <= 1:
        work(0, count)
        return
    if _pool is None or _pool_workers < count_threads - 1 or _pool_pid != os.getpid():
        _pool = ThreadPoolExecutor(max_workers=count_threads - 1, thread_name_prefix="nnbridge-kernel")
        _pool_workers, _pool_pid = count_threads - 1, os.getpid()
    edges = bounds(count, step, count_threads)
    parts = [_pool.submit(work, lo, hi) for lo, hi in zip(edges[:-2], edges[1:-1])]
    work(edges[-2], edges[-1])
    for part in parts:
        part.result()
