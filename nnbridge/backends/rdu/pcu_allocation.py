"""The PCUs of every stage of a partition (specs/rdu-architecture.md §5.2): each section's stages
water-filled on the machine's PCUs (``allocate.water_fill``) against the stage times of the
performance model (``pipeline_model.StageModel``), then placed; ``pipeline_model.estimate``
prices the placed plan."""

from __future__ import annotations

import functools
import math
from collections.abc import Callable

from .allocate import place, water_fill
from .config import CompileOptions, Machine
from .partition import Section
from .pipeline_model import PlanPricing, StageModel


def allocate_sections(sections: list[Section], machine: Machine, options: CompileOptions, samples: int,
                      pricing: PlanPricing | None = None) -> None:
    """Give every section's stages their PCUs on ``machine`` and place them (``estimate`` prices
    the placed plan, on this machine or another); ``pricing``: the sections', if already made."""
    batch, micro = options.batch_size, options.micro_batch or 1
    tokens = math.ceil(batch / micro)
    sync_s = machine.stage_sync_cycles / (machine.clock_ghz * 1e9)
    pricing = pricing or PlanPricing(sections)
    for section, models, producers_of in zip(sections, pricing.models(machine, samples, micro, batch),
                                             pricing.producers):
        pcus = _allocate(section, models, producers_of, machine.n_pcu, tokens, micro, sync_s)
        for k, p in zip(section.kernels, pcus):
            k.pcus = p
        place(section)


class _Memo(dict):
    """``f(key)`` per key, worked out on first use (a dict lookup after that)."""

    def __init__(self, f: Callable):
        super().__init__()
        self.f = f

    def __missing__(self, key):
        value = self[key] = self.f(key)
        return value


#: the allocations made as if off-chip memory were 2, 4, … times slower are tried up to this factor
OFFCHIP_SCALES_TRIED = 1 << 12


def _allocate(section: Section, models: list[StageModel], producers_of: tuple, n_pcu: int, tokens: int,
              micro: int, sync_s: float) -> list[int]:
    """PCUs per stage (``_allocation``, shared by identical sections)."""
    stages = tuple((m.key(), k.max_pcus) for m, k in zip(models, section.kernels))
    return list(_allocation(stages, producers_of, n_pcu, tokens, micro, sync_s))


@functools.lru_cache(maxsize=4096)
def _allocation(stages: tuple, producers_of: tuple, n_pcu: int, tokens: int, micro: int,
                sync_s: float) -> tuple[int, ...]:
    """The allocation with the least latency for the batch among those made for the machine and,
    in a section with off-chip streams, as if off-chip memory were 2, 4, … times slower, until it
    bounds every stage at one PCU. The scales do not depend on the bandwidth, so the
    allocations tried on a machine include every one tried on one with half its off-chip bandwidth
    (whose allocation is then never priced slower here). Only a token of one sample has its
    allocations refined against the latency (the local search is most of a compile's time, and the
    compiler allocates a plan for every micro-batch it tries)."""
    models = [StageModel.of(key) for key, _ in stages]
    max_pcus = [top for _, top in stages]
    timers: dict[float, list[_Memo]] = {}

    def times(scale: float) -> list[_Memo]:
        """Per stage, its time and limit on p PCUs (``memo[p]``), remembered: the searches ask for
        the same ones again and again."""
        if scale not in timers:
            timers[scale] = [_Memo(functools.partial(m.time, offchip_scale=scale)) for m in models]
        return timers[scale]

    def timer(scale: float) -> Callable[[int, int], tuple[float, str]]:
        """Stage i's time on p PCUs (``times``)."""
        memos = times(scale)
        return lambda i, p: memos[i][p]

    def latency_at(scale: float) -> Callable[[list[int]], float]:
        memos = times(scale)
        token_memos = [_Memo(lambda p, memo=memo: micro * memo[p][0] + sync_s) for memo in memos]

        def latency(pcus: list[int]) -> float:
            """A token's way through the stages (``arrivals`` plus its own time, inlined: the local
            search calls this millions of times) and the slowest stage per further token."""
            token_times = [memo[p] for memo, p in zip(token_memos, pcus)]
            reach: list[float] = []
            way = 0.0
            for before, t in zip(producers_of, token_times):
                begin = (reach[before[0]] if len(before) == 1 else
                         max([reach[j] for j in before], default=0.0)) + t
                reach.append(begin)
                if begin > way:
                    way = begin
            return way + (tokens - 1) * max(token_times, default=0.0)
        return latency

    scales = [1.0]
    if len(models) > 1 and any(m.offchip > 0 for m in models):
        # until every stage that reads off-chip memory is bound by it at one PCU (from there on the
        # allocation no longer changes; a stage that reads none never does)
        while scales[-1] < OFFCHIP_SCALES_TRIED and any(0 < m.offchip * scales[-1] < m.time(1, 0.0)[0]
                                                        for m in models):
            scales.append(scales[-1] * 2)
    latency = latency_at(1.0)
    best: tuple[float, list[int]] | None = None
    for scale in scales:
        pcus = water_fill(len(models), n_pcu, max_pcus, timer(scale), latency_at(scale) if micro == 1 else None)
        t = latency(pcus)
        if best is None or t < best[0] * (1 - 1e-12):
            best = (t, pcus)
    return tuple(best[1])
