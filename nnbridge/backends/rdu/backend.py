"""The RDU backend: partition → allocate → estimate at compile time; bf16 functional runs.

``compile`` fixes what SambaFlow fixes at compile time (preset, mode, batch, micro-batch)
and produces an executable whose ``run`` computes outputs in bf16 and whose ``report``
holds the performance estimate; ``save`` writes the PEF artifact and ``load_pef`` reads it.
"""

from __future__ import annotations

import dataclasses
import json
import math
import os
from collections.abc import Iterator
from typing import Any

import numpy as np

from ...base.errors import CapacityError, FormatError, NonFiniteError
from ...base.fileio import check_output_size, max_elements
from ...ir import DType, Graph, Node
from ...kernels import get_kernel, kernel_op_names
from ...passes.autodiff import UPDATES_KEY
from ...reporting.report import Report
from ..base import CLEAN, FOLD, SCALE, ChipSimulator, Executable
from .allocate import place
from .artifact import read_pef, write_pef
from .config import CompileOptions, Machine, compile_settings
from .functional import FunctionalSim
from .partition import Kernel, Section, build_kernels, partition
from .pcu_allocation import allocate_sections
from .pipeline_model import (
    Estimate,
    PlanPricing,
    WeightHomes,
    best_micro_batch,
    fits_on_chip,
    host_bytes,
    latency_floor_us,
    latency_us,
    micro_batches,
    samples_per_call,
)
from .plan_schema import decode
from .presets import DEFAULT_PRESET, PRESETS, machine_for
from .unfuse import inline_fused

UNKNOWN_SHAPES = ("{n} tensor(s) have no static shape; their bytes and work are not counted in the estimate "
                  "(give the model static input shapes)")


class RduExecutable(Executable):
    def __init__(self, graph: Graph, machine: Machine, options: CompileOptions, sections: list[Section],
                 samples: int, estimated: Estimate | None = None):
        """``sections`` are placed (their kernels have PCUs); ``estimated``: their estimate, if made."""
        super().__init__(graph, "rdu")
        self.machine = machine
        self.options = options
        self.sections = sections
        self.samples = samples
        self.estimate = estimated or best_micro_batch(sections, machine, options, samples)
        self._sim: FunctionalSim | None = None
        self.steps = 0  # training steps taken through the SambaFlow-style API

    def _run(self, feeds: dict[str, Any]) -> tuple[dict[str, np.ndarray], Report]:
        sim = self._sim
        if sim is None:  # built on first run: estimating performance needs no kernels
            stored = {name for s in self.sections for k in s.kernels for name in k.outputs}
            sim = self._sim = FunctionalSim(self.graph, stored)  # concurrent first runs: either one serves
        return sim.run(feeds), self.section_report()

    @property
    def training(self) -> bool:
        """A training program (forward, backward and optimizer sections)."""
        return UPDATES_KEY in self.graph.metadata

    def train_step(self, feeds: dict[str, Any]) -> dict[str, np.ndarray]:
        """One step of a training program: run it, then make its updates (new weights, optimizer
        and batch-norm states) the program's tensors for the next step — unless an output is not
        finite: then ``NonFiniteError`` names the first, and nothing is updated."""
        if not self.training:
            raise FormatError(f"'{self.graph.name}' is not a training program (compile it with --optimizer)")
        outputs = self.run(feeds)
        for name, array in outputs.items():  # a non-finite step is not applied: it would spread to every tensor
            if np.asarray(array).dtype.kind == "f" and not np.isfinite(array).all():
                raise NonFiniteError(f"'{name}' of the training program '{self.graph.name}'")
        updates = {tensor: outputs[out] for out, tensor in json.loads(self.graph.metadata[UPDATES_KEY]).items()}
        self.graph.initializers.update(updates)
        self._sim.set_tensors(updates)
        return outputs

    def measure_performance(self, batch_size: int | None = None, micro_batch: int | None = None) -> Estimate:
        """Re-estimate for another batch on the same placement (an analytical model: no rerun); the
        micro-batch given, else the one compiled with, else the fastest that fits (as compiled)."""
        batch = batch_size or self.options.batch_size
        if batch == self.options.batch_size and micro_batch is None:
            return self.estimate
        if micro_batch is None and self.options.micro_batch is not None:
            micro_batch = min(self.options.micro_batch, batch)
        options = dataclasses.replace(self.options, batch_size=batch, micro_batch=micro_batch).validated()
        return best_micro_batch(_copy_plan(self.sections), self.machine, options, self.samples)

    def section_report(self, est: Estimate | None = None, stages: bool = False) -> Report:
        est = est or self.estimate
        report = Report("rdu", self.graph.name, totals=dict(est.totals))
        rows = est.stages if stages else est.sections
        for row in rows:
            # the name a plot or page labels the row with: the stage's kernel (as in the trace and
            # the slowest-stages table), or the section's index
            name = row.kernel if stages else f"section {row.index}"
            data = {"name": name, **row.__dict__}
            if not stages:
                data["total_us"] = row.total_us
            report.add_row(**data)
        report.notes.append(f"machine {est.machine}, mode {est.mode}, batch {est.batch_size}, "
                            f"micro-batch {est.micro_batch}")
        if est.totals["unknown_shape_values"]:
            report.notes.append(UNKNOWN_SHAPES.format(n=est.totals["unknown_shape_values"]))
        return report

    def plan(self) -> dict[str, Any]:
        return {
            "machine": self.machine.to_dict(), "options": self.options.to_dict(), "samples_per_call": self.samples,
            "sections": [s.to_dict() for s in self.sections],
            "schedule": [{"section": s.index, "reconfigure": s.index > 0, "fill": sorted(s.fills),
                          "spill": sorted(s.spills), "load_weights": not self.estimate.totals["weights_resident"]}
                         for s in self.sections],
            "estimate": self.estimate.to_dict(),
        }

    def save(self, path: str | os.PathLike) -> None:
        weights = sum(int(getattr(a, "nbytes", 0)) for a in self.graph.initializers.values())
        check_output_size(weights, path, f"writing '{os.fspath(path)}'")
        write_pef(path, self.graph, self.plan())


#: smaller variants of the machine whose plans are also tried: a greedy partition (or PCU
#: allocation) made for more SRAM per PMU, faster PCUs or more SRAM can be worse than one made for
#: less, and a plan that fits a smaller machine fits this one (a plan made for smaller PMUs spreads
#: its data over more of them, for more bandwidth; one made for less SRAM streams weights it would
#: otherwise hold and keeps more kernels in a section). PMU sizes halve down to a fixed floor and
#: SRAM sizes down to the graph's (below its smallest kernel every weight streams), so the plans
#: tried for a machine include every plan tried for one with half its PMU size or SRAM: a bigger
#: machine is never priced slower than the smaller one it contains.
PMU_PLAN_FLOOR = 64 * 1024
FLOP_PLAN_SCALES = (0.5, 0.25)
#: compile effort: a graph of N kernels considers the first ⌊this / N⌋ plans of the list (at least
#: the machine's own): every plan up to ~4,000 kernels (the LLM benches' largest has 2,144); a
#: 100k-node graph (54k kernels) only the machine's own
PLAN_KERNEL_BUDGET = 100_000


def _plan_machines(machine: Machine, kernels: list[Kernel]) -> list[Machine]:
    """The machine, then its smaller variants: PMU sizes, FLOPs per PCU, SRAM sizes, then PMU
    counts at each PMU size (halving)."""
    variants = [machine]
    sizes = [machine.pmu_bytes]
    while sizes[-1] / 2 >= PMU_PLAN_FLOOR:
        sizes.append(sizes[-1] / 2)
    variants += [dataclasses.replace(machine, pmu_bytes=size) for size in sizes[1:]]
    variants += [dataclasses.replace(machine, flop_per_pcu_per_cycle=machine.flop_per_pcu_per_cycle * scale)
                 for scale in FLOP_PLAN_SCALES]
    if machine.sram_bytes is not None and kernels:
        smallest = min(k.weight_bytes + k.staging_bytes for k in kernels)
        sram = machine.sram_bytes // 2
        while True:  # down to the first size at which every kernel streams its weights
            variants.append(dataclasses.replace(machine, sram_bytes=sram))
            if sram < smallest or sram == 0:
                break
            sram //= 2
    if machine.n_pmu is not None and kernels:
        # fewer PMUs close sections sooner, so more PCUs serve each stage (a plan made for 64 PMUs
        # of 64 KiB was 12 % faster than the one for 128); PMU counts and sizes together decide
        # where a section closes, so every count is tried at every size, down to where no two
        # kernels fit one section (one section per kernel is tried anyway)
        for size in sizes:
            sized = dataclasses.replace(machine, pmu_bytes=size)
            floor = 2 * min(k.pmu_count(sized) for k in kernels)
            n_pmu = machine.n_pmu // 2
            while n_pmu >= floor:
                variants.append(dataclasses.replace(machine, pmu_bytes=size, n_pmu=n_pmu))
                n_pmu //= 2
    return variants


def _best_plan(graph: Graph, machine: Machine, options: CompileOptions, groups,
               samples: int) -> tuple[list[Section], Estimate]:
    """Sections and PCU placement: the fastest, on ``machine``, of the plans made for it and for
    its smaller variants (with its estimate on ``machine``)."""
    best: tuple[float, list[Section], list[list[int]]] | None = None  # latency, partition, its PCUs
    # a kernel's work and traffic do not depend on the variants' fields: built once, copied per plan
    built = build_kernels(graph, machine, groups if options.mode != "o0" else None)
    machines = _plan_machines(machine, built)
    # besides the partitions made for each machine, one section per kernel: a greedy partition
    # packs kernels that then share the PCUs, which at a small batch can be slower than giving
    # each its own section (when the reconfiguration is cheap or looped)
    one_per_kernel = [(machine, "o0")] if options.mode != "o0" and len(built) > 1 else []
    plans = [(machine, options.mode), *one_per_kernel, *((m, options.mode) for m in machines[1:])]
    plans = plans[:max(1, PLAN_KERNEL_BUDGET // max(1, len(built)))]
    needed = sum(k.weight_bytes + k.staging_bytes for k in built)  # more on-chip capacity never binds
    tried: set[tuple] = set()  # partitions made for (mode, capacity, PMU counts, FLOPs)
    priced: set[tuple] = set()  # the same, by the sections they came out as
    partitions: dict[tuple, tuple[list[Section], PlanPricing]] = {}
    pmu_counts: dict[float, tuple[int, ...]] = {}  # per PMU size (the only field they depend on)
    for planned_for, mode in plans:
        # the partition sees a machine only through its on-chip capacity and the kernels' PMU
        # counts: a PMU size giving the same ones gives the same sections (and the FLOPs per PCU
        # only change the allocation)
        if planned_for.pmu_bytes not in pmu_counts:
            pmu_counts[planned_for.pmu_bytes] = tuple(k.pmu_count(planned_for) for k in built)
        made_for = (mode, min(planned_for.on_chip_bytes, needed), pmu_counts[planned_for.pmu_bytes],
                    planned_for.n_pmu if planned_for.n_pmu is not None and planned_for.n_pmu < sum(
                        pmu_counts[planned_for.pmu_bytes]) else None)
        key = (*made_for, planned_for.flop_per_pcu_per_cycle)
        if key in tried:
            continue
        tried.add(key)
        if made_for not in partitions:  # (re-allocated in place by each plan made from it)
            made = partition(graph, planned_for, mode, groups, kernels=[k.clone() for k in built])
            partitions[made_for] = (made, PlanPricing(made))
        sections, pricing = partitions[made_for]
        # the allocation sees a partition through its sections' kernels, what they stream and their
        # PMUs: a smaller SRAM often gives the same ones
        shape = (planned_for.flop_per_pcu_per_cycle,
                 tuple((len(s.kernels), *((k.streamed_weights, k.pmus) for k in s.kernels)) for s in sections))
        if shape in priced:
            continue
        priced.add(shape)
        # not priced: a plan that cannot beat the best so far (its reconfigurations and each
        # section's slowest stage at its most PCUs already take longer)
        if best is not None and latency_floor_us(sections, machine, options, samples, pricing) >= best[0] * (1 - 1e-12):
            continue
        for latency in _micro_batch_plans(sections, machine, planned_for, options, samples, pricing):
            if best is None or latency < best[0] * (1 - 1e-12):
                best = (latency, sections, _pcus(sections))
    placed = _placed(best[1], best[2])
    # the micro-batch as a loaded .pef re-chooses it on the placement (never slower: it tries this one)
    return placed, best_micro_batch(placed, machine, options, samples)


def _micro_batch_plans(sections: list[Section], machine: Machine, planned_for: Machine, options: CompileOptions,
                       samples: int, pricing: PlanPricing) -> Iterator[float]:
    """The latency (on ``machine``) of the plan allocated in place (on ``planned_for``; the caller
    reads each allocation before the next) for the options' micro-batch or, unless they give one,
    for every micro-batch that fits on chip: a larger token shares each weight read among more
    samples but takes longer to fill the pipeline, and the allocation depends on it. Every
    candidate is priced (stopping at the first that is no faster let a machine with twice the SRAM
    come out 9 % slower), so a machine with more on-chip memory tries every (plan, micro-batch) a
    smaller one does. Allocating in place spares a copy of the plan per candidate: only the
    fastest is copied, once (``_placed``)."""
    given = options.micro_batch
    candidates = [given] if given is not None else \
        [m for m in micro_batches(options.batch_size) if m == 1 or fits_on_chip(sections, machine, m, samples,
                                                                                 pricing)]
    for micro in candidates:
        chosen = dataclasses.replace(options, micro_batch=micro)
        allocate_sections(sections, planned_for, chosen, samples, pricing)
        yield latency_us(sections, machine, chosen, samples, pricing)


def _pcus(sections: list[Section]) -> list[list[int]]:
    """The PCUs of every stage: a candidate's allocation, kept while the next is made in its place."""
    return [[k.pcus for k in s.kernels] for s in sections]


def _placed(sections: list[Section], pcus: list[list[int]]) -> list[Section]:
    """A copy of the plan with these PCUs per stage (``_pcus``), placed."""
    placed = _copy_plan(sections)
    for section, counts in zip(placed, pcus):
        for k, p in zip(section.kernels, counts):
            k.pcus = p
        place(section)
    return placed


def _check_capacity(graph: Graph, sections: list[Section], machine: Machine) -> None:
    """Refuse a model whose weights (beside the graph's inputs and outputs in the first tier)
    overflow the last off-chip tier: the tiers are filled in order, so every tier is full then."""
    homes = WeightHomes(sections, machine)
    last = machine.tiers[-1]
    if homes.free[-1] >= 0:
        return
    weights = sum(k.weight_bytes for s in sections for k in s.kernels)
    tiers = ", ".join(f"{t.name} {t.capacity_bytes / 2**20:,.1f} MiB" for t in machine.tiers)
    raise CapacityError(
        f"model '{graph.name}': {weights / 2**20:,.1f} MiB of weights (and {host_bytes(sections) / 2**20:,.1f} MiB "
        f"of inputs and outputs) do not fit the off-chip memory of {machine.name} ({tiers}); the last tier, "
        f"{last.name}, would hold {(last.capacity_bytes - homes.free[-1]) / 2**20:,.1f} MiB in its "
        f"{last.capacity_bytes / 2**20:,.1f} MiB: give it more (--set {last.name}_capacity_bytes=…) or price it "
        f"anyway with --allow-overcommit (allow_overcommit=True)")


def _copy_plan(sections: list[Section]) -> list[Section]:
    """Sections whose kernels an estimate may re-place without touching the originals (their
    inputs, outputs and buffers are never written, so they are shared)."""
    return [dataclasses.replace(s, kernels=[k.clone() for k in s.kernels]) for s in sections]


def load_pef(path: str | os.PathLike) -> RduExecutable:
    """An executable from a PEF artifact; its placement is used as stored."""
    graph, plan = read_pef(path)
    where = f"PEF '{os.fspath(path)}'"
    if not isinstance(plan, dict) or not {"machine", "options", "sections", "samples_per_call"} <= set(plan):
        raise FormatError(f"{where}: plan.json needs machine, options, sections and samples_per_call")
    machine = decode(Machine, plan["machine"], where, "machine").validated()
    options = decode(CompileOptions, plan["options"], where, "options").validated()
    if not isinstance(plan["sections"], list):
        raise FormatError(f"{where}: plan.json sections should be a list")
    sections = [decode(Section, s, where, f"sections[{i}]") for i, s in enumerate(plan["sections"])]
    samples = plan["samples_per_call"]
    if not isinstance(samples, int) or isinstance(samples, bool):
        raise FormatError(f"{where}: plan.json samples_per_call should be an integer")
    _check_plan(sections, samples, where)
    _check_batch(graph, options, samples, where)
    return RduExecutable(graph, machine, options, sections, samples)


def _check_batch(graph: Graph, options: CompileOptions, samples: int, where: str) -> None:
    """The plan's batch agrees with its graph: the samples per call are the graph's, and the batch's
    inputs (what ``run`` feeds, call by call) fit the memory budget."""
    if samples != samples_per_call(graph):
        raise FormatError(f"{where}: plan.json samples_per_call {samples} disagrees with the program, whose "
                          f"inputs take {samples_per_call(graph)} sample(s) per call")
    per_call = sum(math.prod(v.type.shape or ()) for v in graph.inputs)
    elements = per_call * -(-options.batch_size // samples)
    if elements > max_elements():
        raise FormatError(f"{where}: plan.json batch_size {options.batch_size} makes inputs of {elements:.3g} "
                          f"elements, over the limit of {max_elements():.3g} (a quarter of the memory budget; "
                          "raise it with --max-memory)")


def _check_plan(sections: list[Section], samples: int, where: str) -> None:
    """A stored plan is input like any other: counts and sizes in range before the model uses them."""
    if samples < 1 or not sections:
        raise FormatError(f"{where}: plan.json needs at least one section and one sample per call")
    for section in sections:
        if not isinstance(section.depth, int) or section.depth < 1 or not section.kernels:
            raise FormatError(f"{where}: section {section.index} of plan.json has no kernels or a depth below 1")
        for k in section.kernels:
            if not (isinstance(k.inputs, dict) and isinstance(k.outputs, dict) and isinstance(k.buffer_bytes, list)):
                raise FormatError(f"{where}: kernel '{k.name}' of plan.json has malformed inputs, outputs or buffers")
            counts = (k.pcus, k.max_pcus)
            sizes = (k.flops, k.weight_bytes, k.pmus, *k.inputs.values(), *k.outputs.values(), *k.buffer_bytes)
            numbers = all(isinstance(v, (int, float)) and not isinstance(v, bool) for v in (*counts, *sizes))
            if not numbers or min(counts) < 1 or not all(0 <= v < float("inf") for v in sizes):
                raise FormatError(f"{where}: kernel '{k.name}' of plan.json has a count or size out of range")


class RduBackend(ChipSimulator):
    name = "rdu"
    description = "SambaNova-style RDU simulator: sections on a PCU/PMU grid, bf16 numerics, throughput model"
    precision = DType.BFLOAT16  # PMUs and section boundaries store bf16 (spec §4)

    def unsupported_reason(self, node: Node) -> str | None:
        spec = get_kernel(node.op, node.domain)
        if spec is None:
            return None if node.op == "Fused" else "no kernel for the functional simulation"
        return spec.unsupported_reason(node)

    pipelines = {
        0: [*FOLD, "simplify", "layout-nchw", "cancel-transposes", *CLEAN],  # constants are weights, never kernels
        1: [*FOLD, "simplify", "layout-nchw", "cancel-transposes", *CLEAN, "fuse-chains"],
        2: [*FOLD, "simplify", "layout-nchw", "cancel-transposes", *CLEAN, "fuse-chains"],
        3: [*FOLD, "simplify", *SCALE, "layout-nchw", "cancel-transposes", *CLEAN, "fuse-chains"],
    }

    settings = compile_settings(PRESETS, DEFAULT_PRESET)

    def compile(self, graph: Graph, mode: str = "o1", preset: str | Machine = DEFAULT_PRESET,
                batch_size: int = 1, micro_batch: int | None = None, allow_overcommit: bool = False,
                **machine_overrides: Any) -> RduExecutable:
        """``micro_batch``: samples per pipeline token (default: the fastest that fits on chip);
        ``allow_overcommit``: price a model whose weights exceed the last off-chip tier."""
        options = self.options({"mode": mode, "preset": preset, "batch_size": batch_size, "micro_batch": micro_batch,
                                "allow_overcommit": allow_overcommit, **machine_overrides})
        mode, preset, batch_size, micro_batch, allow_overcommit = (
            options.pop(k) for k in ("mode", "preset", "batch_size", "micro_batch", "allow_overcommit"))
        machine = machine_for(preset, **options)
        options = CompileOptions(mode, batch_size, micro_batch, allow_overcommit).validated()
        groups = inline_fused(graph)
        samples = samples_per_call(graph)
        sections, estimated = _best_plan(graph, machine, options, groups, samples)
        if not options.allow_overcommit:
            _check_capacity(graph, sections, machine)
        return RduExecutable(graph, machine, options, sections, samples, estimated=estimated)

    def supported_ops(self) -> set[str]:
        return kernel_op_names()
