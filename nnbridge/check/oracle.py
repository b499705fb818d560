"""onnxruntime as the oracle: sessions, whole-model runs, intermediates exposed, single nodes.

onnxruntime runs with all graph optimisations disabled (specs/passes.md §10), so the
oracle is the model as written. ``expose`` marks intermediate values as graph outputs
(polygraphy's "mark all"), and ``node_model`` cuts one node out of a model so that it
can be re-run on another runtime's inputs (the node's own error, free of what came before).
"""

from __future__ import annotations

import os
import re
from collections.abc import Iterable, Mapping
from typing import Any

import numpy as np
from onnx import ModelProto, NodeProto, helper

from ..api.threads import current_threads
from ..base.errors import NNBridgeError
from ..ir import Graph


def oracle_model(model: Any, graph: Graph) -> ModelProto:
    """The ModelProto onnxruntime should run: the user's own file where there is one."""

    if isinstance(model, ModelProto):
        return model
    if isinstance(model, str) or hasattr(model, "__fspath__"):
        path = os.fspath(model)
        if path.lower().endswith(".onnx"):
            return _read_leaving_external_data(path)
    from ..converters.onnx import graph_to_model

    return graph_to_model(graph)


#: metadata key of an oracle model read without its external data: the folder that data lives in
EXTERNAL_FOLDER_KEY = "nnbridge.oracle.external_data_folder"


def _read_leaving_external_data(path: str) -> ModelProto:
    """The model in ``path`` with weights kept in external data left in their files, whose folder
    the model notes: onnxruntime maps them itself, so a 2 GB model is neither read into this
    process nor written out again for the session (nnbridge's reader vetted the paths)."""
    import onnx

    from ..converters.onnx.vetting import has_external

    proto = onnx.load(path, load_external_data=False)
    if has_external(proto):
        proto.metadata_props.add(key=EXTERNAL_FOLDER_KEY, value=os.path.dirname(os.path.abspath(path)))
    return proto


def external_folder(model: ModelProto) -> str | None:
    """Where ``model``'s external data lives, if it was read without it (``oracle_model``)."""
    return next((p.value for p in model.metadata_props if p.key == EXTERNAL_FOLDER_KEY), None)


def ort_session(model: ModelProto, level: str = "ORT_DISABLE_ALL", optimized_path: str | None = None):
    """An onnxruntime session; models newer than its IR version are relabelled to its newest."""
    import onnxruntime as ort

    options = ort.SessionOptions()
    options.graph_optimization_level = getattr(ort.GraphOptimizationLevel, level)
    options.log_severity_level = 4  # errors reach the caller as exceptions; keep stderr quiet
    threads = current_threads()
    if threads is not None:  # the same count as the reference backend's BLAS (nnbridge.api.threads)
        options.intra_op_num_threads = threads
        options.inter_op_num_threads = 1
    if optimized_path:
        options.optimized_model_filepath = optimized_path
    folder = external_folder(model)
    if folder is not None:
        options.add_session_config_entry("session.model_external_initializers_file_folder_path", folder)
    try:
        return _session(model, options)
    except Exception as exc:
        found = re.search(r"max supported IR version: (\d+)", str(exc))
        if not found:
            raise
        relabelled = ModelProto()
        relabelled.CopyFrom(model)
        relabelled.ir_version = int(found.group(1))
        return _session(relabelled, options)


#: protobuf cannot serialise a message of 2 GiB or more
_PROTO_LIMIT = 2**31 - 2**20


def _session(model: ModelProto, options: Any):
    """A session from the model's bytes, or, at 2 GiB and over, from a temporary copy whose
    weights are external data (onnxruntime reads them while the session is built)."""
    import shutil
    import tempfile

    import onnx
    import onnxruntime as ort

    if model.ByteSize() < _PROTO_LIMIT:
        return ort.InferenceSession(model.SerializeToString(), options, providers=["CPUExecutionProvider"])
    folder = tempfile.mkdtemp(prefix="nnbridge-oracle-")
    try:
        path = f"{folder}/model.onnx"
        copy = ModelProto()
        copy.CopyFrom(model)
        onnx.save_model(copy, path, save_as_external_data=True, all_tensors_to_one_file=True,
                        location="model.onnx.data", size_threshold=1024)
        return ort.InferenceSession(path, options, providers=["CPUExecutionProvider"])
    finally:
        shutil.rmtree(folder, ignore_errors=True)


def run_onnxruntime(model: ModelProto, feeds: Mapping[str, np.ndarray]) -> dict[str, np.ndarray]:
    try:
        session = ort_session(model)
        names = [o.name for o in session.get_outputs()]
        wanted = {i.name for i in session.get_inputs()}
        values = session.run(names, {k: v for k, v in feeds.items() if k in wanted})
    except Exception as exc:
        raise NNBridgeError(f"onnxruntime (the oracle) cannot run this model: {str(exc).strip()[:300]}") from None
    return dict(zip(names, values))


def expose(model: ModelProto, names: Iterable[str] | None = None) -> ModelProto:
    """A copy of ``model`` whose graph also outputs ``names`` (default: every node output)."""
    exposed = ModelProto()
    exposed.CopyFrom(model)
    have = {o.name for o in exposed.graph.output}
    if names is None:
        names = [n for node in model.graph.node for n in node.output if n]
    for name in names:
        if name not in have:
            exposed.graph.output.add(name=name)  # untyped: onnxruntime takes the inferred type
            have.add(name)
    return exposed


def node_model(model: ModelProto, node: NodeProto, feeds: Mapping[str, np.ndarray]) -> ModelProto | None:
    """``node`` alone as a model: ``feeds`` become its inputs, ``model``'s initializers its weights.

    None when the node has a subgraph (it may read outer-scope values) or an input that is
    neither fed nor an initializer."""
    if any(a.type in (a.GRAPH, a.GRAPHS) for a in node.attribute):
        return None
    weights = {t.name: t for t in model.graph.initializer}
    inputs, initializers = [], []
    for name in dict.fromkeys(n for n in node.input if n):
        if name in feeds:
            value = np.asarray(feeds[name])
            inputs.append(helper.make_tensor_value_info(name, helper.np_dtype_to_tensor_dtype(value.dtype),
                                                        list(value.shape)))
        elif name in weights:
            initializers.append(weights[name])
        else:
            return None
    graph = helper.make_graph([node], f"{node.name or node.op_type}_alone", inputs,
                              [helper.make_empty_tensor_value_info(n) for n in node.output if n], initializers)
    single = helper.make_model(graph, opset_imports=list(model.opset_import))
    single.ir_version = model.ir_version
    single.metadata_props.extend(p for p in model.metadata_props if p.key == EXTERNAL_FOLDER_KEY)
    for f in model.functions:
        single.functions.append(f)
    return single
