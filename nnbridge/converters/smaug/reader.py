"""SMAUG files → IR.

The IR keeps ONNX semantics (Conv is NCHW, MatMul takes ``[in, out]``), so every
backend can run a loaded model. SMAUG's storage layouts stay visible: graph
inputs and constants keep the file's dims and layout (an NHWC input stays an NHWC
input), and wherever an op needs another layout an ``nnbridge.Reorder`` node is
inserted. Each SMAUG tensor may therefore have several IR *views* (one per
layout); an op asks for the view it needs and one Reorder is made per
(tensor, layout), so the IR has a transform only where the file's storage order
is observable — typically once at the input and once at the flatten.
The walk is :class:`~.importer.Importer`; the per-op translations are in ``import_ops``.
"""

from __future__ import annotations

import os

import numpy as np

from ...base.errors import FormatError, Unsupported, UnsupportedOpError
from ...base.smaug_runtime import DEVIATIONS_KEY
from ...ir import DType, Graph
from ...protos.smaug import smaug_graph_pb2 as gpb
from ...protos.smaug import smaug_tensor_pb2 as tpb
from ...protos.smaug import smaug_types_pb2 as pb
from . import layouts, params
from .files import model_paths, read_params, read_topology
from .import_ops import FUSES_ACTIVATION, IMPORTERS, RUNTIME_DEFAULTS, Unimportable
from .importer import (
    DATA_REORDERS_KEY,
    IGNORED_PARAMS_KEY,
    NODE_ORDER_KEY,
    RECIPE_SCALE,
    TENSOR_NAMES_KEY,
    TENSOR_TYPES_KEY,
    Importer,
    recipe_arrays,
)
from .naming import data_input_name, output_name


def load_smaug(path: str | os.PathLike, *, inputs: list[str] | None = None,
               compute_dtype: str | None = None, synthetic_scale: float = RECIPE_SCALE,
               lrelu: str = "runtime", activations: str = "exact", **_options) -> Graph:
    """Load ``<name>_topo.pbtxt`` (+ ``<name>_params.pb`` beside it, if present) into the IR.

    ``inputs`` names the Data nodes that are network inputs (default: those not feeding a
    weight/statistics slot). ``compute_dtype="float32"`` widens an fp16 (SMV) model. Without a
    params file, constants are synthesised with SMAUG's recipe and the graph metadata says so.
    ``lrelu="intended"`` honours a standalone LReLU's slope (the runtime uses 0.1, quirk Q1).
    ``activations="reference"`` computes σ and tanh as SMAUG's Reference backend does (a Reference
    file only): σ in float64 rounded to float32, tanh as 2·σ(2x) − 1, which loses the relative
    precision of small values; the default ``"exact"`` keeps ONNX's Sigmoid and Tanh (and lossless
    round trips).
    """
    topo, par = model_paths(path)
    proto = read_topology(topo)
    array = read_params(par) if par.is_file() else None
    return graph_from_proto(proto, array, str(topo), inputs=inputs, compute_dtype=compute_dtype,
                            synthetic_scale=synthetic_scale, lrelu=lrelu, activations=activations)


def load_inputs(path: str | os.PathLike, graph: Graph | None = None) -> dict[str, np.ndarray]:
    """The values a SMAUG params file stores for the network inputs (SMAUG keeps them there), as
    ``graph`` (default: the file loaded) declares its inputs."""
    graph = graph if graph is not None and graph.input_values else load_smaug(path)
    return dict(graph.input_values)


def graph_from_proto(proto: gpb.GraphProto, array: tpb.TensorDataArray | None, what: str, *,
                     inputs: list[str] | None = None, compute_dtype: str | None = None,
                     synthetic_scale: float = RECIPE_SCALE, lrelu: str = "runtime",
                     activations: str = "exact") -> Graph:

    dtype = DType.from_numpy(np.dtype(compute_dtype)) if compute_dtype else None
    _check_activations(proto, what, activations)
    imp = Importer(proto, what, compute_dtype=dtype, lrelu=lrelu, activations=activations)
    order = imp.check_structure()
    if proto.backend and proto.backend not in layouts.BACKENDS:
        raise FormatError(f"{what}: unknown backend '{proto.backend}' (expected Reference or SMV)")
    graph = imp.graph
    graph.metadata["smaug.backend"] = proto.backend or "SMV"
    graph.metadata["smaug.mem_policy"] = _enum_name(pb.HostMemoryAccessPolicy, proto.mem_policy, what)
    _load_data_nodes(imp, order, array, inputs, synthetic_scale)
    _import_ops(imp, order)
    graph.metadata["smaug.input_layouts"] = ",".join(f"{v.name}:{v.type.layout.value}" for v in graph.inputs)
    _record_file_details(imp, proto)
    _add_outputs(imp, order)
    imp.tidy_constants()
    return graph


def _check_activations(proto: gpb.GraphProto, what: str, activations: str) -> None:
    """Refuse an ``activations`` option that is unknown or that contradicts the file's backend."""
    if activations not in ("exact", "reference"):
        raise FormatError(f"{what}: activations must be 'exact' or 'reference', not '{activations}'")
    if activations == "reference" and proto.backend == "SMV":
        raise FormatError(f"{what}: activations='reference' reproduces SMAUG's Reference backend, and this file is "
                          "for SMV (the smv backend reproduces SMV's activations); load it without the option")


def _import_ops(imp: Importer, order) -> None:
    """Translate every non-Data node; collect every op that does not import (skipping what lies
    downstream of one, which would only add noise) and raise them all at once."""
    failed: set[str] = set()
    for node in order:
        if node.op == pb.Data:
            continue
        if failed.intersection(node.parents):  # downstream of a node that did not import: no more noise
            failed.add(node.name)
            continue
        reason = _import_op(imp, node)
        if reason:
            imp.unsupported.append(Unsupported(_enum_name(pb.OpType, node.op, imp.what), node.name, reason))
            failed.add(node.name)
    if imp.unsupported:
        raise UnsupportedOpError(f"SMAUG import of {imp.what}", imp.unsupported)


def _import_op(imp: Importer, node) -> str:
    """Translate one node; the reason it cannot be imported, or "" once it is."""
    fn = IMPORTERS.get(node.op)
    if fn is None:
        return "nnbridge does not import this SMAUG op"
    try:
        fn(imp, node)
    except Unimportable as exc:
        return str(exc)
    return ""


def _record_file_details(imp: Importer, proto: gpb.GraphProto) -> None:
    """Keep in the graph's metadata what the IR does not hold but a re-save needs (node order, own
    tensor names, Data reorders, ignored params, unusual tensor types) and the SMV runtime's
    deviations."""
    metadata = imp.graph.metadata
    metadata[NODE_ORDER_KEY] = "\n".join(node.name for node in proto.nodes)
    _set_lines(metadata, TENSOR_NAMES_KEY, own_tensor_names(proto))
    _set_lines(metadata, DATA_REORDERS_KEY, _data_reorders(imp, proto))
    _set_lines(metadata, IGNORED_PARAMS_KEY, ignored_params(proto))
    _set_lines(metadata, TENSOR_TYPES_KEY, unusual_tensors(proto))
    if metadata["smaug.backend"] == "SMV":
        from .smv_rules import hazards

        found = hazards(proto)  # what the real SMV runtime computes differently: the SMV simulator reproduces it
        _set_lines(metadata, DEVIATIONS_KEY, [f"{u.node}\t{u.reason}" for u in found])


def _set_lines(metadata: dict[str, str], key: str, lines: list[str]) -> None:
    """Record ``lines`` under ``key``, only if there are any."""
    if lines:
        metadata[key] = "\n".join(lines)


def _data_reorders(imp: Importer, proto: gpb.GraphProto) -> list[str]:
    """The ``DATA_REORDERS_KEY`` lines of a file: its Reorder nodes that read a Data node."""
    return [f"{node.parents[0]}\t{layouts.TO_IR[node.output_tensors[0].shape.layout].value}\t{node.name}"
            for node in proto.nodes if node.op == pb.Reorder and imp.nodes[node.parents[0]].op == pb.Data
            and node.output_tensors and node.output_tensors[0].shape.layout in layouts.TO_IR]


def _add_outputs(imp: Importer, order) -> None:
    """What nothing reads is an output (a lone Data node too: the runtime prints its values)."""
    graph = imp.graph
    input_names = {v.name for v in graph.inputs}
    for node in order:
        if node.name not in imp.users and (node.op != pb.Data or node.name in input_names):
            for k in range(len(node.output_tensors)):
                decl = imp.output_decl(node, k)
                graph.outputs.append(imp.view_of(f"{node.name}:{k}", decl.layout))


def ignored_params(proto: gpb.GraphProto) -> list[str]:
    """The ``IGNORED_PARAMS_KEY`` lines of a file: the params of its standalone parameterised
    activations (the runtime runs its own constants), the act_params of its fused Softmaxes (the
    runtime drops them); a node without params is recorded as "-"."""
    lines = []
    for node in proto.nodes:
        if node.op in RUNTIME_DEFAULTS:
            lines.append(f"{node.name}\t{node.params.SerializeToString().hex() if node.HasField('params') else '-'}")
        elif node.op in FUSES_ACTIVATION and node.params.act_params.activation == pb.Softmax:
            lines.append(f"{node.name}\t{node.params.act_params.SerializeToString().hex()}")
    return lines


def own_tensor_names(proto: gpb.GraphProto) -> list[str]:
    """The ``TENSOR_NAMES_KEY`` lines of a file: its tensors not named by the frontend's rule."""
    lines = []
    for node in proto.nodes:
        named = [(output_name(node.name, k), t.name) for k, t in enumerate(node.output_tensors)]
        if node.op == pb.Data and node.input_tensors:
            named.insert(0, (data_input_name(node.name), node.input_tensors[0].name))
        lines += [f"{rule}\t{name}" for rule, name in named if name != rule]
    return lines


def unusual_tensors(proto: gpb.GraphProto) -> list[str]:
    """The ``TENSOR_TYPES_KEY`` lines of a file: its tensors stored otherwise than the writer derives."""
    backend = proto.backend or "SMV"
    float_type = pb.Float16 if backend == "SMV" else pb.Float32
    lines: dict[str, str] = {}
    for node in proto.nodes:
        for t in [*(node.input_tensors[:1] if node.op == pb.Data else []), *node.output_tensors]:
            layout = layouts.TO_IR.get(t.shape.layout)
            odd_type = t.data_type in params.FLOATS and t.data_type != float_type
            odd_layout = layout is not None and layouts.layout_for_rank(layout, len(t.shape.dims)) != layout
            if (odd_type or odd_layout or t.shape.alignment != layouts.ALIGNMENT.get(backend)) and t.name not in lines:
                lines[t.name] = "\t".join([t.name, _enum_name(pb.DataType, t.data_type, t.name),
                                           _enum_name(pb.DataLayout, t.shape.layout, t.name), str(t.shape.alignment)])
    return list(lines.values())


def _enum_name(enum, value: int, what: str) -> str:
    try:
        return enum.Name(value)
    except ValueError:
        raise FormatError(f"{what}: unknown {enum.DESCRIPTOR.name} value {value}") from None


def _load_data_nodes(imp: Importer, order, array, inputs, scale: float) -> None:
    """Data nodes become graph inputs or initializers (from the params file or synthesised)."""
    entries = {}
    if array is not None:
        for e in array.data_array:
            entries.setdefault(e.name, e)
    data_nodes = [n for n in order if n.op == pb.Data]
    decls = [_data_decl(imp, node) for node in data_nodes]
    is_input = _network_inputs(imp, data_nodes, inputs)
    synthetic = None
    if array is None:
        synthetic = _synthesise(imp, data_nodes, decls, is_input, scale)
    for node, decl in zip(data_nodes, decls):
        if is_input[node.name]:
            value = _add_data_input(imp, node, decl, entries)
        else:
            values = synthetic[node.name] if synthetic is not None else _stored_constant(imp, node, decl, entries)
            target = imp.ir_type(decl).dtype
            value = imp.constant(node.name, values.astype(target.numpy, copy=False), decl.layout)
        imp.declared[f"{node.name}:0"] = decl
        imp.views[f"{node.name}:0"] = {decl.layout: value}


def _data_decl(imp: Importer, node):
    """The declaration of a Data node's one input tensor."""
    if len(node.input_tensors) != 1:
        raise FormatError(f"{imp.what}: Data node '{node.name}' must have one input tensor")
    return imp.declare(node.input_tensors[0], f"{imp.what}: Data node '{node.name}'")


def _network_inputs(imp: Importer, data_nodes, inputs: list[str] | None) -> dict[str, bool]:
    """Whether each Data node is a network input: those ``inputs`` names, or by default those not
    feeding a weight/statistics slot."""
    if inputs is None:
        return {n.name: not imp.is_parameter(n.name) for n in data_nodes}
    is_input = {n.name: n.name in inputs for n in data_nodes}
    unknown = set(inputs) - set(is_input)
    if unknown:
        raise FormatError(f"{imp.what}: inputs {sorted(unknown)} are not Data nodes")
    return is_input


def _synthesise(imp: Importer, data_nodes, decls, is_input: dict[str, bool], scale: float) -> dict[str, np.ndarray]:
    """Constants made with SMAUG's recipe for a file without params, in the file's dtype (the
    recipe casts there; widened later if asked), and the metadata that says so."""
    synthetic = {}
    for dtype in {d.dtype for n, d in zip(data_nodes, decls) if not is_input[n.name]}:
        const = [(n, d) for n, d in zip(data_nodes, decls) if not is_input[n.name] and d.dtype == dtype]
        arrays = recipe_arrays([d.dims for _, d in const], dtype.numpy, scale)
        synthetic.update({n.name: a for (n, _), a in zip(const, arrays)})
    imp.graph.metadata["nnbridge.synthetic_params"] = "true"
    imp.graph.metadata["nnbridge.synthetic_scale"] = repr(scale)
    return synthetic


def _add_data_input(imp: Importer, node, decl, entries: dict):
    """A graph input for a Data node, with the value its params entry stores (SMAUG runs the
    network on the input its params file stores)."""
    value = imp.graph.add_input(node.name, imp.ir_type(decl))
    if decl.name in entries:
        stored = params.decode(entries[decl.name], decl.dims, params.FROM_IR[decl.dtype], decl.alignment,
                               f"{imp.what}: params entry '{decl.name}'")
        imp.graph.input_values[node.name] = stored.astype(value.type.dtype.numpy, copy=False)
    return value


def _stored_constant(imp: Importer, node, decl, entries: dict) -> np.ndarray:
    """A Data node's constant as its params entry stores it."""
    if decl.name not in entries:
        raise FormatError(f"{imp.what}: the params file has no entry '{decl.name}' for "
                          f"Data node '{node.name}'")
    return params.decode(entries[decl.name], decl.dims, params.FROM_IR[decl.dtype],
                         decl.alignment, f"{imp.what}: params entry '{decl.name}'")
