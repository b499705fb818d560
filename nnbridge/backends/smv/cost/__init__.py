"""The SMV performance model: per-invocation transfer + compute, CPU work, scheduling.

``cost_plan`` turns a tiling plan into a ``LayerCost`` whose compute / transfer /
CPU parts add up to the operator's latency (SMAUG's breakdown, spec §8.1);
``fastest_schedule`` chooses over how many of the accelerators an operator's
tile groups are dealt and in how many sub-batch calls it runs.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Sequence
from dataclasses import dataclass

from ..config import MemPolicy, SmvConfig
from ..tiling import TilingPlan, spread
from .compute import compute_cycles
from .cpu import copy_ns, copy_stats, cpu_op_ns
from .schedule import accel_phase_ns
from .transfer import acp_cycles, convert_cycles, dma_cycles, flush_ns


@dataclass(kw_only=True)
class LayerCost:
    compute_ns: float = 0.0
    transfer_ns: float = 0.0
    cpu_ns: float = 0.0
    tiling_ns: float = 0.0  # the data preparation/finalization part of cpu_ns (tile copies)
    accel_cycles: float = 0.0  # Σ per-invocation accelerator cycles (what gem5-Aladdin reports)
    compute_cycles: float = 0.0  # the kernels' loops: the PE array/vector units plus the fp16 conversions
    convert_cycles: float = 0.0  # of which the fp16<->fp32 conversions of loaded and stored tiles
    dram_bytes: int = 0
    invocations: int = 0
    macs: int = 0

    @property
    def latency_ns(self) -> float:
        return self.compute_ns + self.transfer_ns + self.cpu_ns


def _transfer(nbytes: int, dma: bool, rate: float, cfg: SmvConfig) -> tuple[float, float]:
    """(accelerator cycles, CPU cache-maintenance ns) for one operand transfer."""
    if dma:
        return dma_cycles(nbytes, rate, cfg), flush_ns(nbytes, cfg)
    return acp_cycles(nbytes, cfg), 0.0


def cost_plan(plan: TilingPlan, cfg: SmvConfig, extra_cpu_ns: float = 0.0) -> LayerCost:
    """Latency parts of one accelerated operator (``extra_cpu_ns``: e.g. a Repeat for broadcasting)."""
    rate, store_rate, _ = cfg.family_rates(plan.family)
    act_dma = cfg.mem_policy.activations_use_dma()
    w_dma = cfg.mem_policy.weights_use_dma()
    ns_per_cycle = 1.0 / cfg.clock_ghz
    groups, cpu_each, accel_each = [], [], []
    total = LayerCost(invocations=plan.num_invocations)
    comp_sum = xfer_sum = flush_sum = 0.0
    for inv in plan.invocations:
        c_in, f_in = _transfer(inv.in_bytes, act_dma, rate, cfg)
        c_w, f_w = _transfer(inv.w_bytes, w_dma, rate, cfg)
        c_out, f_out = _transfer(inv.out_bytes, act_dma, store_rate, cfg)
        convert = sum(convert_cycles(b, cfg) for b in (inv.in_bytes, inv.w_bytes, inv.out_bytes))
        comp = compute_cycles(plan.family, inv, cfg) + convert
        total.convert_cycles += convert
        xfer = c_in + c_w + c_out
        flush = f_in + f_w + f_out
        groups.append(inv.group)
        cpu_each.append(cfg.invoke_overhead_ns + flush)
        accel_each.append((comp + xfer) * ns_per_cycle)
        comp_sum += comp
        xfer_sum += xfer
        flush_sum += flush
        total.dram_bytes += inv.in_bytes + inv.w_bytes + inv.out_bytes
        total.macs += inv.macs
    total.accel_cycles = comp_sum + xfer_sum
    total.compute_cycles = comp_sum
    phase = accel_phase_ns(groups, cpu_each, accel_each, plan.accels, total.dram_bytes, cfg.dram_gbps,
                           blocking=cfg.num_accels == 1)
    serial = comp_sum * ns_per_cycle + xfer_sum * ns_per_cycle + flush_sum + cfg.invoke_overhead_ns * len(groups)
    scale = phase / serial if serial else 0.0
    total.compute_ns = comp_sum * ns_per_cycle * scale
    total.transfer_ns = (xfer_sum * ns_per_cycle + flush_sum) * scale
    calls = nbytes = 0
    for key in ("input", "output"):  # weights are tiled at load time (fast-forwarded in SMAUG)
        if key in plan.tiled:
            c, b = copy_stats(plan.tiled[key], cfg.alignment)
            calls, nbytes = calls + c, nbytes + b
    total.dram_bytes += 2 * nbytes
    total.tiling_ns = copy_ns(calls, nbytes, cfg)
    total.cpu_ns = (cfg.op_overhead_ns + total.tiling_ns
                    + cfg.invoke_overhead_ns * len(groups) * scale + extra_cpu_ns)
    return total


def fastest_schedule(calls: Sequence[tuple[TilingPlan, int]], cfg: SmvConfig) -> tuple[TilingPlan, LayerCost]:
    """The fastest way to run an operator, with its cost: one of ``calls`` — (plan, times it is
    issued): SMAUG's plan of the whole operator once, or a plan of a sub-batch issued once per
    sub-batch — with its tile groups dealt round-robin over 1 to ``num_accels`` accelerators.

    SMAUG's runtime deals every conv/FC over all the accelerators and runs an operator on its
    whole batch (``smaug_schedule``). But one more accelerator
    changes which tiles each keeps between its invocations and can move more bytes than it saves
    time (a 3-conv net at 2 GB/s was 25 % slower on 5 accelerators than on 4), and SMAUG's tiler
    can cut a larger batch worse (a 2-sample conv output that no longer fits one tile is cut by
    channels, with per-row copies: half the throughput of one sample). So the compiler keeps the
    best count and calls, and a bigger machine or batch is never slower (``Planner.calls`` offers
    the candidates; the functional simulation follows the one kept)."""
    best: tuple[TilingPlan, LayerCost] | None = None
    for plan, times in calls:
        counts = [cfg.num_accels] if cfg.smaug_schedule or cfg.num_accels == 1 else \
            range(1, min(cfg.num_accels, plan.num_groups) + 1)  # more than the groups: some stay idle
        for count in counts:
            dealt = spread(plan, count, cfg.alignment)
            cost = _times(cost_plan(dealt, cfg), times)
            if best is None or cost.latency_ns < best[1].latency_ns * (1 - 1e-12):
                best = (dataclasses.replace(dealt, calls=times), cost)
    return best


def _times(cost: LayerCost, calls: int) -> LayerCost:
    """The cost of ``calls`` calls, one after another (every part adds up)."""
    if calls == 1:
        return cost
    return LayerCost(**{f.name: getattr(cost, f.name) * calls for f in dataclasses.fields(LayerCost)})


def cost_cpu_op(nbytes_moved: int, macs: int, cfg: SmvConfig) -> LayerCost:
    return LayerCost(cpu_ns=cpu_op_ns(nbytes_moved, macs, cfg), dram_bytes=nbytes_moved)


__all__ = ["LayerCost", "MemPolicy", "cost_cpu_op", "cost_plan", "fastest_schedule"]
