"""Layer-by-layer comparison: every intermediate exposed on both sides, in the model's order.

The oracle's model gets every node output as a graph output (``oracle.expose``); the
backend compiles a copy of the IR graph whose outputs include the same values (its
public API: a graph output is always computed and returned). Each node's outputs are
compared under the run's rule. Two findings come out of it:

* ``first_divergent`` — the first node whose output leaves tolerance. Rounding errors
  compound through a deep network, so on fp16/bf16 this can be a node that is itself
  fine; hence
* ``culprit`` — the first node whose *own* error leaves tolerance: the node is re-run
  alone on onnxruntime from the backend's inputs, which removes everything upstream.

Both comparisons judge a value that fails the row against a float64 evaluation, as ``check``
judges its outputs (``exact.py``).

``origin`` names the first node whose backend output holds NaN/inf, with the value
range that caused it (overflow when the exact values exceed the format's range).
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from typing import Any

import ml_dtypes
import numpy as np
from onnx import ModelProto, NodeProto, numpy_helper

from ..base.errors import NNBridgeError
from ..ir import DType, Graph
from .exact import judged_against_float64
from .oracle import expose, external_folder, node_model, run_onnxruntime
from .verdict import OutputCheck, Rule, compare, jsonable


@dataclass
class NodeCheck:
    """One node of the oracle's model: its outputs compared end to end and on their own."""

    name: str
    op: str
    input_shapes: list[list[int] | None]
    outputs: list[OutputCheck] = field(default_factory=list)
    local: list[OutputCheck] = field(default_factory=list)  # re-run alone from the backend's inputs
    note: str = ""

    @property
    def ok(self) -> bool:
        return all(o.ok for o in self.outputs)

    @property
    def local_ok(self) -> bool:
        return all(o.ok for o in self.local)

    def to_dict(self) -> dict[str, Any]:
        return {"name": self.name, "op": self.op, "input_shapes": self.input_shapes, "ok": self.ok,
                "outputs": [o.to_dict() for o in self.outputs], "local_ok": self.local_ok if self.local else None,
                "local": [o.to_dict() for o in self.local], "note": self.note}


@dataclass(kw_only=True)
class NonfiniteOrigin:
    """The first node whose backend output holds NaN/inf, and why."""

    node: str
    op: str
    output: str
    count: int
    size: int
    oracle_nonfinite: int          # NaN/inf the oracle has in the same output
    exact_min: float | None        # the oracle's finite values there: what should have been stored
    exact_max: float | None
    input_ranges: dict[str, list[float] | None]  # the backend's inputs of that node
    format_max: float

    @property
    def overflow(self) -> bool:
        top = max(abs(self.exact_min or 0.0), abs(self.exact_max or 0.0))
        return top > self.format_max

    def describe(self) -> str:
        what = (f"first NaN/inf at node '{self.node}' ({self.op}): {self.count} of {self.size} elements "
                f"of '{self.output}'")
        if self.overflow:
            return (f"{what}; its exact values span [{self.exact_min:.4g}, {self.exact_max:.4g}], beyond the "
                    f"format's largest finite {self.format_max:.6g} (overflow)")
        if self.oracle_nonfinite:
            return f"{what}; onnxruntime has {self.oracle_nonfinite} there too: the model itself produces them"
        spans = ", ".join(f"{k} [{v[0]:.4g}, {v[1]:.4g}]" for k, v in self.input_ranges.items() if v)
        return f"{what}; onnxruntime's values there are finite; inputs span {spans or 'n/a'}"

    def to_dict(self) -> dict[str, Any]:
        data = {k: jsonable(v) for k, v in self.__dict__.items()}
        data.update(overflow=self.overflow, text=self.describe())
        return data


@dataclass
class LayerwiseResult:
    nodes: list[NodeCheck] = field(default_factory=list)
    origin: NonfiniteOrigin | None = None
    unexposed: list[str] = field(default_factory=list)  # computed values the backend did not return

    @property
    def first_divergent(self) -> NodeCheck | None:
        return next((n for n in self.nodes if n.outputs and not n.ok), None)

    @property
    def culprit(self) -> NodeCheck | None:
        return next((n for n in self.nodes if n.local and not n.local_ok), None)

    def shown(self, limit: int) -> list[NodeCheck]:
        """The rows of a table of at most ``limit`` rows (more when it names more nodes): every row
        when they fit, else the first divergent node and the culprit, which the table names, and
        the other nodes that leave tolerance (end to end or on their own), in the model's order."""
        if len(self.nodes) <= limit:
            return self.nodes
        named = {id(n) for n in (self.first_divergent, self.culprit) if n is not None}
        others = [n for n in self.nodes if id(n) not in named and (not n.ok or (n.local and not n.local_ok))]
        keep = named | {id(n) for n in others[:max(limit - len(named), 0)]}
        return [n for n in self.nodes if id(n) in keep]

    def to_dict(self) -> dict[str, Any]:
        first, culprit = self.first_divergent, self.culprit
        return {"first_divergent": first.name if first else None, "culprit": culprit.name if culprit else None,
                "origin": self.origin.to_dict() if self.origin else None, "unexposed": self.unexposed,
                "nodes": [n.to_dict() for n in self.nodes]}


#: runs the backend on a graph whose outputs include the named intermediates
BackendRun = Callable[[Graph], dict[str, Any]]


def layerwise(proto: ModelProto, graph: Graph, feeds: Mapping[str, Any], run_backend: BackendRun, rule: Rule,
              nonfinite_ok: Callable[[str], bool] = lambda name: False,
              notes: Mapping[str, str] | None = None, origin_only: bool = False) -> LayerwiseResult:
    """Compare every node output of ``proto`` with the backend's, in the model's order.

    ``origin_only``: just find where NaN/inf first appear (no comparisons; onnxruntime then runs
    only for the values of that node)."""
    nodes = list(proto.graph.node)
    wanted = _read_outputs(proto)
    exposed = _exposing(graph, wanted)
    if origin_only:
        return LayerwiseResult(origin=_first_nonfinite(proto, nodes, feeds, run_backend(exposed), rule))
    expected = run_onnxruntime(expose(proto, wanted), feeds)
    actual = run_backend(exposed)
    weights = {t.name: t for t in proto.graph.initializer}
    constants = set(graph.initializers)  # e.g. Constant nodes, folded on import: nothing to compute
    result = LayerwiseResult(unexposed=[n for n in wanted if n in expected and n not in actual
                                        and n not in constants])
    known: dict[str, Any] = {**feeds, **expected}
    produced = {**feeds, **actual}
    for node in nodes:
        outs = _compared_outputs(node, expected, actual)
        if not outs:
            continue
        if result.origin is None:
            result.origin = _origin(node, outs, produced, expected, rule)
        row = NodeCheck(node.name or outs[0], node.op_type,
                        [_shape(n, known, weights) for n in node.input], note=(notes or {}).get(node.name, ""))
        row.outputs = [compare(o, actual[o], expected[o], rule, nonfinite_ok(o), same_dtype=False) for o in outs]
        row.local = _local(proto, node, outs, feeds, actual, expected, rule, nonfinite_ok, weights)
        result.nodes.append(row)
    # outputs that fail the row, judged against the model's float64 evaluation as ``check`` judges its own
    judged = iter(judged_against_float64([o for n in result.nodes for o in n.outputs], actual, expected, rule,
                                         expose(proto, wanted), feeds, nonfinite_ok))
    for row in result.nodes:
        row.outputs = [next(judged) for _ in row.outputs]
    return result


def _read_outputs(proto: ModelProto) -> list[str]:
    """Node outputs something reads (or the model returns), in the model's order: an unread output
    (an inference-mode Dropout mask) cannot change the result, and its type may differ between opsets."""
    read = {i for n in proto.graph.node for i in n.input} | {o.name for o in proto.graph.output}
    return [o for n in proto.graph.node for o in n.output if o and o in read]


def _exposing(graph: Graph, wanted: list[str]) -> Graph:
    """A copy of ``graph`` whose outputs also include each wanted value it computes."""
    exposed = graph.copy()
    present = {v.name for v in exposed.outputs}
    computed = {v.name: v for n in exposed.nodes for v in n.outputs if v is not None}
    for name in wanted:
        if name in computed and name not in present:
            exposed.outputs.append(computed[name])
            present.add(name)
    return exposed


def _compared_outputs(node: NodeProto, expected: Mapping[str, Any], actual: Mapping[str, Any]) -> list[str]:
    """The node's outputs both sides computed as tensors (sequences have no one row)."""
    return [o for o in node.output if o in expected and o in actual
            and isinstance(expected[o], np.ndarray) and isinstance(actual[o], np.ndarray)]


def _first_nonfinite(proto: ModelProto, nodes: list[NodeProto], feeds: Mapping[str, Any],
                     actual: Mapping[str, Any], rule: Rule) -> NonfiniteOrigin | None:
    """The first node, in the model's order, whose backend output holds NaN/inf; onnxruntime runs
    with only that node's outputs exposed, for the exact values there."""
    for node in nodes:
        outs = [o for o in node.output if isinstance(actual.get(o), np.ndarray) and actual[o].dtype.kind == "f"
                and not np.isfinite(actual[o]).all()]
        if outs:
            expected = run_onnxruntime(expose(proto, outs), feeds)
            outs = [o for o in outs if isinstance(expected.get(o), np.ndarray)]
            return _origin(node, outs, {**feeds, **actual}, expected, rule)
    return None


def _local(proto: ModelProto, node: NodeProto, outs: list[str], feeds, actual, expected, rule: Rule,
           nonfinite_ok, weights) -> list[OutputCheck]:
    """The node's own error: its backend outputs against onnxruntime run on the backend's inputs.

    Float weights are given rounded to the rule's format, as the backend stores them: what
    remains is the node's arithmetic (a scaled weight still shows in full)."""
    inputs = {}
    for name in node.input:
        if not name:
            continue
        for source in (actual, feeds, expected):
            if name in source:
                if not isinstance(source[name], np.ndarray):
                    return []  # a sequence or optional input: only the end-to-end row is shown
                inputs[name] = source[name]
                break
        else:
            if name in weights and rule.format is not DType.FLOAT32:
                array = numpy_helper.to_array(weights[name], external_folder(proto) or "")
                if array.dtype.kind == "f":
                    inputs[name] = array.astype(rule.format.numpy).astype(array.dtype)
    single = node_model(proto, node, inputs)
    if single is None:
        return []
    try:
        own = run_onnxruntime(single, inputs)
    except NNBridgeError:
        return []  # e.g. a function-typed or opset-mismatched node: only the end-to-end row is shown
    local = rule.for_node()
    checks = [compare(o, actual[o], own[o], local, nonfinite_ok(o), same_dtype=False) for o in outs if o in own]
    return judged_against_float64(checks, actual, own, local, single, inputs, nonfinite_ok)


def _origin(node: NodeProto, outs: list[str], actual, expected, rule: Rule) -> NonfiniteOrigin | None:
    for name in outs:
        a = np.asarray(actual[name])
        if a.dtype.kind != "f" or np.isfinite(a).all():
            continue
        e = np.asarray(expected[name]).astype(np.float64)
        finite = e[np.isfinite(e)]
        ranges = {}
        for i in node.input:
            v = np.asarray(actual[i]) if i in actual else None
            ranges[i] = ([float(np.min(v)), float(np.max(v))] if v is not None and v.size and v.dtype.kind == "f"
                         else None)
        return NonfiniteOrigin(node=node.name or name, op=node.op_type, output=name,
                               count=int(np.count_nonzero(~np.isfinite(a))),
                               size=int(a.size), oracle_nonfinite=int(np.count_nonzero(~np.isfinite(e))),
                               exact_min=float(finite.min()) if finite.size else None,
                               exact_max=float(finite.max()) if finite.size else None, input_ranges=ranges,
                               format_max=float(ml_dtypes.finfo(rule.format.numpy).max))
    return None


def _shape(name: str, known: Mapping[str, Any], weights) -> list[int] | None:
    if not name:
        return None
    if name in known:
        value = known[name]
        return list(value.shape) if isinstance(value, np.ndarray) else None  # sequences: no one shape
    if name in weights:
        return list(weights[name].dims)
    return None
