"""The SMAUG import walk: :class:`Importer` builds one IR graph from a GraphProto (+ params).

The per-op translations (``import_ops``) import this module and receive an ``Importer``; the
reader hands their table to it.
"""

from __future__ import annotations

import heapq
from dataclasses import dataclass
from pathlib import Path

import numpy as np

from ...base.errors import FormatError, Unsupported
from ...base.fileio import check_numel
from ...ir import NNBRIDGE_DOMAIN, DType, Graph, Layout, TensorType, Value
from ...protos.smaug import smaug_graph_pb2 as gpb
from ...protos.smaug import smaug_tensor_pb2 as tpb
from ...protos.smaug import smaug_types_pb2 as pb
from . import layouts, params

#: Input slots that carry parameters (weights, BN statistics): Data nodes reaching
#: them (directly or through Reorders/Repeats) are constants, the others are inputs.

#: Input slots that carry parameters (weights, BN statistics): Data nodes reaching
#: them (directly or through Reorders/Repeats) are constants, the others are inputs.
PARAM_SLOTS = {pb.Convolution3d: {1}, pb.ConvolutionDepthwise: {1}, pb.InnerProduct: {1},
               pb.BatchNorm: {1, 2, 3, 4}}
PASS_THROUGH = {pb.Reorder}
#: the alignments SMAUG's backends use (specs/smaug-format.md §4.3)
ALIGNMENTS = (0, 8)
#: A Data node only broadcast (Repeat) or combined elementwise with computed tensors is a constant too.
CONSTANT_USERS = {pb.Repeat, pb.EltwiseAdd, pb.EltwiseMul}
#: graph metadata key: the file's node names in file order, so that writing it back keeps the order
NODE_ORDER_KEY = "smaug.node_order"
#: graph metadata key: "<name the writer gives>\t<the file's name>" lines for tensors not named by the
#: frontend's rule ("<node>/input0" for a Data tensor, "<node>/output<k>"): the frontend keeps a
#: Tensor's own name (an LSTM's "lstm0:/h"), older files name a Data node's output after its input
TENSOR_NAMES_KEY = "smaug.tensor_names"
#: graph metadata key: "<tensor>\t<DataType>\t<DataLayout>\t<alignment>" lines for the tensors whose
#: storage the writer would not derive: a float type other than the backend's (fp16 on Reference),
#: a layout label that does not fit the rank (a 2-D NCHW tensor), an alignment other than the
#: backend's (a frontend Tensor made outside any graph); so writing back keeps them
TENSOR_TYPES_KEY = "smaug.tensor_types"
#: graph metadata key: "<Data node>\t<layout>\t<Reorder node>" for the file's Reorders of Data nodes (the IR
#: reads constants and inputs in any layout directly), so writing back keeps them
DATA_REORDERS_KEY = "smaug.data_reorders"
#: graph metadata key: "<node>\t<its Params, serialized, hex>" for the parameters the runtime ignores
#: (a standalone LReLU/ELU/SELU/HardTanh's act_params, quirks Q1/Q2; a fused Softmax, Q3): the IR
#: computes what the runtime does, and writing back keeps what the file said
IGNORED_PARAMS_KEY = "smaug.ignored_params"
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
                 lrelu: str = "runtime", activations: str = "exact"):
        self.proto = proto
        self.what = what
        self.compute_dtype = compute_dtype
        self.lrelu = lrelu
        self.activations = activations
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
        self._check_computes()
        order = self._index_names()
        users: dict[str, list[str]] = {}
        missing = {}
        for node in self.proto.nodes:
            self._check_parents(node)
            for parent in node.parents:
                users.setdefault(parent, []).append(node.name)
            missing[node.name] = len(set(node.parents))
        for node in self.proto.nodes:
            self._check_dims(node)
        result = self._topological_order(order, users, missing)
        self.users = users
        return result

    def _check_computes(self) -> None:
        """Refuse a graph without an op (one lone Data node is how SMAUG prints a tensor)."""
        kinds = {node.op for node in self.proto.nodes}
        if not kinds or (kinds == {pb.Data} and len(self.proto.nodes) > 1):
            raise FormatError(f"{self.what}: the graph has {len(self.proto.nodes)} nodes and no op; nothing to "
                              "compute (a graph of one Data node is how SMAUG prints a tensor)")

    def _index_names(self) -> dict[str, int]:
        """Each node's position in the file, by its (required, unique) name; fills ``self.nodes``."""
        order: dict[str, int] = {}
        for i, node in enumerate(self.proto.nodes):
            if not node.name:
                raise FormatError(f"{self.what}: node #{i} has no name")
            if node.name in order:
                raise FormatError(f"{self.what}: node name '{node.name}' is used twice")
            order[node.name] = i
            self.nodes[node.name] = node
        return order

    def _check_parents(self, node: gpb.NodeProto) -> None:
        """Every op reads something, and each parent it names exists and has the output it reads."""
        if node.op != pb.Data and not node.parents:
            kind = pb.OpType.Name(node.op) if node.op in pb.OpType.values() else f"op code {node.op}"
            raise FormatError(f"{self.what}: node '{node.name}' ({kind}) has no parents; every op but Data "
                              "reads at least one tensor")
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

    def _topological_order(self, order: dict[str, int], users: dict[str, list[str]],
                           missing: dict[str, int]) -> list[gpb.NodeProto]:
        """The nodes in topological order, ties broken by file position; a cycle is refused."""
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
        return result

    def _check_dims(self, node: gpb.NodeProto) -> None:
        """A tensor's dims are written twice, by its producer and by each reader (and a Data node
        declares its input and its output): a file where they differ contradicts itself."""
        pairs = [(f"reads output {index} of '{parent}' as", list(self.nodes[parent].output_tensors[index].shape.dims),
                  list(read.shape.dims), f"'{parent}' declares")
                 for parent, index, read in zip(node.parents, node.src_tensors_indices, node.input_tensors)
                 if index < len(self.nodes[parent].output_tensors)]
        if node.op == pb.Data and node.input_tensors and node.output_tensors:
            pairs.append(("outputs", list(node.input_tensors[0].shape.dims), list(node.output_tensors[0].shape.dims),
                          "its input tensor is"))
        for how, declared, used, who in pairs:
            if declared != used:
                raise FormatError(f"{self.what}: node '{node.name}' {how} {used}, but {who} {declared}: "
                                  f"the file contradicts itself")

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
        if tensor.shape.alignment not in ALIGNMENTS:
            raise FormatError(f"{what}: alignment {tensor.shape.alignment}; SMAUG pads the last dim to a multiple "
                              "of 8 (SMV) or not at all (0, Reference)")
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
