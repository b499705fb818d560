"""IR → SMAUG control flow: ``nnbridge.Switch`` → Switch, ``Where`` on a one-value predicate → Merge.

SMAUG's runtime has dead tensors: a Switch forwards its data to the output its predicate picks
and marks the other dead, an op with a dead input is skipped (its outputs dead), and a Merge
forwards its first live input. The IR computes both branches and joins them with
``Where(pred, true, false)``. A Where becomes a Merge of the two inputs when each is computed
only in its branch (downstream of a Switch on that predicate, as SMAUG's ``cond`` builds them and
as a SMAUG file is imported); an input computed in both branches goes through a new Switch
first. Registered in the same table as ``export_ops``.
"""

from __future__ import annotations

import numpy as np

from ...ir import NNBRIDGE_DOMAIN, DType, Node, Value
from ...protos.smaug import smaug_types_pb2 as pb
from .export_ops import define, exporter, same_layout_ref
from .exporter import LOOKED_THROUGH, Exporter, Inexpressible, Ref

#: Switch output index of each branch (SMAUG's: output 0 when false, output 1 when true)
PORTS = {False: 0, True: 1}


def first_value_of(value: Value) -> Value | None:
    """``p`` when ``value`` is ``Gather(p, 0)`` of a 1-D ``p`` (or of ``Reshape(p, [-1])``): how the reader
    takes the first value of a predicate holding several (which the runtime refuses to run)."""
    gather = value.producer
    if gather is None or gather.op != "Gather" or gather.domain or gather.input(1) is None:
        return None
    index, source = gather.inputs[1].const, gather.inputs[0]
    if index is None or index.ndim != 0 or int(index) != 0 or int(gather.attr("axis", 0)) != 0:
        return None
    flat = source.producer
    if flat is not None and flat.op == "Reshape" and not flat.domain and flat.input(1) is not None \
            and flat.inputs[1].const is not None and list(flat.inputs[1].const.reshape(-1)) == [-1]:
        source = flat.inputs[0]
    return source if source.type.rank == 1 else None


def one_value(pred: Value) -> None:
    """SMAUG's runtime validates a Switch's predicate: one value, else it stops before running."""
    count = int(np.prod(pred.type.shape)) if pred.type.is_static else None
    if count != 1:
        raise Inexpressible(f"a predicate of {count or 'unknown'} values: SMAUG's runtime runs a Switch on one "
                            "boolean only (it stops with 'switch was not configured correctly')")


def predicate(ex: Exporter, cond: Value) -> Value:
    """The SMAUG predicate tensor behind a Where's condition: one boolean, the condition itself or the
    first value of a 1-D boolean tensor (which must then hold one value too)."""
    source = first_value_of(cond) or cond
    t = source.type
    if t.dtype != DType.BOOL or t.rank != 1 or (source is cond and t.shape != (1,)):
        raise Inexpressible("a Where whose condition varies per element: SMAUG chooses between whole tensors "
                            "only (Switch/Merge on one boolean value)")
    one_value(source)
    return source


def _claimed(ex: Exporter, node: Node) -> bool:
    """The Reshape and Gather that take a predicate's first value for a Where are read through."""
    out = node.outputs[0] if node.outputs else None
    if out is None or node.domain or node.op not in ("Reshape", "Gather") or ex.graph.is_output(out):
        return False
    users = ex.graph.consumers(out)
    if node.op == "Reshape":
        return bool(users) and all(_claimed(ex, u) for u in users)
    return bool(users) and first_value_of(out) is not None and all(
        u.op == "Where" and not u.domain and u.inputs[0] is out and u.inputs[1] is not out and u.inputs[2] is not out
        for u in users)


LOOKED_THROUGH.append(_claimed)


def live_in(ex: Exporter, value: Value) -> frozenset[tuple[int, int]]:
    """The Switch branches (predicate value id, port) ``value`` is computed in: SMAUG's runtime
    computes it only when each of those predicates picks that port."""
    if ex.live is None:
        ex.live = {}
        for node in ex.graph.nodes:  # topological order: one pass
            reads = node.inputs
            if node.op == "Where" and not node.domain:
                reads = node.inputs[1:]  # a Merge's liveness does not depend on its predicate
            found = frozenset().union(*(ex.live.get(id(v), frozenset()) for v in reads if v is not None))
            if node.op == "Where" and not node.domain:  # a Merge of both branches of one predicate leaves them
                found = frozenset(b for b in found if (b[0], 1 - b[1]) not in found)
            for k, out in enumerate(node.outputs):
                if node.op == "Switch" and node.domain == NNBRIDGE_DOMAIN and k < 2:
                    ex.live[id(out)] = found | {(id(node.inputs[1]), k)}
                else:
                    ex.live[id(out)] = found
    return ex.live.get(id(value), frozenset())


def _pred_ref(ex: Exporter, pred: Value) -> Ref:
    return ex.need(pred, ex.layout_of(pred))


@exporter("Switch", domain=NNBRIDGE_DOMAIN)
def _switch(ex: Exporter, node: Node) -> None:
    x = same_layout_ref(ex, node.inputs[0])
    pred = node.inputs[1]
    if pred.type.dtype != DType.BOOL or pred.type.rank != 1:
        raise Inexpressible("a Switch predicate is a 1-D boolean tensor")
    one_value(pred)
    _, refs = ex.emit(pb.Switch, node.name, [x, _pred_ref(ex, pred)], [(x.dims, x.layout)] * 2)
    for value, ref in zip(node.outputs, refs):
        define(ex, value, ref)


@exporter("Where")
def _where(ex: Exporter, node: Node) -> None:
    cond, when_true, when_false = node.inputs
    y = node.outputs[0]
    pred = predicate(ex, cond)
    if not y.type.is_static or any(v.type.shape != y.type.shape for v in (when_true, when_false)):
        raise Inexpressible("a Where that broadcasts its branches: SMAUG's Merge forwards whole tensors of one shape")
    layout = ex.layout_of(y)
    refs = []
    for value, taken in ((when_true, True), (when_false, False)):
        live = live_in(ex, value)
        if (id(pred), PORTS[not taken]) in live:
            raise Inexpressible(f"its {'true' if taken else 'false'} input is computed only when the predicate is "
                                f"{'false' if taken else 'true'}, where SMAUG's runtime marks it dead")
        ref = ex.need(value, layout)
        if (id(pred), PORTS[taken]) not in live:  # computed in both branches: switched here
            ref = ex.emit(pb.Switch, f"{node.name}/switch", [ref, _pred_ref(ex, pred)],
                          [(ref.dims, ref.layout)] * 2)[1][PORTS[taken]]
        refs.append(ref)
    _, outs = ex.emit(pb.Merge, node.name, refs, [(refs[0].dims, refs[0].layout)])
    define(ex, y, outs[0])
