"""``plan-memory``: liveness, storage sharing and in-place reuse for activations.

NNVM's PlanMemory in our own words (specs/passes.md §7): reference-count every
node output (graph outputs hold an extra reference); walk the nodes in
topological order; an elementwise-shaped op may write into an input's storage
when that input dies here and has the same byte size (in-place); the remaining
outputs are allocated largest first from a free pool by best fit inside a size
window ``[size / match_range, size · match_range)`` (blocks grow to fit); an
input's storage is released when its count drops to zero. The plan is tried
with match ranges 1…16 and the one with the fewest total bytes is kept. Sizes
use the real dtype width. Graph inputs and initializers are external (not
planned). The pass records the result in ``graph.metadata`` and changes
nothing else.
"""

from __future__ import annotations

import bisect
from dataclasses import dataclass, field

from ..ir import Graph, Node, PatternKind, Value
from ..ir.topology import walk_readers
from .fuse import op_pattern
from .manager import register_pass

MATCH_RANGES = (2, 4, 8, 16, 1 << 40)  # the last: any free block, grown to fit
EXTERNAL = -2


@dataclass
class MemoryPlan:
    storage_of: dict[str, int] = field(default_factory=dict)  # value name → storage id (−2 external)
    storage_bytes: list[int] = field(default_factory=list)  # storage id → bytes
    inplace: dict[str, str] = field(default_factory=dict)  # output name → input whose storage it reuses
    unshared_bytes: int = 0  # every activation in its own buffer
    live_peak_bytes: int = 0  # max bytes alive at once in this order (see live_peak_bytes)
    match_range: int = 16

    @property
    def total_bytes(self) -> int:
        """Bytes of all storages: the activation memory this plan needs (its peak)."""
        return sum(self.storage_bytes)


def _size(value: Value) -> int:
    n = value.type.nbytes
    return int(n) if n is not None else 0


def _inplace_inputs(node: Node) -> set[int]:
    """ids of inputs an output may overwrite: those read only elementwise on the way to the
    outputs (element i of the input is last read to make element i of the output). For a
    fused group that excludes whatever feeds its anchor (a conv reads neighbourhoods)."""
    if node.op == "Fused" and node.domain == "nnbridge":
        body = node.attr("body")
        return {id(outer) for inner, outer in zip(body.inputs, node.inputs)
                if outer is not None and _elementwise_only(inner, body)}
    if op_pattern(node) <= PatternKind.BROADCAST:
        return {id(v) for v in node.inputs if v is not None}
    return set()


def _elementwise_only(value: Value, body: Graph) -> bool:
    """Whether every reader downstream of ``value`` in ``body`` is elementwise and shape-keeping."""
    return all(op_pattern(reader) <= PatternKind.BROADCAST and all(o.type.shape == v.type.shape for o in reader.outputs)
               for reader, v in walk_readers(body, value, _always))


def _always(node: Node, value: Value) -> bool:
    return True


@dataclass
class _Step:
    """A node reduced to what planning reads, computed once for all match ranges."""
    outputs: list[tuple[int, int, str]]  # (value id, bytes, name), largest first
    reads: list[tuple[int, str]]  # planned (non-external) values read: (id, name)
    inplace: set[int]


def plan_memory(graph: Graph) -> MemoryPlan:
    """The best plan over the match ranges for ``graph``'s current topological order."""
    external = {id(v) for v in graph.inputs} | {id(v) for v in graph.values.values() if v.const is not None}
    steps = []
    for node in graph.nodes:
        outputs = sorted(((id(o), _size(o), o.name) for o in node.outputs), key=lambda o: o[1], reverse=True)
        reads = [(id(v), v.name) for v in _reads(node) if id(v) not in external]
        steps.append(_Step(outputs, reads, _inplace_inputs(node)))
    sizes = {vid: size for step in steps for vid, size, _ in step.outputs}
    refs: dict[int, int] = {}
    for step in steps:
        for vid, _ in step.reads:
            refs[vid] = refs.get(vid, 0) + 1
    for v in graph.outputs:
        refs[id(v)] = refs.get(id(v), 0) + 1
    bound = live_peak_bytes(graph)  # no plan needs less; reaching it ends the search
    best = None
    for match_range in MATCH_RANGES:
        plan = _plan(steps, sizes, dict(refs), match_range)
        if best is None or plan.total_bytes < best.total_bytes:
            best = plan
        if best.total_bytes <= bound:
            break
    for v in graph.inputs:
        best.storage_of[v.name] = EXTERNAL  # type: ignore[union-attr]
    best.live_peak_bytes = bound  # type: ignore[union-attr]
    return best  # type: ignore[return-value]


def _plan(steps: list[_Step], sizes: dict[int, int], refs: dict[int, int], match_range: int) -> MemoryPlan:
    plan = MemoryPlan(match_range=match_range)
    storage_of: dict[int, int] = {}
    free: list[tuple[int, int]] = []  # (bytes, storage id), sorted

    def request(size: int) -> int:
        """Best fit: the smallest free block ≥ size in the window, else the largest smaller one."""
        at = bisect.bisect_left(free, (size, -1))
        if at < len(free) and free[at][0] < size * match_range:
            return free.pop(at)[1]
        if at > 0 and free[at - 1][0] * match_range > size:
            bytes_, sid = free.pop(at - 1)
            plan.storage_bytes[sid] = max(bytes_, size)
            return sid
        plan.storage_bytes.append(size)
        return len(plan.storage_bytes) - 1

    def release(vid: int) -> None:
        sid = storage_of[vid]
        bisect.insort(free, (plan.storage_bytes[sid], sid))

    for step in steps:
        donated: set[int] = set()
        for out, size, name in step.outputs:
            plan.unshared_bytes += size
            sid = None
            for vid, vname in step.reads:
                if vid in step.inplace and refs.get(vid) == 1 and vid not in donated \
                        and sizes.get(vid) == size and vid in storage_of:
                    sid = storage_of[vid]
                    donated.add(vid)
                    plan.inplace[name] = vname
                    break
            storage_of[out] = sid if sid is not None else request(size)
            plan.storage_of[name] = storage_of[out]
        for vid, _ in step.reads:
            refs[vid] -= 1
            if refs[vid] == 0 and vid not in donated and vid in storage_of:
                release(vid)
        for out, _, _ in step.outputs:
            if refs.get(out, 0) == 0:
                release(out)
    return plan


def _reads(node: Node) -> list[Value]:
    """Distinct values a node reads (its inputs and its subgraphs' captures)."""
    seen: dict[int, Value] = {}
    for v in list(node.inputs) + node.captured():
        if v is not None:
            seen.setdefault(id(v), v)
    return list(seen.values())


def live_peak_bytes(graph: Graph) -> int:
    """Max over steps of the bytes of activations alive during the step (inputs and outputs
    of the step included): the least memory any plan without in-place reuse can need."""
    nodes = graph.nodes
    last: dict[int, int] = {}
    for i, node in enumerate(nodes):
        for v in _reads(node):
            last[id(v)] = i
    for v in graph.outputs:
        last[id(v)] = len(nodes)
    born: list[int] = [0] * (len(nodes) + 2)
    for i, node in enumerate(nodes):
        for out in node.outputs:
            born[i] += _size(out)
            born[max(last.get(id(out), i), i) + 1] -= _size(out)
    peak = live = 0
    for i in range(len(nodes)):
        live += born[i]
        peak = max(peak, live)
    return peak


@register_pass("plan-memory", requires=["infer-shapes"])
def plan_memory_pass(graph: Graph) -> bool:
    """Plan activation storage (sharing, in-place); record peak bytes in the graph metadata."""
    plan = plan_memory(graph)
    summary = {
        "nnbridge.peak_activation_bytes": str(plan.total_bytes),
        "nnbridge.unshared_activation_bytes": str(plan.unshared_bytes),
        "nnbridge.storages": str(len(plan.storage_bytes)),
    }
    changed = any(graph.metadata.get(k) != v for k, v in summary.items())
    graph.metadata.update(summary)
    return changed
