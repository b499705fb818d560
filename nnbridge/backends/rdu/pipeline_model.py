"""The RDU performance model (specs/rdu-architecture.md §5.2 steps 3–8).

Stage time per sample = max(compute, PMU bandwidth, network, off-chip streams); a token of
micro-batch samples shares each weight read (from its PMUs, or streamed from off chip). A section
is a pipeline: throughput = 1 / slowest stage; the batch takes the first token's pass along the
heaviest chain of stages plus (tokens − 1) × slowest stage, a token being one micro-batch (so
batch 1 costs one pass, not depth × the slowest stage, and a large batch the slowest stage
each). Sections run one after another over the whole batch; between two sections the fabric
is reconfigured, live tensors are spilled to and filled from off-chip memory, and weights are
loaded unless all of them stay resident.
"""

from __future__ import annotations

import dataclasses
import math
from dataclasses import asdict, dataclass, field
from typing import Any, TypedDict

from .config import CompileOptions, Machine, Tier
from .partition import Kernel, Section, arrivals, producers


class Totals(TypedDict, total=False):
    """What an estimate adds up to, one key per figure (keyword-built, type-checked: a figure
    misnamed or given the wrong type is caught by the checker, not printed silently)."""

    sections: int
    kernels: int
    ops: int
    max_depth: int
    flop_per_sample: float
    throughput_samples_per_s: float
    steady_throughput_samples_per_s: float
    stage_latency_us: float
    latency_us: float
    latency_per_sample_us: float
    flops_utilization: float
    steady_flops_utilization: float
    compute_units_used: int
    compute_units: int
    memory_bytes: float
    memory_units: int
    memory_utilization: float
    weights_resident: bool
    reconfig_us: float
    spill_us: float
    weight_load_us: float
    unknown_shape_values: int
    latency_us_by_kind: dict[str, float]
    weights_by_tier: dict[str, int]
    offchip_bytes_by_tier: dict[str, float]
    calls: int  # a batch larger than the graph's own runs the graph this many times


@dataclass(kw_only=True)
class StageEstimate:
    section: int
    kernel: str
    ops: int
    anchor: str
    pcus: int
    pmus: int
    flops_per_sample: float
    compute_us: float
    pmu_us: float
    network_us: float
    offchip_us: float
    stage_us: float  # per micro-batch token, including the synchronisation overhead
    bottleneck: str
    start_us: float = 0.0  # when the first token reaches the stage, from the section's start
    sockets_us: float = 0.0  # exchanging partial sums with the other tensor-parallel sockets


@dataclass(kw_only=True)
class SectionEstimate:
    index: int
    kernels: int
    ops: int
    depth: int
    pcus: int
    pmus: int
    stage_us: float  # slowest stage, per token
    bottleneck: str
    pipeline_us: float  # the whole batch through this section
    reconfig_us: float
    spill_us: float
    weight_load_us: float  # the part of the weight load the previous section does not hide
    kind: str = "fwd"
    weight_prefetch_us: float = 0.0  # loaded while the previous section ran (not in total_us)

    @property
    def total_us(self) -> float:
        return self.pipeline_us + self.reconfig_us + self.spill_us + self.weight_load_us


@dataclass(kw_only=True)
class Estimate:
    machine: str
    mode: str
    batch_size: int
    micro_batch: int
    sections: list[SectionEstimate]
    stages: list[StageEstimate]
    totals: Totals = field(default_factory=lambda: Totals())

    def to_dict(self) -> dict[str, Any]:
        return {"machine": self.machine, "mode": self.mode, "batch_size": self.batch_size,
                "micro_batch": self.micro_batch, "totals": self.totals,
                "sections": [asdict(s) | {"total_us": s.total_us} for s in self.sections],
                "stages": [asdict(s) for s in self.stages]}


def host_bytes(sections: list[Section]) -> int:
    """Bytes of graph inputs and outputs one call moves between the first tier and the chip."""
    return sum(sum(s.host_in.values()) + sum(s.host_out.values()) for s in sections)


class WeightHomes:
    """Where each kernel's weights live off chip: the tiers filled in order (HBM, then DDR) by
    capacity, in program order; reading a kernel's weights takes Σ bytes / bandwidth over the
    tiers that hold them. Activations spilled between sections use what capacity is left."""

    def __init__(self, sections: list[Section], machine: Machine):
        self.tiers = machine.tiers
        free = [t.capacity_bytes for t in machine.tiers]
        # the graph's inputs and outputs (an LLM's KV cache) live in the first tier before any weight
        free[0] = max(0, free[0] - host_bytes(sections))
        self.of: dict[int, list[tuple[int, int]]] = {}  # id(kernel) → [(tier index, bytes)]
        for s in sections:
            for k in s.kernels:
                left, parts = k.weight_bytes, []
                for i in range(len(free)):
                    if left <= 0:
                        break
                    # the last tier takes what the others cannot (capacity is a preset's, not a wall)
                    take = left if i == len(free) - 1 else min(left, free[i])
                    if take > 0:
                        parts.append((i, take))
                        free[i] -= take
                        left -= take
                self.of[id(k)] = parts
        self.free = free

    def read_s(self, k: Kernel, fraction: float = 1.0) -> float:
        """Seconds to read ``fraction`` of ``k``'s weights from their tiers."""
        return sum(b * fraction / (self.tiers[i].bw_gbps * 1e9) for i, b in self.of.get(id(k), ()))

    def bytes_by_tier(self, kernels) -> dict[str, int]:
        totals = {t.name: 0 for t in self.tiers}
        for k in kernels:
            for i, b in self.of.get(id(k), ()):
                totals[self.tiers[i].name] += b
        return totals


def weight_reuse(micro: int, samples: int, batch: int) -> int:
    """Samples that share one read of a kernel's weights: a token's, or a call's when the graph's
    own batch is larger (its samples are rows of the same matrix product) — never more than the
    batch has (a batch of fewer samples than a call still reads every weight once)."""
    return min(max(micro, samples), batch)


def token_scale(micro: int, samples: int) -> float:
    """How many calls' worth of activations a stage stages at once: a token of ``micro`` samples
    keeps them all on chip to apply each weight read to every one of them."""
    return max(1.0, micro / samples)


class StageModel:
    """Per-sample stage time of one kernel as a function of its PCU count (``_KernelRates.model``)."""

    def __init__(self, compute: float, pmu: float, pmus: int, network: float, offchip: float, link: float):
        self.compute = compute
        self.pmu = pmu
        self.pmus = pmus
        self.network = network
        self.offchip = offchip
        self.link = link

    def key(self) -> tuple:
        """What the stage time depends on (identical stages, e.g. of repeated layers, share one)."""
        return self.compute, self.pmu, self.pmus, self.network, self.offchip, self.link

    @classmethod
    def of(cls, key: tuple) -> StageModel:
        return cls(*key)

    def terms(self, pcus: int) -> dict[str, float]:
        # a stage streams through its own PMUs and the PMU beside each of its PCUs (1:1 checkerboard)
        return {"compute": self.compute / pcus, "pmu": self.pmu / max(self.pmus, pcus, 1),
                "network": self.network / pcus,
                "offchip": self.offchip, "sockets": self.link}

    def time(self, pcus: int, offchip_scale: float = 1.0) -> tuple[float, str]:
        """The stage time and what bounds it (``terms`` without building a dict: the allocation
        calls this for every PCU count it tries); ``offchip_scale``: as if off-chip memory were
        that many times slower."""
        best, limit = self.compute / pcus, "compute"  # unrolled: the compiler's innermost call
        value = self.pmu / (self.pmus if self.pmus > pcus else pcus if pcus > 1 else 1)
        if value > best:
            best, limit = value, "pmu"
        value = self.network / pcus
        if value > best:
            best, limit = value, "network"
        value = self.offchip * offchip_scale
        if value > best:
            best, limit = value, "offchip"
        if self.link > best:
            best, limit = self.link, "sockets"
        return best, limit


class _KernelRates:
    """A kernel's stage model on one machine at one weight read per sample; only the reads a token
    shares (``model``) depend on the micro-batch, so the rest is worked out once per machine."""

    def __init__(self, k: Kernel, section: Section, machine: Machine, samples: int, homes: WeightHomes):
        f = machine.clock_ghz * 1e9
        self.kernel, self.homes = k, homes
        self.compute = k.flops / samples / (machine.flop_per_pcu_per_cycle * f)
        self.activations = (k.in_bytes + k.out_bytes) / samples
        self.pmu_rate = machine.pmu_bw_bytes_per_cycle * f
        self.network = k.out_bytes / samples / (machine.switch_bw_bytes_per_cycle * f)
        host = sum(section.host_in.get(n, 0) for n in k.inputs) + sum(section.host_out.get(n, 0) for n in k.outputs)
        self.host = host / samples / (machine.tiers[0].bw_gbps * 1e9)
        # tensor-parallel exchange with the other sockets (bandwidth per sample, latency per call)
        self.link = (k.link_bytes / (machine.link_gbps * 1e9) + k.link_steps * machine.link_latency_us * 1e-6) \
            / samples

    def model(self, reuse: int) -> StageModel:
        """The stage model with each weight read shared by ``reuse`` samples (``weight_reuse``)."""
        k = self.kernel
        # streamed weights: read from the tiers that hold them once per token (or call)
        streamed = self.homes.read_s(k, 1.0 / reuse) if k.streamed_weights else 0.0
        return StageModel(self.compute, (self.activations + k.weight_bytes / reuse) / self.pmu_rate, k.pmus,
                           self.network, self.host + streamed, self.link)


class PlanPricing:
    """What pricing one partition reads of it, worked out once for every allocation and estimate
    made of it (the plan search prices a partition for several machines and micro-batches, and a
    batch's estimate per call too): each section's producers, the weights' homes per set of tiers,
    and the stage models per machine rates, samples and weight reuse — keyed by everything they
    depend on. It stays valid while the sections keep their kernels, and the kernels their edges,
    weights and PMUs: allocating changes only PCUs, which no model reads."""

    def __init__(self, sections: list[Section]):
        self.sections = sections
        self.producers = [producers(s.kernels) for s in sections]
        self.ops = [sum(len(k.ops) for k in s.kernels) for s in sections]
        self.pmus = [sum(k.pmus for k in s.kernels) for s in sections]
        self.held = [held_weights(s) for s in sections]
        self.staged = [staging_bytes(s, 1) for s in sections]  # × a scale: ``staging_bytes`` at that scale
        self.moved = [sum(s.spills.values()) + sum(s.fills.values()) for s in sections]  # spilled and filled
        # nothing spilled is freed before the call ends: the last boundary holds every spill (each
        # value is spilled by the one section that computes it)
        self.live = sum(sum(s.spills.values()) for s in sections)
        self.streams = any(k.streamed_weights for s in sections for k in s.kernels)
        self.weights = sum(k.weight_bytes for s in sections for k in s.kernels)
        self._reconfigured: dict[str, list[bool]] = {}
        self._loads: dict[tuple[Tier, ...], list[float]] = {}
        self._homes: dict[tuple[Tier, ...], WeightHomes] = {}
        self._rates: dict[tuple, list[list[_KernelRates]]] = {}
        self._models: dict[tuple, list[list[StageModel]]] = {}

    def homes(self, machine: Machine) -> WeightHomes:
        """``WeightHomes`` on ``machine`` (which reads only its tiers)."""
        homes = self._homes.get(machine.tiers)
        if homes is None:
            homes = self._homes[machine.tiers] = WeightHomes(self.sections, machine)
        return homes

    def staging(self, scale: float = 1.0) -> list[float]:
        """``staging_bytes`` of every section at ``scale``."""
        return [b * scale for b in self.staged]

    def reconfigurations(self, mode: str) -> list[bool]:
        """``reconfigurations`` of the sections in ``mode``."""
        found = self._reconfigured.get(mode)
        if found is None:
            found = self._reconfigured[mode] = reconfigurations(self.sections, mode)
        return found

    def load_s(self, machine: Machine) -> list[float]:
        """Per section, seconds to load the weights it holds (not those it streams) from their tiers."""
        found = self._loads.get(machine.tiers)
        if found is None:
            homes = self.homes(machine)
            found = self._loads[machine.tiers] = [sum(homes.read_s(k) for k in s.kernels if not k.streamed_weights)
                                                  for s in self.sections]
        return found

    def models(self, machine: Machine, samples: int, micro: int, batch: int) -> list[list[StageModel]]:
        """Per section, its stages' models on ``machine`` (which they read only through its rates
        and tiers: the plan search's variants of a machine differ in PMUs, SRAM or FLOPs per PCU)
        for the weight reuse of ``micro`` and ``batch``."""
        rated = (machine.clock_ghz, machine.flop_per_pcu_per_cycle, machine.pmu_bw_bytes_per_cycle,
                 machine.switch_bw_bytes_per_cycle, machine.tiers, machine.link_gbps, machine.link_latency_us,
                 samples)
        reuse = weight_reuse(micro, samples, batch)
        models = self._models.get((rated, reuse))
        if models is None:
            rates = self._rates.get(rated)
            if rates is None:
                homes = self.homes(machine)
                rates = self._rates[rated] = [[_KernelRates(k, s, machine, samples, homes) for k in s.kernels]
                                              for s in self.sections]
            models = self._models[rated, reuse] = [[r.model(reuse) for r in section] for section in rates]
        return models


def samples_per_call(graph) -> int:
    """Samples in one call of the graph: the leading dim of its first input (1 if unknown)."""
    for v in graph.inputs:
        shape = v.type.shape
        if shape and isinstance(shape[0], int) and shape[0] > 0:
            return shape[0]
    return 1


def reconfigurations(sections: list[Section], mode: str) -> list[bool]:
    """Per section, whether the fabric is reconfigured before it: not before the first, and not
    (kernel looping, o1) before one running the same program as the section before it (the next
    identical decoder layer is the same configuration called again)."""
    if mode != "o1":
        return [i > 0 for i in range(len(sections))]
    programs = [program(s) for s in sections]
    return [i > 0 and programs[i] != programs[i - 1] for i in range(len(sections))]


def latency_floor_us(sections: list[Section], machine: Machine, options: CompileOptions, samples: int,
                     pricing: PlanPricing | None = None) -> float:
    """A lower bound on any estimate of the plan, so a plan whose floor exceeds a known latency
    need not be priced: its reconfigurations (each call of the batch makes them all), and per
    section the batch at the pace of its slowest stage — given every PCU the other stages leave it
    and the most weight reuse a token can have — or of all its stages' compute on every PCU."""
    floor = sum(reconfigurations(sections, options.mode)) * machine.reconfig_us
    batch = options.batch_size
    pricing = pricing or PlanPricing(sections)
    for section, models in zip(sections, pricing.models(machine, samples, batch, batch)):
        left = max(1, machine.n_pcu - len(section.kernels) + 1)
        slowest = max(m.time(min(k.max_pcus, left))[0] for m, k in zip(models, section.kernels))
        shared = sum(m.compute for m in models) / machine.n_pcu
        floor += batch * max(slowest, shared) * 1e6
    return floor


def micro_batches(batch: int) -> list[int]:
    """The micro-batches the compiler tries for a batch: the powers of two up to it and the batch
    halved again and again (so those tried for a batch include those tried for a quarter of it)."""
    found = {batch, *_halvings(batch)}
    power = 1
    while power < batch:
        found.add(power)
        power *= 2
    return sorted(found)


def fits_on_chip(sections: list[Section], machine: Machine, micro: int, samples: int,
                 pricing: PlanPricing | None = None) -> bool:
    """Whether every section's held weights and its stages' buffers, staging a token of ``micro``
    samples, fit on chip (or need no more room than one sample per token does); ``pricing``: the
    sections', if already made."""
    pricing = pricing or PlanPricing(sections)
    capacity = machine.on_chip_bytes
    return all(held + token <= max(capacity, held + one) for held, token, one in
               zip(pricing.held, pricing.staging(token_scale(micro, samples)), pricing.staging()))


def best_micro_batch(sections: list[Section], machine: Machine, options: CompileOptions, samples: int) -> Estimate:
    """The estimate of the placed plan with the fastest micro-batch that fits (``micro_batches``),
    or with the options' own micro-batch when they give one."""
    if options.micro_batch is not None:
        return estimate(sections, machine, options, samples)
    best: tuple[float, CompileOptions] | None = None
    pricing = PlanPricing(sections)
    for micro in micro_batches(options.batch_size):
        if micro > 1 and not fits_on_chip(sections, machine, micro, samples, pricing):
            continue
        chosen = dataclasses.replace(options, micro_batch=micro)
        latency = latency_us(sections, machine, chosen, samples, pricing)
        if best is None or latency < best[0] * (1 - 1e-12):
            best = (latency, chosen)
    return estimate(sections, machine, best[1], samples, pricing)


def estimate(sections: list[Section], machine: Machine, options: CompileOptions, samples: int,
             pricing: PlanPricing | None = None) -> Estimate:
    """The time for the batch of the placed plan (``allocate_sections``) on ``machine``
    (``pricing``: the sections', if already made)."""
    return _estimate(sections, machine, options, samples, rows=True, pricing=pricing or PlanPricing(sections))


def latency_us(sections: list[Section], machine: Machine, options: CompileOptions, samples: int,
               pricing: PlanPricing | None = None) -> float:
    """``estimate(...).totals["latency_us"]``, by the same steps but without the stage rows and the
    other totals: a search compares plans by it and estimates only the one it keeps in full."""
    return _estimate(sections, machine, options, samples, rows=False,
                     pricing=pricing or PlanPricing(sections)).totals["latency_us"]


def _estimate(sections: list[Section], machine: Machine, options: CompileOptions, samples: int,
              rows: bool, pricing: PlanPricing) -> Estimate:
    """``estimate``; without ``rows``, its sections and latency only (no stages, no other totals)."""
    batch, micro = options.batch_size, options.micro_batch or 1
    tokens = math.ceil(batch / micro)
    sync_s = machine.stage_sync_cycles / (machine.clock_ghz * 1e9)
    scale = token_scale(micro, samples)
    resident = _weights_resident(pricing, machine, scale)
    homes = pricing.homes(machine)
    spill_tier = _spill_tier(pricing.live, machine, batch, homes.free)
    stages: list[StageEstimate] = []
    section_estimates: list[SectionEstimate] = []
    offchip_busy_us: dict[int, float] = {}  # per section: its stages' off-chip reads, for the whole batch
    reconfigured = pricing.reconfigurations(options.mode)
    loads = [0.0] * len(sections) if resident else pricing.load_s(machine)
    for i, (section, models) in enumerate(zip(sections, pricing.models(machine, samples, micro, batch))):
        worst, slowest, fill = _pipeline(section, models, pricing.producers[i], micro, sync_s,
                                         stages if rows else None, samples)
        # the stages stream concurrently through the same off-chip tiers: together no faster than
        # their bytes over the bandwidth
        busy_us = offchip_busy_us[section.index] = sum(micro * m.offchip for m in models) * tokens * 1e6
        pipelined_us = (fill + (tokens - 1) * worst) * 1e6
        section_estimates.append(SectionEstimate(
            index=section.index, kernels=len(section.kernels), ops=pricing.ops[i], depth=section.depth,
            pcus=sum(k.pcus for k in section.kernels), pmus=pricing.pmus[i], stage_us=worst * 1e6,
            bottleneck=slowest if pipelined_us >= busy_us else "all stages (off-chip bandwidth shared)",
            pipeline_us=max(pipelined_us, busy_us),
            reconfig_us=machine.reconfig_us if reconfigured[i] else 0.0,
            spill_us=pricing.moved[i] * batch / samples / (spill_tier.bw_gbps * 1e9) * 1e6,
            weight_load_us=loads[i] * 1e6, kind=section.kind,
        ))
    if not resident:
        _prefetch(pricing, section_estimates, machine, offchip_busy_us, scale)
    result = Estimate(machine=machine.name, mode=options.mode, batch_size=batch, micro_batch=micro,
                      sections=section_estimates, stages=stages)
    if rows:
        result.totals = _totals(result, sections, machine, samples, resident)
        result.totals["weights_by_tier"] = homes.bytes_by_tier(k for s in sections for k in s.kernels)
        reads = tokens * micro / weight_reuse(micro, samples, batch)  # of each streamed weight
        result.totals["offchip_bytes_by_tier"] = _offchip_bytes(result, sections, homes, spill_tier, resident,
                                                                reads, samples)
    else:
        result.totals = Totals(latency_us=_latency_us(section_estimates), weights_resident=resident)
    for calls in _calls_spilling_faster(pricing.live, machine, batch, homes.free, spill_tier):
        in_calls = _in_calls(sections, machine, options, samples, calls, rows, pricing)
        if in_calls.totals["latency_us"] < result.totals["latency_us"]:
            result = in_calls
    return result


def _pipeline(section: Section, models: list[StageModel], producers_of: tuple, micro: int, sync_s: float,
              stages: list[StageEstimate] | None, samples: int) -> tuple[float, str, float]:
    """A placed section as a pipeline: its slowest stage's time per token, that stage (``kernel
    (limit)``) and one token's way across the section; each stage's row is added to ``stages``
    (unless None)."""
    worst, worst_name, worst_limit = 0.0, "", ""
    timed = [model.time(k.pcus) for k, model in zip(section.kernels, models)]
    token_times = [micro * t + sync_s for t, _ in timed]
    starts = arrivals(producers_of, token_times)
    for k, model, (_, limit), token_s, start in zip(section.kernels, models, timed, token_times, starts):
        if stages is not None:
            stages.append(_stage_row(section, k, model, samples, limit, token_s, start))
        if token_s > worst:
            worst, worst_name, worst_limit = token_s, k.name, limit
    fill = max((s + t for s, t in zip(starts, token_times)), default=0.0)  # one token across the section
    return worst, f"{worst_name} ({worst_limit})", fill


def _stage_row(section: Section, k: Kernel, model: StageModel, samples: int, limit: str, token_s: float,
               start: float) -> StageEstimate:
    """The estimate's row of one stage (``token_s``: its time per token; ``start``: when the first
    token reaches it)."""
    terms = model.terms(k.pcus)
    return StageEstimate(
        section=section.index, kernel=k.name, ops=len(k.ops), anchor=k.anchor, pcus=k.pcus, pmus=k.pmus,
        flops_per_sample=k.flops / samples, compute_us=terms["compute"] * 1e6, pmu_us=terms["pmu"] * 1e6,
        network_us=terms["network"] * 1e6, offchip_us=terms["offchip"] * 1e6, stage_us=token_s * 1e6,
        bottleneck=limit, start_us=start * 1e6, sockets_us=terms["sockets"] * 1e6)


def _latency_us(sections: list[SectionEstimate]) -> float:
    """The batch's time: every section's, one after another."""
    return sum(s.total_us for s in sections)


def _calls_spilling_faster(live: int, machine: Machine, batch: int, free: list[int], spill_tier: Tier) -> list[int]:
    """For each tier faster than the one the batch spills to, the fewest calls whose share of the
    batch spills there (a runtime may run a batch as several calls of the same program)."""
    counts = []
    for tier in machine.tiers:
        if tier is spill_tier:
            break
        per_call = next((c for c in _halvings(batch) if _spill_tier(live, machine, c, free) is tier), None)
        if per_call:
            counts.append(math.ceil(batch / per_call))
    return counts


def _halvings(batch: int) -> list[int]:
    """batch/2, batch/4, … down to 1 (the per-call batches tried)."""
    out, size = [], batch
    while size > 1:
        size = math.ceil(size / 2)
        out.append(size)
    return out


def _in_calls(sections: list[Section], machine: Machine, options: CompileOptions, samples: int,
              calls: int, rows: bool, pricing: PlanPricing) -> Estimate:
    """The batch run as ``calls`` calls of (nearly) equal size: each call reconfigures, loads and
    spills as a batch of its size does; the rows are one call's, the times the sum over the calls
    (``rows``: as in ``_estimate``)."""
    batch, micro = options.batch_size, options.micro_batch or 1
    size = math.ceil(batch / calls)
    last = batch - (calls - 1) * size
    one = _estimate(sections, machine, dataclasses.replace(options, batch_size=size, micro_batch=min(micro, size)),
                    samples, rows, pricing)
    latency = (calls - 1) * one.totals["latency_us"] + (
        one.totals["latency_us"] if last == size else
        latency_us(sections, machine, dataclasses.replace(options, batch_size=last, micro_batch=min(micro, last)),
                   samples, pricing))
    scale = latency / one.totals["latency_us"] if one.totals["latency_us"] else float(calls)
    scaled = [dataclasses.replace(s, pipeline_us=s.pipeline_us * scale, reconfig_us=s.reconfig_us * scale,
                                  spill_us=s.spill_us * scale, weight_load_us=s.weight_load_us * scale,
                                  weight_prefetch_us=s.weight_prefetch_us * scale) for s in one.sections]
    result = Estimate(machine=machine.name, mode=options.mode, batch_size=batch, micro_batch=one.micro_batch,
                      sections=scaled, stages=one.stages)
    if not rows:
        result.totals = Totals(latency_us=_latency_us(scaled), weights_resident=one.totals["weights_resident"])
        return result
    result.totals = _totals(result, sections, machine, samples, one.totals["weights_resident"])
    result.totals["weights_by_tier"] = one.totals["weights_by_tier"]
    result.totals["offchip_bytes_by_tier"] = {t: b * scale for t, b in one.totals["offchip_bytes_by_tier"].items()}
    result.totals["calls"] = calls
    return result


def _offchip_bytes(est: Estimate, sections: list[Section], homes: WeightHomes, spill_tier: Tier,
                   resident: bool, reads: float, samples: int) -> dict[str, float]:
    """Bytes each tier delivers during the batch: weight loads, streamed weights (``reads`` times:
    once per token, or per call) and spills/fills (host I/O counted on the first tier)."""
    moved = {t.name: 0.0 for t in homes.tiers}
    for s in sections:
        for k in s.kernels:
            if k.streamed_weights or not resident:
                for i, b in homes.of.get(id(k), ()):
                    moved[homes.tiers[i].name] += b * (reads if k.streamed_weights else 1)
    for e in est.sections:
        moved[spill_tier.name] += e.spill_us * 1e-6 * spill_tier.bw_gbps * 1e9
    moved[homes.tiers[0].name] += host_bytes(sections) * est.batch_size / max(samples, 1)
    return moved


def program(section: Section) -> tuple:
    """What configures the fabric for a section: its kernels' ops, work, weights and traffic
    (not the names of the values or the weights' contents)."""
    return tuple((len(k.ops), k.anchor, k.flops, k.weight_bytes, k.streamed_weights, tuple(k.inputs.values()),
                  tuple(k.outputs.values()), tuple(k.buffer_bytes), k.link_bytes) for k in section.kernels)


def held_weights(section: Section) -> int:
    """Weight bytes a section keeps on chip (streamed ones pass through)."""
    return sum(k.weight_bytes for k in section.kernels if not k.streamed_weights)


def staging_bytes(section: Section, scale: float = 1.0) -> float:
    """On-chip buffer bytes a section's stages stage their streamed inputs in (``scale``: calls'
    worth of activations per token, ``token_scale``)."""
    return sum(k.staging_bytes for k in section.kernels) * scale


def _prefetch(pricing: PlanPricing, estimates: list[SectionEstimate], machine: Machine,
              offchip_busy_us: dict[int, float], scale: float) -> None:
    """A section's weights load while the previous section runs when both sections' weights and
    the larger one's buffers fit on chip at once (double buffering): only what the previous
    pipeline does not cover stays on the critical path."""
    staging, held, capacity = pricing.staging(scale), pricing.held, machine.on_chip_bytes
    for i, (prev, cur) in enumerate(zip(estimates, estimates[1:])):
        if held[i] + held[i + 1] + max(staging[i], staging[i + 1]) <= capacity:
            # only while the previous section is not itself reading off-chip memory
            free_us = max(0.0, prev.pipeline_us - offchip_busy_us.get(prev.index, 0.0))
            hidden = min(cur.weight_load_us, free_us)
            cur.weight_load_us -= hidden
            cur.weight_prefetch_us = hidden


def _weights_resident(pricing: PlanPricing, machine: Machine, scale: float) -> bool:
    """All sections' weights stay on chip when none is streamed and together they fit beside the
    largest section's buffers."""
    if pricing.streams:
        return False
    return pricing.weights + max(pricing.staging(scale), default=0) <= machine.on_chip_bytes


def _spill_tier(live: int, machine: Machine, batch: int, free: list[int]) -> Tier:
    """The fastest tier whose capacity left beside the weights holds the largest set of tensors
    live across a section boundary (``live``: ``PlanPricing.live``), for the batch."""
    for tier, left in zip(machine.tiers, free):
        if live * batch <= left:
            return tier
    return machine.tiers[-1]


def _totals(est: Estimate, sections: list[Section], machine: Machine, samples: int,
            resident: bool) -> Totals:
    latency_us = _latency_us(est.sections)
    flops = sum(k.flops for s in sections for k in s.kernels) / samples
    per_sample_us = sum(s.stage_us / est.micro_batch + s.spill_us / est.batch_size for s in est.sections)
    steady = 1e6 / per_sample_us if per_sample_us > 0 else float("inf")
    throughput = est.batch_size / (latency_us * 1e-6) if latency_us > 0 else float("inf")
    scale = token_scale(est.micro_batch, samples)
    buffers = max((staging_bytes(s, scale) for s in sections), default=0)
    units = max((s.pmus for s in est.sections), default=0)
    # resident: every section's weights at once beside the largest buffers; otherwise the chip holds
    # one section's weights and buffers at a time (the peak is one section's, not two maxima summed)
    on_chip = (sum(held_weights(s) for s in sections) + buffers if resident else
               max((held_weights(s) + staging_bytes(s, scale) for s in sections), default=0))
    capacity = machine.on_chip_bytes if math.isfinite(machine.on_chip_bytes) else units * machine.pmu_bytes
    return Totals(
        sections=len(sections),
        kernels=sum(len(s.kernels) for s in sections),
        ops=sum(len(k.ops) for s in sections for k in s.kernels),
        max_depth=max((s.depth for s in sections), default=0),
        flop_per_sample=flops,
        throughput_samples_per_s=throughput,
        steady_throughput_samples_per_s=steady,
        stage_latency_us=max((s.stage_us for s in est.sections), default=0.0),
        latency_us=latency_us,
        latency_per_sample_us=latency_us / est.batch_size,
        flops_utilization=flops * throughput / machine.peak_flops,
        steady_flops_utilization=flops * steady / machine.peak_flops,
        compute_units_used=max((s.pcus for s in est.sections), default=0),
        compute_units=machine.n_pcu,
        memory_bytes=on_chip,
        memory_units=units,
        memory_utilization=on_chip / capacity if capacity else 0.0,
        weights_resident=resident,
        reconfig_us=sum(s.reconfig_us for s in est.sections),
        spill_us=sum(s.spill_us for s in est.sections),
        weight_load_us=sum(s.weight_load_us for s in est.sections),
        unknown_shape_values=sum(k.unknown_shapes for s in sections for k in s.kernels),
        latency_us_by_kind={kind: sum(s.total_us for s in est.sections if s.kind == kind)
                           for kind in dict.fromkeys(s.kind for s in est.sections)},
    )
