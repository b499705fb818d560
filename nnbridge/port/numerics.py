"""A converted file judged against onnxruntime on its source model, on the same input values.

A file may name its outputs otherwise, keep SMV's NHWC storage order for an image input or
output, or hold a [1, 1000, 1, 1] tensor where the source has [1, 1000]. ``source_as`` wraps the
source model so that it takes and gives what the file does (an ONNX Transpose, Reshape or Cast
at each end, nothing inside): ``check`` then runs the file on its backend and the wrapped source
on onnxruntime, and judges every output by its rule, as for any model (``check(oracle=...)``).
"""

from __future__ import annotations

import math
from collections.abc import Mapping
from dataclasses import dataclass

import numpy as np
from onnx import AttributeProto, GraphProto, ModelProto, TensorProto, helper, numpy_helper

from ..base.errors import NNBridgeError
from ..ir import Graph, Layout, Value

#: NCHW ↔ NHWC, as numpy and ONNX Transpose permutations
TO_NHWC, TO_NCHW = (0, 2, 3, 1), (0, 3, 1, 2)


class Unmatched(NNBridgeError):
    """The file's inputs or outputs cannot be paired with the source's."""


@dataclass
class Wrapped:
    """The source as the file's interface, and the file's inputs made from the source's."""

    oracle: ModelProto
    feeds: dict[str, np.ndarray]


def source_as(source: ModelProto, source_graph: Graph, converted: Graph,
              feeds: Mapping[str, np.ndarray]) -> Wrapped:
    """``source`` taking ``converted``'s inputs and giving its outputs; ``feeds`` (the source's
    inputs) as the converted model's. Inputs and outputs pair by name, else by position."""
    ins = _paired("inputs", source_graph.inputs, converted.inputs)
    outs = _paired("outputs", source_graph.outputs, converted.outputs)
    model = ModelProto()
    model.CopyFrom(source)
    graph = model.graph
    taken = _names(graph)
    mine = {c.name for _, c in ins} | {c.name for _, c in outs}
    for name in sorted(taken & mine):  # the file's names are the graph's ends now: the source's move aside
        _rename(graph, name, f"{name}/source")
    renamed = {s.name: (f"{s.name}/source" if s.name in mine else s.name) for s, _ in (*ins, *outs)}
    front, back, converted_feeds = [], [], {}
    real = {renamed[s.name] for s, _ in ins}
    kept = [vi for vi in graph.input if vi.name not in real]  # an old model's weights listed as inputs
    for s, c in ins:
        value = np.asarray(feeds[s.name])
        converted_feeds[c.name] = _to_file(value, s, c)
        front += _adapter(graph, c, s, c.name, renamed[s.name], value.shape, np.dtype(value.dtype), into_source=True)
    for s, c in outs:
        shape = _static(s, "output")
        back += _adapter(graph, s, c, renamed[s.name], c.name, shape, s.type.dtype.numpy, into_source=False)
    del graph.input[:]
    graph.input.extend([*(helper.make_tensor_value_info(c.name, _onnx_type(converted_feeds[c.name]),
                                                        list(converted_feeds[c.name].shape)) for _, c in ins), *kept])
    nodes = [*front, *graph.node, *back]
    del graph.node[:]
    graph.node.extend(nodes)
    del graph.output[:]
    graph.output.extend(helper.make_empty_tensor_value_info(c.name) for _, c in outs)
    return Wrapped(model, converted_feeds)


def _paired(what: str, source: list[Value], converted: list[Value]) -> list[tuple[Value, Value]]:
    """By name, else by position; a file with more outputs (SMV's padding slices of a wide layer)
    pairs each source output with the next of the file's that holds as many elements."""
    if sorted(v.name for v in source) == sorted(v.name for v in converted):
        by_name = {v.name: v for v in converted}
        return [(s, by_name[s.name]) for s in source]
    if len(source) == len(converted):
        return list(zip(source, converted))
    if what == "outputs" and len(converted) > len(source):
        pairs, rest = [], iter(converted)
        for s in source:
            size = _size(s)
            c = next((c for c in rest if size is not None and _size(c) == size), None)
            if c is None:
                break
            pairs.append((s, c))
        else:
            return pairs
    raise Unmatched(f"the file has {len(converted)} {what} ({', '.join(v.name for v in converted)}), the source "
                    f"{len(source)} ({', '.join(v.name for v in source)})")


def _size(value: Value) -> int | None:
    shape = value.type.shape
    return math.prod(shape) if shape is not None and all(isinstance(d, int) for d in shape) else None


def _static(value: Value, what: str) -> tuple[int, ...]:
    shape = value.type.shape
    if shape is None or not all(isinstance(d, int) for d in shape):
        raise Unmatched(f"{what} '{value.name}' has no static shape")
    return tuple(shape)


def _storage(source_shape: tuple[int, ...], value: Value) -> str:
    """How a value of ``source_shape`` is stored in the file's ``value``: as it is, transposed to
    NHWC, or reshaped (same elements in the same order)."""
    shape = _static(value, "file's")
    if shape == source_shape:
        return "same"
    if len(shape) == 4 and value.type.layout is Layout.NHWC and tuple(source_shape[p] for p in TO_NHWC) == shape:
        return "nhwc"
    if math.prod(shape) == math.prod(source_shape):
        return "reshape"
    raise Unmatched(f"'{value.name}' is {list(shape)} in the file, {list(source_shape)} in the source")


def _to_file(value: np.ndarray, source: Value, converted: Value) -> np.ndarray:
    how = _storage(value.shape, converted)
    out = value.transpose(TO_NHWC) if how == "nhwc" else value.reshape(_static(converted, "file's"))
    dtype = converted.type.dtype.numpy if converted.type.dtype is not None else value.dtype
    return np.ascontiguousarray(out).astype(dtype, copy=False)


def _adapter(graph: GraphProto, frm: Value, to: Value, src: str, dst: str, source_shape: tuple[int, ...],
             source_dtype: np.dtype, into_source: bool) -> list:
    """Nodes from ``src`` (named ``frm``'s way) to ``dst``: layout, shape and type as ``to`` has them."""
    file_value = frm if into_source else to
    how = _storage(tuple(source_shape), file_value)
    nodes, at = [], src
    if into_source:
        file_dtype = file_value.type.dtype.numpy if file_value.type.dtype is not None else source_dtype
        if np.dtype(file_dtype) != source_dtype:
            nodes.append(helper.make_node("Cast", [at], [f"{dst}/port.cast"], to=_onnx_code(source_dtype)))
            at = nodes[-1].output[0]
    if how == "nhwc":
        nodes.append(helper.make_node("Transpose", [at], [f"{dst}/port.layout"],
                                      perm=list(TO_NCHW if into_source else TO_NHWC)))
    elif how == "reshape":
        shape = source_shape if into_source else _static(file_value, "file's")
        const = f"{dst}/port.shape"
        graph.initializer.append(numpy_helper.from_array(np.asarray(shape, np.int64), const))
        nodes.append(helper.make_node("Reshape", [at, const], [f"{dst}/port.shape_out"]))
    if nodes:
        at = nodes[-1].output[0]
    if not into_source and to.type.dtype is not None and to.type.dtype.numpy != np.dtype(source_dtype):
        # the file's output type (SMV's fp16): the source's value rounded as the file must store it
        nodes.append(helper.make_node("Cast", [at], [f"{dst}/port.cast"], to=to.type.dtype.onnx))
        at = nodes[-1].output[0]
    if at != dst:
        if nodes:
            nodes[-1].output[0] = dst
        else:
            nodes.append(helper.make_node("Identity", [at], [dst]))
    return nodes


def _onnx_code(dtype: np.dtype) -> int:
    return helper.np_dtype_to_tensor_dtype(np.dtype(dtype))


def _onnx_type(value: np.ndarray) -> int:
    return _onnx_code(value.dtype) if value.dtype.name != "bfloat16" else TensorProto.BFLOAT16


def _names(graph: GraphProto) -> set[str]:
    """Every value name of ``graph`` and its subgraphs."""
    names = {v.name for v in (*graph.input, *graph.output)} | {t.name for t in graph.initializer}
    for node in graph.node:
        names.update(n for n in (*node.input, *node.output) if n)
        for attr in node.attribute:
            for sub in _subgraphs(attr):
                names |= _names(sub)
    return names


def _rename(graph: GraphProto, old: str, new: str) -> None:
    """``old`` is ``new`` everywhere in ``graph`` and its subgraphs (which may read it)."""
    for v in (*graph.input, *graph.output, *graph.value_info):
        if v.name == old:
            v.name = new
    for t in graph.initializer:
        if t.name == old:
            t.name = new
    for node in graph.node:
        for seq in (node.input, node.output):
            for i, name in enumerate(seq):
                if name == old:
                    seq[i] = new
        for attr in node.attribute:
            for sub in _subgraphs(attr):
                _rename(sub, old, new)


def _subgraphs(attr: AttributeProto) -> list[GraphProto]:
    if attr.type == AttributeProto.GRAPH:
        return [attr.g]
    if attr.type == AttributeProto.GRAPHS:
        return list(attr.graphs)
    return []
