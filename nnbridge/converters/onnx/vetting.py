"""What the ONNX reader checks before it allocates anything: where external data may be read from
(only inside the model's directory), declared tensor sizes, window attributes (kernel, stride,
dilation, pads, group) and element types the IR has."""

from __future__ import annotations

import functools
from pathlib import Path

import onnx
from onnx import AttributeProto, ModelProto, TensorProto
from onnx.external_data_helper import load_external_data_for_model, load_external_data_for_tensor, uses_external_data

from ...base.errors import FormatError, Unsupported, UnsupportedOpError
from ...base.fileio import check_numel, resolve_inside
from ...ir import DType

#: the largest pad of a window op nnbridge accepts (real models pad by a few pixels)
MAX_PAD = 1 << 16


def _iter_tensors(model_or_graph):
    """Every TensorProto a model holds, wherever it sits: initializers, sparse initializers,
    node attributes of any declared type (tensor, tensor list, sparse tensor(s), subgraphs) in
    the graph and in local functions — the places external data may be referenced from."""
    if isinstance(model_or_graph, ModelProto):
        yield from _iter_tensors(model_or_graph.graph)
        for function in model_or_graph.functions:
            yield from _node_tensors(function.node)
        return
    graph = model_or_graph
    yield from graph.initializer
    for sparse in graph.sparse_initializer:
        yield from (sparse.values, sparse.indices)
    yield from _node_tensors(graph.node)


def _node_tensors(nodes):
    for node in nodes:
        for attr in node.attribute:
            if attr.HasField("t"):
                yield attr.t
            yield from attr.tensors
            for sparse in ([attr.sparse_tensor] if attr.HasField("sparse_tensor") else []) + list(attr.sparse_tensors):
                yield from (sparse.values, sparse.indices)
            if attr.HasField("g"):
                yield from _iter_tensors(attr.g)
            for g in attr.graphs:
                yield from _iter_tensors(g)


def has_external(model: ModelProto) -> bool:
    return any(uses_external_data(t) for t in _iter_tensors(model))


def load_external(model: ModelProto, base_dir: Path) -> None:
    """External data of every vetted tensor, read from inside ``base_dir`` (onnx's loader skips
    sparse tensors, which would later be read relative to the working directory)."""
    load_external_data_for_model(model, str(base_dir))
    for t in _iter_tensors(model):
        if uses_external_data(t):
            load_external_data_for_tensor(t, str(base_dir))


def vet_tensors(model: ModelProto, name: str, base_dir: Path | None) -> None:
    for t in _iter_tensors(model):
        check_numel(list(t.dims), f"{name}: tensor '{t.name}'")
        if not uses_external_data(t):
            continue
        info = {e.key: e.value for e in t.external_data}
        if base_dir is None:
            raise FormatError(f"{name}: tensor '{t.name}' uses external data; load the model from its file")
        location = info.get("location", "")
        if "\0" in location:
            raise FormatError(f"{name}: external data location of tensor '{t.name}' contains a NUL byte")
        offset, length = (_external_count(info, key, name, t.name) for key in ("offset", "length"))
        target = resolve_inside(base_dir, location, f"{name}: tensor '{t.name}'")
        if not target.is_file():
            raise FormatError(f"{name}: external data file '{location}' of tensor '{t.name}' is missing")
        end = offset + length
        if end > target.stat().st_size:
            raise FormatError(f"{name}: external data of tensor '{t.name}' runs past the end of {target.name}")


def _external_count(info: dict[str, str], key: str, name: str, tensor: str) -> int:
    """An external-data ``offset`` or ``length``: a non-negative decimal number of bytes."""
    text = info.get(key, "0")
    if not (text.isascii() and text.isdigit()):
        raise FormatError(f"{name}: external data {key} '{text[:40]}' of tensor '{tensor}' is not a "
                          "non-negative number of bytes")
    return int(text)


def _unknown_elem_type(tp: onnx.TypeProto) -> int | None:
    which = tp.WhichOneof("value")
    if which == "tensor_type":
        code = tp.tensor_type.elem_type
        return code if code and code not in _KNOWN_TYPES else None
    if which == "sequence_type":
        return _unknown_elem_type(tp.sequence_type.elem_type)
    if which == "optional_type":
        return _unknown_elem_type(tp.optional_type.elem_type)
    return None


_KNOWN_TYPES = frozenset(d.value for d in DType)


def vet_element_types(model: ModelProto, name: str) -> None:
    """Element types newer than the IR (float8e8m0, int2, ...) are reported per node, all at once."""
    bad: dict[str, Unsupported] = {}

    def visit(gp: onnx.GraphProto) -> None:
        users: dict[str, onnx.NodeProto] = {}
        for node in gp.node:
            for value in list(node.output) + list(node.input):
                users.setdefault(value, node)
            for attr in node.attribute:
                for sub in [attr.g] if attr.type == AttributeProto.GRAPH else attr.graphs:
                    visit(sub)
        typed = [(vi.name, _unknown_elem_type(vi.type)) for vi in (*gp.input, *gp.output, *gp.value_info)]
        typed += [(t.name, t.data_type if t.data_type not in _KNOWN_TYPES else None) for t in gp.initializer]
        for value, code in typed:
            if code is None:
                continue
            node = users.get(value)
            op, where = (node.op_type, node.name or node.output[0]) if node is not None else ("graph value", value)
            label = TensorProto.DataType.Name(code) if code in TensorProto.DataType.values() else str(code)
            bad.setdefault(where, Unsupported(op, where, f"element type {label} has no IR equivalent"))

    visit(model.graph)
    if bad:
        raise UnsupportedOpError(name, list(bad.values()))


def vet_attributes(model: ModelProto, name: str) -> None:
    """Window attributes in range, for every node (subgraphs and functions included): a negative
    kernel, a zero stride or a pad of 10^9 is refused here instead of hanging or allocating later."""
    nodes = [n for g in _graphs(model.graph) for n in g.node] + [n for f in model.functions for n in f.node]
    versions = {("" if o.domain == "ai.onnx" else o.domain): int(o.version) for o in model.opset_import}
    for node in nodes:
        where = f"{name}: node '{node.name or (node.output[0] if node.output else node.op_type)}' ({node.op_type})"
        domain = "" if node.domain == "ai.onnx" else node.domain
        declared = _declared_attribute_types(node.op_type, domain, versions.get(domain, 0))
        for attr in node.attribute:
            _vet_attribute_type(attr, declared.get(attr.name), where)
            if node.op_type == "Transpose" and attr.name == "perm":
                _vet_permutation(attr, where)
            _vet_window_value(node, attr, where)
        if node.op_type != "Pad":
            _vet_window_lengths(node, where)


def _vet_attribute_type(attr: AttributeProto, want: int | None, where: str) -> None:
    """The attribute has the type the operator's schema declares (if it declares one)."""
    if want is not None and attr.type != want:
        have = AttributeProto.AttributeType.Name(attr.type) if attr.type in _ATTR_TYPES else attr.type
        raise FormatError(f"{where}: attribute '{attr.name}' is of type {have}, the operator defines it "
                          f"as {AttributeProto.AttributeType.Name(want)}")


def _vet_permutation(attr: AttributeProto, where: str) -> None:
    """A Transpose's perm lists each axis once."""
    if sorted(attr.ints) != list(range(len(attr.ints))):
        raise FormatError(f"{where}: perm={list(attr.ints)} is not a permutation of 0..{len(attr.ints) - 1}")


def _vet_window_value(node, attr: AttributeProto, where: str) -> None:
    """An integer window attribute is at least its smallest meaningful value (pads at most
    ``MAX_PAD``); Pad-2's pads may be negative."""
    if attr.type != AttributeProto.INTS and attr.type != AttributeProto.INT:
        return
    low = _LOWEST.get(attr.name)
    if low is None or (attr.name == "pads" and node.op_type == "Pad"):  # Pad-2 pads may be negative
        return
    values = list(attr.ints) if attr.type == AttributeProto.INTS else [attr.i]
    bad = [v for v in values if v < low or (attr.name == "pads" and v > MAX_PAD)]
    if bad:
        limit = f"between {low} and {MAX_PAD}" if attr.name == "pads" else f">= {low}"
        raise FormatError(f"{where}: {attr.name}={values} must be {limit}")


def _vet_window_lengths(node, where: str) -> None:
    """A window's attributes agree on its rank: pads list a begin and an end per spatial axis,
    strides and dilations one value each (a kernel_shape, when given, fixes the rank)."""
    lists = {a.name: list(a.ints) for a in node.attribute
             if a.type == AttributeProto.INTS and a.name in ("kernel_shape", "strides", "dilations", "pads")}
    rank = len(lists["kernel_shape"]) if "kernel_shape" in lists else None
    if "pads" in lists and (len(lists["pads"]) % 2 or (rank is not None and len(lists["pads"]) != 2 * rank)):
        axes = f"the {rank} axes of kernel_shape" if rank is not None else "each spatial axis"
        raise FormatError(f"{where}: pads={lists['pads']} must list a begin and an end for {axes}")
    for name in ("strides", "dilations"):
        if rank is not None and name in lists and len(lists[name]) != rank:
            raise FormatError(f"{where}: {name}={lists[name]} must have one value per axis of "
                              f"kernel_shape={lists['kernel_shape']}")


def vet_names(model: ModelProto, name: str) -> None:
    """Names are text: protobuf hands names that are not valid UTF-8 over as bytes, refused here."""
    for graph in _graphs(model.graph):
        texts = [graph.name, *(t.name for t in graph.initializer),
                 *(v.name for v in (*graph.input, *graph.output, *graph.value_info))]
        for node in graph.node:
            texts += [node.name, node.op_type, node.domain, *node.input, *node.output,
                      *(a.name for a in node.attribute)]
        texts += [o.domain for o in model.opset_import]
        texts += [t for f in model.functions for n in f.node
                  for t in (n.name, n.op_type, n.domain, *n.input, *n.output)]
        bad = next((t for t in texts if isinstance(t, bytes)), None)
        if bad is not None:
            raise FormatError(f"{name}: the name {bad!r} in graph {graph.name!r} is not valid UTF-8 text")


def vet_declared_shapes(model: ModelProto, name: str) -> None:
    """Declared tensor shapes (inputs, outputs, value_info, in every subgraph) within the size limit."""
    for graph in _graphs(model.graph):
        for vi in (*graph.input, *graph.output, *graph.value_info):
            if vi.type.WhichOneof("value") != "tensor_type" or not vi.type.tensor_type.HasField("shape"):
                continue
            dims = [d.dim_value for d in vi.type.tensor_type.shape.dim if d.dim_value > 0]  # -1: a symbol
            check_numel(dims, f"{name}: value '{vi.name}'")


_ATTR_TYPES = frozenset(AttributeProto.AttributeType.values())


@functools.cache
def _declared_attribute_types(op: str, domain: str, version: int) -> dict[str, int]:
    """Attribute name → type as onnx's schema of ``op`` at the model's opset ``version`` declares
    it (Cast-1 took ``to`` as a string); {} for unknown ops and versions."""
    try:
        schema = onnx.defs.get_schema(op, version, domain) if version > 0 else onnx.defs.get_schema(op, domain)
    except (onnx.defs.SchemaError, TypeError):  # TypeError: a name protobuf handed over as bytes
        return {}
    return {name: int(a.type) for name, a in schema.attributes.items()}


#: window attributes and their smallest meaningful value
_LOWEST = {"kernel_shape": 1, "strides": 1, "dilations": 1, "pads": 0, "group": 1}


def _graphs(graph: onnx.GraphProto):
    yield graph
    for node in graph.node:
        for attr in node.attribute:
            if attr.HasField("g"):
                yield from _graphs(attr.g)
            for g in attr.graphs:
                yield from _graphs(g)
