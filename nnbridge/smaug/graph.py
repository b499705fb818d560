"""The builder state: ``Graph`` (nodes of a SMAUG model under construction), ``Tensor`` and ``Node``.

The object model is SMAUG's frontend's (specs/smaug-format.md §3.2, §5.2), so that scripts written
for it run unmodified and write the same bytes: ``with Graph(...)`` makes a graph the active one
(``input_data(tensor)`` and ops on free tensors go there); a free tensor (user data, no source node)
gets a Data node when an op first reads it, and keeps it; an op whose inputs are in layouts its
backend does not read gets Reorder nodes (reused when the same graph tensor is reordered again);
node names are made unique with per-base counters; output tensors get the backend's alignment.

A graph opened inside another's ``with`` block is a nested graph (SMAUG's ``cond`` builds its
branches so): it shares the outer graph's node names and joins it when its block ends. One
addition: an op whose inputs belong to a graph that is neither the active one nor encloses it
builds into that graph, so graphs can also be built side by side without ``with``
(``input_data(t, graph=g)``).
"""

from __future__ import annotations

import os
import warnings
from pathlib import Path

import numpy as np

from ..base.errors import InputError, NNBridgeWarning
from ..converters.smaug import layouts, params
from ..converters.smaug.files import PARAMS_SUFFIX, TOPO_SUFFIX, write_files
from ..converters.smaug.naming import NameScope, output_name
from ..protos.smaug import smaug_graph_pb2 as gpb
from ..protos.smaug import smaug_node_pb2 as npb
from ..protos.smaug import smaug_tensor_pb2 as tpb
from ..protos.smaug import smaug_types_pb2 as pb

_DTYPES = {np.dtype(np.float16): pb.Float16, np.dtype(np.float32): pb.Float32, np.dtype(np.float64): pb.Float64,
           np.dtype(np.int32): pb.Int32, np.dtype(np.int64): pb.Int64, np.dtype(np.bool_): pb.Bool}

#: The graphs of the enclosing ``with Graph(...)`` blocks, innermost last.
_ACTIVE: list[Graph] = []


def active_graph() -> Graph | None:
    return _ACTIVE[-1] if _ACTIVE else None


class Tensor:
    """A tensor: user data (``tensor_data``, no source) or the output ``source_index`` of node ``source``."""

    def __init__(self, dims=None, name: str | None = None, data_layout: int = pb.NCHW, data_type: int | None = None,
                 data_format: int = pb.Uncompressed, tensor_data: np.ndarray | None = None,
                 alignment: int | None = None):
        what = f"Tensor '{name}'" if name else "a Tensor"
        if tensor_data is not None:
            tensor_data = np.asarray(tensor_data)
            if tensor_data.dtype not in _DTYPES:
                raise InputError(f"{what}: SMAUG cannot store dtype {tensor_data.dtype}; use one of "
                                 f"{', '.join(str(d) for d in _DTYPES)}")
            if dims is not None and [int(d) for d in dims] != list(tensor_data.shape):
                raise InputError(f"{what}: dims {list(dims)} disagree with tensor_data's shape "
                                 f"{list(tensor_data.shape)}; give one of them")
            if data_type is not None and data_type != _DTYPES[tensor_data.dtype]:
                raise InputError(f"{what}: data_type {pb.DataType.Name(data_type)} disagrees with tensor_data's "
                                 f"dtype {tensor_data.dtype}; give one of them")
            dims, data_type = tensor_data.shape, _DTYPES[tensor_data.dtype]
        if dims is None:
            raise InputError(f"{what} needs dims or tensor_data")
        if alignment is None:  # SMAUG's rule: the alignment of the graph active now (0 outside any)
            graph = active_graph()
            alignment = graph.alignment if graph is not None else 0
        self._shape = tpb.TensorShapeProto(dims=[int(d) for d in dims], layout=data_layout, alignment=alignment)
        self.name = name
        self.data_type = data_type if data_type is not None else pb.Float32
        self.data_format = data_format
        self.tensor_data = tensor_data
        self.source: Node | None = None
        self.source_index: int | None = None
        self.targets: list[Node] = []

    @property
    def graph(self) -> Graph | None:
        """The graph of the node producing this tensor (None for a free tensor)."""
        return self.source.graph if self.source is not None else None

    @property
    def shape(self) -> tpb.TensorShapeProto:
        """Dims, layout and alignment, as SMAUG's ``TensorShapeProto``."""
        return self._shape

    def dims(self, index: int) -> int:
        """The size of dimension ``index``."""
        if not -len(self._shape.dims) <= index < len(self._shape.dims):
            raise InputError(f"{self}: no dimension {index}")
        return self._shape.dims[index]

    def to_proto(self) -> tpb.TensorProto:
        return tpb.TensorProto(name=self.name, shape=self._shape, data_type=self.data_type,
                               data_format=self.data_format)

    def __repr__(self) -> str:
        return f"Tensor({self.name}, {list(self._shape.dims)}, {pb.DataLayout.Name(self._shape.layout)})"


class Node:
    """One operator: SMAUG's node (name, op, params, input and output tensors)."""

    def __init__(self, graph: Graph, name: str, op: int, params: npb.Params | None):
        self.graph, self.name, self.op, self.params = graph, name, op, params
        self.inputs: list[Tensor] = []
        self.outputs: list[Tensor] = []

    def update_input(self, tensor: Tensor, index: int) -> None:
        """Read ``tensor`` as input ``index`` instead (``cond`` routes a branch's inputs through Switches)."""
        self.inputs[index] = tensor

    def to_proto(self) -> npb.NodeProto:
        proto = npb.NodeProto(name=self.name, op=self.op)
        if self.params is not None:
            proto.params.SetInParent()
            proto.params.CopyFrom(self.params)
        for t in self.inputs:
            if t.source is not None:
                proto.parents.append(t.source.name)
                proto.src_tensors_indices.append(t.source_index)
            proto.input_tensors.append(t.to_proto())
        proto.output_tensors.extend(t.to_proto() for t in self.outputs)
        return proto


#: Input layouts each backend's kernels read (a bit set; X: any), for the ops the frontend checks.
EXPECTED_LAYOUTS = {
    "Reference": {pb.Convolution3d: [pb.NCHW, pb.NCHW], pb.MaxPooling: [pb.NCHW], pb.AveragePooling: [pb.NCHW],
                  pb.InnerProduct: [pb.NC, pb.CN], pb.BatchNorm: [pb.NCHW], pb.Softmax: [pb.NC]},
    "SMV": {pb.Convolution3d: [pb.NHWC, pb.NHWC], pb.MaxPooling: [pb.NHWC], pb.AveragePooling: [pb.NHWC],
            pb.InnerProduct: [pb.NC, pb.NC], pb.BatchNorm: [pb.NHWC], pb.Softmax: [pb.NC]},
}

#: Host memory access policies by name (``mem_policy`` also takes the enum values, sg.AllDma etc.).
MEM_POLICIES = {name: pb.HostMemoryAccessPolicy.Value(name) for name in ("AllDma", "AllAcp", "AllAcpWithDmaForWeights")}


class Graph:
    """``with Graph(name="lenet5_smv", backend="SMV") as g:`` — then build with ``nn``/``math``/``tensor``."""

    def __init__(self, name: str = "DefaultGraph", backend: str = "Reference", mem_policy: int | str = pb.AllDma):
        if backend not in layouts.BACKENDS:
            raise InputError(f"Graph '{name}': backend must be 'Reference' or 'SMV', not '{backend}'")
        policy = MEM_POLICIES.get(mem_policy, mem_policy) if isinstance(mem_policy, str) else mem_policy
        if policy not in MEM_POLICIES.values():
            raise InputError(f"Graph '{name}': mem_policy must be one of sg.{', sg.'.join(MEM_POLICIES)}, "
                             f"not {mem_policy!r}")
        self.name, self.backend, self.mem_policy = name, backend, policy
        self.alignment = layouts.ALIGNMENT[backend]
        self.layout_trans_enabled = True
        self.parent: Graph | None = None  # the graph active when this one's `with` block began
        self._names = NameScope()
        self.nodes: list[Node] = []

    def __enter__(self) -> Graph:
        self.parent = active_graph()
        _ACTIVE.append(self)
        return self

    def __exit__(self, *exc) -> None:
        _ACTIVE.pop()
        if self.parent is not None:  # a nested graph (a branch of `cond`) joins the enclosing one
            self.parent.merge(self)

    @property
    def names(self) -> NameScope:
        """Node names are unique across nested graphs (the outermost graph keeps the counters)."""
        return self.parent.names if self.parent is not None else self._names

    def lineage(self) -> list[Graph]:
        """This graph and the graphs enclosing it, innermost first."""
        return [self, *(self.parent.lineage() if self.parent is not None else [])]

    def merge(self, other: Graph) -> None:
        """Append ``other``'s nodes (a nested graph's, when its block ends)."""
        mine = {n.name for n in self.nodes}
        clash = next((n.name for n in other.nodes if n.name in mine), None)
        if clash is not None:
            raise InputError(f"graph '{other.name}' cannot join '{self.name}': both have a node '{clash}'")
        for node in other.nodes:
            node.graph = self
        self.nodes.extend(other.nodes)
        other.nodes = []

    def __repr__(self) -> str:
        return f"<smaug.Graph {self.name} ({self.backend}), {len(self.nodes)} nodes>"

    def disable_layout_transform(self) -> None:
        """Build ops on their inputs' layouts as given (no automatic Reorders)."""
        self.layout_trans_enabled = False

    def enable_layout_transform(self) -> None:
        self.layout_trans_enabled = True

    def get_node(self, name: str) -> Node | None:
        return next((n for n in self.nodes if n.name == name), None)

    def get_nodes(self) -> list[Node]:
        return self.nodes

    # -- building ------------------------------------------------------------------------------
    def add_node(self, name: str, op: int, input_tensors: list[Tensor], output_tensors_dims: list,
                 output_tensor_layout: int = pb.NCHW, output_tensor_dtype: int | None = None,
                 params: npb.Params | None = None) -> list[Tensor]:
        """Append a node (free inputs first get their Data node); returns its output tensors.
        ``output_tensor_layout`` X means the first input's layout; the dtype defaults to the first input's."""
        inputs = list(input_tensors)
        for i, t in enumerate(inputs):
            if t.graph is not None and t.graph not in self.lineage():
                raise InputError(f"{name}: input {t} belongs to graph '{t.graph.name}', not '{self.name}'")
            if t.source is None and op != pb.Data:
                inputs[i] = self.data(t)
        if output_tensor_dtype is None:
            output_tensor_dtype = inputs[0].data_type
        if output_tensor_layout == pb.X:
            output_tensor_layout = inputs[0].shape.layout
        node = Node(self, self.names.unique(name), op, params)
        self.nodes.append(node)
        if op == pb.Data:
            self._check_alignment(node.name, inputs[0])
        for i, t in enumerate(inputs):
            if t.name is None:
                t.name = f"{node.name}/input{i}"
            node.inputs.append(t)
            t.targets.append(node)
        for i, dims in enumerate(output_tensors_dims):
            out = Tensor(dims=dims, name=output_name(node.name, i), data_layout=output_tensor_layout,
                         data_type=output_tensor_dtype)
            out.shape.alignment = self.alignment
            out.source, out.source_index = node, i
            node.outputs.append(out)
        return node.outputs

    def _check_alignment(self, node: str, t: Tensor) -> None:
        """Say so when a tensor is stored unpadded where the backend's kernels read padded rows."""
        dims, alignment = t.shape.dims, t.shape.alignment
        if self.alignment and alignment != self.alignment and dims and dims[-1] % self.alignment:
            warnings.warn(f"Data node '{node}': {t} has alignment {alignment} (made outside any graph), so, as in "
                          f"SMAUG, it is stored unpadded; SMAUG's {self.backend} kernels read rows of "
                          f"{self.alignment} values and compute it wrong or abort: make the Tensor inside "
                          "`with sg.Graph(...)`", NNBridgeWarning, stacklevel=4)

    def data(self, t: Tensor, name: str = "data") -> Tensor:
        """The output of ``t``'s Data node (created on first use: its values go to the params file)."""
        for node in t.targets:
            if node.op == pb.Data and node.graph in self.lineage():
                return node.outputs[0]
        if t.tensor_data is None:
            raise InputError(f"{t} has no tensor_data for its Data node; give it data or use an op's output")
        return self.add_node(name, pb.Data, [t], [list(t.shape.dims)], t.shape.layout, t.data_type)[0]

    def to_layouts(self, op: int, tensors: list[Tensor]) -> list[Tensor]:
        """The frontend's layout check: each input whose layout the backend's kernel does not read gets
        a Reorder to the expected layout (an existing Reorder of the same tensor is reused)."""
        if not self.layout_trans_enabled:
            return list(tensors)
        expected = EXPECTED_LAYOUTS[self.backend][op]
        result = []
        for t, allowed in zip(tensors, expected):
            layout = t.shape.layout
            if not (allowed >= layout and allowed & layout):
                t = next((n.outputs[0] for n in t.targets if n.op == pb.Reorder
                          and n.outputs[0].shape.layout == allowed), None) or reorder_tensor(self, t, allowed)
            result.append(t)
        return result

    # -- outputs ---------------------------------------------------------------------------------
    @property
    def proto(self) -> gpb.GraphProto:
        return gpb.GraphProto(name=self.name, backend=self.backend, mem_policy=self.mem_policy,
                              nodes=[n.to_proto() for n in self.nodes])

    def params_file(self) -> params.ParamsFile:
        """The params entries: every input tensor holding data (Data nodes' inputs), in node order, each
        padded to its tensor's own alignment (as SMAUG's frontend: that of the graph active when the
        Tensor was made, 0 outside any graph)."""
        stored = params.ParamsFile(0, f"'{self.name}'")
        for node in self.nodes:
            for t in node.inputs:
                if t.tensor_data is not None:
                    stored.add(t.name, params.pad_last(t.tensor_data, t.shape.alignment), t.data_type)
        return stored

    def params_array(self) -> tpb.TensorDataArray:
        return self.params_file().message()

    def write_graph(self, name: str | os.PathLike | None = None) -> tuple[Path, Path]:
        """Write ``<name>_topo.pbtxt`` and ``<name>_params.pb`` as SMAUG's ``write_graph`` does: ``name``
        (default: the graph's name) is a path prefix, relative to the working directory."""
        prefix = os.fspath(name) if name is not None else self.name
        return write_files(self.proto, self.params_file(), Path(prefix + TOPO_SUFFIX), Path(prefix + PARAMS_SUFFIX))

    def to_ir(self):
        """The graph in nnbridge's IR (exportable to ONNX/LBANN, runnable on every backend)."""
        from ..converters.smaug import graph_from_proto

        return graph_from_proto(self.proto, self.params_array(), f"<smaug.Graph {self.name}>")

    def summary(self) -> str:
        from .summary import summary_text

        return summary_text(self.proto)

    def print_summary(self) -> None:
        print(self.summary(), end="")


#: Reorders SMAUG's frontend builds: source layout → target layouts.
_REORDERS = {pb.NCHW: (pb.NHWC, pb.NC), pb.NHWC: (pb.NCHW, pb.NC), pb.NTC: (pb.NCT,), pb.NCT: (pb.NTC,),
             pb.NC: (pb.CN,), pb.CN: (pb.NC,)}


def reorder_tensor(graph: Graph, t: Tensor, target: int, name: str = "reorder") -> Tensor:
    """A Reorder node: 4-D layout change, flatten of a 4-D tensor to NC, NTC↔NCT, or a 2-D transpose."""
    src, dims = t.shape.layout, list(t.shape.dims)
    if target not in _REORDERS.get(src, ()):
        raise InputError(f"{name}: SMAUG cannot reorder {pb.DataLayout.Name(src)} to "
                         f"{pb.DataLayout.Name(target) if target in pb.DataLayout.values() else target}")
    if target == pb.NC and len(dims) == 4:
        out = [dims[0], int(np.prod(dims[1:]))]
    else:
        out = layouts.permute_dims(dims, layouts.TO_IR[src], layouts.TO_IR[target])
    return graph.add_node(name, pb.Reorder, [t], [out], target)[0]


def graph_of(*tensors: Tensor | None) -> Graph:
    """The graph an op builds into: the active one if its inputs are in it or in graphs enclosing it
    (or are free), else that of its first input already in a graph (graphs built side by side)."""
    graphs = [t.graph for t in tensors if t is not None and t.graph is not None]
    active = active_graph()
    if active is not None and all(g in active.lineage() for g in graphs):
        return active
    if graphs:
        return graphs[0]
    raise InputError("no graph to build into: build inside `with sg.Graph(...)` "
                     "(or start from input_data(tensor, graph=g))")


def input_data(input_tensor: Tensor, name: str = "data", graph: Graph | None = None) -> Tensor:
    """Start a network: a Data node for ``input_tensor`` in the active graph (or ``graph``)."""
    if not isinstance(name, str):
        raise InputError(f"input_data: name must be a string, not {type(name).__name__} "
                         "(the graph is the active one, or pass graph=...)")
    graph = graph if graph is not None else graph_of(input_tensor)
    if input_tensor.source is not None:
        raise InputError(f"input_data: {input_tensor} is already the output of node '{input_tensor.source.name}'")
    if input_tensor.tensor_data is None:
        raise InputError(f"input_data: {input_tensor} has no tensor_data")
    return graph.add_node(name, pb.Data, [input_tensor], [list(input_tensor.shape.dims)],
                          input_tensor.shape.layout, input_tensor.data_type)[0]
