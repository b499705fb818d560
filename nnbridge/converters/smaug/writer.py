"""IR → SMAUG files for one backend (``Reference`` or ``SMV``).

The writer walks the IR in topological order and emits SMAUG nodes through the
per-op table in ``export_ops``. Tensors are produced lazily by :meth:`Exporter.need`
("this IR value, stored in that SMAUG layout"), which reproduces the frontend's
conventions: a Data node is created right before its first consumer; constants
are written directly in the layout the consumer wants (no Reorder for weights);
an IR ``Reorder`` is looked through when the source already has the wanted layout
and becomes a SMAUG ``Reorder`` only when it is really needed. So SMAUG → IR →
SMAUG gives back the original files, and ONNX → SMAUG gives SMAUG-native files.
"""

from __future__ import annotations

import os
from dataclasses import dataclass, field

import numpy as np

from ...errors import FormatError, Unsupported, UnsupportedOpError
from ...ir import DType, Graph, Layout, Node, Value
from ...protos.smaug import smaug_graph_pb2 as gpb
from ...protos.smaug import smaug_node_pb2 as npb
from ...protos.smaug import smaug_tensor_pb2 as tpb
from ...protos.smaug import smaug_types_pb2 as pb
from . import layouts, params
from .files import write_model
from .naming import NameScope, data_input_name, output_name
from .reader import RECIPE_SCALE, recipe_arrays


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


class Exporter:
    def __init__(self, graph: Graph, backend: str, mem_policy: int, inputs: dict[str, np.ndarray]):
        self.graph = graph
        self.backend = backend
        self.alignment = layouts.ALIGNMENT[backend]
        self.float_type = pb.Float16 if backend == "SMV" else pb.Float32
        self.proto = gpb.GraphProto(name=graph.name, backend=backend, mem_policy=mem_policy)
        self.params = tpb.TensorDataArray()
        self.names = NameScope()
        self.input_values = inputs
        self.cache: dict[tuple[int, Layout], Ref] = {}
        self.native: dict[int, Ref] = {}
        self.consumers = graph.consumer_map()
        self.absorbed: set[int] = set()  # nodes emitted as part of another (fused activations)
        self.unsupported: list[Unsupported] = []

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
        """Append a node; ``outputs`` are (dims, layout) pairs. Returns the node and its output refs."""
        name = self.names.unique(sanitize(request))
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
        name = self.names.unique(sanitize(request))
        t = self.tensor(data_input_name(name), array.shape, layout, data_type)
        node = self.proto.nodes.add(name=name, op=pb.Data)
        node.input_tensors.add().CopyFrom(t)
        out = self.tensor(output_name(name), array.shape, layout, data_type)
        node.output_tensors.add().CopyFrom(out)
        self.params.data_array.append(params.encode(t.name, array, data_type, self.alignment))
        return Ref(name, 0, out)

    # -- finding IR values as SMAUG tensors -----------------------------------------------------
    def need(self, value: Value, layout: Layout, have: Layout | None = None) -> Ref:
        """``value`` (IR dims listed in ``have``) as a SMAUG tensor stored in ``layout``."""
        have = have or ir_layout(value)
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
        reorder = self.reorder_of(value)
        if reorder is not None and have.value == reorder.attrs.get("dst_layout"):
            return self.find(reorder.inputs[0], layout, Layout(reorder.attrs["src_layout"]))
        if have != layout:
            native = self.native.get(id(value))
            return native if native is not None and native.layout == layout else None
        return self.materialize(value, have)

    def produce(self, value: Value, layout: Layout, have: Layout) -> Ref:
        reorder = self.reorder_of(value)
        if reorder is not None and have.value == reorder.attrs.get("dst_layout"):
            src = Layout(reorder.attrs["src_layout"])
            if have == layout:  # the file's own Reorder: keep it (and its name)
                return self.smaug_reorder(self.need(reorder.inputs[0], src, src), layout, reorder.name)
            return self.need(reorder.inputs[0], layout, src)
        array = self.constant(value)
        if array is not None:
            p = layouts.perm(have, layout)
            if p is None:
                raise Inexpressible(f"cannot store constant '{value.name}' ({have.value}) as {layout.value}")
            return self.data(value.name, array.transpose(p), layout)
        source = self.native.get(id(value)) or self.materialize(value, have)
        if source is None:
            raise Inexpressible(f"value '{value.name}' is not computed by anything SMAUG can express")
        if source.layout == layout:
            return source
        return self.smaug_reorder(source, layout, "reorder")

    def materialize(self, value: Value, have: Layout) -> Ref | None:
        """Data nodes for constants and graph inputs in their own layout; computed tensors as is."""
        if id(value) in self.native:
            native = self.native[id(value)]
            return native if native.layout == have else None
        array = self.constant(value)
        if array is None and any(v is value for v in self.graph.inputs):
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

    def reorder_of(self, value: Value) -> Node | None:
        p = value.producer
        return p if p is not None and p.op == "Reorder" and p.domain == "nnbridge" else None

    def constant(self, value: Value) -> np.ndarray | None:
        if value.const is not None:
            return value.const
        p = value.producer
        if p is not None and p.op == "Constant" and isinstance(p.attrs.get("value"), np.ndarray):
            return p.attrs["value"]
        return None

    def input_array(self, value: Value) -> np.ndarray:
        if value.name in self.input_values:
            array = np.asarray(self.input_values[value.name])
            if list(array.shape) != list(value.type.shape or ()):
                raise FormatError(f"smaug_inputs['{value.name}'] has shape {list(array.shape)}, the "
                                  f"input is {list(value.type.shape or ())}")
            return array
        if not value.type.is_static:
            raise Inexpressible(f"graph input '{value.name}' has a symbolic shape {value.type.shape}; "
                                f"SMAUG needs static dims")
        dtype = np.float16 if self.float_type == pb.Float16 else np.float32
        return recipe_arrays([tuple(value.type.shape)], dtype, RECIPE_SCALE)[0]

    # -- the walk -------------------------------------------------------------------------------
    def run(self) -> None:
        from .export_ops import EXPORTERS

        for node in self.graph.nodes:
            if id(node) in self.absorbed or (node.op == "Reorder" and node.domain == "nnbridge"):
                continue
            if node.op == "Constant":
                continue
            fn = EXPORTERS.get((node.domain, node.op))
            try:
                if fn is None:
                    raise Inexpressible("SMAUG has no equivalent operator")
                fn(self, node)
            except Inexpressible as exc:
                self.unsupported.append(Unsupported(node.op, node.name, str(exc), node.domain))
                self.poison(node)
        for out in self.graph.outputs:
            try:
                self.need(out, ir_layout(out))
            except Inexpressible as exc:
                self.unsupported.append(Unsupported("output", out.name, str(exc)))

    def poison(self, node: Node) -> None:
        """Stand-ins for a failed node's outputs, so the walk goes on and reports every failure."""
        for out in node.outputs:
            if out.type.shape is not None and out.type.is_static:
                lay = ir_layout(out)
                self.native[id(out)] = Ref("?", 0, self.tensor("?", out.type.shape, lay))

    def single_consumer(self, value: Value) -> Node | None:
        users = self.consumers.get(id(value), [])
        if len(users) == 1 and not self.graph.is_output(value):
            return users[0]
        return None


def sanitize(name: str) -> str:
    """SMAUG uses ':' as its scope separator; keep names free of it."""
    return (name or "node").replace(":", "_")


MEM_POLICIES = {"AllDma": pb.AllDma, "AllAcp": pb.AllAcp, "AllAcpWithDmaForWeights": pb.AllAcpWithDmaForWeights}


def graph_to_smaug(graph: Graph, backend: str = "SMV", *, mem_policy: str = "AllDma",
                   inputs: dict[str, np.ndarray] | None = None) -> tuple[gpb.GraphProto, tpb.TensorDataArray]:
    """The two SMAUG messages for ``graph``; raises one error listing every inexpressible node."""
    if backend not in layouts.BACKENDS:
        raise FormatError(f"smaug_backend must be 'Reference' or 'SMV', not '{backend}'")
    if mem_policy not in MEM_POLICIES:
        raise FormatError(f"smaug_mem_policy must be one of {', '.join(MEM_POLICIES)}, not '{mem_policy}'")
    ex = Exporter(graph, backend, MEM_POLICIES[mem_policy], dict(inputs or {}))
    ex.run()
    if ex.unsupported:
        raise UnsupportedOpError(f"SMAUG ({backend})", ex.unsupported)
    return ex.proto, ex.params


def save_smaug(graph: Graph, path: str | os.PathLike, *, smaug_backend: str | None = None,
               smaug_mem_policy: str | None = None, smaug_inputs: dict[str, np.ndarray] | None = None,
               **_other_formats_options) -> tuple[str, str]:
    """Write ``<name>_topo.pbtxt`` and ``<name>_params.pb`` (both or neither).

    The backend defaults to the one the graph was loaded from (metadata ``smaug.backend``),
    else SMV. Network inputs are stored with ``smaug_inputs`` or SMAUG's random-data recipe.
    """
    backend = smaug_backend or graph.metadata.get("smaug.backend") or "SMV"
    policy = smaug_mem_policy or graph.metadata.get("smaug.mem_policy") or "AllDma"
    proto, array = graph_to_smaug(graph, backend, mem_policy=policy, inputs=smaug_inputs)
    topo, par = write_model(proto, array, path)
    return str(topo), str(par)
