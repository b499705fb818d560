"""If, Loop and Scan: subgraphs run through ``ctx.run_graph`` (which sees the outer values).

Each body is compiled once (the executor caches plans per subgraph) and only the
per-iteration feeds change, so a loop costs one plan execution per trip.
Per-iteration scan outputs are collected in lists and stacked once at the end.
"""

from __future__ import annotations

from typing import Any

import numpy as np

from ....errors import KernelError
from ....ir import Graph, Value
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
def if_(ctx, cond):
    branch = ctx.attr("then_branch") if bool(_scalar(cond)) else ctx.attr("else_branch")
    return tuple(ctx.run_graph(branch, {}))


@kernel("Loop")
def loop(ctx, max_trips=None, cond=None, *carried):
    body: Graph = ctx.attr("body")
    names = [v.name for v in body.inputs]
    n_carried = len(carried)
    trips = int(_scalar(max_trips)) if max_trips is not None else None
    keep_going = bool(_scalar(cond)) if cond is not None else True
    state = list(carried)
    scans: list[list[Any]] = [[] for _ in body.outputs[1 + n_carried:]]
    i = 0
    while keep_going and (trips is None or i < trips):
        feeds = {names[0]: np.array(i, np.int64), names[1]: np.array(keep_going, np.bool_)}
        feeds.update(zip(names[2:], state))
        outs = ctx.run_graph(body, feeds)
        keep_going = bool(_scalar(outs[0]))
        state = outs[1:1 + n_carried]
        for bucket, value in zip(scans, outs[1 + n_carried:]):
            bucket.append(value)
        i += 1
    stacked = [np.stack(bucket) if bucket else _empty_stack(v)
               for bucket, v in zip(scans, body.outputs[1 + n_carried:])]
    return tuple(state + stacked)


@kernel("Scan")
def scan(ctx, *inputs):
    body: Graph = ctx.attr("body")
    n_scan = ctx.attr("num_scan_inputs")
    n_state = len(inputs) - n_scan
    n_out = len(body.outputs) - n_state
    in_axes = _axes(ctx.attr("scan_input_axes"), n_scan, [np.ndim(x) for x in inputs[n_state:]])
    in_dirs = ctx.attr("scan_input_directions") or [0] * n_scan
    out_dirs = ctx.attr("scan_output_directions") or [0] * n_out
    sequences = [np.moveaxis(x, axis, 0) for x, axis in zip(inputs[n_state:], in_axes)]
    sequences = [s[::-1] if d else s for s, d in zip(sequences, in_dirs)]
    lengths = {len(s) for s in sequences}
    if len(lengths) > 1:
        raise KernelError(f"node '{ctx.node.name}' (Scan): scan inputs differ in length {sorted(lengths)}")
    length = lengths.pop() if lengths else 0
    names = [v.name for v in body.inputs]
    state = list(inputs[:n_state])
    scans: list[list[np.ndarray]] = [[] for _ in range(n_out)]
    for t in range(length):
        feeds = dict(zip(names, state + [s[t] for s in sequences]))
        outs = ctx.run_graph(body, feeds)
        state = outs[:n_state]
        for bucket, value in zip(scans, outs[n_state:]):
            bucket.append(value)
    results = []
    elem_ranks = [np.ndim(b[0]) + 1 if b else 1 for b in scans]
    out_axes = _axes(ctx.attr("scan_output_axes"), n_out, elem_ranks)
    for bucket, value, axis, direction in zip(scans, body.outputs[n_state:], out_axes, out_dirs):
        stacked = np.stack(bucket[::-1] if direction else bucket) if bucket else _empty_stack(value)
        results.append(np.moveaxis(stacked, 0, axis))
    return tuple(state + results)


def _axes(given: list[int] | None, count: int, ranks: list[int]) -> list[int]:
    """Axes attribute with defaults (0) and negative values resolved against each rank."""
    axes = list(given) if given else [0] * count
    return [a + r if a < 0 else a for a, r in zip(axes, ranks)]
