"""The builder state: ``Graph`` (a SMAUG GraphProto under construction) and ``Tensor``.

Unlike SMAUG's frontend there is no global "active graph": ops find their graph
through their input tensors (a tensor produced by an op belongs to that op's
graph) and ``input_data`` is given the graph explicitly, so several graphs can
be built side by side. The rules reproduced are the frontend's (specs/
smaug-format.md §3.2, §5.2): a Data node is created right before the first op
that consumes a free tensor, each op converts its inputs to the layouts the
backend expects by inserting (or reusing) Reorder nodes, names are made unique
with per-base counters, and every tensor gets the backend's alignment.
"""

from __future__ import annotations

import os
from pathlib import Path

import numpy as np

from ..converters.smaug import layouts, params
from ..converters.smaug.files import write_model
from ..converters.smaug.naming import NameScope, data_input_name, output_name
from ..errors import InputError
from ..ir import Layout
from ..protos.smaug import smaug_graph_pb2 as gpb
from ..protos.smaug import smaug_node_pb2 as npb
from ..protos.smaug import smaug_tensor_pb2 as tpb
from ..protos.smaug import smaug_types_pb2 as pb

MEM_POLICIES = {"AllDma": pb.AllDma, "AllAcp": pb.AllAcp, "AllAcpWithDmaForWeights": pb.AllAcpWithDmaForWeights}
_DTYPES = {np.dtype(np.float16): pb.Float16, np.dtype(np.float32): pb.Float32, np.dtype(np.float64): pb.Float64,
           np.dtype(np.int32): pb.Int32, np.dtype(np.int64): pb.Int64, np.dtype(np.bool_): pb.Bool}


class Tensor:
    """A tensor: user data (``tensor_data``) or the output of an op (``source``)."""

    def __init__(self, dims=None, name: str | None = None, data_layout: int = pb.NCHW,
                 data_type: int | None = None, tensor_data: np.ndarray | None = None):
        if tensor_data is not None:
            tensor_data = np.asarray(tensor_data)
            dims = tensor_data.shape if dims is None else dims
            if data_type is None:
                if tensor_data.dtype not in _DTYPES:
                    raise InputError(f"tensor '{name}': SMAUG cannot store dtype {tensor_data.dtype}")
                data_type = _DTYPES[tensor_data.dtype]
        if dims is None:
            raise InputError("a Tensor needs dims or tensor_data")
        self.dims = [int(d) for d in dims]
        self.name = name
        self.data_layout = data_layout
        self.data_type = data_type if data_type is not None else pb.Float32
        self.tensor_data = tensor_data
        self.source: tuple[Graph, str, int] | None = None  # (graph, node name, output index)

    @property
    def shape(self) -> list[int]:
        return list(self.dims)

    @property
    def layout(self) -> Layout:
        return layouts.TO_IR[self.data_layout]

    def __repr__(self) -> str:
        return f"Tensor({self.name}, {self.dims}, {pb.DataLayout.Name(self.data_layout)})"


class Graph:
    """``with Graph(name="lenet5_smv", backend="SMV") as g:`` — then build with ``nn``/``math``/``tensor``."""

    def __init__(self, name: str = "DefaultGraph", backend: str = "Reference", mem_policy: str = "AllDma"):
        if backend not in layouts.BACKENDS:
            raise InputError(f"backend must be 'Reference' or 'SMV', not '{backend}'")
        if mem_policy not in MEM_POLICIES:
            raise InputError(f"mem_policy must be one of {', '.join(MEM_POLICIES)}")
        self.proto = gpb.GraphProto(name=name, backend=backend, mem_policy=MEM_POLICIES[mem_policy])
        self.backend = backend
        self.alignment = layouts.ALIGNMENT[backend]
        self.names = NameScope()
        self.values: list[tuple[str, np.ndarray, int]] = []  # params entries in Data-node order
        self.reorders: dict[tuple[str, int, int], Tensor] = {}

    def __enter__(self) -> Graph:
        return self

    def __exit__(self, *exc) -> None:
        return None

    @property
    def name(self) -> str:
        return self.proto.name

    # -- nodes ---------------------------------------------------------------------------------
    def proto_of(self, t: Tensor) -> tpb.TensorProto:
        """A tensor as its consumers record it (the producer's output tensor)."""
        _, node, index = t.source
        return next(n for n in self.proto.nodes if n.name == node).output_tensors[index]

    def tensor_proto(self, name: str, dims, layout: int, data_type: int) -> tpb.TensorProto:
        t = tpb.TensorProto(name=name, data_type=data_type, data_format=pb.Uncompressed)
        t.shape.dims.extend(int(d) for d in dims)
        t.shape.layout = layout
        t.shape.alignment = self.alignment
        return t

    def data(self, t: Tensor, name: str = "data") -> Tensor:
        """Wrap a free tensor in a Data node (its values go to the params file)."""
        if t.source is not None:
            raise InputError(f"{t} already belongs to a graph")
        if t.tensor_data is None:
            raise InputError(f"tensor '{t.name}' has no data for its Data node")
        node_name = self.names.unique(t.name or name)
        node = self.proto.nodes.add(name=node_name, op=pb.Data)
        node.input_tensors.add().CopyFrom(self.tensor_proto(data_input_name(node_name), t.dims, t.data_layout,
                                                            t.data_type))
        node.output_tensors.add().CopyFrom(self.tensor_proto(output_name(node_name), t.dims, t.data_layout,
                                                             t.data_type))
        self.values.append((data_input_name(node_name), t.tensor_data, t.data_type))
        t.source = (self, node_name, 0)
        return t

    def operand(self, t: Tensor) -> Tensor:
        if t.source is None:
            return self.data(t)
        if t.source[0] is not self:
            raise InputError(f"{t} belongs to graph '{t.source[0].name}', not '{self.name}'")
        return t

    def add_node(self, op: int, name: str, inputs: list[Tensor], outputs: list[tuple[list[int], int]],
                 *, data_type: int | None = None) -> tuple[npb.NodeProto, list[Tensor]]:
        """Append a node; ``outputs`` are (dims, layout) pairs; returns the node and output tensors."""
        inputs = [self.operand(t) for t in inputs]
        node_name = self.names.unique(name)
        node = self.proto.nodes.add(name=node_name, op=op)
        for t in inputs:
            node.parents.append(t.source[1])
            node.src_tensors_indices.append(t.source[2])
            node.input_tensors.add().CopyFrom(self.proto_of(t))
        dtype = data_type if data_type is not None else (inputs[0].data_type if inputs else pb.Float32)
        results = []
        for k, (dims, layout) in enumerate(outputs):
            node.output_tensors.add().CopyFrom(self.tensor_proto(output_name(node_name, k), dims, layout, dtype))
            out = Tensor(dims, output_name(node_name, k), layout, dtype)
            out.source = (self, node_name, k)
            results.append(out)
        return node, results

    def to_layout(self, t: Tensor, allowed: int, target: int) -> Tensor:
        """The frontend's check: a tensor whose layout is not in ``allowed`` gets a Reorder to ``target``
        (an existing Reorder of the same tensor to the same layout is reused)."""
        t = self.operand(t)
        if t.data_layout & allowed:
            return t
        key = (t.source[1], t.source[2], target)
        if key not in self.reorders:
            self.reorders[key] = reorder_tensor(self, t, target)
        return self.reorders[key]

    # -- outputs ---------------------------------------------------------------------------------
    def params_file(self) -> params.ParamsFile:
        stored = params.ParamsFile(self.alignment, f"'{self.name}'")
        for name, values, data_type in self.values:
            stored.add(name, values, data_type)
        return stored

    def params_array(self) -> tpb.TensorDataArray:
        return self.params_file().message()

    def write_graph(self, path: str | os.PathLike | None = None) -> tuple[Path, Path]:
        """Write ``<name>_topo.pbtxt`` and ``<name>_params.pb`` (into ``path`` if it is a directory)."""
        target = Path(path) if path is not None else Path(".")
        if path is None or target.is_dir():
            target = target / self.name
        return write_model(self.proto, self.params_file(), target)

    def to_ir(self):
        """The graph in nnbridge's IR (exportable to ONNX/LBANN, runnable on every backend)."""
        from ..converters.smaug import graph_from_proto

        return graph_from_proto(self.proto, self.params_array(), f"<smaug.Graph {self.name}>")

    def summary(self) -> str:
        from .summary import summary_text

        return summary_text(self.proto)

    def print_summary(self) -> None:
        print(self.summary(), end="")


def reorder_tensor(graph: Graph, t: Tensor, target: int, name: str = "reorder") -> Tensor:
    """A Reorder node (layout change, flatten to NC, or 2-D transpose) of ``t``."""
    src, dst = layouts.TO_IR[t.data_layout], layouts.TO_IR[target]
    if not layouts.reorder_supported(src, dst):
        raise InputError(f"SMAUG cannot reorder {src.value} to {dst.value}")
    if len(t.dims) == 4 and dst in (Layout.NC, Layout.CN):
        dims = [t.dims[0], int(np.prod(t.dims[1:]))]
    else:
        dims = layouts.permute_dims(t.dims, src, dst)
    return graph.add_node(pb.Reorder, name, [t], [(dims, target)])[1][0]


def graph_of(*tensors: Tensor) -> Graph:
    """The graph an op belongs to: that of its first input produced inside a graph."""
    for t in tensors:
        if t is not None and t.source is not None:
            return t.source[0]
    raise InputError("an op needs at least one input from a graph (start with input_data(tensor, graph))")


def input_data(tensor: Tensor, graph: Graph, name: str = "data") -> Tensor:
    """Start a network: wrap ``tensor`` in a Data node of ``graph``."""
    return graph.data(tensor, name)
