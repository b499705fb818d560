"""Spatial allocation inside a section (spec §5.2 step 3) and placement on the fabric.

Water-filling: every stage starts with one PCU; the slowest stage receives one more PCU
while that makes it faster (it is limited by compute, by its output links, or by the
PMU bandwidth of the PMUs beside its PCUs) and it still has parallelism to use. When the
slowest stage cannot be sped up, further PCUs would not raise throughput; those still free
go where they shorten a stage most per PCU, shortening a token's way through the pipeline —
the latency of a small batch. The rest stay free (reported as unused). Neither greedy order
weighs a small batch's latency exactly (the way once, the slowest stage per further token), so a
small section's allocation is then refined against it by local search.
"""

from __future__ import annotations

import heapq
from collections.abc import Callable

from .partition import Section

StageTime = Callable[[int, int], tuple[float, str]]  # (stage index, pcus) → (seconds, limiting resource)


#: sections of at most this many stages have their allocation refined against the batch's latency
REFINED_STAGES = 16


def water_fill(n_stages: int, budget: int, max_pcus: list[int], stage_time: StageTime,
               latency: Callable[[list[int]], float] | None = None) -> list[int]:
    """PCUs per stage minimising the slowest stage, with at most ``budget`` PCUs in total, the rest
    shortening a token's way through the stages. With ``latency`` (the batch's time for an
    allocation, from these stage times: it never falls unless a stage gets faster), a small
    section's allocation is then refined by moving PCUs between stages while that lowers it: a
    small batch pays the way once and the slowest stage only per further token, which neither
    greedy order weighs exactly.

    The water-fill is equivalent to handing out PCUs one at a time to the slowest stage, but each
    round jumps straight to the fewest PCUs that make that stage no slower than the runner-up (or
    that reach its plateau), found by bisection since stage time never grows with more PCUs.
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
    # throughput is set; PCUs still free shorten the token's way through the pipeline (the latency
    # of a small batch, which adds up the stages a token passes): each goes where it shortens a
    # stage most per PCU — for stage times that fall less and less with more PCUs, the shortest way
    _shorten_the_way(pcus, spare, max_pcus, stage_time)
    if latency is not None and 1 < n_stages <= REFINED_STAGES:
        _refine(pcus, budget, max_pcus, latency, stage_time)
    return pcus


def _refine(pcus: list[int], budget: int, max_pcus: list[int], latency: Callable[[list[int]], float],
            stage_time: StageTime) -> None:
    """Local search: give a stage PCUs that are free or taken from another stage (power-of-two
    amounts, largest first) while that lowers ``latency``. A move that leaves the stage given PCUs
    no faster is not priced: the latency cannot fall when no stage gets faster, and as stage time
    never grows with more PCUs, none of the smaller amounts makes that stage faster either."""
    now = latency(pcus)
    improved = True
    while improved:
        improved = False
        for to in range(len(pcus)):
            for source in (None, *range(len(pcus))):
                if source == to:
                    continue
                room = max_pcus[to] - pcus[to]
                have = budget - sum(pcus) if source is None else pcus[source] - 1
                step = 1 << max(0, min(room, have).bit_length() - 1)
                while room > 0 and have > 0 and step >= 1:
                    if stage_time(to, pcus[to] + step)[0] >= stage_time(to, pcus[to])[0]:
                        break
                    pcus[to] += step
                    if source is not None:
                        pcus[source] -= step
                    t = latency(pcus)
                    if t < now * (1 - 1e-12):
                        now, improved = t, True
                        break
                    pcus[to] -= step
                    if source is not None:
                        pcus[source] += step
                    step //= 2


def _shorten_the_way(pcus: list[int], spare: int, max_pcus: list[int], stage_time: StageTime) -> None:
    """Hand ``spare`` PCUs out by the largest time saved per PCU (a stage flat in its PMU bandwidth
    is offered the jump to where it falls again)."""
    heap: list[tuple[float, int, int]] = []

    def offer(i: int) -> None:
        top = min(max_pcus[i], pcus[i] + spare)
        if top <= pcus[i]:
            return
        now = stage_time(i, pcus[i])[0]
        step, after = pcus[i] + 1, stage_time(i, pcus[i] + 1)[0]
        if after >= now:  # flat here: the jump to the fewest PCUs reaching what ``top`` reaches
            after = stage_time(i, top)[0]
            if after >= now:
                return
            step = _fewest(stage_time, i, pcus[i] + 1, top, after)
        heapq.heappush(heap, (-(now - after) / (step - pcus[i]), i, step))

    for i in range(len(pcus)):
        offer(i)
    while spare > 0 and heap:
        _, i, step = heapq.heappop(heap)
        if step - pcus[i] > spare:  # offered when more were free
            offer(i)
            continue
        spare -= step - pcus[i]
        pcus[i] = step
        offer(i)


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
