"""Normalize any ONNX model to the one IR opset (``IR_OPSET``).

Older models go through ``onnx.version_converter``; ops whose history it cannot
walk (Cast-1, Split-1, Tile-1, LSTM-1, ...) are rewritten by our own adapters
(``adapters.py``) and hidden from the converter meanwhile. Large tensors are detached
first (the converter serializes the model and would choke on >2 GB, and it never
needs their values) and put back afterwards.

Newer models are accepted when every op they use has the same definition at the
IR opset, or when its newer version only widens the accepted types (listed in
``TYPE_ONLY_BUMPS``) or an adapter maps it back exactly; any other newer op is
reported with all the others at once.
"""

from __future__ import annotations

import re

import onnx
import onnx.defs
from onnx import ModelProto, version_converter

from ...base.errors import FormatError, Unsupported, UnsupportedOpError
from ...ir.schema import IR_OPSET
from . import adapters

#: Op versions newer than IR_OPSET whose only change is the list of accepted
#: element types (attributes, inputs and outputs are identical), so the IR
#: semantics still apply. tests/test_conformance.py checks every entry against
#: onnx.defs at both versions.
TYPE_ONLY_BUMPS: dict[str, int] = {
    "BitShift": 28, "Cast": 28, "Celu": 28, "Compress": 28, "DepthToSpace": 28, "DequantizeLinear": 28,
    "Einsum": 28, "Mod": 28, "OneHot": 28, "Optional": 28, "OptionalGetElement": 28,
    "OptionalHasElement": 28, "QuantizeLinear": 28, "ReduceLogSum": 28, "ReduceLogSumExp": 28,
    "ReverseSequence": 28, "Unique": 28,
}

#: domain that hides adapted nodes from onnx.version_converter while it upgrades the rest
_ADAPTED_DOMAIN = "ai.nnbridge.adapted"
_DETACH_BYTES = 1024


#: graph metadata: the default-domain opset of the ONNX file a graph was read from (the ONNX
#: writer's default opset; not written into files)
SOURCE_OPSET_KEY = "onnx.source_opset"


def default_opset(model: ModelProto) -> int:
    for o in model.opset_import:
        if o.domain in ("", "ai.onnx"):
            return o.version
    return 0


def normalize(model: ModelProto, source: str) -> ModelProto:
    version = default_opset(model)
    newest = onnx.defs.onnx_opset_version()
    if version < 0 or version > newest:
        raise FormatError(f"{source}: default opset {version} does not exist (onnx {onnx.__version__} knows 1 to "
                          f"{newest}); re-export the model with an opset of at most {newest}")
    if version == 0 or version == IR_OPSET:
        return model
    if version < IR_OPSET:
        if not _unchanged_since(model, version):
            return _upgrade(model, version, source)
    else:
        _check_newer_ops(model, version, source)
        _apply_adapters(model, version, source, hide=False)
    _relabel(model)
    return model


def _relabel(model: ModelProto) -> None:
    for o in model.opset_import:
        if o.domain in ("", "ai.onnx"):
            o.version = IR_OPSET


def _unchanged_since(model: ModelProto, version: int) -> bool:
    """True when every op of the model has the same definition at ``version`` and at the IR
    opset: then upgrading is only relabelling (the converter would take ~30 ms to do nothing)."""
    for node in _all_nodes(model.graph):
        if node.domain not in ("", "ai.onnx"):
            continue
        try:
            if (onnx.defs.get_schema(node.op_type, version, "").since_version
                    != onnx.defs.get_schema(node.op_type, IR_OPSET, "").since_version):
                return False
        except onnx.defs.SchemaError:
            return False  # let the converter report an op unknown at one of the two versions
    return True


def _upgrade(model: ModelProto, version: int, source: str) -> ModelProto:
    """Own adapters first (their nodes are hidden from the converter), then onnx's converter."""
    adapted = _apply_adapters(model, version, source, hide=True)
    detached = _detach_large_tensors(model)
    try:
        upgraded = version_converter.convert_version(model, IR_OPSET)
    except Exception as exc:  # the converter raises bare RuntimeErrors / C++ asserts
        _reattach(model, detached)
        message = str(exc).strip().splitlines()[-1] if str(exc).strip() else type(exc).__name__
        missing = re.search(r"No Adapter (?:From|To) Version \$?(\d+) for (\w+)", message)
        if missing:
            op = missing.group(2)
            raise UnsupportedOpError(f"{source} (opset {version})", [
                Unsupported(op, _first_node_name(model, op),
                            f"no upgrade path from its opset-{missing.group(1)} form to the IR opset {IR_OPSET}")
            ]) from None
        raise FormatError(f"{source}: cannot upgrade opset {version} to the IR opset {IR_OPSET}: {message}") from None
    _reattach(upgraded, detached)
    if adapted:
        for node in _all_nodes(upgraded.graph):
            if node.domain == _ADAPTED_DOMAIN:
                node.domain = ""
        kept = [o for o in upgraded.opset_import if o.domain != _ADAPTED_DOMAIN]
        del upgraded.opset_import[:]
        upgraded.opset_import.extend(kept)
    return upgraded


def _apply_adapters(model: ModelProto, version: int, source: str, hide: bool) -> bool:
    """Rewrite every node that has an own adapter; report all that cannot be adapted at once."""
    targets = []
    for graph in _all_graphs(model.graph):
        for node in graph.node:
            if node.domain not in ("", "ai.onnx"):
                continue
            try:
                since = onnx.defs.get_schema(node.op_type, version, "").since_version
            except onnx.defs.SchemaError:
                continue
            found = adapters.find_adapter(node.op_type, since)
            if found is not None:
                targets.append((graph, node, found))
    if not targets:
        return False
    ranks = adapters.ranks_of(model)
    bad = []
    for graph, node, found in targets:
        ctx = adapters.AdaptContext(graph, ranks, legacy_inputs=model.ir_version < 4 and graph is model.graph,
                                    opset=version)
        reason = found.fn(node, ctx)
        if reason:
            bad.append(Unsupported(node.op_type, node.name or node.output[0], reason))
        elif hide:
            node.domain = _ADAPTED_DOMAIN
    if bad:
        raise UnsupportedOpError(f"{source} (opset {version})", bad)
    if hide:
        model.opset_import.append(onnx.helper.make_opsetid(_ADAPTED_DOMAIN, 1))
    return True


def _first_node_name(model: ModelProto, op: str) -> str:
    for node in _all_nodes(model.graph):
        if node.op_type == op:
            return node.name or node.output[0]
    return op


def _detach_large_tensors(model: ModelProto) -> dict[str, bytes]:
    detached: dict[str, bytes] = {}
    for t in model.graph.initializer:
        if t.HasField("raw_data") and len(t.raw_data) > _DETACH_BYTES:
            detached[t.name] = t.raw_data
            t.ClearField("raw_data")
    return detached


def _reattach(model: ModelProto, detached: dict[str, bytes], move: bool = False) -> None:
    """``move``: each tensor's bytes leave ``detached`` as they enter ``model`` (never twice in memory)."""
    for t in model.graph.initializer:
        if t.name in detached:
            t.raw_data = detached.pop(t.name) if move else detached[t.name]


def _all_graphs(graph: onnx.GraphProto):
    """The graph and every subgraph inside it, outermost first."""
    yield graph
    for node in graph.node:
        for attr in node.attribute:
            if attr.type == onnx.AttributeProto.GRAPH:
                yield from _all_graphs(attr.g)
            elif attr.type == onnx.AttributeProto.GRAPHS:
                for g in attr.graphs:
                    yield from _all_graphs(g)


def _all_nodes(graph: onnx.GraphProto):
    for g in _all_graphs(graph):
        yield from g.node


def _check_newer_ops(model: ModelProto, version: int, source: str) -> None:
    bad: list[Unsupported] = []
    for node in _all_nodes(model.graph):
        if node.domain not in ("", "ai.onnx"):
            continue
        try:
            since = onnx.defs.get_schema(node.op_type, version, "").since_version
        except onnx.defs.SchemaError:
            continue  # unknown op: the backend reports it with the other unsupported ones
        if (since > IR_OPSET and TYPE_ONLY_BUMPS.get(node.op_type, 0) < since
                and adapters.find_adapter(node.op_type, since) is None):
            bad.append(Unsupported(node.op_type, node.name or node.output[0],
                                   f"version {since} is newer than the IR opset {IR_OPSET}"))
    if bad:
        raise UnsupportedOpError(f"{source} (opset {version})", bad)
