"""Host-CPU time: tiling copies, untiling, cache maintenance, dispatch, fallback ops.

Tiling copies follow the paper's measurement (spec §8.1, Fig. 5b): a copy costs
``memcpy calls × per-call overhead + bytes / bandwidth``; the per-call overhead
(94 bytes' worth of bandwidth) is derived from Fig. 5b's 1.78× and 6.5× ratios.
With several tiling threads the call overheads divide by the thread count while
the byte stream scales only up to the 2.7× bandwidth gain the paper measured
(the paper's 3–4× data-prep speed-up).
"""

from __future__ import annotations

import math
from collections.abc import Sequence

from ..config import SmvConfig
from ..tiling.common import TiledTensor, ceil_to


def contiguous_run(tile: Sequence[int], full: Sequence[int], align: int) -> int:
    """Elements one memcpy can move: trailing dims of the tile that span the full tensor merge."""
    tile = list(tile[:-1]) + [ceil_to(tile[-1], align)]
    full = list(full[:-1]) + [ceil_to(full[-1], align)]
    run = 1
    for t, f in zip(reversed(tile), reversed(full)):
        run *= t
        if t != f:
            break
    return run


def copy_stats(tiled: TiledTensor, align: int) -> tuple[int, int]:
    """(memcpy calls, bytes) to gather every tile of ``tiled`` (0 when it is a single tile)."""
    if tiled.num_tiles <= 1:
        return 0, 0
    calls = nbytes = 0
    for idx in _indices(tiled.counts):
        shape = tiled.tile_shape(idx)
        elems = math.prod(shape[:-1]) * ceil_to(shape[-1], align)
        calls += elems // contiguous_run(shape, tiled.shape, align)
        nbytes += 2 * elems
    return calls, nbytes


def _indices(counts: Sequence[int]):
    import itertools

    return itertools.product(*(range(c) for c in counts))


def copy_ns(calls: int, nbytes: int, cfg: SmvConfig) -> float:
    threads = cfg.tiling_threads
    call_ns = cfg.memcpy_call_bytes / cfg.memcpy_gbps
    bandwidth = min(threads, cfg.memcpy_scaling) * cfg.memcpy_gbps
    dram = 2 * nbytes / cfg.dram_gbps  # each byte copied is read and written through DRAM
    return calls * call_ns / threads + max(nbytes / bandwidth, dram)


def cpu_op_ns(nbytes_moved: int, macs: int, cfg: SmvConfig) -> float:
    """A CPU-only operator (reorder, flatten, concat, fallback kernels): memory- or compute-bound."""
    bandwidth = min(cfg.memcpy_gbps, cfg.dram_gbps)
    return cfg.op_overhead_ns + max(nbytes_moved / bandwidth, macs / cfg.cpu_gmacs)
