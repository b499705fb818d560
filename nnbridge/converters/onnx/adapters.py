"""Own opset adapters for op versions that ``onnx.version_converter`` cannot upgrade.

Each adapter rewrites one node of an old version straight into its form at the
IR opset (attributes that became inputs turn into initializers, removed
attributes whose old default equals the new behaviour are dropped). An adapter
returns a reason when the node uses a feature the new version cannot express;
the loader then reports it as unsupported instead of guessing.

The same registry maps a few versions *newer* than the IR opset back, when the
only change is a new attribute whose default is the IR behaviour (SpaceToDepth
``mode``, Range ``stash_type``).
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass

import numpy as np
import onnx
import onnx.version_converter
from onnx import NodeProto, TensorProto, helper, numpy_helper

from ...base.registry import Registry

#: value name → rank, from shape inference at the model's own opset (may be partial)
Ranks = dict[str, int]
AdaptFn = Callable[[NodeProto, "AdaptContext"], "str | None"]


@dataclass
class AdaptContext:
    graph: onnx.GraphProto
    ranks: Ranks
    legacy_inputs: bool = False  # IR < 4: the main graph lists every initializer as an input too
    opset: int = 0  # the model's own default-domain opset

    def constant(self, name: str) -> np.ndarray | None:
        for t in self.graph.initializer:
            if t.name == name:
                return numpy_helper.to_array(t)
        for node in self.graph.node:
            if node.op_type == "Constant" and node.output[0] == name:
                for a in node.attribute:
                    if a.name == "value":
                        return numpy_helper.to_array(a.t)
        return None

    def add_initializer(self, hint: str, array: np.ndarray) -> str:
        taken = {t.name for t in self.graph.initializer} | {o for n in self.graph.node for o in n.output}
        name, i = hint, 0
        while name in taken:
            i += 1
            name = f"{hint}_{i}"
        tensor = numpy_helper.from_array(array, name)
        self.graph.initializer.append(tensor)
        if self.legacy_inputs:
            self.graph.input.append(helper.make_tensor_value_info(name, tensor.data_type, array.shape))
        return name


@dataclass(frozen=True)
class Adapter:
    op: str
    first: int  # since-versions first..last of the old op this adapter accepts
    last: int
    fn: AdaptFn


#: (op, first since-version) → adapter; ranges of one op must not overlap
ADAPTERS: Registry[tuple[str, int], Adapter] = Registry("ONNX opset adapters")


def adapter(op: str, first: int, last: int) -> Callable[[AdaptFn], AdaptFn]:
    return ADAPTERS.decorator((op, first), value=lambda _, fn: Adapter(op, first, last, fn))


def find_adapter(op: str, since_version: int) -> Adapter | None:
    for a in ADAPTERS.values():
        if a.op == op and a.first <= since_version <= a.last:
            return a
    return None


def _drop_attrs(node: NodeProto, *names: str) -> None:
    keep = [a for a in node.attribute if a.name not in names]
    del node.attribute[:]
    node.attribute.extend(keep)


def _attr(node: NodeProto, name: str):
    for a in node.attribute:
        if a.name == name:
            return helper.get_attribute_value(a)
    return None


@adapter("Cast", 1, 1)
def _cast_type_name(node: NodeProto, ctx: AdaptContext) -> str | None:
    """Cast-1 names the target type as a string ('FLOAT'); later versions use the enum code."""
    to = _attr(node, "to")
    if isinstance(to, bytes):
        name = to.decode().upper()
        if name not in TensorProto.DataType.keys():
            return f"unknown target type '{name}'"
        _drop_attrs(node, "to")
        node.attribute.append(helper.make_attribute("to", TensorProto.DataType.Value(name)))
    return None


@adapter("LSTM", 1, 1)
@adapter("GRU", 1, 3)
@adapter("RNN", 1, 1)
def _drop_output_sequence(node: NodeProto, ctx: AdaptContext) -> str | None:
    """``output_sequence`` only chose whether Y was produced; since version 7 Y is simply optional."""
    _drop_attrs(node, "output_sequence")
    return None


@adapter("Split", 1, 1)
def _split_sizes(node: NodeProto, ctx: AdaptContext) -> str | None:
    """Split-1 took sizes as an attribute or a second input; now it is an input or ``num_outputs``."""
    sizes = _attr(node, "split")
    _drop_attrs(node, "split")
    if len(node.input) > 1 and node.input[1]:
        return None  # already the IR form: sizes as the second input
    if sizes:
        node.input.append(ctx.add_initializer(f"{node.name or node.output[0]}_split",
                                              np.asarray(sizes, np.int64)))
    else:
        node.attribute.append(helper.make_attribute("num_outputs", len(node.output)))
    return None


@adapter("Tile", 1, 1)
def _tile_repeats(node: NodeProto, ctx: AdaptContext) -> str | None:
    """Tile-1 repeated one axis (``tiles`` times along ``axis``); now ``repeats`` names every axis."""
    if len(node.input) != 3:
        return f"Tile-1 takes 3 inputs (input, tiles, axis), not {len(node.input)}"
    tiles, axis = ctx.constant(node.input[1]), ctx.constant(node.input[2])
    rank = ctx.ranks.get(node.input[0])
    if tiles is None or axis is None or rank is None or np.size(tiles) != 1 or np.size(axis) != 1:
        return "Tile-1 needs constant scalar tiles/axis and an input of known rank"
    if not -rank <= int(np.ravel(axis)[0]) < rank:
        return f"Tile-1 axis {int(np.ravel(axis)[0])} is outside rank {rank}"
    tiles, axis = np.ravel(tiles)[0], int(np.ravel(axis)[0]) % rank
    repeats = np.ones(rank, np.int64)
    repeats[int(axis)] = int(tiles)
    del node.input[1:]
    node.input.append(ctx.add_initializer(f"{node.name or node.output[0]}_repeats", repeats))
    return None


@adapter("Equal", 1, 1)
def _legacy_broadcast(node: NodeProto, ctx: AdaptContext) -> str | None:
    """Old-style ``broadcast`` equals numpy broadcasting when B aligns with A's trailing axes."""
    axis = _attr(node, "axis")
    if axis is not None and _attr(node, "broadcast"):
        ra, rb = ctx.ranks.get(node.input[0]), ctx.ranks.get(node.input[1])
        if ra is None or rb is None or axis != ra - rb:
            return f"legacy broadcast along axis {axis} is not numpy broadcasting"
    _drop_attrs(node, "axis", "broadcast")
    return None


def ranks_of(model: onnx.ModelProto) -> Ranks:
    """Ranks of every value (subgraphs included) that onnx's shape inference can type at the
    model's own opset."""
    try:
        inferred = onnx.shape_inference.infer_shapes(model, strict_mode=False)
    except Exception:  # partial information is fine: adapters that need a rank say so
        inferred = model
    ranks: Ranks = {}
    pending = [inferred.graph]
    while pending:
        g = pending.pop()
        for vi in (*g.input, *g.value_info, *g.output):
            tt = vi.type.tensor_type
            if vi.type.HasField("tensor_type") and tt.HasField("shape"):
                ranks[vi.name] = len(tt.shape.dim)
        for t in g.initializer:
            ranks[t.name] = len(t.dims)
        for node in g.node:
            for attr in node.attribute:
                pending.extend([attr.g] if attr.HasField("g") else attr.graphs)
    return ranks


@adapter("SpaceToDepth", 28, 28)
def _space_to_depth_mode(node: NodeProto, ctx: AdaptContext) -> str | None:
    """Version 28 added ``mode``; its default DCR is exactly the IR version's behaviour."""
    mode = _attr(node, "mode")
    if mode not in (None, b"DCR"):
        return f"mode {mode.decode()} is newer than the IR opset"
    _drop_attrs(node, "mode")
    return None


@adapter("PRelu", 1, 6)
def _prelu_channel_slope(node: NodeProto, ctx: AdaptContext) -> str | None:
    """Before version 7 a 1-D slope of length C was per channel (axis 1), which numpy-style
    broadcasting would apply to the last axis: reshape it to (C, 1, ..., 1)."""
    _drop_attrs(node, "consumed_inputs")
    slope, rank = ctx.constant(node.input[1]), ctx.ranks.get(node.input[0])
    if slope is not None and (slope.size == 1 or slope.ndim != 1 or rank == 2):
        return None
    if slope is None or rank is None:
        return "a pre-7 PRelu needs a constant slope and an input of known rank"
    shaped = slope.reshape((slope.size,) + (1,) * (rank - 2))
    node.input[1] = ctx.add_initializer(f"{node.input[1]}_per_channel", shaped)
    return None


@adapter("Scan", 8, 8)
def _scan_batch_axis(node: NodeProto, ctx: AdaptContext) -> str | None:
    """Scan-8 runs its body over axis 1 of every batch entry (axis 0). onnx's converter just drops
    the batch axis; the exact form is an outer Scan over the batch whose body is a Scan-9."""
    if node.input and node.input[0]:
        return "Scan-8 with sequence_lens has no Scan-9 form"
    body = _upgraded_body(_attr(node, "body"), ctx)
    if body is None:
        return "the Scan-8 body cannot be upgraded on its own"
    n_scan = _attr(node, "num_scan_inputs")
    values = list(node.input[1:])
    prefix = node.name or node.output[0]
    inner_in = [f"{prefix}_batch_in{i}" for i in range(len(values))]
    inner_out = [f"{prefix}_batch_out{i}" for i in range(len(node.output))]
    inner = helper.make_node("Scan", inner_in, inner_out, body=body, num_scan_inputs=n_scan,
                             scan_input_directions=_attr(node, "directions") or [0] * n_scan)
    elem = [vi.type.tensor_type.elem_type for vi in (*body.input, *body.output)]
    per_batch = helper.make_graph(
        [inner], f"{prefix}_per_batch",
        [helper.make_tensor_value_info(n, t, None) for n, t in zip(inner_in, elem)],
        [helper.make_tensor_value_info(n, t, None) for n, t in zip(inner_out, elem[len(inner_in):])])
    del node.input[:]
    node.input.extend(values)
    _drop_attrs(node, "body", "directions", "num_scan_inputs")
    node.attribute.extend([helper.make_attribute("body", per_batch),
                           helper.make_attribute("num_scan_inputs", len(values))])
    return None


def _upgraded_body(body: onnx.GraphProto, ctx: AdaptContext) -> onnx.GraphProto | None:
    """A self-contained body upgraded to the IR opset by onnx's converter, or None."""
    from ...ir.schema import IR_OPSET

    model = helper.make_model(body, opset_imports=[helper.make_opsetid("", ctx.opset)])
    try:
        return onnx.version_converter.convert_version(model, IR_OPSET).graph
    except Exception:  # outer-scope references or an op without upgrade path
        return None


@adapter("Range", 27, 27)
def _range_stash_type(node: NodeProto, ctx: AdaptContext) -> str | None:
    """Version 27 added ``stash_type``; its default (accumulate in float32) gives the IR version's
    ``start + i * delta`` rounded once. Accumulating in 16-bit floats (0) is a different result."""
    stash = _attr(node, "stash_type")
    if stash not in (None, 1):
        return f"stash_type {stash} is newer than the IR opset"
    _drop_attrs(node, "stash_type")
    return None
