"""``infer-shapes``: recompute every node output's dtype and shape after rewrites.

Standard ops use onnx's own per-node inference (``infer_node_outputs``) with
small constant inputs passed as data, so Reshape/Expand targets resolve;
nnbridge ops (Reorder, Repeat, Fused) have their own rules here. Spatial ops
computing in NHWC are inferred in NCHW and permuted back. Symbolic dims survive;
a node whose inference fails or is unknown keeps its current types, so an op the
pass does not understand is never corrupted.
"""

from __future__ import annotations

import numpy as np
import onnx
from onnx import helper, numpy_helper, shape_inference

from ..ir import DType, Graph, Layout, Node, ShapeRule, TensorType, TypeKind, op_traits
from .layouts import PERMS, is_spatial, permute_shape, spatial_layout
from .manager import register_pass

_DATA_LIMIT = 4096  # constant scalars and vectors up to this many elements are passed to onnx as data
_MEMO: dict[tuple, list | None] = {}  # node signature → inferred types (inference is pure)
_MEMO_LIMIT = 100_000


@register_pass("infer-shapes")
def infer_shapes(graph: Graph) -> bool:
    """Infer dtypes and shapes of every node output (standard and nnbridge ops)."""
    changed = False
    for node in graph.nodes:
        try:
            inferred = infer_node(node)
        except Exception:  # onnx refuses a node it cannot reason about: keep what we know
            inferred = None
        if not inferred:
            continue
        for out, new in zip(node.outputs, inferred):
            merged = _merge(out.type, new)
            if merged != out.type:
                out.type = merged
                changed = True
    return changed


def _merge(old: TensorType, new: TensorType | None) -> TensorType:
    """Prefer inferred facts; keep old ones where inference knows less; keep layouts."""
    if new is None or old.kind is not TypeKind.TENSOR or new.kind is not TypeKind.TENSOR \
            or (new == old and old.layout is not Layout.UNKNOWN):  # (the common case: nothing new)
        return old
    dtype = new.dtype or old.dtype
    shape = new.shape
    if shape is None:
        shape = old.shape
    elif old.shape is not None and len(old.shape) == len(shape):
        shape = tuple(n if n is not None else o for n, o in zip(shape, old.shape))
    if shape is not None and old.shape is not None and len(shape) == len(old.shape) \
            and old.layout is not Layout.UNKNOWN:
        layout = old.layout
    else:
        layout = new.layout if new.layout is not Layout.UNKNOWN else Layout.default_for_rank(
            None if shape is None else len(shape))
    return TensorType(dtype, shape, layout)


def infer_node(node: Node) -> list[TensorType | None] | None:
    """The output types of one node from its inputs' types (and constant values), or None."""
    if node.domain == "nnbridge":
        rule = _NNBRIDGE_RULES.get(node.op)
        return rule(node) if rule else None
    if node.subgraphs() or any(v is not None and v.type.kind is not TypeKind.TENSOR for v in node.inputs):
        return None
    fast = _fast_rule(node)
    if fast is not None:
        return fast
    key = _signature(node)
    if key is not None and key in _MEMO:
        return _MEMO[key]
    result = _infer_standard(node)
    if key is not None:
        if len(_MEMO) > _MEMO_LIMIT:
            _MEMO.clear()
        _MEMO[key] = result
    return result


def _fast_rule(node: Node) -> list[TensorType] | None:
    """The op-traits table's shape rules (same type, same-dtype broadcast, transpose, matmul),
    without onnx."""
    types = [v.type for v in node.inputs if v is not None]
    if len(node.outputs) != 1 or not types or not all(t.is_static and t.dtype is not None for t in types):
        return None
    rule = _FAST_RULES.get(op_traits(node.op, node.domain).shape)
    return None if rule is None else rule(node, types)


def _same_type(node: Node, types: list[TensorType]) -> list[TensorType] | None:
    if len(types) != 1:
        return None
    x = types[0]
    return [TensorType(x.dtype, x.shape, Layout.default_for_rank(len(x.shape)))]


def _broadcast_type(node: Node, types: list[TensorType]) -> list[TensorType] | None:
    x = types[0]
    if not all(t.dtype is x.dtype for t in types):
        return None
    shape = np.broadcast_shapes(*(t.shape for t in types))
    return [TensorType(x.dtype, tuple(shape), Layout.default_for_rank(len(shape)))]


def _transpose_type(node: Node, types: list[TensorType]) -> list[TensorType] | None:
    if len(types) != 1:
        return None
    x = types[0]
    perm = node.attrs.get("perm")
    perm = list(range(len(x.shape)))[::-1] if perm is None else [int(p) for p in perm]
    if sorted(perm) != list(range(len(x.shape))):
        return None  # onnx's inference says what is wrong
    return [TensorType(x.dtype, tuple(x.shape[p] for p in perm), Layout.default_for_rank(len(perm)))]


def _matmul_type(node: Node, types: list[TensorType]) -> list[TensorType] | None:
    x = types[0]
    if len(types) != 2 or types[1].dtype is not x.dtype:
        return None
    shape = _matmul_shape(x.shape, types[1].shape)
    return None if shape is None else [TensorType(x.dtype, shape, Layout.default_for_rank(len(shape)))]


_FAST_RULES = {ShapeRule.SAME: _same_type, ShapeRule.BROADCAST: _broadcast_type,
               ShapeRule.TRANSPOSE: _transpose_type, ShapeRule.MATMUL: _matmul_type}


def _matmul_shape(a: tuple[int, ...], b: tuple[int, ...]) -> tuple[int, ...] | None:
    """numpy's matmul result shape (a vector operand gains, then loses, a unit dim), None if the
    operands do not fit."""
    if not a or not b:
        return None
    left = (1, *a) if len(a) == 1 else a
    right = (*b, 1) if len(b) == 1 else b
    if left[-1] != right[-2]:
        return None
    try:
        batch = np.broadcast_shapes(left[:-2], right[:-2])
    except ValueError:
        return None
    return (*batch, *((left[-2],) if len(a) > 1 else ()), *((right[-1],) if len(b) > 1 else ()))


def _signature(node: Node) -> tuple | None:
    """A hashable summary of everything onnx's inference reads (None: do not memoise)."""
    parts: list = [node.op, node.domain]
    for key, value in sorted(node.attrs.items()):
        if isinstance(value, np.ndarray):
            value = (value.dtype.str, value.shape, value.tobytes() if value.size <= _DATA_LIMIT else None)
        elif isinstance(value, list):
            value = tuple(tuple(v) if isinstance(v, list) else v for v in value)
        try:
            hash(value)
        except TypeError:
            return None
        parts.append((key, value))
    for v in node.inputs:
        if v is None:
            parts.append(None)
            continue
        data = _shape_data(v)
        parts.append((v.type.dtype, v.type.shape, v.type.layout, None if data is None else data.tobytes()))
    return tuple(parts)


def _shape_data(value) -> np.ndarray | None:
    """The constant onnx may read as data: shape-like arguments (Reshape's shape, Resize's scales,
    Range's limits, axes, pads) are scalars or vectors; weights of rank ≥ 2 never are, and leaving
    them out lets the memo serve every layer with the same shapes."""
    const = value.const
    if const is None or const.ndim > 1 or const.size > _DATA_LIMIT or const.dtype == object:
        return None
    return const


def _infer_standard(node: Node) -> list[TensorType | None] | None:
    if is_spatial(node) and spatial_layout(node) is Layout.NHWC:
        to_nchw = PERMS[(Layout.NHWC, Layout.NCHW)]
        slots = op_traits(node.op).spatial_slots
        types = [_input_type(v, to_nchw if i in slots else None) for i, v in enumerate(node.inputs)]
        outs = _onnx_infer(node, types)
        back = PERMS[(Layout.NCHW, Layout.NHWC)]
        return [None if t is None else TensorType(t.dtype, permute_shape(t.shape, back), Layout.NHWC)
                for t in outs] if outs else None
    return _onnx_infer(node, [_input_type(v, None) for v in node.inputs])


def _input_type(value, perm) -> TensorType | None:
    if value is None:
        return None
    t = value.type
    return t if perm is None or t.shape is None else t.with_shape(permute_shape(t.shape, perm))


def _onnx_infer(node: Node, types: list[TensorType | None]) -> list[TensorType | None] | None:
    try:
        schema = onnx.defs.get_schema(node.op, 26, node.domain)
    except onnx.defs.SchemaError:
        return None
    names = [f"i{i}" if v is not None else "" for i, v in enumerate(node.inputs)]
    proto = helper.make_node(node.op, names, [f"o{i}" for i in range(len(node.outputs))],
                             domain=node.domain or None)
    attr_types = {n: a.type for n, a in schema.attributes.items()}
    for key, value in node.attrs.items():
        if value is not None:
            proto.attribute.append(_onnx_attribute(key, value, attr_types.get(key)))
    inputs = _onnx_inputs(node, names, types)
    if inputs is None:
        return None
    result = shape_inference.infer_node_outputs(schema, proto, *inputs)
    return [_from_proto(result.get(f"o{i}")) for i in range(len(node.outputs))]


def _onnx_attribute(key: str, value, kind: int | None) -> onnx.AttributeProto:
    """An IR attribute as onnx's schema types it (an int where it wants a float is widened)."""
    if isinstance(value, np.ndarray):
        value = numpy_helper.from_array(value)
    elif isinstance(value, tuple):
        value = list(value)
    if kind == onnx.AttributeProto.FLOAT:
        value = float(value)
    elif kind == onnx.AttributeProto.FLOATS:
        value = [float(v) for v in value]
    return helper.make_attribute(key, value, attr_type=kind if value == [] else None)


def _onnx_inputs(node: Node, names: list[str], types: list[TensorType | None]) -> tuple[dict, dict] | None:
    """The inputs' types and the small constants passed as data, by their names in the proto; None
    if a present input's type is unknown."""
    input_types, input_data = {}, {}
    for name, v, t in zip(names, node.inputs, types):
        if v is None or t is None or t.dtype is None:
            if v is not None:
                return None
            continue
        input_types[name] = helper.make_tensor_type_proto(t.dtype.onnx, None if t.shape is None else list(t.shape))
        data = _shape_data(v)
        if data is not None:
            input_data[name] = numpy_helper.from_array(data, name)
    return input_types, input_data


def _from_proto(tp) -> TensorType | None:
    if tp is None or tp.WhichOneof("value") != "tensor_type":
        return None
    tt = tp.tensor_type
    shape = None
    if tt.HasField("shape"):
        shape = tuple(d.dim_value if d.HasField("dim_value") else (d.dim_param or None) for d in tt.shape.dim)
    dtype = DType.from_onnx(tt.elem_type) if tt.elem_type else None
    return TensorType(dtype, shape, Layout.default_for_rank(None if shape is None else len(shape)))


def branch_shape_error(graph: Graph) -> str | None:
    """Why onnx's inference rejects a branch of some ``If`` in ``graph`` under the types its
    outer values have now, or None. onnxruntime runs that inference on both branches when it
    loads a file, so a pinned shape that makes an untaken branch impossible (a data-dependent
    condition; a constant one is inlined by ``fold-branches``) yields a file it refuses."""
    for node in graph.walk():
        if node.op != "If" or node.domain:
            continue
        for key in ("then_branch", "else_branch"):
            body = node.attrs.get(key)
            reason = _first_inference_error(body) if isinstance(body, Graph) else None
            if reason:
                return f"the {key} of If '{node.name}' cannot run with these shapes ({reason})"
    return None


def _first_inference_error(body: Graph) -> str | None:
    """The first node of ``body`` whose onnx inference fails on the types flowing into it (nodes
    with subgraphs or of other domains pass their declared types on)."""
    inferred: dict[int, TensorType] = {}
    for node in body.nodes:
        if node.domain or node.subgraphs():
            continue
        types = [None if v is None else inferred.get(id(v), v.type) for v in node.inputs]
        if any(t is not None and t.kind is not TypeKind.TENSOR for t in types):
            continue
        try:
            outs = _onnx_infer(node, types)
        except shape_inference.InferenceError as exc:
            return f"{node.op} '{node.name}': {str(exc).strip().splitlines()[0]}"
        except Exception:  # an attribute onnx cannot take: nothing known about this node
            continue
        for out, t in zip(node.outputs, outs or ()):
            if t is not None:
                inferred[id(out)] = t
    return None


def _reorder(node: Node) -> list[TensorType | None]:
    x = node.inputs[0].type
    perm = node.attr("perm")
    dst = node.attr("dst_layout")
    layout = Layout(dst) if dst in Layout._value2member_map_ else Layout.default_for_rank(len(perm))
    return [TensorType(x.dtype, permute_shape(x.shape, perm), layout)]


def _repeat(node: Node) -> list[TensorType | None]:
    x = node.inputs[0].type
    reps = node.attr("multiples")
    shape = None if x.shape is None else tuple(
        d * r if isinstance(d, int) else (d if r == 1 else None) for d, r in zip(x.shape, reps))
    return [TensorType(x.dtype, shape, x.layout)]


def _fused(node: Node) -> list[TensorType | None]:
    body = node.attr("body")
    for inner, outer in zip(body.inputs, node.inputs):
        if outer is not None:
            inner.type = outer.type
    infer_shapes(body)
    return [v.type for v in body.outputs]


def _switch(node: Node) -> list[TensorType | None]:
    return [node.inputs[0].type] * 2


_NNBRIDGE_RULES = {"Reorder": _reorder, "Repeat": _repeat, "Fused": _fused, "Switch": _switch}
