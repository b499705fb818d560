"""The IR graph as JSON plus a table of arrays (the PEF's program description).

JSON holds structure, attributes and types; every numpy array (initializers, tensor
attributes) is replaced by ``{"array": KEY}`` and returned separately so the artifact can
store it as a ``.npy`` member. Subgraphs (fused bodies, If/Loop bodies) nest as JSON.
"""

from __future__ import annotations

from typing import Any

import numpy as np

from ...base.errors import FormatError
from ...ir import DType, Graph, Layout, Node, TensorType, TypeKind


def encode_graph(graph: Graph, arrays: dict[str, np.ndarray]) -> dict[str, Any]:
    def array_ref(a: np.ndarray) -> dict[str, str]:
        key = f"a{len(arrays)}"
        arrays[key] = np.asarray(a)
        return {"array": key}

    def attr(value: Any) -> Any:
        if isinstance(value, Graph):
            return {"graph": encode_graph(value, arrays)}
        if isinstance(value, np.ndarray):
            return array_ref(value)
        if isinstance(value, np.generic):
            return value.item()
        if isinstance(value, (list, tuple)):
            return [attr(v) for v in value]
        if value is None or isinstance(value, (bool, int, float, str)):
            return value
        raise FormatError(f"graph '{graph.name}': attribute value of type {type(value).__name__} "
                          "cannot be stored in a PEF")

    produced = {o.name for n in graph.nodes for o in n.outputs}
    return {
        "name": graph.name, "doc": graph.doc, "opset": graph.opset, "metadata": graph.metadata,
        "inputs": [{"name": v.name, "type": encode_type(v.type)} for v in graph.inputs],
        "initializers": {name: array_ref(a) for name, a in graph.initializers.items()},
        "initializer_layouts": {name: graph.values[name].type.layout.value
                                for name in graph.initializers if name in graph.values},
        "values": {name: encode_type(graph.values[name].type) for name in sorted(produced) if name in graph.values},
        "nodes": [{"op": n.op, "domain": n.domain, "name": n.name,
                   "inputs": [v.name if v is not None else None for v in n.inputs],
                   "outputs": [v.name for v in n.outputs],
                   "attrs": {k: attr(v) for k, v in n.attrs.items()}} for n in graph.nodes],
        "outputs": [v.name for v in graph.outputs],
    }


def decode_graph(data: dict[str, Any], arrays: dict[str, np.ndarray], parent: Graph | None = None) -> Graph:
    try:
        return _decode(data, arrays, parent)
    except FormatError:
        raise
    except (KeyError, TypeError, ValueError, AttributeError) as exc:
        raise FormatError(f"PEF program description is malformed ({type(exc).__name__}: {exc})") from None


def _decode(data: dict[str, Any], arrays: dict[str, np.ndarray], parent: Graph | None) -> Graph:
    def array(ref: dict[str, str]) -> np.ndarray:
        if ref["array"] not in arrays:
            raise FormatError(f"PEF program refers to a missing array '{ref['array']}'")
        return arrays[ref["array"]]

    def attr(value: Any) -> Any:
        if isinstance(value, dict):
            if "graph" in value:
                return _decode(value["graph"], arrays, graph)
            return array(value)
        if isinstance(value, list):
            return [attr(v) for v in value]
        return value

    graph = Graph(data["name"], parent=parent)
    graph.doc = data.get("doc", "")
    graph.opset = dict(data.get("opset", {}))
    graph.metadata = dict(data.get("metadata", {}))
    for item in data["inputs"]:
        graph.add_input(item["name"], decode_type(item["type"]))
    layouts = data.get("initializer_layouts", {})
    for name, ref in data["initializers"].items():
        value = graph.add_initializer(name, array(ref), exact=True)
        if name in layouts:
            value.type = value.type.with_layout(Layout(layouts[name]))
    types = data["values"]
    for item in data["nodes"]:
        inputs = []
        for name in item["inputs"]:
            if name is None:
                inputs.append(None)
                continue
            v = graph.get(name)
            if v is None:
                raise FormatError(f"PEF node '{item['name']}' reads undefined value '{name}'")
            inputs.append(v)
        outputs = [graph.add_value(name, decode_type(types.get(name)), exact=True) for name in item["outputs"]]
        node = Node(item["op"], inputs, outputs, {}, item["name"], item["domain"])
        graph.reserve_name(item["name"])
        graph.append_node(node)
        node.attrs = {k: attr(v) for k, v in item["attrs"].items()}
    for name in data["outputs"]:
        v = graph.get(name)
        if v is None:
            raise FormatError(f"PEF graph output '{name}' is never defined")
        graph.outputs.append(v)
    return graph


def encode_type(t: TensorType) -> dict[str, Any]:
    return {"dtype": t.dtype.value if t.dtype is not None else None,
            "shape": list(t.shape) if t.shape is not None else None,
            "layout": t.layout.value, "kind": t.kind.value,
            "elem": encode_type(t.elem) if t.elem is not None else None}


def decode_type(data: dict[str, Any] | None) -> TensorType:
    if data is None:
        return TensorType()
    return TensorType(
        DType(data["dtype"]) if data["dtype"] is not None else None,
        tuple(data["shape"]) if data["shape"] is not None else None,
        Layout(data["layout"]), TypeKind(data["kind"]),
        decode_type(data["elem"]) if data["elem"] is not None else None,
    )
