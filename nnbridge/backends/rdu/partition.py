"""Kernels and sections (specs/rdu-architecture.md §5.2 steps 1–2, passes.md §2.3).

1. **Kernels**: the groups of the pipeline's ``fuse`` pass (one anchor + elementwise epilogue,
   injective chains; ``unfuse.inline_fused`` hands them over as lists of ops), so fusion is
   decided once; an op outside any group is a kernel of its own. The groups are convex (the
   pass outlined each into one node of an acyclic graph), so the kernel graph is acyclic.
2. **Sections**: kernels in order grow the current section while the PCU (one per stage at
   least), PMU, SRAM and off-chip port limits hold. ``o0`` skips fusion and gives every
   operator its own section, as SambaFlow's safe mode does.
"""

from __future__ import annotations

import json
import math
from dataclasses import asdict, dataclass, field
from typing import Any

from ...ir import Graph, Node, PatternKind, pattern_kind
from ...passes.autodiff import PHASES_KEY
from .config import Machine
from .costs import op_cost


@dataclass(kw_only=True)
class Kernel:
    """One pipeline stage: fused ops on one or more PCUs with their PMU buffers."""

    name: str
    ops: list[str]
    anchor: str
    flops: float
    weight_bytes: int
    inputs: dict[str, int]  # streamed values entering the kernel → bytes per call
    outputs: dict[str, int]  # values leaving the kernel → bytes per call
    buffer_bytes: list[int]  # on-chip staging per streamed input
    max_pcus: int  # parallelism: at least one vector of output elements per PCU
    pmus: int = 0
    pcus: int = 1
    streamed_weights: bool = False  # weights do not fit on chip: streamed from off-chip
    unknown_shapes: int = 0  # values without a static shape (their bytes and work are not counted)
    pcu_range: tuple[int, int] = (0, 0)
    pmu_range: tuple[int, int] = (0, 0)
    link_bytes: float = 0.0  # sent to the other sockets per call (tensor-parallel AllReduce)
    link_steps: int = 0

    # sums the performance model reads (properties, not cached: an attribute added to a kernel's
    # dict unshares its keys, and a plan search makes tens of thousands of kernel copies)
    @property
    def in_bytes(self) -> int:
        return sum(self.inputs.values())

    @property
    def out_bytes(self) -> int:
        return sum(self.outputs.values())

    @property
    def staging_bytes(self) -> int:
        return sum(self.buffer_bytes)

    def clone(self) -> Kernel:
        """A copy whose placement fields can change (the dicts and lists are shared: never written)."""
        twin = object.__new__(Kernel)
        twin.__dict__.update(self.__dict__)
        return twin

    def pmu_count(self, machine: Machine) -> int:
        weights = 0 if self.streamed_weights else math.ceil(self.weight_bytes / machine.pmu_bytes)
        staging = sum(math.ceil(b / machine.pmu_bytes) for b in self.buffer_bytes)
        return max(1, weights + staging)

    def on_chip_bytes(self) -> int:
        return (0 if self.streamed_weights else self.weight_bytes) + self.staging_bytes


@dataclass(kw_only=True)
class Section:
    index: int
    kernels: list[Kernel]
    fills: dict[str, int] = field(default_factory=dict)  # values read back from off-chip → bytes
    spills: dict[str, int] = field(default_factory=dict)  # values written off-chip for later sections
    host_in: dict[str, int] = field(default_factory=dict)  # graph inputs streamed in
    host_out: dict[str, int] = field(default_factory=dict)  # graph outputs streamed out
    depth: int = 1
    kind: str = "fwd"  # SambaFlow's section types: fwd, bwd, opt (a training program has all three)

    def to_dict(self) -> dict[str, Any]:
        return asdict(self)


def build_kernels(graph: Graph, machine: Machine, groups: list[list[Node]] | None) -> list[Kernel]:
    """One kernel per group of ops (topologically ordered); ``None``: every op alone."""
    graph_outputs = {id(v) for v in graph.outputs}
    groups = groups if groups is not None else [[node] for node in graph.nodes]
    return [_make_kernel(graph, i, ops, machine, graph_outputs) for i, ops in enumerate(groups)]


def _make_kernel(graph: Graph, index: int, ops: list[Node], machine: Machine,
                 graph_outputs: set[int]) -> Kernel:
    costs = [op_cost(n, machine.float_bytes) for n in ops]
    members = {id(n) for n in ops}
    produced = {name for c in costs for name, _ in c.outputs}
    inputs: dict[str, int] = {}
    buffers: list[int] = []
    for c in costs:
        for name, b, buf in c.inputs:
            if name not in produced and name not in inputs:
                inputs[name] = b
                buffers.append(buf)
    outputs: dict[str, int] = {}
    for node, c in zip(ops, costs):
        sizes = dict(c.outputs)
        for v in node.outputs:
            leaves = id(v) in graph_outputs or any(id(u) not in members for u in graph.consumers(v))
            if leaves and v.name in sizes:
                outputs[v.name] = sizes[v.name]
    result_elems = max((b // machine.float_bytes for b in outputs.values()), default=1)
    anchor = next((n.op for n in ops if pattern_kind(n.op, n.domain) in (PatternKind.OUT_ELEMWISE_FUSABLE,
                                                          PatternKind.COMM_REDUCE)), "")
    return Kernel(
        name=f"k{index}_{ops[0].name}", ops=[n.name for n in ops], anchor=anchor,
        flops=sum(c.flops for c in costs), weight_bytes=sum(c.weight_bytes for c in costs),
        inputs=inputs, outputs=outputs, buffer_bytes=buffers,
        max_pcus=max(1, int(result_elems) // machine.pcu_lanes),
        unknown_shapes=sum(c.unknown_shapes for c in costs),
        link_bytes=sum(c.link_bytes for c in costs), link_steps=sum(c.link_steps for c in costs),
    )


def partition(graph: Graph, machine: Machine, mode: str, groups: list[list[Node]] | None = None,
              kernels: list[Kernel] | None = None) -> list[Section]:
    """Kernels (``groups`` of ops, from the fuse pass; o0 ignores them) grouped into sections under
    the machine's resource limits; ``kernels`` already built (``build_kernels``) are used as given."""
    if kernels is None:
        kernels = build_kernels(graph, machine, groups if mode != "o0" else None)
    consumers_of: dict[str, int] = {}
    for k in kernels:
        for name in k.inputs:
            consumers_of[name] = consumers_of.get(name, 0) + 1
    graph_outputs = {v.name for v in graph.outputs}
    phases = json.loads(graph.metadata.get(PHASES_KEY, "{}"))
    produced: dict[str, str] = {}  # value → kind of the kernel that computes it
    kind_of = {id(k): _kind(k, phases, produced) for k in kernels}
    # a training program's sections in SambaFlow's order, fwd → bwd → opt: a kernel never reads a
    # later phase, so the stable sort keeps the order topological (a backward mask computed from
    # forward values alone no longer splits the forward sections)
    kernels.sort(key=lambda k: _ORDER.index(kind_of[id(k)]))
    groups: list[list[Kernel]] = []
    kinds: list[str] = []
    builder: _SectionBuilder | None = None
    for k in kernels:
        # weights that do not fit on chip beside the kernel's own staging buffers stream through it
        k.streamed_weights = k.weight_bytes + k.staging_bytes > machine.on_chip_bytes
        k.pmus = k.pmu_count(machine)
        kind = kind_of[id(k)]
        if mode != "o0" and builder is not None and kind == kinds[-1] and builder.try_add(k):
            continue
        builder = _SectionBuilder(machine, consumers_of, graph_outputs)
        builder.try_add(k, force=True)
        groups.append(builder.kernels)
        kinds.append(kind)
    sections = _finish_sections(graph, groups)
    for section, kind in zip(sections, kinds):
        section.kind = kind
    return sections


_ORDER = ("fwd", "bwd", "opt")


def _kind(kernel: Kernel, phases: dict[str, str], produced: dict[str, str]) -> str:
    """The phase of a training program a kernel belongs to: the latest of the phases of the values
    it computes and of the kernels it reads from (passes rename values; phases only move forward)."""
    found = [phases.get(name, "fwd") for name in kernel.outputs]
    found += [produced[name] for name in kernel.inputs if name in produced]
    kind = max(found, key=_ORDER.index, default="fwd")
    produced.update((name, kind) for name in kernel.outputs)
    return kind


class _SectionBuilder:
    """Incremental resource accounting of the section being grown."""

    def __init__(self, machine: Machine, consumers_of: dict[str, int], graph_outputs: set[str]):
        self.machine = machine
        self.consumers_of = consumers_of
        self.graph_outputs = graph_outputs
        self.kernels: list[Kernel] = []
        self.pmus = 0
        self.bytes = 0
        self.inputs: set[str] = set()
        self.outside: dict[str, int] = {}  # produced here → consumers (or graph output) not yet inside
        self.open = 0  # values of ``outside`` still read outside the section (output ports)

    def try_add(self, k: Kernel, force: bool = False) -> bool:
        """Add ``k`` when the section still fits; the port count is updated from ``k``'s own edges
        (no copy of the section's sets, so building a section is linear in its kernels)."""
        m = self.machine
        pmus = self.pmus + k.pmus
        on_chip = self.bytes + k.on_chip_bytes()
        new_inputs = [name for name in k.inputs if name not in self.outside and name not in self.inputs]
        closed = sum(1 for name in k.inputs if self.outside.get(name) == 1)  # its last reader joins
        produced = {name: self.consumers_of.get(name, 0) + (name in self.graph_outputs) for name in k.outputs}
        ports = len(self.inputs) + len(new_inputs) + self.open - closed + sum(1 for n in produced.values() if n > 0)
        fits = (len(self.kernels) + 1 <= m.n_pcu
                and (m.n_pmu is None or pmus <= m.n_pmu)
                and (m.sram_bytes is None or on_chip <= m.sram_bytes)
                and ports <= m.max_section_ports)
        if not (fits or force):
            return False
        self.kernels.append(k)
        self.pmus, self.bytes = pmus, on_chip
        self.inputs.update(new_inputs)
        for name in k.inputs:
            if name in self.outside:
                self.outside[name] -= 1
        self.open -= closed
        for name, readers in produced.items():
            self.open += (readers > 0) - (self.outside.get(name, 0) > 0)
            self.outside[name] = readers
        if force and m.n_pmu is not None:
            k.pmus = min(k.pmus, m.n_pmu)
        return True


def _finish_sections(graph: Graph, groups: list[list[Kernel]]) -> list[Section]:
    """Cross-section traffic and pipeline depth of each section."""
    graph_inputs = {v.name for v in graph.inputs}
    graph_outputs = {v.name for v in graph.outputs}
    section_of: dict[str, int] = {}
    for s, group in enumerate(groups):
        for k in group:
            for name in k.outputs:
                section_of[name] = s
    sections = [Section(index=s, kernels=group) for s, group in enumerate(groups)]
    for s, section in enumerate(sections):
        for k in section.kernels:
            for name, b in k.inputs.items():
                if name in graph_inputs:
                    section.host_in[name] = b
                elif section_of.get(name, s) != s:
                    section.fills[name] = b
                    sections[section_of[name]].spills[name] = b
            for name, b in k.outputs.items():
                if name in graph_outputs:
                    section.host_out[name] = b
        section.depth = _depth(section.kernels)
    return sections


def _depth(kernels: list[Kernel]) -> int:
    """Stages on the longest path through the section."""
    return round(max((a + 1 for a in arrivals(producers(kernels), [1.0] * len(kernels))), default=1))


def producers(kernels: list[Kernel]) -> tuple[tuple[int, ...], ...]:
    """For each stage of a section (kernels in topological order), the earlier stages it reads from
    (sorted: the tuple also keys identical sections)."""
    producer = {name: i for i, k in enumerate(kernels) for name in k.outputs}
    return tuple(tuple(sorted({producer[n] for n in k.inputs if producer.get(n, i) < i}))
                 for i, k in enumerate(kernels))


def arrivals(producers_of: tuple[tuple[int, ...], ...], weights: list[float]) -> list[float]:
    """When the first token reaches each stage (``producers_of``: from ``producers``): the heaviest
    chain of the stages before it, with stage times as weights. Plus its own weight, the largest is
    the time one token takes to cross the pipeline."""
    reach: list[float] = []  # arrival + own weight
    start: list[float] = []
    for before, weight in zip(producers_of, weights):
        begin = reach[before[0]] if len(before) == 1 else max((reach[j] for j in before), default=0.0)
        start.append(begin)
        reach.append(begin + weight)
    return start
