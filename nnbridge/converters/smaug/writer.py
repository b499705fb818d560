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
from google.protobuf.message import DecodeError

from ...base.errors import FormatError, UnsupportedOpError
from ...ir import Graph, op_traits
from ...ir.decompositions import Target
from ...ir.feeds import match_inputs
from ...protos.smaug import smaug_graph_pb2 as gpb
from ...protos.smaug import smaug_node_pb2 as npb
from ...protos.smaug import smaug_types_pb2 as pb
from . import export_control, export_rnn, export_tensor, layouts, params, smv_rules  # noqa: F401 - add to EXPORTERS
from .export_ops import EXPORTERS
from .exporter import SMV_TILER, Exporter
from .files import write_model
from .import_ops import FUSES_ACTIVATION, RUNTIME_DEFAULTS
from .importer import IGNORED_PARAMS_KEY, NODE_ORDER_KEY, TENSOR_NAMES_KEY, TENSOR_TYPES_KEY

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
    pending = {name: (array, data_type, None) for name, array, data_type in ex.pending}
    _keep_file_details(ex.proto, graph, backend, pending)
    if backend == "SMV":
        _add_smv_refusals(ex, graph, check_range)
    if ex.unsupported:
        raise UnsupportedOpError(f"SMAUG ({backend})", ex.unsupported)
    if NODE_ORDER_KEY in graph.metadata:
        keep_file_order(ex.proto, graph.metadata[NODE_ORDER_KEY].split("\n"))
    stored = params.ParamsFile(ex.alignment, f"'{graph.name}'")
    for node in ex.proto.nodes:  # params entries in Data-node order
        if node.op == pb.Data:
            stored.add(node.input_tensors[0].name, *pending[node.input_tensors[0].name])
    return ex.proto, stored


def _keep_file_details(proto: gpb.GraphProto, graph: Graph, backend: str, pending: dict) -> None:
    """What the file ``graph`` was loaded from had and the exporter does not derive: tensor names,
    tensor storage (for the same backend only), the params the runtime ignores."""
    keep_tensor_names(proto, graph.metadata.get(TENSOR_NAMES_KEY, ""), pending)
    if graph.metadata.get("smaug.backend") == backend:
        keep_tensor_types(proto, graph.metadata.get(TENSOR_TYPES_KEY, ""), pending)
    keep_ignored_params(proto, graph.metadata.get(IGNORED_PARAMS_KEY, ""))


def _add_smv_refusals(ex: Exporter, graph: Graph, check_range: bool) -> None:
    """Refuse what the real SMV runtime would compute wrong: the file's hazards, the tiler's
    refusals of nodes not already refused, and (only if nothing else is refused) fp16 overflow."""
    ex.unsupported += smv_rules.hazards(ex.proto)
    if SMV_TILER:
        seen = {(u.op, u.node) for u in ex.unsupported}
        ex.unsupported += [u for u in SMV_TILER[0].refusals(graph) if (u.op, u.node) not in seen]
    if not ex.unsupported and check_range:
        ex.unsupported += smv_rules.fp16_overflow(graph, ex.stored_inputs, ((n, a) for n, a, _ in ex.pending))


def _tensors(proto: gpb.GraphProto):
    for node in proto.nodes:
        yield from node.input_tensors
        yield from node.output_tensors


def keep_tensor_names(proto: gpb.GraphProto, lines: str, pending: dict) -> None:
    """Tensors get back the names the file they were loaded from gave them (``TENSOR_NAMES_KEY``), in
    every node that reads them and in the params, where the name is not another tensor's."""
    names = dict(line.split("\t", 1) for line in lines.split("\n") if "\t" in line)
    if not names:
        return
    present = {t.name for t in _tensors(proto)}
    names = {rule: name for rule, name in names.items() if rule in present}
    staying = present - set(names)
    names = {rule: name for rule, name in names.items() if name not in staying}
    for t in _tensors(proto):
        t.name = names.get(t.name, t.name)
    for rule, name in names.items():
        if rule in pending:
            pending[name] = pending.pop(rule)


def keep_ignored_params(proto: gpb.GraphProto, lines: str) -> None:
    """Parameters the runtime ignores come back as the file had them (``IGNORED_PARAMS_KEY``): a
    standalone LReLU/ELU/SELU/HardTanh's (written with the runtime's constants, which it computes
    either way), a fused Softmax the runtime drops (written unfused, as the IR computes it)."""
    kept = dict(line.split("\t", 1) for line in lines.split("\n") if "\t" in line)
    for node in proto.nodes:
        text = kept.get(node.name)
        if text is None:
            continue
        try:
            raw = b"" if text == "-" else bytes.fromhex(text)
            if node.op in RUNTIME_DEFAULTS:
                params_ = npb.Params.FromString(raw)
                if text == "-":
                    node.ClearField("params")
                else:
                    node.params.CopyFrom(params_)
            elif node.op in FUSES_ACTIVATION and node.params.act_params.activation == pb.UnknownOp:
                act = npb.ActivationParams.FromString(raw)
                if act.activation == pb.Softmax:
                    node.params.act_params.CopyFrom(act)
        except (ValueError, DecodeError):  # metadata edited by hand: the writer's own params stand
            continue


def keep_tensor_types(proto: gpb.GraphProto, lines: str, pending: dict) -> None:
    """Tensors get back the storage the file gave them (``TENSOR_TYPES_KEY``): its float type (the
    values are converted), a layout label that does not fit the rank, an alignment of its own."""
    kept = {}
    for line in lines.split("\n"):
        fields = line.split("\t")
        if len(fields) == 4 and fields[1] in pb.DataType.keys() and fields[2] in pb.DataLayout.keys() \
                and fields[3].isdigit():
            kept[fields[0]] = (pb.DataType.Value(fields[1]), pb.DataLayout.Value(fields[2]), int(fields[3]))
    if not kept:
        return
    for t in _tensors(proto):
        if t.name not in kept:
            continue
        data_type, layout, alignment = kept[t.name]
        if t.data_type in params.FLOATS and data_type in params.FLOATS:
            t.data_type = data_type
        written = layouts.TO_IR.get(t.shape.layout)
        if layout in layouts.TO_IR and written == layouts.layout_for_rank(layouts.TO_IR[layout], len(t.shape.dims)):
            t.shape.layout = layout
        t.shape.alignment = alignment
    for name, (array, data_type, _) in list(pending.items()):
        if name in kept:
            kind = kept[name][0] if data_type in params.FLOATS and kept[name][0] in params.FLOATS else data_type
            pending[name] = (array, kind, kept[name][2])


def keep_file_order(proto: gpb.GraphProto, order: list[str]) -> None:
    """Nodes in the order of the file the graph was loaded from (the runtime sorts nodes itself, so
    only the text changes): that very order when every node comes from the file (SMAUG's ``cond``
    lists a branch's ops before the Switches they read), else a topological order that takes file
    positions first, a new node keeping its place after the node emitted before it."""
    position = {name: i for i, name in enumerate(order)}
    if all(node.name in position for node in proto.nodes):
        _reorder_nodes(proto, sorted(proto.nodes, key=lambda node: position[node.name]))
        return
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
        _reorder_nodes(proto, nodes)


def _reorder_nodes(proto: gpb.GraphProto, nodes: list[npb.NodeProto]) -> None:
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
