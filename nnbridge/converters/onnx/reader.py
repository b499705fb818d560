"""ONNX file or ModelProto → IR ``Graph``.

Order of work: parse (corrupt files → FormatError), vet external-data paths and
declared tensor sizes (before anything is allocated), load external data, inline
local functions, normalize the opset, infer shapes with onnx's own inference,
then translate protos into IR objects.
"""

from __future__ import annotations

import os
import sys
from pathlib import Path

import numpy as np
import onnx
from google.protobuf.message import DecodeError
from onnx import AttributeProto, ModelProto, TensorProto, helper, inliner, numpy_helper

from ...base.errors import FormatError, NNBridgeError
from ...base.fileio import check_numel, resolve_inside
from ...base.mapped import FileMap, map_file
from ...ir import DType, Graph, Layout, Node, TensorType, TypeKind, Value
from ...ir.graph import paused_gc
from ..wire import ONNX_GRAPH, ONNX_INITIALIZER, ONNX_RAW_DATA, WireError, cut_field, split_nested
from . import opset
from .opset import SOURCE_OPSET_KEY
from .vetting import (
    has_external,
    load_external,
    vet_attributes,
    vet_declared_shapes,
    vet_element_types,
    vet_names,
    vet_tensors,
)


def load_onnx(source: str | os.PathLike | ModelProto | bytes, *, infer_shapes: bool = True) -> Graph:
    """Load an ONNX model into the IR (opset normalized, shapes inferred)."""
    model, name, base_dir, arrays = _read(source)
    if not model.graph.output:
        raise FormatError(f"{name}: the graph declares no outputs, so nothing would be computed (list the "
                          "values wanted in graph.output)")
    vet_tensors(model, name, base_dir)
    if base_dir is not None and has_external(model):
        arrays.update(_map_external(model, base_dir))
        load_external(model, base_dir)
    vet_names(model, name)
    vet_declared_shapes(model, name)
    vet_attributes(model, name)
    _densify_sparse_initializers(model, name)
    if model.functions:
        model = inliner.inline_local_functions(model)
    source_opset = opset.default_opset(model)
    model = opset.normalize(model, name)
    if infer_shapes:
        model = _infer_shapes(model)
    vet_element_types(model, name)
    with paused_gc():
        graph = model_to_graph(model, name, arrays)
    try:  # SSA, definitions before use, arity and required attributes of every known op
        graph.verify()
    except NNBridgeError as exc:
        raise FormatError(f"{name}: not a valid model: {exc}") from None
    if source_opset:
        graph.metadata[SOURCE_OPSET_KEY] = str(source_opset)
    return graph


def _read(source) -> tuple[ModelProto, str, Path | None, dict[str, np.ndarray]]:
    """The model, its name, the directory of its file and the initializers already read as arrays."""
    if isinstance(source, ModelProto):
        model = ModelProto()
        model.CopyFrom(source)
        return model, model.graph.name or "<model>", None, {}
    if isinstance(source, (bytes, bytearray)):
        return _parse(bytes(source), "<bytes>"), "<bytes>", None, {}
    path = Path(source)
    if not path.is_file():
        raise FormatError(f"{path}: no such file")
    model, arrays = _parse_file(path)
    return model, str(path), path.parent, arrays


#: files from this size on are parsed tensor by tensor (``_parse_file``)
STREAM_FILE_BYTES = 64 << 20
STREAM_TENSOR_BYTES = 1 << 20


def _parse_file(path: Path) -> tuple[ModelProto, dict[str, np.ndarray]]:
    """The model in ``path`` and, for a large file, its large initializers as read-only arrays
    over a memory map of the file (the model keeps their type and dims, not their bytes): the
    weights are neither copied nor held twice, as ``np.load(mmap_mode="r")`` would read them.
    A file the wire walker cannot split is parsed whole, which names what is wrong with it."""
    name = str(path)
    if path.stat().st_size < STREAM_FILE_BYTES:
        return _parse(path.read_bytes(), name), {}
    mapped = map_file(path)
    try:
        rest, spans = split_nested(mapped, ONNX_GRAPH, ONNX_INITIALIZER, STREAM_TENSOR_BYTES)
    except WireError:
        return _parse(path.read_bytes(), name), {}
    model = _parse(rest, name)
    arrays: dict[str, np.ndarray] = {}
    for start, end in spans:
        tensor = model.graph.initializer.add()
        try:
            meta, raw = cut_field(mapped, start, end, ONNX_RAW_DATA)
            tensor.ParseFromString(meta)
            dtype = _raw_numpy_dtype(tensor, raw)
            if dtype is None:  # packed, typed or malformed data: the ordinary decoder judges it
                tensor.ParseFromString(mapped[start:end])
                continue
        except (WireError, DecodeError, RuntimeError, ValueError) as exc:
            raise FormatError(f"{name}: not a valid ONNX model (an initializer is corrupt: {exc})") from None
        arrays[tensor.name] = np.frombuffer(mapped, dtype, (raw[1] - raw[0]) // dtype.itemsize, raw[0]).reshape(
            tuple(tensor.dims))
    return model, arrays


def _map_external(model: ModelProto, base_dir: Path) -> dict[str, np.ndarray]:
    """The graph's initializers kept in external files whose bytes are the array (vetted by
    ``vet_tensors``), as read-only arrays over a memory map of each file; their protos keep type
    and dims only. A 2 GB weight is then neither copied into the proto nor held twice; any other
    external tensor is left for onnx's loader."""
    maps: dict[Path, FileMap] = {}
    arrays: dict[str, np.ndarray] = {}
    for tensor in model.graph.initializer:
        if tensor.data_location != TensorProto.EXTERNAL or tensor.HasField("raw_data"):
            continue
        info = {e.key: e.value for e in tensor.external_data}
        target = resolve_inside(base_dir, info.get("location", ""), f"tensor '{tensor.name}'")
        offset, size = int(info.get("offset", "0")), target.stat().st_size
        length = int(info["length"]) if "length" in info else size - offset
        dtype = _raw_numpy_dtype(tensor, (offset, offset + length), external=True)
        if dtype is None or length == 0:
            continue
        if target not in maps:
            maps[target] = map_file(target)
        arrays[tensor.name] = np.frombuffer(maps[target], dtype, length // dtype.itemsize, offset).reshape(
            tuple(tensor.dims))
        del tensor.external_data[:]
        tensor.data_location = TensorProto.DEFAULT
    return arrays


def _raw_numpy_dtype(tensor: TensorProto, raw: tuple[int, int] | None, external: bool = False) -> np.dtype | None:
    """The numpy dtype whose bytes ``tensor``'s raw (or, ``external``, external) data are
    (little-endian host, one element per itemsize bytes, exactly dims' worth of them); ``None``
    otherwise."""
    if raw is None or (tensor.data_location == TensorProto.EXTERNAL) != external or sys.byteorder != "little":
        return None
    try:
        dtype = np.dtype(helper.tensor_dtype_to_np_dtype(tensor.data_type))
    except (KeyError, TypeError, ValueError):
        return None
    packed = tensor.data_type in _PACKED_TYPES
    count = int(np.prod(tensor.dims, dtype=np.int64)) if tensor.dims else 1
    if packed or dtype.kind in "OUS" or count * dtype.itemsize != (raw[1] - raw[0]):
        return None
    return dtype


#: element types whose raw data packs several elements per byte
_PACKED_TYPES = frozenset({TensorProto.INT4, TensorProto.UINT4, TensorProto.FLOAT4E2M1, TensorProto.INT2,
                           TensorProto.UINT2, TensorProto.FLOAT6E2M3, TensorProto.FLOAT6E3M2})


def _parse(data: bytes, name: str) -> ModelProto:
    model = ModelProto()
    try:
        model.ParseFromString(data)
    except (DecodeError, RuntimeError, ValueError) as exc:
        raise FormatError(f"{name}: not a valid ONNX model (truncated or corrupt file: {exc})") from None
    if not model.HasField("graph") or (not model.graph.node and not model.graph.output):
        raise FormatError(f"{name}: not a valid ONNX model (no graph in the file)")
    return model


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


def _infer_shapes(model: ModelProto) -> ModelProto:
    """Shape-inferred copy of ``model``, whose weights are moved, not copied, into the result
    (``model`` is the loader's private copy and is dropped afterwards)."""
    detached = opset._detach_large_tensors(model)
    try:
        inferred = onnx.shape_inference.infer_shapes(model, check_type=False, strict_mode=False, data_prop=True)
    except Exception:  # inference is a help, not a requirement: keep the declared types
        inferred = model
    opset._reattach(inferred, detached, move=True)
    return inferred


# -- proto → IR ---------------------------------------------------------------

#: dim_params that name no dimension (exporters write "?" for "unknown"): like an unnamed dim or -1,
#: each is its own unknown (None in the IR), never one symbol that every input must agree on
UNNAMED_DIMS = frozenset({"?"})


def _dim(d: onnx.TensorShapeProto.Dimension) -> int | str | None:
    if d.HasField("dim_value") and d.dim_value >= 0:
        return d.dim_value
    return d.dim_param if d.dim_param and d.dim_param not in UNNAMED_DIMS else None  # -1: unknown too


def type_from_proto(tp: onnx.TypeProto) -> TensorType:
    which = tp.WhichOneof("value")
    if which == "tensor_type":
        tt = tp.tensor_type
        dtype = DType.from_onnx(tt.elem_type) if tt.elem_type else None
        shape = None
        if tt.HasField("shape"):
            shape = tuple(_dim(d) for d in tt.shape.dim)
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


def model_to_graph(model: ModelProto, source: str = "<model>", arrays: dict[str, np.ndarray] | None = None) -> Graph:
    """The IR of ``model``; ``arrays``: initializers the loader already holds as arrays (the model
    keeps only their type and dims)."""
    graph = Graph(model.graph.name or Path(source).stem or "graph")
    graph.opset = {("" if o.domain == "ai.onnx" else o.domain): o.version for o in model.opset_import}
    graph.metadata = {p.key: p.value for p in model.metadata_props}
    graph.doc = model.graph.doc_string
    _fill_graph(graph, model.graph, source, arrays)
    return graph


def _fill_graph(graph: Graph, gp: onnx.GraphProto, source: str, arrays: dict[str, np.ndarray] | None = None) -> None:
    types = {vi.name: type_from_proto(vi.type) for vi in list(gp.value_info) + list(gp.output)}
    init_names = _add_initializers(graph, gp, source, arrays or {})
    for vi in gp.input:
        if vi.name in init_names:  # IR<4 style: initializers listed as inputs too
            continue
        graph.add_input(vi.name, type_from_proto(vi.type))
    used_names: set[str] = set()
    for i, np_ in enumerate(gp.node):
        inputs = [_node_input(graph, name, types) for name in np_.input]
        outputs = [_node_output(graph, np_, name, types, source) for name in np_.output]
        name = np_.name or f"{np_.op_type.lower()}_{i}"
        if name in used_names:
            name = f"{name}_{i}"
        used_names.add(name)
        attrs = {a.name: _attr_value(a, graph, source) for a in np_.attribute}
        graph.append_node(Node(np_.op_type, inputs, outputs, attrs, name, np_.domain))
    _add_outputs(graph, gp, source)
    try:
        graph.nodes  # noqa: B018 - forces the topological sort, reporting cycles
    except NNBridgeError as exc:
        raise FormatError(f"{source}: {exc}") from None


def _add_initializers(graph: Graph, gp: onnx.GraphProto, source: str, arrays: dict[str, np.ndarray]) -> set[str]:
    """The dense and sparse initializers as the graph's constants; returns their names."""
    init_names = {t.name for t in gp.initializer}
    for t in gp.initializer:
        array = arrays.get(t.name)
        graph.add_initializer(t.name, tensor_to_array(t, source) if array is None else array, exact=True)
    for t in gp.sparse_initializer:
        dense = numpy_helper.to_array(t)
        graph.add_initializer(t.values.name, dense, exact=True)
        init_names.add(t.values.name)
    return init_names


def _node_input(graph: Graph, name: str, types: dict[str, TensorType]) -> Value | None:
    """The value a node reads (None for an absent optional input)."""
    if not name:
        return None
    v = graph.get(name)
    if v is None:  # used before defined (invalid order): create, fixed up by toposort
        v = graph.add_value(name, types.get(name), exact=True)
    return v


def _node_output(graph: Graph, np_: onnx.NodeProto, name: str, types: dict[str, TensorType], source: str) -> Value:
    """The value a node produces; a value produced twice is refused."""
    if not name:  # an unused optional output: give it a private name
        return graph.add_value(f"{np_.name or np_.op_type}_unused")
    v = graph.values.get(name)
    if v is None:
        return graph.add_value(name, types.get(name), exact=True)
    if v.producer is not None:
        raise FormatError(f"{source}: value '{name}' is produced by two nodes")
    return v


def _add_outputs(graph: Graph, gp: onnx.GraphProto, source: str) -> None:
    """The graph's outputs, each produced by something, typed from the file where nothing typed it."""
    for vi in gp.output:
        v = graph.get(vi.name)
        if v is None:
            raise FormatError(f"{source}: graph output '{vi.name}' is never produced")
        if v.type.dtype is None:
            v.type = type_from_proto(vi.type)
        graph.outputs.append(v)


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
