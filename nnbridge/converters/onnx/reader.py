"""ONNX file or ModelProto → IR ``Graph``.

Order of work: parse (corrupt files → FormatError), vet external-data paths and
declared tensor sizes (before anything is allocated), load external data, inline
local functions, normalize the opset, infer shapes with onnx's own inference,
then translate protos into IR objects.
"""

from __future__ import annotations

import os
from pathlib import Path

import numpy as np
import onnx
from google.protobuf.message import DecodeError
from onnx import AttributeProto, ModelProto, TensorProto, inliner, numpy_helper
from onnx.external_data_helper import load_external_data_for_model, load_external_data_for_tensor, uses_external_data

from ...errors import FormatError, NNBridgeError, Unsupported, UnsupportedOpError
from ...fileio import check_numel, resolve_inside
from ...ir import DType, Graph, Layout, Node, TensorType, TypeKind
from ...ir.graph import paused_gc
from . import opset


def load_onnx(source: str | os.PathLike | ModelProto | bytes, *, infer_shapes: bool = True) -> Graph:
    """Load an ONNX model into the IR (opset normalized, shapes inferred)."""
    model, name, base_dir = _read(source)
    _vet_tensors(model, name, base_dir)
    if base_dir is not None and _has_external(model):
        _load_external(model, base_dir)
    _densify_sparse_initializers(model, name)
    if model.functions:
        model = inliner.inline_local_functions(model)
    model = opset.normalize(model, name)
    if infer_shapes:
        model = _infer_shapes(model)
    _vet_element_types(model, name)
    with paused_gc():
        return model_to_graph(model, name)


def _read(source) -> tuple[ModelProto, str, Path | None]:
    if isinstance(source, ModelProto):
        model = ModelProto()
        model.CopyFrom(source)
        return model, model.graph.name or "<model>", None
    if isinstance(source, (bytes, bytearray)):
        return _parse(bytes(source), "<bytes>"), "<bytes>", None
    path = Path(source)
    if not path.is_file():
        raise FormatError(f"{path}: no such file")
    return _parse(path.read_bytes(), str(path)), str(path), path.parent


def _parse(data: bytes, name: str) -> ModelProto:
    model = ModelProto()
    try:
        model.ParseFromString(data)
    except (DecodeError, RuntimeError, ValueError) as exc:
        raise FormatError(f"{name}: not a valid ONNX model (truncated or corrupt file: {exc})") from None
    if not model.HasField("graph") or (not model.graph.node and not model.graph.output):
        raise FormatError(f"{name}: not a valid ONNX model (no graph in the file)")
    return model


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


def _has_external(model: ModelProto) -> bool:
    return any(uses_external_data(t) for t in _iter_tensors(model))


def _load_external(model: ModelProto, base_dir: Path) -> None:
    """External data of every vetted tensor, read from inside ``base_dir`` (onnx's loader skips
    sparse tensors, which would later be read relative to the working directory)."""
    load_external_data_for_model(model, str(base_dir))
    for t in _iter_tensors(model):
        if uses_external_data(t):
            load_external_data_for_tensor(t, str(base_dir))


def _vet_tensors(model: ModelProto, name: str, base_dir: Path | None) -> None:
    for t in _iter_tensors(model):
        check_numel(list(t.dims), f"{name}: tensor '{t.name}'")
        if not uses_external_data(t):
            continue
        info = {e.key: e.value for e in t.external_data}
        if base_dir is None:
            raise FormatError(f"{name}: tensor '{t.name}' uses external data; load the model from its file")
        target = resolve_inside(base_dir, info.get("location", ""), f"{name}: tensor '{t.name}'")
        if not target.is_file():
            raise FormatError(f"{name}: external data file '{info.get('location')}' of tensor '{t.name}' is missing")
        end = int(info.get("offset", 0)) + int(info.get("length", 0))
        if end > target.stat().st_size:
            raise FormatError(f"{name}: external data of tensor '{t.name}' runs past the end of {target.name}")


def _densify_sparse_initializers(model: ModelProto, name: str) -> None:
    """Sparse initializers become dense ones (the IR holds dense constants): COO values at linear
    indices ``[NNZ]`` or coordinates ``[NNZ, rank]``, sizes vetted before the dense array exists."""
    graph = model.graph
    for sparse in graph.sparse_initializer:
        where = f"{name}: sparse initializer '{sparse.values.name}'"
        dims = [int(d) for d in sparse.dims]
        check_numel(dims, where)
        values = numpy_helper.to_array(sparse.values).reshape(-1)
        indices = numpy_helper.to_array(sparse.indices).astype(np.int64) if sparse.indices.dims else \
            np.zeros((0,), np.int64)
        dense = np.zeros(dims, dtype=values.dtype)
        size = dense.size
        if indices.ndim == 2 and indices.shape == (values.size, len(dims)):
            if (indices < 0).any() or (indices >= np.asarray(dims)).any():
                raise FormatError(f"{where}: an index lies outside its dims {dims}")
            dense[tuple(indices.T)] = values
        elif indices.ndim == 1 and indices.size == values.size:
            if (indices < 0).any() or (indices >= size).any():
                raise FormatError(f"{where}: an index lies outside its {size} elements")
            dense.reshape(-1)[indices] = values
        else:
            raise FormatError(f"{where}: indices of shape {list(indices.shape)} do not fit {values.size} values "
                              f"of a tensor with dims {dims}")
        graph.initializer.append(numpy_helper.from_array(dense, sparse.values.name))
    del graph.sparse_initializer[:]


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


def _vet_element_types(model: ModelProto, name: str) -> None:
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
            bad.setdefault(where, Unsupported(op, where, f"element type {TensorProto.DataType.Name(code)} "
                                                        "has no IR equivalent"))

    visit(model.graph)
    if bad:
        raise UnsupportedOpError(name, list(bad.values()))


def _infer_shapes(model: ModelProto) -> ModelProto:
    """Shape-inferred copy of ``model``, whose weights are moved, not copied, into the result
    (``model`` is the loader's private copy and is dropped afterwards)."""
    detached = opset._detach_large_tensors(model)
    try:
        inferred = onnx.shape_inference.infer_shapes(model, check_type=False, strict_mode=False, data_prop=True)
    except Exception:  # inference is a help, not a requirement: keep the declared types
        inferred = model
    opset._reattach(inferred, detached)
    return inferred


# -- proto → IR ---------------------------------------------------------------

def type_from_proto(tp: onnx.TypeProto) -> TensorType:
    which = tp.WhichOneof("value")
    if which == "tensor_type":
        tt = tp.tensor_type
        dtype = DType.from_onnx(tt.elem_type) if tt.elem_type else None
        shape = None
        if tt.HasField("shape"):
            shape = tuple(
                d.dim_value if d.HasField("dim_value") else (d.dim_param or None)
                for d in tt.shape.dim
            )
        rank = None if shape is None else len(shape)
        return TensorType(dtype, shape, Layout.default_for_rank(rank))
    if which == "sequence_type":
        return TensorType(kind=TypeKind.SEQUENCE, elem=type_from_proto(tp.sequence_type.elem_type))
    if which == "optional_type":
        return TensorType(kind=TypeKind.OPTIONAL, elem=type_from_proto(tp.optional_type.elem_type))
    return TensorType()


def tensor_to_array(t: TensorProto, where: str) -> np.ndarray:
    try:
        array = numpy_helper.to_array(t)
    except Exception as exc:
        raise FormatError(f"{where}: tensor '{t.name}' cannot be decoded ({exc})") from None
    if t.data_type == TensorProto.STRING:
        array = np.vectorize(lambda b: b.decode("utf-8", "replace") if isinstance(b, bytes) else b,
                             otypes=[object])(array) if array.size else array.astype(object)
    return array


def model_to_graph(model: ModelProto, source: str = "<model>") -> Graph:
    graph = Graph(model.graph.name or Path(source).stem or "graph")
    graph.opset = {("" if o.domain == "ai.onnx" else o.domain): o.version for o in model.opset_import}
    graph.metadata = {p.key: p.value for p in model.metadata_props}
    graph.doc = model.graph.doc_string
    _fill_graph(graph, model.graph, source)
    return graph


def _fill_graph(graph: Graph, gp: onnx.GraphProto, source: str) -> None:
    types = {vi.name: type_from_proto(vi.type) for vi in list(gp.value_info) + list(gp.output)}
    init_names = {t.name for t in gp.initializer}
    for t in gp.initializer:
        graph.add_initializer(t.name, tensor_to_array(t, source), exact=True)
    for t in gp.sparse_initializer:
        dense = numpy_helper.to_array(t)
        graph.add_initializer(t.values.name, dense, exact=True)
        init_names.add(t.values.name)
    for vi in gp.input:
        if vi.name in init_names:  # IR<4 style: initializers listed as inputs too
            continue
        graph.add_input(vi.name, type_from_proto(vi.type))
    used_names: set[str] = set()
    for i, np_ in enumerate(gp.node):
        inputs = []
        for name in np_.input:
            if not name:
                inputs.append(None)
                continue
            v = graph.get(name)
            if v is None:  # used before defined (invalid order): create, fixed up by toposort
                v = graph.add_value(name, types.get(name), exact=True)
            inputs.append(v)
        outputs = []
        for name in np_.output:
            if not name:  # an unused optional output: give it a private name
                outputs.append(graph.add_value(f"{np_.name or np_.op_type}_unused"))
                continue
            v = graph.values.get(name)
            if v is None:
                v = graph.add_value(name, types.get(name), exact=True)
            elif v.producer is not None:
                raise FormatError(f"{source}: value '{name}' is produced by two nodes")
            outputs.append(v)
        name = np_.name or f"{np_.op_type.lower()}_{i}"
        if name in used_names:
            name = f"{name}_{i}"
        used_names.add(name)
        attrs = {a.name: _attr_value(a, graph, source) for a in np_.attribute}
        graph.append_node(Node(np_.op_type, inputs, outputs, attrs, name, np_.domain))
    for vi in gp.output:
        v = graph.get(vi.name)
        if v is None:
            raise FormatError(f"{source}: graph output '{vi.name}' is never produced")
        if v.type.dtype is None:
            v.type = type_from_proto(vi.type)
        graph.outputs.append(v)
    try:
        graph.nodes  # noqa: B018 - forces the topological sort, reporting cycles
    except NNBridgeError as exc:
        raise FormatError(f"{source}: {exc}") from None


def _attr_value(a: AttributeProto, graph: Graph, source: str):
    if a.type == AttributeProto.GRAPH:
        return _subgraph(a.g, graph, source)
    if a.type == AttributeProto.GRAPHS:
        return [_subgraph(g, graph, source) for g in a.graphs]
    if a.type == AttributeProto.TENSOR:
        return tensor_to_array(a.t, source)
    if a.type == AttributeProto.TENSORS:
        return [tensor_to_array(t, source) for t in a.tensors]
    if a.type == AttributeProto.SPARSE_TENSOR:
        return numpy_helper.to_array(a.sparse_tensor)
    if a.type == AttributeProto.STRING:
        return a.s.decode("utf-8", "replace")
    if a.type == AttributeProto.STRINGS:
        return [s.decode("utf-8", "replace") for s in a.strings]
    if a.type == AttributeProto.TYPE_PROTO:
        return type_from_proto(a.tp)
    if a.type == AttributeProto.TYPE_PROTOS:
        return [type_from_proto(t) for t in a.type_protos]
    if a.type == AttributeProto.UNDEFINED and a.ref_attr_name:
        raise FormatError(f"{source}: attribute '{a.name}' refers to a function attribute outside a function")
    return onnx.helper.get_attribute_value(a)


def _subgraph(gp: onnx.GraphProto, parent: Graph, source: str) -> Graph:
    sub = Graph(gp.name or "body", parent)
    _fill_graph(sub, gp, source)
    return sub
