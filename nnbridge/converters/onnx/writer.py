"""IR ``Graph`` → ONNX ModelProto / file.

Attribute types come from the op's ONNX schema (so an empty list or an int given
for a float attribute is still written correctly). nnbridge-domain ops are
lowered to standard subgraphs by exporters registered with ``register_exporter``;
ops without one are written as custom-domain ops (documented in ``nnbridge ops``).
Every model written passes ``onnx.checker``, and none has an If branch that cannot run with
its shapes (onnxruntime infers both branches at load and refuses such a file); models over
2 GB use external data.
"""

from __future__ import annotations

import os
from collections.abc import Callable
from pathlib import Path
from typing import Any

import numpy as np
import onnx
import onnx.defs
from onnx import AttributeProto, ModelProto, TensorProto, helper, numpy_helper

from ...base.errors import FormatError, ShapeError
from ...base.fileio import temp_dir_beside
from ...base.mapped import write_array
from ...base.registry import Registry
from ...ir import IR_OPSET, NNBRIDGE_DOMAIN, Graph, Node, TensorType, TypeKind
from ..wire import ONNX_GRAPH, ONNX_INITIALIZER, ONNX_RAW_DATA, field_header
from .opset import SOURCE_OPSET_KEY, _detach_large_tensors, _reattach

#: ONNX IR version written: the newest that onnxruntime 1.31 reads.
ONNX_IR_VERSION = 10
_TWO_GB = 2**31 - 1

#: (domain, op) → function returning the standard nodes that replace an IR node.
Exporter = Callable[[Node, "ProtoBuilder"], list[onnx.NodeProto]]
EXPORTERS: Registry[tuple[str, str], Exporter] = Registry("ONNX exporters")


def register_exporter(op: str, domain: str = NNBRIDGE_DOMAIN) -> Callable[[Exporter], Exporter]:
    return EXPORTERS.decorator((domain, op))


def type_to_proto(t: TensorType) -> onnx.TypeProto:
    if t.kind is TypeKind.SEQUENCE:
        return helper.make_sequence_type_proto(type_to_proto(t.elem or TensorType()))
    if t.kind is TypeKind.OPTIONAL:
        return helper.make_optional_type_proto(type_to_proto(t.elem or TensorType()))
    elem = t.dtype.onnx if t.dtype else TensorProto.UNDEFINED
    return helper.make_tensor_type_proto(elem, None if t.shape is None else list(t.shape))


def array_to_tensor(array: np.ndarray, name: str = "") -> TensorProto:
    array = np.asarray(array)
    if array.dtype == object:
        tensor = helper.make_tensor(name, TensorProto.STRING, array.shape,
                                    [s.encode() if isinstance(s, str) else s for s in array.flat])
        return tensor
    return numpy_helper.from_array(array, name)


class ExternalData:
    """Writes initializers of ``threshold`` bytes or more into one data file as the model is built,
    so a model over protobuf's 2 GiB limit never exists as one message (nor twice in memory)."""

    def __init__(self, fh: Any, location: str, threshold: int = 1024):
        self.fh, self.location, self.threshold, self.offset = fh, location, threshold, 0

    def __call__(self, array: np.ndarray, name: str) -> TensorProto:
        array = np.asarray(array)
        if array.dtype == object or array.nbytes < self.threshold:
            return array_to_tensor(array, name)
        tensor = numpy_helper.from_array(array.reshape(-1)[:0], name)  # its data type
        del tensor.dims[:]
        tensor.dims.extend(array.shape)
        tensor.ClearField("raw_data")
        write_array(self.fh, array)
        tensor.data_location = TensorProto.EXTERNAL
        for key, value in (("location", self.location), ("offset", str(self.offset)), ("length", str(array.nbytes))):
            tensor.external_data.add(key=key, value=value)
        self.offset += array.nbytes
        return tensor


class StreamedTensors:
    """Initializers of ``threshold`` bytes or more stay in their arrays while the model is built,
    converted and checked: the model holds a shell for each (type and dims, its data marked external
    in an empty placeholder file, which is all onnx's checker looks for). ``write`` then appends each
    tensor's bytes straight from its array after the rest of the model. Protobuf merges a repeated
    singular message field (ModelProto.graph) and appends repeated ones (GraphProto.initializer), so
    the file is one ordinary ModelProto, written without a second copy of the weights in memory."""

    PLACEHOLDER = "nnbridge-weights.placeholder"

    def __init__(self, directory: Path, threshold: int = 1 << 20):
        self.directory, self.threshold = directory, threshold
        (directory / self.PLACEHOLDER).touch()
        self.arrays: dict[str, np.ndarray] = {}

    def __call__(self, array: np.ndarray, name: str) -> TensorProto:
        array = np.asarray(array)
        if array.dtype == object or array.nbytes < self.threshold or not _raw_is_numpy_layout(array):
            return array_to_tensor(array, name)
        shell = numpy_helper.from_array(array.reshape(-1)[:0], name)  # its data type
        del shell.dims[:]
        shell.dims.extend(array.shape)
        shell.data_location = TensorProto.EXTERNAL
        shell.external_data.add(key="location", value=self.PLACEHOLDER)
        self.arrays[name] = array
        return shell

    def write(self, model: ModelProto, path: Path) -> None:
        graph = model.graph
        shells, kept = [], []
        for t in graph.initializer:
            (shells if t.name in self.arrays and t.data_location == TensorProto.EXTERNAL else kept).append(t)
        del graph.initializer[:]
        graph.initializer.extend(kept)
        with open(path, "wb") as fh:
            fh.write(model.SerializeToString())
            for shell in shells:
                shell.ClearField("data_location")
                del shell.external_data[:]
                array = self.arrays[shell.name]
                if array.dtype.byteorder == ">":
                    array = array.astype(array.dtype.newbyteorder("<"))
                data = np.ascontiguousarray(array).reshape(-1).view(np.uint8)
                tensor = shell.SerializeToString() + field_header(ONNX_RAW_DATA, data.nbytes)
                in_graph = field_header(ONNX_INITIALIZER, len(tensor) + data.nbytes)
                fh.write(field_header(ONNX_GRAPH, len(in_graph) + len(tensor) + data.nbytes) + in_graph + tensor)
                write_array(fh, data)
        (self.directory / self.PLACEHOLDER).unlink()


Checker = Callable[[ModelProto], None]


def _checker_in(directory: Path) -> Checker:
    """onnx's checker on a model whose large tensors live in external data in ``directory`` (or
    are shells pointing at the placeholder there): it reads the model from a file beside them."""

    def check(model: ModelProto) -> None:
        probe = directory / "nnbridge-check.onnx"
        probe.write_bytes(model.SerializeToString())
        try:
            onnx.checker.check_model(str(probe))
        finally:
            probe.unlink()

    return check


def _raw_is_numpy_layout(array: np.ndarray) -> bool:
    """Does ONNX store this element type as numpy lays it out (not packed like int4, not typed fields)?"""
    sample = numpy_helper.from_array(array.reshape(-1)[:2])
    return sample.HasField("raw_data") and len(sample.raw_data) == 2 * array.dtype.itemsize


class ProtoBuilder:
    """Accumulates the protos of one graph; exporters use it for fresh names."""

    def __init__(self, graph: Graph, tensor_for: Callable[[np.ndarray, str], TensorProto] = array_to_tensor):
        self.graph = graph
        self.domains: set[str] = set()
        self.tensor_for = tensor_for  # how initializers are stored (inline, or ExternalData)

    def fresh(self, hint: str) -> str:
        return self.graph.unique_name(hint)

    def build(self) -> onnx.GraphProto:
        g = self.graph
        nodes: list[onnx.NodeProto] = []
        for node in g.nodes:
            exporter = EXPORTERS.get((node.domain, node.op))
            if exporter is not None:
                nodes.extend(exporter(node, self))
            else:
                nodes.append(self.node_proto(node))
        inits = [self.tensor_for(arr, name) for name, arr in g.initializers.items() if name in g.values]
        inputs = [helper.make_value_info(v.name, type_to_proto(v.type)) for v in g.inputs]
        outputs = [helper.make_value_info(v.name, type_to_proto(v.type)) for v in g.outputs]
        listed = {v.name for v in g.inputs} | {v.name for v in g.outputs} | set(g.initializers)
        infos = [
            helper.make_value_info(o.name, type_to_proto(o.type))
            for n in g.nodes for o in n.outputs
            if o.name not in listed and o.type.dtype is not None and o.type.kind is TypeKind.TENSOR
        ]
        return helper.make_graph(nodes, g.name, inputs, outputs, inits, doc_string=g.doc,
                                 value_info=infos)

    def node_proto(self, node: Node) -> onnx.NodeProto:
        if node.domain:
            self.domains.add(node.domain)
        proto = helper.make_node(
            node.op,
            [v.name if v is not None else "" for v in node.inputs],
            [o.name for o in node.outputs],
            name=node.name,
            domain=node.domain or None,
        )
        types = _schema_attr_types(node.op, node.domain)
        for key, value in sorted(node.attrs.items()):
            if value is None:
                continue
            proto.attribute.append(self.attribute(key, value, types.get(key)))
        return proto

    def attribute(self, key: str, value: Any, attr_type: int | None) -> AttributeProto:
        if isinstance(value, Graph):
            sub = ProtoBuilder(value)
            gp = sub.build()
            self.domains |= sub.domains
            return helper.make_attribute(key, gp)
        if isinstance(value, list) and value and isinstance(value[0], Graph):
            protos = []
            for g in value:
                sub = ProtoBuilder(g)
                protos.append(sub.build())
                self.domains |= sub.domains
            return helper.make_attribute(key, protos)
        if isinstance(value, np.ndarray):
            return helper.make_attribute(key, array_to_tensor(value))
        if isinstance(value, TensorType):
            return helper.make_attribute(key, type_to_proto(value))
        if attr_type == AttributeProto.FLOAT:
            value = float(value)
        elif attr_type == AttributeProto.INT:
            value = int(value)
        elif attr_type == AttributeProto.FLOATS:
            value = [float(v) for v in value]
        elif attr_type == AttributeProto.INTS:
            value = [int(v) for v in value]
        elif isinstance(value, (list, tuple)) and not value and attr_type is None:
            attr_type = AttributeProto.INTS
        if isinstance(value, tuple):
            value = list(value)
        return helper.make_attribute(key, value, attr_type=attr_type)


def _schema_attr_types(op: str, domain: str) -> dict[str, int]:
    try:
        schema = onnx.defs.get_schema(op, IR_OPSET, domain)
    except onnx.defs.SchemaError:
        return {}
    return {name: int(a.type) for name, a in schema.attributes.items()}


def graph_to_model(graph: Graph, tensor_for: Callable[[np.ndarray, str], TensorProto] = array_to_tensor) -> ModelProto:
    """Build a ModelProto at the IR opset (plus any custom domains used)."""
    builder = ProtoBuilder(graph, tensor_for)
    gp = builder.build()
    opsets = {"": IR_OPSET}
    for domain, version in graph.opset.items():
        if domain not in ("", "ai.onnx"):
            opsets[domain] = version
    for domain in builder.domains:
        opsets.setdefault(domain, 1)
    model = helper.make_model(
        gp,
        opset_imports=[helper.make_opsetid(d, v) for d, v in sorted(opsets.items())],
        ir_version=ONNX_IR_VERSION,
        producer_name="nnbridge",
    )
    for key, value in graph.metadata.items():
        if key != SOURCE_OPSET_KEY:
            model.metadata_props.add(key=key, value=value)
    return model


def save_onnx(graph: Graph, path: str | os.PathLike, *, check: bool = True,
              external_threshold: int = _TWO_GB, onnx_opset: int | None = None) -> Path:
    """Write ``graph`` as an ONNX file atomically; weights go to ``<name>.data`` beside it
    when they total ``external_threshold`` bytes or more (protobuf's 2 GB limit). ``onnx_opset``
    writes that default-domain opset (onnx's version converter) for runtimes older than the IR's."""
    from ...passes.infer_shapes import branch_shape_error

    path = Path(path)
    reason = branch_shape_error(graph)
    if reason:  # onnxruntime infers both branches' shapes at load: the file would never load
        raise ShapeError(f"{path}: not written: {reason}, and onnxruntime refuses such a file at load "
                         f"(pin other values, or leave the dims that branch needs dynamic)")
    big = sum(int(np.asarray(a).nbytes) for a in graph.initializers.values()) >= external_threshold
    with temp_dir_beside(path) as tmpdir:
        tmp = tmpdir / path.name
        streamed = None if big else StreamedTensors(tmpdir)
        if big:
            with open(tmpdir / external_data_name(path), "wb") as fh:
                model = graph_to_model(graph, ExternalData(fh, external_data_name(path)))
        else:
            model = graph_to_model(graph, streamed)
        checker = _checker_in(tmpdir)
        model = at_opset(model, onnx_opset, path, checker) if onnx_opset is not None else \
            at_default_opset(model, graph, checker)
        if check:
            try:
                checker(model)
            except onnx.checker.ValidationError as exc:
                raise FormatError(f"{path}: the ONNX written by nnbridge fails onnx.checker: "
                                  f"{str(exc).strip().splitlines()[0]}") from None
        if streamed:
            streamed.write(model, tmp)
        else:
            onnx.save_model(model, str(tmp))
    return path


#: the oldest opset nnbridge writes (onnx's version converter adapts most ops from here on)
OLDEST_OPSET = 7


def at_opset(model: ModelProto, opset: int, path: Path, checker: Checker = onnx.checker.check_model) -> ModelProto:
    """``model`` converted to default-domain ``opset``; one line naming the op when it cannot be."""
    if not OLDEST_OPSET <= opset <= IR_OPSET:
        raise FormatError(f"{path}: --opset {opset} is outside {OLDEST_OPSET}..{IR_OPSET}")
    try:
        return _converted(model, opset, checker)
    except Exception as exc:  # the converter raises plain RuntimeErrors naming the op it cannot adapt
        text = str(exc).strip().splitlines()[0] if str(exc).strip() else type(exc).__name__
        reason = text.split("failed: ", 1)[-1][:300]  # past the converter's source location
        raise FormatError(f"{path}: cannot write the model at opset {opset}: {reason} (onnx's version "
                          f"converter); try a newer opset") from None


#: opsets deployed runtimes load (onnxruntime 1.8+, 1.14+, 1.20+): a model from a file without an
#: ONNX opset (SMAUG, LBANN) is written at the first of these that expresses it
RUNTIME_OPSETS = (13, 17, 21)


def at_default_opset(model: ModelProto, graph: Graph, checker: Checker = onnx.checker.check_model) -> ModelProto:
    """The opset a writer without ``--opset`` uses: the source ONNX file's where onnx's version
    converter takes the model there (an op the source did not have may need a newer one), else
    the first of ``RUNTIME_OPSETS`` that does; the IR's when none does."""
    source = int(graph.metadata.get(SOURCE_OPSET_KEY, 0))
    for opset in [source] if source else RUNTIME_OPSETS:
        if OLDEST_OPSET <= opset < IR_OPSET:
            try:
                return _converted(model, opset, checker)
            except Exception:  # an op the converter cannot adapt to that opset
                continue
    return model


#: hides nodes from onnx's version converter while it adapts the rest (it has no down-adapter
#: for many ops whose newer versions only accept more element types)
_HIDDEN_DOMAIN = "ai.nnbridge.unchanged"
#: ops whose attribute values changed meaning without a change of signature (GridSample-20's modes)
_SAME_SIGNATURE_NEW_MEANING = {"GridSample"}


def _converted(model: ModelProto, opset: int, checker: Checker = onnx.checker.check_model) -> ModelProto:
    """onnx's version converter on ``model`` without its large tensors (it serializes the model
    and never needs their values); nodes whose op has the same signature at ``opset`` as at the
    IR's (a type-only change) pass through it hidden. Checked by onnx's checker."""
    if opset == IR_OPSET:
        return model
    from onnx import version_converter

    detached = _detach_large_tensors(model)
    work = ModelProto()
    work.CopyFrom(model)
    _reattach(model, detached)
    hidden = [node for node in work.graph.node
              if node.domain in ("", "ai.onnx") and _same_signature(node.op_type, opset)]
    for node in hidden:
        node.domain = _HIDDEN_DOMAIN
    if hidden:
        work.opset_import.append(helper.make_opsetid(_HIDDEN_DOMAIN, 1))
    converted = version_converter.convert_version(work, opset)
    for node in converted.graph.node:
        if node.domain == _HIDDEN_DOMAIN:
            node.domain = ""
    kept = [o for o in converted.opset_import if o.domain != _HIDDEN_DOMAIN]
    del converted.opset_import[:]
    converted.opset_import.extend(kept)
    _reattach(converted, detached)
    checker(converted)
    return converted


def _same_signature(op: str, opset: int) -> bool:
    """Is ``op``'s definition at ``opset`` the IR opset's up to element types (same inputs,
    outputs, attributes and defaults)?"""
    try:
        old, new = onnx.defs.get_schema(op, opset, ""), onnx.defs.get_schema(op, IR_OPSET, "")
    except onnx.defs.SchemaError:
        return False
    if old.since_version == new.since_version:
        return False  # unchanged: the converter relabels it
    if op in _SAME_SIGNATURE_NEW_MEANING:
        return False

    def signature(schema):
        attributes = {name: (a.type, a.required, a.default_value.SerializeToString())
                      for name, a in schema.attributes.items()}
        return [(f.name, f.option) for f in schema.inputs], [(f.name, f.option) for f in schema.outputs], attributes

    return signature(old) == signature(new)


def external_data_name(path: Path) -> str:
    """Where a model too big for one protobuf message keeps its weights, beside it."""
    return f"{path.name}.data"


def written_files(path: Path) -> list[Path]:
    data = path.with_name(external_data_name(path))
    return [path, *([data] if data.is_file() else [])]
