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
from ..ir.passes import register_pass
from .fuse import op_pattern

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
        readers = body.consumer_map()
        return {id(outer) for inner, outer in zip(body.inputs, node.inputs)
                if outer is not None and _elementwise_only(inner, readers)}
    if op_pattern(node) <= PatternKind.BROADCAST:
        return {id(v) for v in node.inputs if v is not None}
    return set()


def _elementwise_only(value: Value, readers: dict[int, list[Node]]) -> bool:
    stack, seen = [value], set()
    while stack:
        v = stack.pop()
        if id(v) in seen:
            continue
        seen.add(id(v))
        for reader in readers.get(id(v), []):
            if op_pattern(reader) > PatternKind.BROADCAST or any(o.type.shape != v.type.shape for o in reader.outputs):
                return False
            stack.extend(reader.outputs)
    return True


def plan_memory(graph: Graph) -> MemoryPlan:
    """The best plan over the match ranges for ``graph``'s current topological order."""
    steps = [(node, _reads(node), _inplace_inputs(node)) for node in graph.nodes]
    sizes = {id(v): _size(v) for node, reads, _ in steps for v in reads + node.outputs}
    best = None
    for match_range in MATCH_RANGES:
        plan = _plan(graph, steps, sizes, match_range)
        if best is None or plan.total_bytes < best.total_bytes:
            best = plan
    best.live_peak_bytes = live_peak_bytes(graph)  # type: ignore[union-attr]
    return best  # type: ignore[return-value]


def _plan(graph: Graph, steps: list[tuple[Node, list[Value], set[int]]], sizes: dict[int, int],
          match_range: int) -> MemoryPlan:
    external = {id(v) for v in graph.inputs} | {id(v) for v in graph.values.values() if v.const is not None}
    refs: dict[int, int] = {}
    for _, reads, _ in steps:
        for v in reads:
            if id(v) not in external:
                refs[id(v)] = refs.get(id(v), 0) + 1
    for v in graph.outputs:
        refs[id(v)] = refs.get(id(v), 0) + 1
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

    def release(value: Value) -> None:
        sid = storage_of[id(value)]
        bisect.insort(free, (plan.storage_bytes[sid], sid))

    for node, all_reads, inplace in steps:
        reads = [v for v in all_reads if id(v) not in external]
        donated: set[int] = set()
        for out in sorted(node.outputs, key=lambda o: sizes[id(o)], reverse=True):
            plan.unshared_bytes += sizes[id(out)]
            sid = None
            for v in reads:
                if id(v) in inplace and refs.get(id(v)) == 1 and id(v) not in donated \
                        and sizes[id(v)] == sizes[id(out)] and id(v) in storage_of:
                    sid = storage_of[id(v)]
                    donated.add(id(v))
                    plan.inplace[out.name] = v.name
                    break
            storage_of[id(out)] = sid if sid is not None else request(sizes[id(out)])
            plan.storage_of[out.name] = storage_of[id(out)]
        for v in reads:
            refs[id(v)] -= 1
            if refs[id(v)] == 0 and id(v) not in donated and id(v) in storage_of:
                release(v)
        for out in node.outputs:
            if refs.get(id(out), 0) == 0:
                release(out)
    for v in graph.inputs:
        plan.storage_of[v.name] = EXTERNAL
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


@register_pass("plan-memory")
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
