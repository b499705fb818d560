"""Normalize any ONNX model to the one IR opset (``IR_OPSET``).

Older models go through ``onnx.version_converter``. Large tensors are detached
first (the converter serializes the model and would choke on >2 GB, and it never
needs their values) and put back afterwards.

Newer models are accepted when every op they use has the same definition at the
IR opset, or when its newer version only widens the accepted types (listed in
``TYPE_ONLY_BUMPS``); any other newer op is reported with all the others at once.
"""

from __future__ import annotations

import onnx
import onnx.defs
from onnx import ModelProto, version_converter

from ...errors import FormatError, Unsupported, UnsupportedOpError
from ...ir.schema import IR_OPSET

#: Op versions newer than IR_OPSET whose only change is a wider type list, so IR
#: semantics still apply (each entry is exercised by the conformance run).
TYPE_ONLY_BUMPS: dict[str, int] = {
    "Cast": 28, "CastLike": 28, "BitShift": 28, "Celu": 28, "Compress": 28,
    "DepthToSpace": 28, "SpaceToDepth": 28, "Mod": 28, "OneHot": 28, "ReduceLogSum": 28,
    "ReduceLogSumExp": 28, "ReverseSequence": 28, "Unique": 28, "Einsum": 28,
    "Optional": 28, "OptionalGetElement": 28, "OptionalHasElement": 28,
}

_DETACH_BYTES = 1024


def default_opset(model: ModelProto) -> int:
    for o in model.opset_import:
        if o.domain in ("", "ai.onnx"):
            return o.version
    return 0


def normalize(model: ModelProto, source: str) -> ModelProto:
    version = default_opset(model)
    if version == 0 or version == IR_OPSET:
        return model
    if version < IR_OPSET:
        return _upgrade(model, version, source)
    _check_newer_ops(model, version, source)
    for o in model.opset_import:
        if o.domain in ("", "ai.onnx"):
            o.version = IR_OPSET
    return model


def _upgrade(model: ModelProto, version: int, source: str) -> ModelProto:
    detached = _detach_large_tensors(model)
    try:
        upgraded = version_converter.convert_version(model, IR_OPSET)
    except Exception as exc:  # the converter raises bare RuntimeErrors / C++ asserts
        _reattach(model, detached)
        raise FormatError(
            f"{source}: cannot upgrade opset {version} to the IR opset {IR_OPSET}: "
            f"{str(exc).strip().splitlines()[-1] if str(exc).strip() else type(exc).__name__}"
        ) from None
    _reattach(upgraded, detached)
    return upgraded


def _detach_large_tensors(model: ModelProto) -> dict[str, bytes]:
    detached: dict[str, bytes] = {}
    for t in model.graph.initializer:
        if t.HasField("raw_data") and len(t.raw_data) > _DETACH_BYTES:
            detached[t.name] = t.raw_data
            t.ClearField("raw_data")
    return detached


def _reattach(model: ModelProto, detached: dict[str, bytes]) -> None:
    for t in model.graph.initializer:
        if t.name in detached:
            t.raw_data = detached[t.name]


def _all_nodes(graph: onnx.GraphProto):
    for node in graph.node:
        yield node
        for attr in node.attribute:
            if attr.type == onnx.AttributeProto.GRAPH:
                yield from _all_nodes(attr.g)
            elif attr.type == onnx.AttributeProto.GRAPHS:
                for g in attr.graphs:
                    yield from _all_nodes(g)


def _check_newer_ops(model: ModelProto, version: int, source: str) -> None:
    bad: list[Unsupported] = []
    for node in _all_nodes(model.graph):
        if node.domain not in ("", "ai.onnx"):
            continue
        try:
            since = onnx.defs.get_schema(node.op_type, version, "").since_version
        except onnx.defs.SchemaError:
            continue  # unknown op: the backend reports it with the other unsupported ones
        if since > IR_OPSET and TYPE_ONLY_BUMPS.get(node.op_type, 0) < since:
            bad.append(Unsupported(node.op_type, node.name or node.output[0],
                                   f"version {since} is newer than the IR opset {IR_OPSET}"))
    if bad:
        raise UnsupportedOpError(f"{source} (opset {version})", bad)
