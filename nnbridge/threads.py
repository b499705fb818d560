"""How many CPU threads the numerical libraries use — one setting for both sides of a comparison.

numpy's BLAS (OpenBLAS/MKL, through ``threadpoolctl``) and onnxruntime (intra-op threads of
every session created while the setting holds) get the same count, so a latency ratio
reference / onnxruntime compares like with like.
"""

from __future__ import annotations

import os
from collections.abc import Iterator
from contextlib import contextmanager

from .errors import InputError

_current: int | None = None  # None: each library's own default


def current_threads() -> int | None:
    """The thread count in force (None: libraries' defaults)."""
    return _current


def all_cores() -> int:
    """The CPUs this process may run on (the machine's default thread count)."""
    try:
        return len(os.sched_getaffinity(0))
    except AttributeError:  # not Linux
        return os.cpu_count() or 1


@contextmanager
def cpu_threads(count: int | None) -> Iterator[None]:
    """Limit numpy's BLAS and new onnxruntime sessions to ``count`` threads (None: no change)."""
    global _current
    if count is None:
        yield
        return
    if count < 1:
        raise InputError(f"--threads must be at least 1, got {count}")
    from threadpoolctl import threadpool_limits

    previous = _current
    _current = count
    try:
        with threadpool_limits(limits=count):
            yield
    finally:
        _current = previous
