"""ONNX exporters for nnbridge-domain ops: each lowers to standard ONNX nodes.

``Reorder`` → ``Transpose`` (same perm); ``Repeat`` → ``Tile`` (multiples as an
int64 constant); ``AllReduce`` → ``Identity`` (one socket's view); ``Switch`` → an ``Identity`` per output (both
branches are computed); ``Fused`` → its body inlined
(body inputs and outputs renamed
to the node's, nested nnbridge ops lowered in turn).
"""

from __future__ import annotations

import numpy as np
import onnx
from onnx import helper, numpy_helper

from ...ir import Node
from .writer import EXPORTERS, ProtoBuilder, register_exporter


@register_exporter("Reorder")
def export_reorder(node: Node, builder: ProtoBuilder) -> list[onnx.NodeProto]:
    return [helper.make_node("Transpose", [node.inputs[0].name], [node.outputs[0].name], name=node.name,
                             perm=[int(p) for p in node.attr("perm")])]


@register_exporter("Repeat")
def export_repeat(node: Node, builder: ProtoBuilder) -> list[onnx.NodeProto]:
    reps = builder.fresh(f"{node.name}_multiples")
    const = helper.make_node("Constant", [], [reps], name=builder.fresh(f"{node.name}_const"),
                             value=numpy_helper.from_array(np.asarray(node.attr("multiples"), np.int64)))
    return [const, helper.make_node("Tile", [node.inputs[0].name, reps], [node.outputs[0].name], name=node.name)]


@register_exporter("AllReduce")
def export_all_reduce(node: Node, builder: ProtoBuilder) -> list[onnx.NodeProto]:
    return [helper.make_node("Identity", [node.inputs[0].name], [node.outputs[0].name], name=node.name)]


@register_exporter("Switch")
def export_switch(node: Node, builder: ProtoBuilder) -> list[onnx.NodeProto]:
    return [helper.make_node("Identity", [node.inputs[0].name], [out.name], name=f"{node.name}/{port}")
            for out, port in zip(node.outputs, ("false", "true"))]


@register_exporter("Fused")
def export_fused(node: Node, builder: ProtoBuilder) -> list[onnx.NodeProto]:
    body = node.attr("body")
    rename = {inner.name: outer.name for inner, outer in zip(body.inputs, node.inputs) if outer is not None}
    rename.update({inner.name: outer.name for inner, outer in zip(body.outputs, node.outputs)})
    protos: list[onnx.NodeProto] = []
    for inner in body.nodes:
        exporter = EXPORTERS.get((inner.domain, inner.op))
        protos.extend(exporter(inner, builder) if exporter else [builder.node_proto(inner)])
    for proto in protos:
        proto.input[:] = [rename.get(n, n) for n in proto.input]
        proto.output[:] = [rename.get(n, n) for n in proto.output]
    return protos
