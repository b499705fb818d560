"""The SMAUG export walk: :class:`Exporter` emits SMAUG nodes for IR nodes through a per-op table.

Tensors are produced lazily by :meth:`Exporter.need` ("this IR value, stored in that SMAUG
layout"), which reproduces the frontend's conventions: a Data node is created right before its
first consumer; constants are written directly in the layout the consumer wants (no Reorder for
weights); an IR ``Reorder`` is looked through when the source already has the wanted layout and
becomes a SMAUG ``Reorder`` only when it is really needed. The per-op functions (``export_ops``
and its siblings) import this module; the writer hands their table to :meth:`Exporter.run`.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import dataclass, field

import numpy as np

from ...base.errors import FormatError, Unsupported
from ...ir import DType, Graph, Layout, Node, Value
from ...passes.fold_constants import oversized_constant
from ...protos.smaug import smaug_graph_pb2 as gpb
from ...protos.smaug import smaug_node_pb2 as npb
from ...protos.smaug import smaug_tensor_pb2 as tpb
from ...protos.smaug import smaug_types_pb2 as pb
from . import layouts, params
from .importer import DATA_REORDERS_KEY, NODE_ORDER_KEY, RECIPE_SCALE, recipe_arrays
from .naming import NameScope, data_input_name, output_name


class Inexpressible(Exception):
    """Raised by an op exporter: SMAUG (for this backend) cannot express the node."""


@dataclass
class Ref:
    """A SMAUG tensor: output ``index`` of node ``node`` with its declared proto."""

    node: str
    index: int
    tensor: tpb.TensorProto
    #: for a flattened NHWC tensor: IR feature index of each stored feature (§5.3)
    feature_perm: np.ndarray | None = field(default=None, compare=False)

    @property
    def layout(self) -> Layout:
        return layouts.TO_IR[self.tensor.shape.layout]

    @property
    def dims(self) -> list[int]:
        return list(self.tensor.shape.dims)


def ir_layout(value: Value) -> Layout:
    """The layout the value's IR dims are listed in (rank default when unlabelled)."""
    rank = value.type.rank or 0
    return layouts.layout_for_rank(value.type.layout, rank)


#: Rules naming IR nodes that no SMAUG node stands for because their readers look through them
#: (the first value of a Merge's predicate); registered by the per-op modules.
LOOKED_THROUGH: list[Callable[[Exporter, Node], bool]] = []


class Exporter:
    def __init__(self, graph: Graph, backend: str, mem_policy: int, inputs: dict[str, np.ndarray]):
        self.graph = graph
        self.backend = backend
        self.alignment = layouts.ALIGNMENT[backend]
        self.float_type = pb.Float16 if backend == "SMV" else pb.Float32
        self.proto = gpb.GraphProto(name=graph.name, backend=backend, mem_policy=mem_policy)
        self.names = NameScope()
        self.input_values = inputs
        self.cache: dict[tuple[int, Layout], Ref] = {}
        self.native: dict[int, Ref] = {}
        #: constants written transformed for their readers (weights permuted for a flatten order,
        #: scaled, padded), keyed by the constant and the transformation, so readers share one Data node
        self.derived: dict[tuple, Ref] = {}
        #: SMV [N, C] values computed with rows padded to a multiple of 8 (see export_ops.row_tail):
        #: IR value id → (padded tensor, C, padding lanes hold the softmax mask); the slice back to
        #: C is emitted only when something reads it, so no Split is left dangling
        self.padded: dict[int, tuple[Ref, int, bool]] = {}
        self.absorbed: set[int] = set()  # nodes emitted as part of another (fused activations)
        self.unsupported: list[Unsupported] = []
        self.pending: list[tuple[str, np.ndarray, int]] = []
        self.stored_inputs: dict[str, np.ndarray] = {}  # network inputs as the params file holds them
        self.input_layouts = {v.name: lay for v in graph.inputs
                              if (lay := stored_input_layout(graph, v)) is not None}
        #: the nodes of the SMAUG file the graph was loaded from: its own Reorders and standalone
        #: activations are written back as they were (not folded into a stored input, not fused)
        self.file_nodes = frozenset(graph.metadata.get(NODE_ORDER_KEY, "").split("\n")) - {""}
        self.file_reorders = data_reorders(graph)
        #: IR value id → the Switch branches it is computed in (export_control), filled on first use
        self.live: dict[int, frozenset[tuple[int, int]]] | None = None

    def layout_of(self, value: Value) -> Layout:
        """The layout the value's IR dims are listed in; graph inputs keep the layout recorded in
        the metadata when a format without layouts (ONNX) dropped the label on the way."""
        if value.name in self.input_layouts and self.is_input(value):
            return self.input_layouts[value.name]
        p = value.producer
        if p is not None and p.op == "Transpose" and not p.domain and value.type.layout in (
                Layout.UNKNOWN, Layout.X, Layout.default_for_rank(value.type.rank)):
            return self.transposed_layout(p) or ir_layout(value)
        return ir_layout(value)

    def transposed_layout(self, node: Node) -> Layout | None:
        """A Transpose that maps one known layout onto another (NCHW → NHWC) yields that layout."""
        x = node.inputs[0]
        source = self.layout_of(x)
        perm = [int(i) for i in (node.attrs.get("perm") or range(x.type.rank or 0)[::-1])]
        if len(perm) != len(source.value):
            return None
        letters = "".join(source.value[i] for i in perm)
        found = next((lay for lay in layouts.RANK if lay.value == letters), None)
        return found if found is not None and found != source else None

    # -- emitting SMAUG nodes ---------------------------------------------------------------
    def tensor(self, name: str, dims, layout: Layout, data_type: int | None = None) -> tpb.TensorProto:
        t = tpb.TensorProto(name=name, data_type=data_type or self.float_type,
                            data_format=pb.Uncompressed)
        t.shape.dims.extend(int(d) for d in dims)
        t.shape.layout = layouts.FROM_IR[layout]
        t.shape.alignment = self.alignment
        return t

    def emit(self, op: int, request: str, inputs: list[Ref], outputs: list[tuple[list[int], Layout]],
             *, data_type: int | None = None) -> tuple[npb.NodeProto, list[Ref]]:
        """Append a node; ``outputs`` are (dims, layout) pairs. Returns the node and its output refs.
        Names keep ':', SMAUG's scope separator (``lstm:step0:mm_x``). Outputs take ``data_type``, else,
        as in SMAUG's frontend, the first input's type when that is not a float (Int64, Bool), else
        the backend's float type."""
        if data_type is None and inputs and inputs[0].tensor.data_type in params.NON_FLOAT:
            data_type = inputs[0].tensor.data_type
        name = self.names.unique(request or "node")
        node = self.proto.nodes.add(name=name, op=op)
        for ref in inputs:
            node.parents.append(ref.node)
            node.src_tensors_indices.append(ref.index)
            node.input_tensors.add().CopyFrom(ref.tensor)
        refs = []
        for k, (dims, layout) in enumerate(outputs):
            t = self.tensor(output_name(name, k), dims, layout, data_type)
            node.output_tensors.add().CopyFrom(t)
            refs.append(Ref(name, k, t))
        return node, refs

    def data(self, request: str, array: np.ndarray, layout: Layout) -> Ref:
        """A Data node holding ``array`` (dims already in ``layout`` order) and its params entry."""
        array = np.asarray(array)
        data_type = self.float_type if array.dtype.kind == "f" else params.FROM_IR.get(
            DType.from_numpy(array.dtype))
        if data_type is None:
            raise Inexpressible(f"constant '{request}' has dtype {array.dtype}, which SMAUG cannot store")
        name = self.names.unique(request or "data")
        t = self.tensor(data_input_name(name), array.shape, layout, data_type)
        node = self.proto.nodes.add(name=name, op=pb.Data)
        node.input_tensors.add().CopyFrom(t)
        out = self.tensor(output_name(name), array.shape, layout, data_type)
        node.output_tensors.add().CopyFrom(out)
        self.pending.append((t.name, array, data_type))  # encoded only if the whole graph converts
        return Ref(name, 0, out)

    # -- finding IR values as SMAUG tensors -----------------------------------------------------
    def native_of(self, value: Value) -> Ref | None:
        """The tensor that computes ``value`` in its native layout, if it is computed already."""
        if id(value) not in self.native and id(value) in self.padded:
            ref, width, _ = self.padded[id(value)]
            n, stored = ref.dims
            split, outs = self.emit(pb.Split, f"{ref.node}/slice", [ref],
                                    [([n, width], Layout.NC), ([n, stored - width], Layout.NC)])
            split.params.split_params.split_axis = 1
            self.native[id(value)] = outs[0]
        return self.native.get(id(value))

    def need(self, value: Value, layout: Layout, have: Layout | None = None) -> Ref:
        """``value`` (IR dims listed in ``have``) as a SMAUG tensor stored in ``layout``."""
        have = have or self.layout_of(value)
        key = (id(value), layout)
        if key in self.cache:
            return self.cache[key]
        ref = self.find(value, layout, have)
        if ref is None:
            ref = self.produce(value, layout, have)
        self.cache[key] = ref
        return ref

    def find(self, value: Value, layout: Layout, have: Layout) -> Ref | None:
        """An existing (or free: Data/input in its own layout) tensor; never adds a Reorder."""
        key = (id(value), layout)
        if key in self.cache:
            return self.cache[key]
        change = self.layout_change(value, have)
        if change is not None:
            return self.find(change[0].inputs[0], layout, change[1])
        if have != layout:
            native = self.native_of(value)
            return native if native is not None and native.layout == layout else None
        return self.materialize(value, have)

    def produce(self, value: Value, layout: Layout, have: Layout) -> Ref:
        """A new SMAUG tensor for ``value`` in ``layout``: through the layout change that made it,
        as the file's own Reorder, as a Data node, or reordered from where it is computed."""
        change = self.layout_change(value, have)
        if change is not None:
            return self._through_change(*change, layout, have)
        named = self._file_reorder(value, layout, have)
        if named is not None:
            return named
        array = self.constant(value)
        if array is not None:
            p = layouts.perm(have, layout)
            if p is None:
                raise Inexpressible(f"cannot store constant '{value.name}' ({have.value}) as {layout.value}")
            return self.data(value.name, array.transpose(p), layout)
        if self.backend == "SMV" and id(value) not in self.native and self.is_input(value) \
                and layouts.perm(have, layout) is not None:
            # As SMAUG's own SMV models do: the network input is stored in the layout its kernels
            # read, zero-padded. A run-time Reorder would leave the NHWC alignment lanes
            # uninitialised, and the first convolution multiplies them (garbage, even NaN).
            ref = self.data(value.name, self.input_array(value).transpose(layouts.perm(have, layout)), layout)
            self.native[id(value)] = ref
            return ref
        source = self.native_of(value) or self.materialize(value, have)
        if source is None:
            raise Inexpressible(f"value '{value.name}' is not computed by anything SMAUG can express")
        if source.layout == layout:
            return source
        return self.smaug_reorder(source, layout, "reorder")

    def _through_change(self, node: Node, src: Layout, layout: Layout, have: Layout) -> Ref:
        """A value that is a layout change of ``node``'s input: the file's own Reorder is kept; any
        other change is folded into how the input is read."""
        source = node.inputs[0]
        stored_input = self.backend == "SMV" and self.is_input(source) and self.native_of(source) is None \
            and node.name not in self.file_nodes
        if have == layout and not stored_input:  # a real layout change (the file's own Reorder): keep it
            return self.smaug_reorder(self.need(source, src, src), layout, node.name)
        return self.need(source, layout, src)

    def _file_reorder(self, value: Value, layout: Layout, have: Layout) -> Ref | None:
        """The file stored this constant or input in its own layout and reordered it: so again."""
        named = self.file_reorders.get((value.name, layout))
        if named is None or (self.constant(value) is None and not self.is_input(value)):
            return None
        source = self.materialize(value, have)
        if source is not None and layouts.reorder_supported(source.layout, layout):
            return self.smaug_reorder(source, layout, named)
        return None

    def materialize(self, value: Value, have: Layout) -> Ref | None:
        """Data nodes for constants and graph inputs in their own layout; computed tensors as is."""
        native = self.native_of(value)
        if native is not None:
            return native if native.layout == have else None
        array = self.constant(value)
        if array is None and self.is_input(value):
            array = self.input_array(value)
        if array is None:
            return None
        ref = self.data(value.name, array, have)
        self.native[id(value)] = ref
        return ref

    def smaug_reorder(self, source: Ref, layout: Layout, request: str) -> Ref:
        if not layouts.reorder_supported(source.layout, layout):
            raise Inexpressible(f"SMAUG cannot reorder {source.layout.value} to {layout.value}")
        dims = source.dims
        if layout in (Layout.NC, Layout.CN) and len(dims) == 4:
            out = [dims[0], int(np.prod(dims[1:]))]
        else:
            out = layouts.permute_dims(dims, source.layout, layout)
        return self.emit(pb.Reorder, request, [source], [(out, layout)])[1][0]

    def layout_change(self, value: Value, have: Layout) -> tuple[Node, Layout] | None:
        """If ``value`` (dims read as ``have``) is another layout of its producer's input, return
        (producer, source layout): an ``nnbridge.Reorder`` to ``have``, or a Transpose whose
        permutation is exactly source → ``have`` (inputs and constants may be read in any layout)."""
        p = value.producer
        if p is None or value is not p.outputs[0]:
            return None
        if p.op == "Reorder" and p.domain == "nnbridge":
            return (p, Layout(p.attrs["src_layout"])) if p.attrs.get("dst_layout") == have.value else None
        if p.op != "Transpose" or p.domain:
            return None
        x = p.inputs[0]
        perm = [int(i) for i in (p.attrs.get("perm") or range(x.type.rank or 0)[::-1])]
        free = self.constant(x) is not None or self.is_input(x)
        for src in layouts.RANK:
            if layouts.perm(src, have) == perm and (src == self.layout_of(x) or free):
                return p, src
        return None

    def is_lazy(self, node: Node) -> bool:
        """Layout changes are emitted on demand by :meth:`need`, not in the walk (and so are the nodes
        a ``LOOKED_THROUGH`` rule claims for their readers)."""
        if node.op == "Reorder" and node.domain == "nnbridge":
            return True
        if any(rule(self, node) for rule in LOOKED_THROUGH):
            return True
        if node.op != "Transpose":
            return False
        return self.layout_change(node.outputs[0], self.layout_of(node.outputs[0])) is not None

    def is_input(self, value: Value) -> bool:
        return any(v is value for v in self.graph.inputs)

    def constant(self, value: Value) -> np.ndarray | None:
        if value.const is not None:
            return value.const
        p = value.producer
        if p is not None and p.op == "Constant" and isinstance(p.attrs.get("value"), np.ndarray):
            return p.attrs["value"]
        return None

    def input_array(self, value: Value) -> np.ndarray:
        """The network input's stored values: ``smaug_inputs``, else the values the graph came with
        (a SMAUG file's own), else SMAUG's random-data recipe."""
        if value.name not in self.stored_inputs:
            self.stored_inputs[value.name] = self._input_array(value)
        return self.stored_inputs[value.name]

    def _input_array(self, value: Value) -> np.ndarray:
        for source, given in (("smaug_inputs", self.input_values), ("the graph's input values",
                                                                     self.graph.input_values)):
            if value.name in given:
                array = np.asarray(given[value.name])
                if list(array.shape) != list(value.type.shape or ()):
                    raise FormatError(f"{source}['{value.name}'] has shape {list(array.shape)}, the "
                                      f"input is {list(value.type.shape or ())}")
                return array
        if not value.type.is_static:
            raise Inexpressible(f"graph input '{value.name}' has a symbolic shape {value.type.shape}; "
                                f"SMAUG needs static dims")
        dtype = np.float16 if self.float_type == pb.Float16 else np.float32
        scale = float(self.graph.metadata.get("nnbridge.synthetic_scale", RECIPE_SCALE))
        array = recipe_arrays([tuple(value.type.shape)], dtype, scale)[0]
        if value.type.dtype is not None and not value.type.dtype.is_float:  # a mask, ids: the input's own type
            array = array.astype(value.type.dtype.numpy)
        return array

    # -- the walk -------------------------------------------------------------------------------
    def run(self, exporters: Mapping[tuple[str, str], Callable[[Exporter, Node], None]]) -> None:
        for node in self.graph.nodes:
            if id(node) in self.absorbed or self.is_lazy(node):
                continue
            if node.op == "Constant":
                continue
            fn = exporters.get((node.domain, node.op))
            try:
                if fn is None:
                    raise Inexpressible(oversized_constant(node) or "SMAUG has no equivalent operator")
                fn(self, node)
            except Inexpressible as exc:
                self.unsupported.append(Unsupported(node.op, node.name, str(exc), node.domain))
                self.poison(node)
            except ValueError as exc:  # protobuf's range check of an int32 field (a dim, a stride)
                if "out of range" not in str(exc):
                    raise
                self.unsupported.append(Unsupported(node.op, node.name, f"a dimension or attribute is beyond "
                                                    f"the 32-bit integers SMAUG stores ({exc})", node.domain))
                self.poison(node)
        for out in self.graph.outputs:
            try:
                self.need(out, self.layout_of(out))
            except Inexpressible as exc:
                self.unsupported.append(Unsupported("output", out.name, str(exc)))

    def poison(self, node: Node) -> None:
        """Stand-ins for a failed node's outputs, so the walk goes on and reports every failure."""
        for out in node.outputs:
            if out.type.shape is not None and out.type.is_static and all(d < 2**31 for d in out.type.shape):
                lay = self.layout_of(out)
                self.native[id(out)] = Ref("?", 0, self.tensor("?", out.type.shape, lay))

    def single_consumer(self, value: Value) -> Node | None:
        users = self.graph.consumers(value)
        if len(users) == 1 and not self.graph.is_output(value):
            return users[0]
        return None


def data_reorders(graph: Graph) -> dict[tuple[str, Layout], str]:
    """(Data node, layout) → the file's Reorder of that Data node to that layout (``DATA_REORDERS_KEY``)."""
    found = {}
    for line in graph.metadata.get(DATA_REORDERS_KEY, "").split("\n"):
        fields = line.split("\t")
        if len(fields) == 3 and fields[1] in Layout._value2member_map_:
            found[(fields[0], Layout(fields[1]))] = fields[2]
    return found


#: graph metadata key listing the network inputs' layouts ("data:NHWC,mask:NC")
INPUT_LAYOUTS_KEY = "smaug.input_layouts"


def stored_input_layout(graph: Graph, value: Value) -> Layout | None:
    """The recorded layout of a graph input whose IR label is only the rank default."""
    entries = dict(item.split(":", 1) for item in graph.metadata.get(INPUT_LAYOUTS_KEY, "").split(",") if ":" in item)
    rank = value.type.rank or 0
    label = value.type.layout
    if value.name not in entries or (label not in (Layout.UNKNOWN, Layout.X)
                                      and label != Layout.default_for_rank(rank)):
        return None
    try:
        layout = Layout(entries[value.name])
    except ValueError:
        return None
    return layout if layouts.RANK.get(layout) == rank else None


@dataclass
class SmvTiler:
    """SMAUG's SMV tiler as the SMV backend models it. The top package plugs it in with
    ``use_smv_tiler`` (converters import no backend); without it SMV files are not tiler-checked."""

    refusals: Callable[[Graph], list[Unsupported]]  # nodes whose shapes the tiler cannot run
    pool_group: Callable[[tuple[int, int, int, int], list[int], list[int], str], int]  # channels per pool


SMV_TILER: list[SmvTiler] = []


def use_smv_tiler(tiler: SmvTiler) -> None:
    SMV_TILER[:] = [tiler]
