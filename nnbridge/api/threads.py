"""How many CPU threads the numerical libraries use — one setting for both sides of a comparison.

numpy's BLAS (OpenBLAS/MKL, through ``threadpoolctl``), the reference kernels' own blocks
(``kernels.parallel``) and onnxruntime (intra-op threads of every session created while the
setting holds) get the same count, so a latency ratio reference / onnxruntime compares like
with like.
"""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager

from ..base.errors import InputError
from ..kernels.parallel import all_cores, set_threads
from ..kernels.parallel import threads_setting as current_threads

__all__ = ["all_cores", "cpu_threads", "current_threads"]


@contextmanager
def cpu_threads(count: int | None) -> Iterator[None]:
    """Limit numpy's BLAS, the kernels' blocks and new onnxruntime sessions to ``count`` threads
    (None: no change)."""
    if count is None:
        yield
        return
    if count < 1:
        raise InputError(f"--threads must be at least 1, got {count}")
    from threadpoolctl import threadpool_limits

    previous = current_threads()
    set_threads(count)
    try:
        with threadpool_limits(limits=count):
            yield
    finally:
        set_threads(previous)
