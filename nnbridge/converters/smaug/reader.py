"""SMAUG files → IR.

The IR keeps ONNX semantics (Conv is NCHW, MatMul takes ``[in, out]``), so every
backend can run a loaded model. SMAUG's storage layouts stay visible: graph
inputs and constants keep the file's dims and layout (an NHWC input stays an NHWC
input), and wherever an op needs another layout an ``nnbridge.Reorder`` node is
inserted. Each SMAUG tensor may therefore have several IR *views* (one per
layout); an op asks for the view it needs and one Reorder is made per
(tensor, layout), so the IR has a transform only where the file's storage order
is observable — typically once at the input and once at the flatten.
The per-op translations are in ``import_ops``.
"""

from __future__ import annotations

import heapq
import os
from dataclasses import dataclass
from pathlib import Path

import numpy as np

from ...errors import FormatError, Unsupported, UnsupportedOpError
from ...fileio import check_numel
from ...ir import NNBRIDGE_DOMAIN, DType, Graph, Layout, TensorType, Value
from ...protos.smaug import smaug_graph_pb2 as gpb
from ...protos.smaug import smaug_tensor_pb2 as tpb
from ...protos.smaug import smaug_types_pb2 as pb
from ...smaug_runtime import DEVIATIONS_KEY
from . import layouts, params
from .files import model_paths, read_params, read_topology

#: Input slots that carry parameters (weights, BN statistics): Data nodes reaching
#: them (directly or through Reorders/Repeats) are constants, the others are inputs.
PARAM_SLOTS = {pb.Convolution3d: {1}, pb.ConvolutionDepthwise: {1}, pb.InnerProduct: {1},
               pb.BatchNorm: {1, 2, 3, 4}}
PASS_THROUGH = {pb.Reorder}
#: A Data node only broadcast (Repeat) or combined elementwise with computed tensors is a constant too.
CONSTANT_USERS = {pb.Repeat, pb.EltwiseAdd, pb.EltwiseMul}
#: graph metadata key: the file's node names in file order, so that writing it back keeps the order
NODE_ORDER_KEY = "smaug.node_order"
#: Scale of SMAUG's random-data recipe (experiments' *_network.py builders).
RECIPE_SEED = 1234
RECIPE_SCALE = 0.005


@dataclass
class Declared:
    """A SMAUG tensor as the file declares it (dims in ``layout`` order)."""

    name: str
    dtype: DType
    dims: tuple[int, ...]
    layout: Layout
    alignment: int


def recipe_arrays(shapes: list[tuple[int, ...]], dtype: np.dtype, scale: float = RECIPE_SCALE,
                  seed: int = RECIPE_SEED) -> list[np.ndarray]:
    """SMAUG's ``RandomState(seed).rand(*dims) * scale`` per tensor, computed from one stream
    (every tensor restarts the same generator, so each is a prefix of the longest)."""
    longest = max((int(np.prod(s)) for s in shapes), default=0)
    stream = (np.random.RandomState(seed).rand(longest) * scale).astype(dtype)
    return [stream[: int(np.prod(s))].reshape(s) for s in shapes]


class Importer:
    """Builds one IR graph from a GraphProto (+ params). Op translations live in import_ops."""

    def __init__(self, proto: gpb.GraphProto, what: str, *, compute_dtype: DType | None = None,
                 lrelu: str = "runtime"):
        self.proto = proto
        self.what = what
        self.compute_dtype = compute_dtype
        self.lrelu = lrelu
        self.graph = Graph(proto.name or Path(what).stem)
        self.nodes = {}
        self.views: dict[str, dict[Layout, Value]] = {}  # tensor → layout → IR value
        self.declared: dict[str, Declared] = {}  # "<node>:<k>" → declared output tensor
        self.unsupported: list[Unsupported] = []
        self.renames: dict[str, str] = {}  # transposed constant → its Data node's name
        #: flatten output → IR feature index of each feature in the file's order (spec §5.3)
        self.feature_order: dict[str, np.ndarray] = {}
        #: "<node>:<k>" → the Switch branches its value lives in: {(predicate "<node>:<k>", port)}
        self.branches: dict[str, frozenset[tuple[str, int]]] = {}

    def tidy_constants(self) -> None:
        """Drop unused constants; a Data node's only transposed copy takes the Data node's name."""
        graph = self.graph
        outputs = {id(v) for v in graph.outputs}
        for node in reversed(graph.nodes):  # Reorders nobody reads (their source was read directly)
            if node.op == "Reorder" and not graph.consumers(node.outputs[0]) and id(node.outputs[0]) not in outputs:
                graph.remove_node(node)
        used = {id(v) for n in graph.nodes for v in n.inputs if v is not None}
        for name in list(graph.initializers):
            if id(graph.values[name]) not in used:
                del graph.initializers[name]
                del graph.values[name]
        for new, old in self.renames.items():
            if new in graph.initializers and old not in graph.values:
                value = graph.values.pop(new)
                graph.initializers[old] = graph.initializers.pop(new)
                value.name = old
                graph.values[old] = value

    # -- structure ------------------------------------------------------------------
    def check_structure(self) -> list[gpb.NodeProto]:
        """Unique names, known parents, matching index lists; returns nodes in topological order."""
        order: dict[str, int] = {}
        for i, node in enumerate(self.proto.nodes):
            if not node.name:
                raise FormatError(f"{self.what}: node #{i} has no name")
            if node.name in order:
                raise FormatError(f"{self.what}: node name '{node.name}' is used twice")
            order[node.name] = i
            self.nodes[node.name] = node
        users: dict[str, list[str]] = {}
        missing = {}
        for node in self.proto.nodes:
            if len(node.src_tensors_indices) != len(node.parents):
                raise FormatError(f"{self.what}: node '{node.name}' has {len(node.parents)} parents but "
                                  f"{len(node.src_tensors_indices)} src_tensors_indices")
            for parent, index in zip(node.parents, node.src_tensors_indices):
                if parent not in self.nodes:
                    raise FormatError(f"{self.what}: node '{node.name}' names parent '{parent}', "
                                      f"which is not a node of the graph")
                if not 0 <= index < max(1, len(self.nodes[parent].output_tensors)):
                    raise FormatError(f"{self.what}: node '{node.name}' reads output {index} of "
                                      f"'{parent}', which has {len(self.nodes[parent].output_tensors)}")
                users.setdefault(parent, []).append(node.name)
            missing[node.name] = len(set(node.parents))
        ready = [(order[n], n) for n, k in missing.items() if k == 0]
        heapq.heapify(ready)
        result = []
        while ready:
            _, name = heapq.heappop(ready)
            result.append(self.nodes[name])
            for user in dict.fromkeys(users.get(name, [])):
                missing[user] -= 1
                if missing[user] == 0:
                    heapq.heappush(ready, (order[user], user))
        if len(result) != len(self.nodes):
            stuck = sorted((n for n, k in missing.items() if k > 0), key=order.get)[:5]
            raise FormatError(f"{self.what}: the nodes form a cycle (through {', '.join(stuck)})")
        self.users = users
        return result

    def is_parameter(self, name: str, seen: set[str] | None = None) -> bool:
        """Is this Data node a constant? It is when it reaches a parameter slot (through Reorders)
        or when it is only broadcast or combined elementwise; network inputs feed real ops."""
        users = [self.nodes[u] for u in self.users.get(name, [])]
        if seen is None and users and all(u.op == pb.Repeat or (u.op in CONSTANT_USERS and any(
                self.nodes[p].op != pb.Data for p in u.parents)) for u in users):
            return True
        seen = seen if seen is not None else set()
        for user_name in self.users.get(name, []):
            if user_name in seen:
                continue
            seen.add(user_name)
            user = self.nodes[user_name]
            slots = {i for i, p in enumerate(user.parents) if p == name}
            if slots & PARAM_SLOTS.get(user.op, set()):
                return True
            if user.op in PASS_THROUGH and self.is_parameter(user_name, seen):
                return True
        return False

    # -- tensors ----------------------------------------------------------------------
    def declare(self, tensor: tpb.TensorProto, what: str) -> Declared:
        dims = tuple(int(d) for d in tensor.shape.dims)
        check_numel(dims, what)
        dtype = params.ir_dtype(tensor.data_type, what)
        layout = layouts.layout_for_rank(layouts.ir_layout(tensor.shape.layout, what), len(dims))
        if tensor.shape.alignment < 0:
            raise FormatError(f"{what}: negative alignment {tensor.shape.alignment}")
        return Declared(tensor.name, dtype, dims, layout, tensor.shape.alignment)

    def ir_type(self, decl: Declared, layout: Layout | None = None, dims=None) -> TensorType:
        dtype = decl.dtype
        if self.compute_dtype is not None and dtype.is_float:
            dtype = self.compute_dtype
        return TensorType(dtype, tuple(decl.dims if dims is None else dims), layout or decl.layout)

    def output_decl(self, node: gpb.NodeProto, k: int = 0) -> Declared:
        key = f"{node.name}:{k}"
        if key not in self.declared:
            if k >= len(node.output_tensors):
                raise FormatError(f"{self.what}: node '{node.name}' ({pb.OpType.Name(node.op)}) "
                                  f"declares no output tensor {k}")
            self.declared[key] = self.declare(node.output_tensors[k], f"{self.what}: node '{node.name}'")
        return self.declared[key]

    def input_decl(self, node: gpb.NodeProto, i: int) -> Declared:
        return self.output_decl(self.nodes[node.parents[i]], node.src_tensors_indices[i])

    def define(self, node: gpb.NodeProto, k: int, value: Value) -> None:
        """Register ``value`` as a view of output ``k`` of ``node``, checking the declared dims."""
        decl = self.output_decl(node, k)
        layout = value.type.layout
        dims = list(value.type.shape or ())
        expect = list(decl.dims)
        if layout != decl.layout and layouts.perm(decl.layout, layout) is not None:
            expect = layouts.permute_dims(expect, decl.layout, layout)
        if dims != expect:
            raise FormatError(
                f"{self.what}: node '{node.name}' ({pb.OpType.Name(node.op)}) declares output dims "
                f"{list(decl.dims)} {decl.layout.value}, but its inputs give {dims} {layout.value}")
        self.views.setdefault(f"{node.name}:{k}", {})[layout] = value

    def view(self, node: gpb.NodeProto, i: int, layout: Layout | None = None) -> Value:
        """Input ``i`` of ``node`` as an IR value in ``layout`` (default: the declared layout)."""
        key = f"{node.parents[i]}:{node.src_tensors_indices[i]}"
        return self.view_of(key, layout or self.input_decl(node, i).layout)

    def views_of(self, node: gpb.NodeProto, i: int) -> dict[Layout, Value]:
        return self.views[f"{node.parents[i]}:{node.src_tensors_indices[i]}"]

    def view_of(self, key: str, layout: Layout) -> Value:
        views = self.views[key]
        if layout in views:
            return views[layout]
        for src_layout, src in views.items():
            p = layouts.perm(src_layout, layout)
            if p is not None and src.const is not None:  # constants are transposed once, here
                out = self.constant(f"{src.name}/{layout.value.lower()}", src.const.transpose(p), layout)
                self.renames[out.name] = src.name
                views[layout] = out
                return out
            if p is not None:
                out = self.graph.add_node(
                    "Reorder", [src], [f"{src.name}/{layout.value.lower()}"],
                    {"perm": p, "src_layout": src_layout.value, "dst_layout": layout.value},
                    name=f"{src.name}/to_{layout.value.lower()}", domain=NNBRIDGE_DOMAIN).outputs[0]
                out.type = src.type.with_shape([src.type.shape[j] for j in p]).with_layout(layout)
                views[layout] = out
                return out
        have = ", ".join(v.value for v in views)
        raise FormatError(f"{self.what}: tensor '{key.split(':')[0]}' ({have}) cannot be viewed as "
                          f"{layout.value}")

    def const(self, node: gpb.NodeProto, i: int) -> np.ndarray | None:
        """The constant array behind input ``i`` in its declared layout, if it is a Data constant."""
        for value in self.views_of(node, i).values():
            if value.const is not None and value.type.layout == self.input_decl(node, i).layout:
                return value.const
        return None

    # -- building ---------------------------------------------------------------------
    def add(self, op: str, inputs, out_name: str, attrs=None, *, name: str, type: TensorType,
            domain: str = "") -> Value:
        node = self.graph.add_node(op, inputs, [out_name], attrs or {}, name=name, domain=domain)
        node.outputs[0].type = type
        return node.outputs[0]

    def constant(self, name: str, array: np.ndarray, layout: Layout | None = None) -> Value:
        value = self.graph.add_initializer(name, array)
        if layout is not None:
            value.type = value.type.with_layout(layout)
        return value


def load_smaug(path: str | os.PathLike, *, inputs: list[str] | None = None,
               compute_dtype: str | None = None, synthetic_scale: float = RECIPE_SCALE,
               lrelu: str = "runtime", **_options) -> Graph:
    """Load ``<name>_topo.pbtxt`` (+ ``<name>_params.pb`` beside it, if present) into the IR.

    ``inputs`` names the Data nodes that are network inputs (default: those not feeding a
    weight/statistics slot). ``compute_dtype="float32"`` widens an fp16 (SMV) model. Without a
    params file, constants are synthesised with SMAUG's recipe and the graph metadata says so.
    ``lrelu="intended"`` honours a standalone LReLU's slope (the runtime uses 0.1, quirk Q1).
    """
    topo, par = model_paths(path)
    proto = read_topology(topo)
    array = read_params(par) if par.is_file() else None
    return graph_from_proto(proto, array, str(topo), inputs=inputs, compute_dtype=compute_dtype,
                            synthetic_scale=synthetic_scale, lrelu=lrelu)


def load_inputs(path: str | os.PathLike, graph: Graph | None = None) -> dict[str, np.ndarray]:
    """The values a SMAUG params file stores for the network inputs (SMAUG keeps them there), as
    ``graph`` (default: the file loaded) declares its inputs."""
    graph = graph if graph is not None and graph.input_values else load_smaug(path)
    return dict(graph.input_values)


def graph_from_proto(proto: gpb.GraphProto, array: tpb.TensorDataArray | None, what: str, *,
                     inputs: list[str] | None = None, compute_dtype: str | None = None,
                     synthetic_scale: float = RECIPE_SCALE, lrelu: str = "runtime") -> Graph:
    from .import_ops import IMPORTERS, Unimportable

    dtype = DType.from_numpy(np.dtype(compute_dtype)) if compute_dtype else None
    imp = Importer(proto, what, compute_dtype=dtype, lrelu=lrelu)
    order = imp.check_structure()
    if proto.backend and proto.backend not in layouts.BACKENDS:
        raise FormatError(f"{what}: unknown backend '{proto.backend}' (expected Reference or SMV)")
    graph = imp.graph
    graph.metadata["smaug.backend"] = proto.backend or "SMV"
    graph.metadata["smaug.mem_policy"] = _enum_name(pb.HostMemoryAccessPolicy, proto.mem_policy, what)
    _load_data_nodes(imp, order, array, inputs, synthetic_scale)
    failed: set[str] = set()
    for node in order:
        if node.op == pb.Data:
            continue
        if failed.intersection(node.parents):  # downstream of a node that did not import: no more noise
            failed.add(node.name)
            continue
        fn = IMPORTERS.get(node.op)
        reason = "nnbridge does not import this SMAUG op" if fn is None else ""
        if fn is not None:
            try:
                fn(imp, node)
            except Unimportable as exc:
                reason = str(exc)
        if reason:
            imp.unsupported.append(Unsupported(_enum_name(pb.OpType, node.op, what), node.name, reason))
            failed.add(node.name)
    if imp.unsupported:
        raise UnsupportedOpError(f"SMAUG import of {what}", imp.unsupported)
    graph.metadata["smaug.input_layouts"] = ",".join(f"{v.name}:{v.type.layout.value}" for v in graph.inputs)
    graph.metadata[NODE_ORDER_KEY] = "\n".join(node.name for node in proto.nodes)
    if graph.metadata["smaug.backend"] == "SMV":
        from .smv_rules import hazards

        found = hazards(proto)
        if found:  # what the real SMV runtime computes differently: the SMV simulator reproduces it
            graph.metadata[DEVIATIONS_KEY] = "\n".join(f"{u.node}\t{u.reason}" for u in found)
    for node in order:  # what nothing reads is an output (a lone Data node: the runtime prints its values)
        if node.name not in imp.users and (node.op != pb.Data or node.name in {v.name for v in graph.inputs}):
            for k in range(len(node.output_tensors)):
                decl = imp.output_decl(node, k)
                graph.outputs.append(imp.view_of(f"{node.name}:{k}", decl.layout))
    imp.tidy_constants()
    return graph


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
    decls = []
    for node in data_nodes:
        if len(node.input_tensors) != 1:
            raise FormatError(f"{imp.what}: Data node '{node.name}' must have one input tensor")
        decls.append(imp.declare(node.input_tensors[0], f"{imp.what}: Data node '{node.name}'"))
    is_input = {n.name: (n.name in inputs) if inputs is not None else not imp.is_parameter(n.name)
                for n in data_nodes}
    if inputs is not None:
        unknown = set(inputs) - set(is_input)
        if unknown:
            raise FormatError(f"{imp.what}: inputs {sorted(unknown)} are not Data nodes")
    synthetic = None
    if array is None:
        synthetic = {}  # in the file's dtype (the recipe casts there), widened below if asked
        for dtype in {d.dtype for n, d in zip(data_nodes, decls) if not is_input[n.name]}:
            const = [(n, d) for n, d in zip(data_nodes, decls) if not is_input[n.name] and d.dtype == dtype]
            arrays = recipe_arrays([d.dims for _, d in const], dtype.numpy, scale)
            synthetic.update({n.name: a for (n, _), a in zip(const, arrays)})
        imp.graph.metadata["nnbridge.synthetic_params"] = "true"
        imp.graph.metadata["nnbridge.synthetic_scale"] = repr(scale)
    for node, decl in zip(data_nodes, decls):
        if is_input[node.name]:
            value = imp.graph.add_input(node.name, imp.ir_type(decl))
            if decl.name in entries:  # SMAUG runs the network on the input its params file stores
                stored = params.decode(entries[decl.name], decl.dims, params.FROM_IR[decl.dtype], decl.alignment,
                                       f"{imp.what}: params entry '{decl.name}'")
                imp.graph.input_values[node.name] = stored.astype(value.type.dtype.numpy, copy=False)
        else:
            if synthetic is not None:
                values = synthetic[node.name]
            else:
                if decl.name not in entries:
                    raise FormatError(f"{imp.what}: the params file has no entry '{decl.name}' for "
                                      f"Data node '{node.name}'")
                values = params.decode(entries[decl.name], decl.dims, params.FROM_IR[decl.dtype],
                                       decl.alignment, f"{imp.what}: params entry '{decl.name}'")
            target = imp.ir_type(decl).dtype
            value = imp.constant(node.name, values.astype(target.numpy, copy=False), decl.layout)
        imp.declared[f"{node.name}:0"] = decl
        imp.views[f"{node.name}:0"] = {decl.layout: value}
