"""IR tensor ops → SMAUG: Flatten/Reshape (with the NHWC flatten-order weight permutation),
Transpose, Identity/Dropout, Concat, Split, Tile (Repeat) and Pad (Padding). Registered in the
same table as ``export_ops``."""

from __future__ import annotations

import numpy as np

from ...ir import Layout, Node, Value
from ...protos.smaug import smaug_types_pb2 as pb
from . import layouts
from .export_ops import const_input, define, exporter, int_list, out_dims, same_layout_ref, zero_pad
from .exporter import Exporter, Inexpressible


# -- tensor ops --------------------------------------------------------------------------------
def flatten_users_absorb_order(ex: Exporter, value: Value) -> bool:
    """Can every consumer of a flatten absorb a feature permutation into constant weights?"""
    users = ex.graph.consumers(value)
    if not users or ex.graph.is_output(value):
        return False
    for user in users:
        if user.op == "MatMul" and user.inputs[0] is value and ex.constant(user.inputs[1]) is not None:
            continue
        if user.op == "Gemm" and user.inputs[0] is value and ex.constant(user.inputs[1]) is not None \
                and not int(user.attr("transA", 0)):
            continue
        return False
    return True


def flatten(ex: Exporter, node: Node, x_value: Value, y: Value) -> None:
    have = ex.layout_of(x_value)
    native = ex.native_of(x_value)
    perm = None
    if native is not None and native.layout != have and native.layout in (Layout.NCHW, Layout.NHWC) \
            and flatten_users_absorb_order(ex, y):
        x = native  # flatten in storage order; the weights are permuted instead (§5.3)
        ir_dims = list(x_value.type.shape)
        index = np.arange(int(np.prod(ir_dims[1:]))).reshape(ir_dims[1:])
        perm = index.transpose([p - 1 for p in layouts.perm(have, native.layout)[1:]]).reshape(-1)
    else:
        x = ex.need(x_value, have if have in (Layout.NCHW, Layout.NHWC) else Layout.NCHW, have)
    ref = ex.smaug_reorder(x, Layout.NC, node.name)
    ref.feature_perm = perm
    define(ex, y, ref)


@exporter("Flatten")
def _flatten(ex: Exporter, node: Node) -> None:
    x_value = node.inputs[0]
    if int(node.attr("axis", 1)) != 1:
        raise Inexpressible("SMAUG flattens only to [N, features] (axis 1)")
    if x_value.type.rank == 2:
        define(ex, node.outputs[0], same_layout_ref(ex, x_value))
    elif x_value.type.rank == 4:
        flatten(ex, node, x_value, node.outputs[0])
    else:
        raise Inexpressible("SMAUG flattens 4-D tensors only")


@exporter("Reshape")
def _reshape(ex: Exporter, node: Node) -> None:
    x_value, y = node.inputs[0], node.outputs[0]
    if not y.type.is_static or not x_value.type.is_static:
        raise Inexpressible("SMAUG Reshape needs static shapes")
    dims = list(y.type.shape)
    if x_value.type.rank == 4 and len(dims) == 2 and dims[0] == x_value.type.shape[0]:
        flatten(ex, node, x_value, y)
        return
    x = ex.need(x_value, ex.layout_of(x_value))
    layout = ex.layout_of(y)
    if layout not in layouts.RANK:
        raise Inexpressible(f"SMAUG has no layout for a {len(dims)}-D tensor")
    _, refs = ex.emit(pb.Reshape, node.name, [x], [(dims, layout)])
    define(ex, y, refs[0])


@exporter("Transpose")
def _transpose(ex: Exporter, node: Node) -> None:
    """A layout permutation is a SMAUG Reorder; its result is relabelled (Reshape keeps the storage)
    with the IR output's own layout, because the IR sees a new tensor, not a new layout."""
    x_value, y = node.inputs[0], node.outputs[0]
    have = ex.layout_of(x_value)
    perm = int_list(node.attr("perm")) or list(range(x_value.type.rank or 0))[::-1]
    for target in layouts.RANK:
        if layouts.perm(have, target) == perm and layouts.reorder_supported(have, target):
            ref = ex.smaug_reorder(ex.need(x_value, have), target, node.name)
            out_layout = ex.layout_of(y)
            if out_layout != target:
                ref = ex.emit(pb.Reshape, f"{node.name}/relabel", [ref], [(ref.dims, out_layout)])[1][0]
            define(ex, y, ref)
            return
    raise Inexpressible(f"transpose {perm} of a {have.value} tensor is not a SMAUG Reorder")


@exporter("Identity", "Dropout")
def _identity(ex: Exporter, node: Node) -> None:
    if len(node.outputs) > 1 and ex.graph.consumers(node.outputs[1]):
        raise Inexpressible("the Dropout mask has no SMAUG equivalent")
    x_value = node.inputs[0]
    native = ex.native_of(x_value)
    define(ex, node.outputs[0], native if native is not None else ex.need(x_value, ex.layout_of(x_value)))


@exporter("Concat")
def _concat(ex: Exporter, node: Node) -> None:
    y = node.outputs[0]
    have = ex.layout_of(y)
    first = ex.native_of(node.inputs[0])
    layout = first.layout if first is not None and first.layout in layouts.RANK and \
        layouts.perm(have, first.layout) is not None else have
    axis = int(node.attr("axis", 0)) % (y.type.rank or 1)
    refs = [ex.need(v, layout, ex.layout_of(v)) for v in node.inputs]
    new_axis = layout.value.index(have.value[axis]) if have != layout else axis
    dims = out_dims(y, have, layout)
    proto, outs = ex.emit(pb.Concat, node.name, refs, [(dims, layout)])
    proto.params.concat_params.concat_axis = new_axis
    define(ex, y, outs[0])


@exporter("Split")
def _split(ex: Exporter, node: Node) -> None:
    x_value = node.inputs[0]
    have = ex.layout_of(x_value)
    native = ex.native_of(x_value)
    layout = native.layout if native is not None and layouts.perm(have, native.layout) is not None else have
    axis = int(node.attr("axis", 0)) % (x_value.type.rank or 1)
    if not all(o.type.is_static for o in node.outputs):
        raise Inexpressible("SMAUG Split needs static output shapes")
    x = ex.need(x_value, layout, have)
    new_axis = layout.value.index(have.value[axis]) if have != layout else axis
    proto, outs = ex.emit(pb.Split, node.name, [x], [(out_dims(o, have, layout), layout) for o in node.outputs])
    proto.params.split_params.split_axis = new_axis
    for value, ref in zip(node.outputs, outs):
        define(ex, value, ref)


@exporter("Tile", "Expand")
def _tile(ex: Exporter, node: Node) -> None:
    """Tile, and Expand within one rank (a broadcast is a tiling of size-1 dims): SMAUG's Repeat."""
    x_value, y = node.inputs[0], node.outputs[0]
    if node.op == "Expand" and (x_value.type.rank != y.type.rank or not y.type.is_static):
        raise Inexpressible("Expand to another rank has no SMAUG equivalent")
    have = ex.layout_of(x_value)
    x = ex.need(x_value, have)
    _, refs = ex.emit(pb.Repeat, node.name, [x], [(list(y.type.shape), have)])
    define(ex, y, refs[0])


@exporter("Pad")
def _pad(ex: Exporter, node: Node) -> None:
    x_value, y = node.inputs[0], node.outputs[0]
    if ex.backend == "SMV" and node.name in ex.file_nodes:
        raise Inexpressible("SMV's Padding operator aborts (it fills fp16 tensors through a float32 path, quirk "
                            "Q5); nnbridge writes zero padding on SMV as a Concat of zero blocks, which is not "
                            "this file's Padding node: convert for --smaug-backend Reference to keep it")
    if node.attr("mode", "constant") not in ("constant", b"constant"):
        raise Inexpressible("SMAUG Padding only pads with zeros")
    pads = const_input(ex, node, 1, "the pads").astype(int).tolist()
    if node.input(2) is not None and np.any(const_input(ex, node, 2, "the pad value") != 0):
        raise Inexpressible("SMAUG Padding only pads with zeros")
    if node.input(3) is not None:
        raise Inexpressible("Pad with axes is not supported")
    rank = x_value.type.rank
    if min(pads) < 0:
        raise Inexpressible("negative pads (cropping) have no SMAUG equivalent")
    have = ex.layout_of(x_value)
    pairs = [(pads[i], pads[rank + i]) for i in range(rank)]
    layout = have
    if ex.backend == "SMV" and rank == 4 and have in (Layout.NCHW, Layout.NHWC):
        layout = Layout.NHWC  # SMV pads spatial axes of NHWC tensors (see zero_pad)
        pairs = [pairs[i] for i in layouts.perm(have, layout)]
    x = ex.need(x_value, layout, have)
    define(ex, y, zero_pad(ex, x, pairs, node.name))
