"""The third opinion: the oracle's model cast to float64 and run by onnxruntime, or by
``onnx.reference`` where onnxruntime has no double kernel (Conv, Erf, Resize, …).

``check`` asks for it only when an output fails the table's rule, to tell a backend that is
worse than onnxruntime from one that is as accurate where float32 itself is not (a sigmoid
of −14 has no relative precision in float32, onnxruntime's included): docs/check.md.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Mapping
from dataclasses import replace
from typing import Any

import ml_dtypes
import numpy as np
from onnx import AttributeProto, GraphProto, ModelProto, NodeProto, TensorProto, TypeProto, helper, numpy_helper
from onnx.external_data_helper import load_external_data_for_model

from ..base.errors import NNBridgeError
from .oracle import external_folder, ort_session
from .verdict import OutputCheck, Rule, against_exact, joined, retryable

#: element types made float64
_NARROW = {TensorProto.FLOAT, TensorProto.FLOAT16, TensorProto.BFLOAT16}
#: attributes that name an element type (Cast's ``to``; RandomNormal's, EyeLike's … ``dtype``)
_TYPE_ATTRS = ("to", "dtype")
#: numpy float types fed as float64
_NARROW_NUMPY = {np.dtype(np.float32), np.dtype(np.float16), np.dtype(ml_dtypes.bfloat16)}


def float64_model(model: ModelProto) -> ModelProto:
    """A copy of ``model`` whose float tensors, types and casts are all float64."""
    wide = ModelProto()
    wide.CopyFrom(model)
    folder = external_folder(wide)
    if folder is not None:  # read without its external data (oracle_model): the widened copy holds it
        load_external_data_for_model(wide, folder)
    _widen_graph(wide.graph)
    for function in wide.functions:
        _widen_nodes(function.node)
    return wide


def judged_against_float64(checks: list[OutputCheck], actual: Mapping[str, Any], expected: Mapping[str, Any],
                           rule: Rule, model: ModelProto, feeds: Mapping[str, Any],
                           nonfinite_ok: Callable[[str], bool]) -> list[OutputCheck]:
    """``checks`` (of ``model``'s values run on ``feeds``), those that fail ``rule`` judged again against
    the model's float64 evaluation; it runs only when one fails. A model that cannot be evaluated in
    float64 leaves the verdicts, with the reason in their notes."""
    if not any(retryable(c, rule) for c in checks):
        return checks
    try:
        exact, evaluator = run_float64(model, feeds)
    except NNBridgeError as exc:
        return [replace(c, note=joined(c.note, str(exc))) if retryable(c, rule) else c for c in checks]
    return [against_exact(c, actual[c.name], expected[c.name], exact[c.name], rule, evaluator, nonfinite_ok(c.name))
            if c.name in exact else c for c in checks]


def run_float64(model: ModelProto, feeds: Mapping[str, Any]) -> tuple[dict[str, Any], str]:
    """The float64 evaluation of ``model`` on ``feeds`` and the runtime that made it.

    Raises NNBridgeError when neither onnxruntime nor onnx.reference can run it."""
    try:
        wide = float64_model(model)
    except Exception as exc:  # e.g. weights in external data that was not loaded
        raise NNBridgeError(f"no float64 evaluation: the model cannot be cast ({_first_line(exc)})") from None
    wide_feeds = {k: _widen_value(v) for k, v in feeds.items()}
    try:
        session = ort_session(wide)
    except Exception as ort_error:
        return _run_reference(wide, wide_feeds, ort_error), "onnx.reference"
    names = [o.name for o in session.get_outputs()]
    wanted = {i.name for i in session.get_inputs()}
    try:
        values = session.run(names, {k: v for k, v in wide_feeds.items() if k in wanted})
    except Exception as exc:
        raise NNBridgeError(f"the float64 evaluation failed in onnxruntime: {_first_line(exc)}") from None
    return dict(zip(names, values)), "onnxruntime"


def _run_reference(model: ModelProto, feeds: Mapping[str, Any], ort_error: Exception) -> dict[str, Any]:
    from onnx.reference import ReferenceEvaluator

    try:
        evaluator = ReferenceEvaluator(model)
        wanted = set(evaluator.input_names)
        values = evaluator.run(None, {k: v for k, v in feeds.items() if k in wanted})
    except Exception as exc:
        raise NNBridgeError(f"no float64 evaluation: onnxruntime ({_first_line(ort_error)}) and onnx.reference "
                            f"({_first_line(exc)}) cannot run the model in float64") from None
    return dict(zip(evaluator.output_names, values))


def _first_line(exc: Exception) -> str:
    text = str(exc).strip().splitlines()
    return (text[0] if text else type(exc).__name__)[:200]


def _widen_value(value: Any) -> Any:
    if isinstance(value, (list, tuple)):
        return [_widen_value(v) for v in value]
    if isinstance(value, (np.ndarray, np.generic)) and value.dtype in _NARROW_NUMPY:
        return np.asarray(value, np.float64)
    return value


def _widen_graph(graph: GraphProto) -> None:
    for info in (*graph.input, *graph.output, *graph.value_info):
        _widen_type(info.type)
    for tensor in graph.initializer:
        _widen_tensor(tensor)
    for sparse in graph.sparse_initializer:
        _widen_tensor(sparse.values)
    _widen_nodes(graph.node)


def _widen_type(t: TypeProto) -> None:
    kind = t.WhichOneof("value")
    if kind in ("tensor_type", "sparse_tensor_type"):
        inner = getattr(t, kind)
        if inner.elem_type in _NARROW:
            inner.elem_type = TensorProto.DOUBLE
    elif kind == "sequence_type":
        _widen_type(t.sequence_type.elem_type)
    elif kind == "optional_type":
        _widen_type(t.optional_type.elem_type)
    elif kind == "map_type":
        _widen_type(t.map_type.value_type)


def _widen_tensor(tensor: TensorProto) -> None:
    if tensor.data_type in _NARROW:
        tensor.CopyFrom(numpy_helper.from_array(numpy_helper.to_array(tensor).astype(np.float64), tensor.name))


def _widen_nodes(nodes: Iterable[NodeProto]) -> None:
    for node in nodes:
        if node.domain not in ("", "ai.onnx"):
            continue  # another domain's attributes mean what that domain says
        for i, attr in enumerate(node.attribute):
            if attr.type == AttributeProto.TENSOR:
                _widen_tensor(attr.t)
            elif attr.type == AttributeProto.TENSORS:
                for tensor in attr.tensors:
                    _widen_tensor(tensor)
            elif attr.type == AttributeProto.SPARSE_TENSOR:
                _widen_tensor(attr.sparse_tensor.values)
            elif attr.type == AttributeProto.GRAPH:
                _widen_graph(attr.g)
            elif attr.type == AttributeProto.GRAPHS:
                for graph in attr.graphs:
                    _widen_graph(graph)
            elif attr.type == AttributeProto.INT and attr.name in _TYPE_ATTRS and attr.i in _NARROW:
                attr.i = TensorProto.DOUBLE
            elif node.op_type == "Constant" and attr.name in ("value_float", "value_floats"):
                value = np.float64(attr.f) if attr.name == "value_float" else np.array(attr.floats, np.float64)
                node.attribute[i].CopyFrom(helper.make_attribute("value", numpy_helper.from_array(value)))
