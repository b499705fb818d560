"""Spatial allocation inside a section (spec §5.2 step 3) and placement on the fabric.

Water-filling: every stage starts with one PCU; the slowest stage receives one more PCU
while that makes it faster (it is limited by compute, by its output links, or by the
PMU bandwidth of the PMUs beside its PCUs) and it still has parallelism to use. When the
slowest stage cannot be sped up, further PCUs would not raise throughput; those still free
go to the other stages (slowest first, each up to its plateau), shortening a token's way
through the pipeline — the latency of a small batch. The rest stay free (reported as unused).
"""

from __future__ import annotations

import heapq
from collections.abc import Callable

from .partition import Section

StageTime = Callable[[int, int], tuple[float, str]]  # (stage index, pcus) → (seconds, limiting resource)


def water_fill(n_stages: int, budget: int, max_pcus: list[int], stage_time: StageTime) -> list[int]:
    """PCUs per stage minimising the slowest stage, with at most ``budget`` PCUs in total.

    Equivalent to handing out PCUs one at a time to the slowest stage, but each round jumps
    straight to the fewest PCUs that make that stage no slower than the runner-up (or that
    reach its plateau), found by bisection since stage time never grows with more PCUs.
    """
    pcus = [1] * n_stages
    spare = budget - n_stages
    heap = [(-stage_time(i, 1)[0], i) for i in range(n_stages)]
    heapq.heapify(heap)
    while spare > 0 and heap:
        neg_now, i = heapq.heappop(heap)
        top = min(max_pcus[i], pcus[i] + spare)
        if top <= pcus[i] or stage_time(i, pcus[i] + 1)[0] >= -neg_now:
            break  # the slowest stage is stuck: more PCUs elsewhere cannot help throughput
        runner_up = -heap[0][0] if heap else 0.0
        lo = _fewest(stage_time, i, pcus[i] + 1, top, max(runner_up, stage_time(i, top)[0]))
        spare -= lo - pcus[i]
        pcus[i] = lo
        heapq.heappush(heap, (-stage_time(i, lo)[0], i))
    # throughput is set; PCUs still free shorten the other stages, which a token passes through
    # one after another (the latency of a small batch), slowest stage first, each to its plateau
    for i in sorted(range(n_stages), key=lambda j: -stage_time(j, pcus[j])[0]):
        top = min(max_pcus[i], pcus[i] + spare)
        if spare <= 0 or top <= pcus[i] or stage_time(i, top)[0] >= stage_time(i, pcus[i])[0]:
            continue
        lo = _fewest(stage_time, i, pcus[i] + 1, top, stage_time(i, top)[0])
        spare -= lo - pcus[i]
        pcus[i] = lo
    return pcus


def _fewest(stage_time: StageTime, i: int, lo: int, hi: int, bound: float) -> int:
    """The fewest PCUs in [lo, hi] that bring stage ``i`` down to ``bound`` (bisection: stage time
    never grows with more PCUs; ``hi`` reaches it)."""
    while lo < hi:
        mid = (lo + hi) // 2
        if stage_time(i, mid)[0] <= bound:
            hi = mid
        else:
            lo = mid + 1
    return lo


def place(section: Section) -> None:
    """Contiguous PCU and PMU index ranges per stage, in pipeline order."""
    next_pcu = next_pmu = 0
    for k in section.kernels:
        k.pcu_range = (next_pcu, next_pcu + k.pcus)
        k.pmu_range = (next_pmu, next_pmu + k.pmus)
        next_pcu += k.pcus
        next_pmu += k.pmus
