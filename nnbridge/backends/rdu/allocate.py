"""Spatial allocation inside a section (spec §5.2 step 3) and placement on the fabric.

Water-filling: every stage starts with one PCU; the slowest stage receives one more PCU
while that makes it faster (it is limited by compute, by its output links, or by the
PMU bandwidth of the PMUs beside its PCUs) and it still has parallelism to use. When the
slowest stage cannot be sped up, further PCUs would not raise throughput, so they stay
free (reported as unused).
"""

from __future__ import annotations

import heapq
from collections.abc import Callable

from .partition import Section

StageTime = Callable[[int, int], tuple[float, str]]  # (stage index, pcus) → (seconds, limiting resource)


def water_fill(n_stages: int, budget: int, max_pcus: list[int], stage_time: StageTime) -> list[int]:
    """PCUs per stage minimising the slowest stage, with at most ``budget`` PCUs in total."""
    pcus = [1] * n_stages
    spare = budget - n_stages
    heap = [(-stage_time(i, 1)[0], i) for i in range(n_stages)]
    heapq.heapify(heap)
    while spare > 0 and heap:
        _, i = heapq.heappop(heap)
        now = stage_time(i, pcus[i])[0]
        if pcus[i] >= max_pcus[i] or stage_time(i, pcus[i] + 1)[0] >= now:
            break  # the slowest stage is stuck: more PCUs elsewhere cannot help throughput
        pcus[i] += 1
        spare -= 1
        heapq.heappush(heap, (-stage_time(i, pcus[i])[0], i))
    return pcus


def place(section: Section) -> None:
    """Contiguous PCU and PMU index ranges per stage, in pipeline order."""
    next_pcu = next_pmu = 0
    for k in section.kernels:
        k.pcu_range = (next_pcu, next_pcu + k.pcus)
        k.pmu_range = (next_pmu, next_pmu + k.pmus)
        next_pcu += k.pcus
        next_pmu += k.pmus
