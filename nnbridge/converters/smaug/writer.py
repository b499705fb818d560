"""IR → SMAUG files for one backend (``Reference`` or ``SMV``).

The writer walks the IR in topological order with an :class:`~.exporter.Exporter` over the
per-op table of ``export_ops`` (its siblings ``export_tensor`` and ``export_rnn`` add to it). So
SMAUG → IR → SMAUG gives back the original files, and ONNX → SMAUG gives SMAUG-native files.
"""

from __future__ import annotations

import heapq
import os
from collections import Counter
from collections.abc import Mapping
from typing import Any

import numpy as np

from ...base.errors import FormatError, UnsupportedOpError
from ...ir import Graph, op_traits
from ...ir.decompositions import Target
from ...ir.feeds import match_inputs
from ...protos.smaug import smaug_graph_pb2 as gpb
from ...protos.smaug import smaug_node_pb2 as npb
from ...protos.smaug import smaug_types_pb2 as pb
from . import export_rnn, export_tensor, layouts, params, smv_rules  # noqa: F401 - both add to EXPORTERS
from .export_ops import EXPORTERS
from .exporter import SMV_TILER, Exporter
from .files import write_model
from .importer import DATA_TENSOR_NAMES_KEY, NODE_ORDER_KEY
from .naming import data_input_name

MEM_POLICIES = {"AllDma": pb.AllDma, "AllAcp": pb.AllAcp, "AllAcpWithDmaForWeights": pb.AllAcpWithDmaForWeights}


def graph_to_smaug(graph: Graph, backend: str = "SMV", *, mem_policy: str = "AllDma",
                   inputs: dict[str, np.ndarray] | None = None,
                   check_range: bool = True) -> tuple[gpb.GraphProto, params.ParamsFile]:
    """The two SMAUG messages for ``graph``; raises one error listing every inexpressible node.

    On SMV the graph is run once on the stored input to refuse values beyond fp16's range
    (``check_range=False`` writes such files anyway: SMAUG then computes inf/NaN)."""
    if backend not in layouts.BACKENDS:
        raise FormatError(f"smaug_backend must be 'Reference' or 'SMV', not '{backend}'")
    if mem_policy not in MEM_POLICIES:
        raise FormatError(f"smaug_mem_policy must be one of {', '.join(MEM_POLICIES)}, not '{mem_policy}'")
    match_inputs(graph, inputs or {})
    ex = Exporter(graph, backend, MEM_POLICIES[mem_policy], dict(inputs or {}))
    ex.run(EXPORTERS)
    if backend == "SMV":
        ex.unsupported += smv_rules.hazards(ex.proto)
    if backend == "SMV" and SMV_TILER:
        seen = {(u.op, u.node) for u in ex.unsupported}
        ex.unsupported += [u for u in SMV_TILER[0].refusals(graph) if (u.op, u.node) not in seen]
    if backend == "SMV" and not ex.unsupported and check_range:
        ex.unsupported += smv_rules.fp16_overflow(graph, ex.stored_inputs, ((n, a) for n, a, _ in ex.pending))
    if ex.unsupported:
        raise UnsupportedOpError(f"SMAUG ({backend})", ex.unsupported)
    if NODE_ORDER_KEY in graph.metadata:
        keep_file_order(ex.proto, graph.metadata[NODE_ORDER_KEY].split("\n"))
    pending = {name: (array, data_type) for name, array, data_type in ex.pending}
    keep_data_tensor_names(ex.proto, graph.metadata.get(DATA_TENSOR_NAMES_KEY, ""), pending)
    stored = params.ParamsFile(ex.alignment, f"'{graph.name}'")
    for node in ex.proto.nodes:  # params entries in Data-node order
        if node.op == pb.Data:
            stored.add(node.input_tensors[0].name, *pending[node.input_tensors[0].name])
    return ex.proto, stored


def keep_data_tensor_names(proto: gpb.GraphProto, lines: str, pending: dict) -> None:
    """Data tensors get back the names the file they were loaded from gave them (where a name is free)."""
    names = dict(line.split("\t", 1) for line in lines.split("\n") if "\t" in line)
    taken = {t.name for node in proto.nodes for t in [*node.input_tensors, *node.output_tensors]}
    for node in proto.nodes:
        if node.op != pb.Data or node.name not in names or names[node.name] in taken:
            continue
        tensor = node.input_tensors[0]
        if tensor.name == data_input_name(node.name) and tensor.name in pending:
            pending[names[node.name]] = pending.pop(tensor.name)
            tensor.name = names[node.name]
            taken.add(tensor.name)


def keep_file_order(proto: gpb.GraphProto, order: list[str]) -> None:
    """Nodes in the order of the file the graph was loaded from (the runtime sorts nodes itself, so
    only the text changes): a topological order that takes file positions first; a new node keeps
    its place after the node emitted before it."""
    position = {name: i for i, name in enumerate(order)}
    keys, last = [], -1.0
    for i, node in enumerate(proto.nodes):
        last = float(position[node.name]) if node.name in position else last + 1e-6
        keys.append((last, i))
    index = {node.name: i for i, node in enumerate(proto.nodes)}
    waiting = [len({p for p in node.parents if p in index}) for node in proto.nodes]
    users: dict[str, list[int]] = {}
    for i, node in enumerate(proto.nodes):
        for parent in dict.fromkeys(node.parents):
            users.setdefault(parent, []).append(i)
    ready = [keys[i] for i, count in enumerate(waiting) if count == 0]
    heapq.heapify(ready)
    nodes = []
    while ready:
        _, i = heapq.heappop(ready)
        nodes.append(proto.nodes[i])
        for user in users.get(proto.nodes[i].name, []):
            waiting[user] -= 1
            if waiting[user] == 0:
                heapq.heappush(ready, keys[user])
    if len(nodes) == len(proto.nodes):
        copies = [npb.NodeProto() for _ in nodes]
        for copy, node in zip(copies, nodes):
            copy.CopyFrom(node)
        del proto.nodes[:]
        proto.nodes.extend(copies)


#: Passes that turn an imported ONNX graph into one SMAUG can store: weights computed by
#: ConstantOfShape/Shape chains become constants; Dropout/Identity disappear.
PREPARE_PASSES = ["fold", "eliminate", "infer-shapes"]


#: SMAUG's rows of the decompositions table (ir/decompositions.py)
TARGET = Target("smaug")


def prepare(graph: Graph, options: Mapping[str, Any] | None = None) -> tuple[Graph, Counter]:
    """A folded copy of ``graph`` rewritten into ops SMAUG has (the caller's graph is never
    changed; returned as it is when nothing applies), and the rewrites per op."""
    from ... import passes  # noqa: F401 - registers the passes
    from ...passes import run_passes
    from ...passes.decompose import decompose

    foldable = any(n.op in ("ConstantOfShape", "Shape", "Constant", "Identity", "Dropout", "Unsqueeze",
                            "Squeeze", "Cast") for n in graph.nodes)
    if not foldable and not any(TARGET.name in op_traits(n.op, n.domain).decompositions for n in graph.nodes):
        return graph, Counter()
    graph = graph.copy()
    if foldable:
        run_passes(graph, PREPARE_PASSES)
    return graph, decompose(graph, TARGET)


def save_smaug(graph: Graph, path: str | os.PathLike, *, smaug_backend: str | None = None,
               smaug_mem_policy: str | None = None, smaug_inputs: dict[str, np.ndarray] | None = None,
               smaug_allow_overflow: bool = False, **_other_formats_options) -> tuple[str, str]:
    """Write ``<name>_topo.pbtxt`` and ``<name>_params.pb`` (both or neither).

    The backend defaults to the one the graph was loaded from (metadata ``smaug.backend``),
    else SMV. Network inputs are stored with ``smaug_inputs`` or SMAUG's random-data recipe.
    SMV files whose stored input overflows fp16 are refused unless ``smaug_allow_overflow``.
    """
    backend = smaug_backend or graph.metadata.get("smaug.backend") or "SMV"
    policy = smaug_mem_policy or graph.metadata.get("smaug.mem_policy") or "AllDma"
    graph, _ = prepare(graph)
    proto, array = graph_to_smaug(graph, backend, mem_policy=policy, inputs=smaug_inputs,
                                  check_range=not smaug_allow_overflow)
    topo, par = write_model(proto, array, path)
    return str(topo), str(par)
