"""If, Loop and Scan: subgraphs run through ``ctx.run_graph`` (which sees the outer values).

Each body is compiled once (the executor caches plans per subgraph) and only the
per-iteration feeds change, so a loop costs one plan execution per trip.
Per-iteration scan outputs are collected in lists and stacked once at the end.

One loop shape is computed without iterating: the "bag reduction" that
``torch.onnx.export`` writes for ``nn.EmbeddingBag`` (trip ``i`` slices
``ids[starts[i]:ends[i]]``, gathers those rows of a table and reduces them over
axis 0). It becomes one gather and one segmented reduction (``ufunc.reduceat``).
"""

from __future__ import annotations

import os
from typing import Any

import numpy as np

from ...base.errors import KernelError
from ...base.fileio import TENSOR_SHARE, memory_budget
from ...ir import Graph, Node, Value
from ..registry import kernel


def _empty_stack(value: Value, axis: int = 0) -> np.ndarray:
    """The stacked scan output of zero iterations: length 0 along ``axis``, element shape if known."""
    t = value.type
    elem = [d if isinstance(d, int) else 0 for d in t.shape] if t.shape is not None else []
    elem.insert(axis, 0)
    return np.empty(elem, t.dtype.numpy if t.dtype is not None else np.float32)


def _scalar(value) -> Any:
    """The one element of a scalar or 1-element tensor (ONNX allows both for conditions and counts)."""
    return np.asarray(value).reshape(-1)[0]


@kernel("If")
def if_(ctx, cond, *, else_branch, then_branch):
    branch = then_branch if bool(_scalar(cond)) else else_branch
    return tuple(ctx.run_graph(branch, {}))


_SEGMENT_REDUCERS = {"ReduceSum": np.add, "ReduceMean": np.add, "ReduceMax": np.maximum, "ReduceMin": np.minimum}


def _bag_pattern(body: Graph) -> dict[str, Any] | None:
    """The values of a bag-reduction body, or None when the body is anything else: a reduction
    over axis 0 of the table rows gathered at ``ids[starts[i]:ends[i]]`` (an EmbeddingBag)."""
    if len(body.inputs) != 2 or len(body.outputs) != 2 or len(body.nodes) > 8:
        return None
    ops = {n.op: n for n in body.nodes if n.op not in ("Cast", "Identity")}
    reduce = next((n for op, n in ops.items() if op in _SEGMENT_REDUCERS), None)
    if reduce is None or body.outputs[1].producer is not reduce or reduce.attr("keepdims", 1):
        return None
    rows = _rows_reduced_over_axis_0(reduce)
    cut = rows.inputs[1].producer if rows is not None else None
    if cut is None or not _slice_along_axis_0(cut):
        return None
    bounds = [_bound_of_trip(bound, body) for bound in cut.inputs[1:3]]
    if None in bounds or not _body_goes_on(body):
        return None
    return {"table": rows.inputs[0], "ids": cut.inputs[0], "starts": bounds[0], "ends": bounds[1],
            "reduce": reduce.op}


def _rows_reduced_over_axis_0(reduce: Node) -> Node | None:
    """The axis-0 Gather a reduction over axis 0 reads, or None."""
    axes = reduce.inputs[1].const if len(reduce.inputs) > 1 and reduce.inputs[1] is not None else None
    rows = reduce.inputs[0].producer
    if axes is None or list(np.asarray(axes).reshape(-1)) != [0] or rows is None or rows.op != "Gather" \
            or rows.attr("axis", 0) != 0:
        return None
    return rows


def _slice_along_axis_0(cut: Node) -> bool:
    """A Slice of starts and ends only, or along axis 0."""
    return cut.op == "Slice" and len(cut.inputs) in (3, 4) and (
        len(cut.inputs) == 3 or list(np.asarray(cut.inputs[3].const).reshape(-1)) == [0])


def _bound_of_trip(bound: Value, body: Graph) -> Value | None:
    """The tensor a slice bound picks its element from at the loop's trip number (Unsqueeze of an
    axis-0 Gather at the body's iteration input), or None."""
    unsq = bound.producer
    pick = unsq.inputs[0].producer if unsq is not None and unsq.op == "Unsqueeze" else None
    if pick is None or pick.op != "Gather" or pick.inputs[1] is not body.inputs[0] or pick.attr("axis", 0):
        return None
    return pick.inputs[0]


def _body_goes_on(body: Graph) -> bool:
    """Does a Loop body's condition output pass on the incoming condition (or a constant true)? Then
    the loop goes on while it went on: its trip count, when it has one, is exactly the trips it runs."""
    done = body.outputs[0]
    while done.producer is not None and done.producer.op in ("Cast", "Identity"):
        done = done.producer.inputs[0]
    return done is body.inputs[1] or (done.const is not None and bool(_scalar(done.const)))


class _ScanBudget:
    """The scan outputs a Loop or Scan collects, held to a quarter of the memory budget (one stacked
    tensor's share): a 1 KB file whose loop runs 1e12 trips of 1 MB each is refused after its first
    trip, when the trips it will run are known, and after the trip that crosses the budget
    otherwise, never after gigabytes."""

    def __init__(self, ctx, trips: int | None, why: str = ""):
        self.ctx, self.trips, self.why, self.total = ctx, trips, why, 0
        self.budget = memory_budget()
        self.allowed = self.budget // TENSOR_SHARE

    def add(self, values: list[Any], trip: int) -> None:
        """Count one trip's scan values (trip 0 is the first) before they are kept."""
        size = sum(np.asarray(v).nbytes for v in values if not isinstance(v, (list, tuple, dict)))
        self.total += size
        if trip == 0 and self.trips is not None and size * self.trips > self.allowed:
            self._refuse(f"would collect {self.trips:,} trips{self.why} × {_mib(size)} = {_mib(size * self.trips)}")
        if self.total > self.allowed:
            self._refuse(f"reached {_mib(self.total)} after {trip + 1:,} trips")

    def _refuse(self, what: str) -> None:
        node = self.ctx.node
        raise KernelError(f"{node.op} '{node.name}': its scan outputs {what}, over a quarter of the "
                          f"{self.budget / 2**30:.1f} GiB memory budget ({_mib(self.allowed)}); nothing more "
                          f"was collected (raise the budget with --max-memory)")


def _mib(nbytes: int) -> str:
    return f"{nbytes / 2**20:,.1f} MiB"


def _bag_reduction(ctx, body: Graph, trips: int) -> np.ndarray | None:
    """All trips of a bag-reduction loop at once; None (run the loop) for anything unusual."""
    pattern = _bag_pattern(body)
    if pattern is None:
        return None
    env = ctx.env
    try:
        table, ids, starts, ends = (np.asarray(env[pattern[k].name] if pattern[k].const is None else pattern[k].const)
                                    for k in ("table", "ids", "starts", "ends"))
    except KeyError:
        return None
    if ids.ndim != 1 or starts.ndim != 1 or ends.ndim != 1 or min(len(starts), len(ends)) < trips or trips == 0:
        return None
    n = len(ids)
    lo, hi = (np.clip(np.where(b < 0, b + n, b), 0, n) for b in (starts[:trips], ends[:trips]))
    lengths = hi - lo
    if (lengths <= 0).any():  # an empty bag: its value is the reduction's identity, leave it to the loop
        return None
    picked = ids[np.repeat(lo - np.concatenate([[0], np.cumsum(lengths)[:-1]]), lengths) + np.arange(lengths.sum())]
    rows = table.shape[0]
    if picked.size and (picked.min() < -rows or picked.max() >= rows):
        return None  # let the loop's Gather report the bad index
    gathered = table[picked]
    offsets = np.concatenate([[0], np.cumsum(lengths)[:-1]])
    result = _SEGMENT_REDUCERS[pattern["reduce"]].reduceat(gathered, offsets, axis=0)
    if pattern["reduce"] == "ReduceMean":
        result = result / lengths.reshape(-1, *[1] * (result.ndim - 1)).astype(result.dtype)
    return result.astype(table.dtype, copy=False)


#: Trips one Loop may run: a trip count in a small file (1e12) must not mean work without end.
#: Overridable with NNBRIDGE_MAX_ITERATIONS; read per call so that a test or a long-lived process
#: can change it (the kernels see no CLI flags, as the fold limit of the passes).
DEFAULT_MAX_ITERATIONS = 100_000


def max_iterations() -> int:
    given = os.environ.get("NNBRIDGE_MAX_ITERATIONS", "")
    if not given.isdigit() or int(given) < 1:
        if given:
            raise KernelError(f"NNBRIDGE_MAX_ITERATIONS '{given}' is not a positive whole number")
        return DEFAULT_MAX_ITERATIONS
    return int(given)


@kernel("Loop")
def loop(ctx, max_trips=None, cond=None, *carried, body: Graph):
    if not carried and max_trips is not None and (cond is None or bool(_scalar(cond))):
        bags = _bag_reduction(ctx, body, int(_scalar(max_trips)))
        if bags is not None:
            return bags
    names = [v.name for v in body.inputs]
    n_carried = len(carried)
    trips = int(_scalar(max_trips)) if max_trips is not None else None
    keep_going = bool(_scalar(cond)) if cond is not None else True
    state = list(carried)
    scans: list[list[Any]] = [[] for _ in body.outputs[1 + n_carried:]]
    limit = max_iterations()
    budget = _loop_budget(ctx, body, trips, cond is None or keep_going, limit)
    i = 0
    while keep_going and (trips is None or i < trips):
        if i == limit:
            raise KernelError(f"Loop '{ctx.node.name}' still running after {limit:,} iterations, the limit "
                              f"(trip count {'none' if trips is None else f'{trips:,}'}; raise the limit with "
                              "NNBRIDGE_MAX_ITERATIONS)")
        feeds = {names[0]: np.array(i, np.int64), names[1]: np.array(keep_going, np.bool_)}
        feeds.update(zip(names[2:], state))
        outs = ctx.run_graph(body, feeds)
        keep_going = bool(_scalar(outs[0]))
        state = outs[1:1 + n_carried]
        if scans:
            budget.add(outs[1 + n_carried:], i)
        for bucket, value in zip(scans, outs[1 + n_carried:]):
            bucket.append(value)
        i += 1
    stacked = [np.stack(bucket) if bucket else _empty_stack(v)
               for bucket, v in zip(scans, body.outputs[1 + n_carried:])]
    return tuple(state + stacked)


def _loop_budget(ctx, body: Graph, trips: int | None, entered: bool, limit: int) -> _ScanBudget:
    """The scan-output budget of a Loop: the trips it will run are known when it has a trip count,
    is entered and its body passes its condition on (then the iteration limit may cut them)."""
    certain = trips is not None and entered and _body_goes_on(body)
    stopped = certain and trips > limit  # the iteration limit stops it there: no more trips are run
    return _ScanBudget(ctx, min(trips, limit) if certain else None,
                       f" (of its {trips:,}, where the iteration limit stops it)" if stopped else "")


@kernel("Scan")
def scan(ctx, *inputs, body: Graph, num_scan_inputs, scan_input_axes=None, scan_input_directions=None,
         scan_output_axes=None, scan_output_directions=None):
    n_scan = num_scan_inputs
    n_state = len(inputs) - n_scan
    n_out = len(body.outputs) - n_state
    sequences, length = _scan_sequences(ctx, inputs[n_state:], scan_input_axes, scan_input_directions)
    names = [v.name for v in body.inputs]
    state = list(inputs[:n_state])
    scans: list[list[np.ndarray]] = [[] for _ in range(n_out)]
    budget = _ScanBudget(ctx, length)
    for t in range(length):
        feeds = dict(zip(names, state + [s[t] for s in sequences]))
        outs = ctx.run_graph(body, feeds)
        state = outs[:n_state]
        if n_out:
            budget.add(outs[n_state:], t)
        for bucket, value in zip(scans, outs[n_state:]):
            bucket.append(value)
    results = _scan_outputs(scans, body.outputs[n_state:], scan_output_axes, scan_output_directions)
    return tuple(state + results)


def _scan_sequences(ctx, inputs: tuple, axes: list[int] | None, directions: list[int] | None) -> tuple[list, int]:
    """Each scan input with its scan axis first (reversed where its direction is 1), and their
    common length."""
    in_axes = _axes(axes, len(inputs), [np.ndim(x) for x in inputs])
    sequences = [np.moveaxis(x, axis, 0) for x, axis in zip(inputs, in_axes)]
    sequences = [s[::-1] if d else s for s, d in zip(sequences, directions or [0] * len(inputs))]
    lengths = {len(s) for s in sequences}
    if len(lengths) > 1:
        raise KernelError(f"node '{ctx.node.name}' (Scan): scan inputs differ in length {sorted(lengths)}")
    return sequences, lengths.pop() if lengths else 0


def _scan_outputs(scans: list[list[np.ndarray]], values: list, axes: list[int] | None,
                  directions: list[int] | None) -> list[np.ndarray]:
    """Each scan output's per-step values stacked along its axis (in reverse where its direction is 1)."""
    out_axes = _axes(axes, len(scans), [np.ndim(b[0]) + 1 if b else 1 for b in scans])
    results = []
    for bucket, value, axis, direction in zip(scans, values, out_axes, directions or [0] * len(scans)):
        stacked = np.stack(bucket[::-1] if direction else bucket) if bucket else _empty_stack(value)
        results.append(np.moveaxis(stacked, 0, axis))
    return results


def _axes(given: list[int] | None, count: int, ranks: list[int]) -> list[int]:
    """Axes attribute with defaults (0) and negative values resolved against each rank."""
    axes = list(given) if given else [0] * count
    return [a + r if a < 0 else a for a, r in zip(axes, ranks)]
