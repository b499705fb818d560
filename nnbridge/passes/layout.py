"""``layout-nhwc`` / ``layout-nchw``: give every 4-D tensor its backend's preferred layout.

Relay ConvertLayout in our own words (specs/passes.md §3, smaug-format.md §5):
the spatial ops (Conv, pools, BatchNormalization, LRN) are moved to the target
layout, their constant weights transposed at compile time (NHWC conv weights
are ``[K, kH, kW, C]``). The change then flows forward: layout-agnostic ops
(elementwise, broadcasting arithmetic) follow their inputs and get their
constants permuted; Concat gets its axis remapped; a flatten (Flatten, or a
Reshape to ``[N, features]``) feeding only Gemm/MatMul with constant weights
keeps the NHWC (h, w, c) feature order and permutes those weights' rows instead
of transposing activations. Any other reader of a changed value gets a
``Reorder`` back to the layout it was written for; graph inputs get one Reorder
each (shared by all readers) and graph outputs keep their layout and names.

The pass only rewrites what changes in this run, so it is idempotent; the
number of Reorder nodes in the graph is recorded in its metadata.
"""

from __future__ import annotations

import numpy as np

from ..ir import Flag, Graph, Layout, Node, PatternKind, TensorType, Value, op_traits
from .fuse import op_pattern
from .layouts import PERMS, image_layout, is_spatial, permute_shape
from .manager import register_pass
from .rewrite import add_const, remove_dead, set_output


@register_pass("layout-nhwc")
def layout_nhwc(graph: Graph) -> bool:
    """Spatial ops in NHWC (SMV): Reorder only at graph inputs/outputs; flatten weights permuted."""
    return convert_layout(graph, Layout.NHWC)


@register_pass("layout-nchw")
def layout_nchw(graph: Graph) -> bool:
    """Spatial ops in NCHW (reference, ONNX semantics): undoes layout-nhwc."""
    return convert_layout(graph, Layout.NCHW)


def convert_layout(graph: Graph, target: Layout) -> bool:
    changed = _Converter(graph, target).run()
    count = str(sum(1 for n in graph.nodes if n.op == "Reorder" and n.domain == "nnbridge"))
    if graph.metadata.get("nnbridge.reorders", "0") != count:
        graph.metadata["nnbridge.reorders"] = count
        changed = True
    return changed


class _Converter:
    def __init__(self, graph: Graph, target: Layout):
        self.graph = graph
        self.target = target
        self.original: dict[int, Layout] = {}  # values re-laid in this run → their old layout
        self.cache: dict[tuple[int, Layout], Value] = {}
        self.changed = False

    def run(self) -> bool:
        for node in self.graph.nodes:
            if is_spatial(node):
                self._spatial(node)
            elif not any(id(v) in self.original for v in self._reads(node)):
                continue
            elif not (self._agnostic(node) or self._concat(node) or self._flatten(node)):
                self._restore_inputs(node)
        if self.changed:
            remove_dead(self.graph)
        return self.changed

    # -- helpers -------------------------------------------------------------
    def _reads(self, node: Node) -> list[Value]:
        return [v for v in list(node.inputs) + node.captured() if v is not None]

    def _was(self, value: Value) -> Layout | None:
        """The layout ``value`` had before this run."""
        return self.original.get(id(value), image_layout(value))

    def as_layout(self, value: Value, want: Layout) -> Value:
        """``value`` physically transposed to ``want`` (constants folded, Reorders shared)."""
        cur = image_layout(value)
        if cur is None or cur is want:
            return value
        key = (id(value), want)
        if key not in self.cache:
            perm = PERMS[(cur, want)]
            if value.const is not None:
                new = add_const(self.graph, f"{value.name}_{want.value.lower()}", value.const.transpose(perm))
                new.type = new.type.with_layout(want)
            else:
                node = self.graph.add_node(
                    "Reorder", [value], name=f"{value.name}_to_{want.value.lower()}", domain="nnbridge",
                    attrs={"perm": list(perm), "src_layout": cur.value, "dst_layout": want.value})
                new = node.outputs[0]
                new.type = TensorType(value.type.dtype, permute_shape(value.type.shape, perm), want)
            self.cache[key] = new
        self.changed = True
        return self.cache[key]

    def _relayout_outputs(self, node: Node, was: Layout, want: Layout) -> None:
        perm = PERMS[(was, want)]
        for k, out in enumerate(node.outputs):
            if out.type.rank != 4:
                continue
            new_type = TensorType(out.type.dtype, permute_shape(out.type.shape, perm), want)
            if self.graph.is_output(out):  # keep the user's output layout and name
                fresh = self.graph.add_value(f"{out.name}_{want.value.lower()}", new_type)
                set_output(node, k, fresh)
                self.graph.add_node("Reorder", [fresh], [out], name=f"{out.name}_to_{was.value.lower()}",
                                    domain="nnbridge", attrs={"perm": list(PERMS[(want, was)]),
                                                              "src_layout": want.value, "dst_layout": was.value})
                out = fresh
            else:
                out.type = new_type
            self.original[id(out)] = was
        self.changed = True

    # -- rules ---------------------------------------------------------------
    def _spatial(self, node: Node) -> None:
        x = node.inputs[0]
        was = self._was(x) or Layout.NCHW
        if was is self.target and image_layout(x) is self.target:
            return
        for slot in op_traits(node.op).spatial_slots:
            v = node.input(slot)
            if v is not None:
                node.set_input(slot, self.as_layout(v, self.target))
        self._relayout_outputs(node, was, self.target)

    def _image_inputs(self, node: Node) -> tuple[Layout, Layout] | None:
        """(layout the op was written for, layout it will run in) if all activations are 4-D images."""
        acts = [v for v in node.inputs if v is not None and v.const is None]
        if not acts or any(image_layout(v) is None for v in acts) or node.captured():
            return None
        if any(v.const is not None and v.const.ndim > 4 for v in node.inputs if v is not None):
            return None
        was = self._was(acts[0])
        want = self.target if any(image_layout(v) is self.target for v in acts) else image_layout(acts[0])
        return was, want

    def _agnostic(self, node: Node) -> bool:
        kind = op_pattern(node)
        if node.domain or Flag.LAYOUT_BOUND in op_traits(node.op).flags or kind > PatternKind.BROADCAST:
            return False
        if any(o.type.rank != 4 for o in node.outputs):
            return False
        layouts = self._image_inputs(node)
        if layouts is None:
            return False
        was, want = layouts
        for i, v in enumerate(node.inputs):
            if v is None:
                continue
            if v.const is not None:
                node.set_input(i, self._permute_const(v, was, want))
            else:
                node.set_input(i, self.as_layout(v, want))
        if want is not was:
            self._relayout_outputs(node, was, want)
        return True

    def _permute_const(self, value: Value, was: Layout, want: Layout) -> Value:
        c = value.const
        if was is want or c.size <= 1:
            return value
        key = (id(value), want)
        if key not in self.cache:
            c4 = c.reshape((1,) * (4 - c.ndim) + c.shape).transpose(PERMS[(was, want)])
            self.cache[key] = add_const(self.graph, f"{value.name}_{want.value.lower()}", c4)
            self.cache[key].type = self.cache[key].type.with_layout(want)
        return self.cache[key]

    def _concat(self, node: Node) -> bool:
        if node.op != "Concat" or node.domain or node.outputs[0].type.rank != 4:
            return False
        layouts = self._image_inputs(node)
        if layouts is None or any(v is not None and v.const is not None for v in node.inputs):
            return False
        was, want = layouts
        if any(self._was(v) is not was for v in node.inputs if v is not None):
            return False
        for i, v in enumerate(node.inputs):
            node.set_input(i, self.as_layout(v, want))
        if want is not was:
            node.attrs["axis"] = PERMS[(was, want)].index(node.attr("axis") % 4)
            self._relayout_outputs(node, was, want)
        return True

    def _flatten(self, node: Node) -> bool:
        """A flatten of a re-laid image feeding only constant-weight Gemm/MatMul: permute the weights."""
        x = node.inputs[0]
        out = node.outputs[0]
        if node.domain or node.op not in ("Flatten", "Reshape") or id(x) not in self.original:
            return False
        shape = x.type.shape
        if not x.type.is_static or not out.type.is_static or out.type.shape != (shape[0], int(np.prod(shape[1:]))):
            return False
        if node.op == "Flatten" and node.attr("axis", 1) != 1:
            return False
        users = self.graph.consumers(out)
        if self.graph.is_output(out) or not users or not all(_weight_slot(u, out) for u in users):
            return False
        was, cur = self.original[id(x)], image_layout(x)
        features = tuple(permute_shape(shape, PERMS[(cur, was)])[1:])  # in the order the weights expect
        axes = [p - 1 for p in PERMS[(was, cur)][1:]]  # how the flattened axes were reordered
        for user in users:
            w = user.inputs[1].const
            if user.op == "Gemm" and user.attr("transB", 0):  # [out, features]: permute columns
                permuted = w.reshape(w.shape[0], *features).transpose(0, *(a + 1 for a in axes))
            else:  # [features, out]: permute rows
                permuted = w.reshape(*features, w.shape[1]).transpose(*axes, len(axes))
            user.set_input(1, add_const(self.graph, f"{user.inputs[1].name}_{cur.value.lower()}",
                                        permuted.reshape(w.shape)))
        self.changed = True
        return True

    def _restore_inputs(self, node: Node) -> None:
        for i, v in enumerate(node.inputs):
            if v is not None and id(v) in self.original:
                node.set_input(i, self.as_layout(v, self.original[id(v)]))
        for v in node.captured():
            if id(v) in self.original:
                restored = self.as_layout(v, self.original[id(v)])
                for sub in node.subgraphs():
                    sub.replace_uses(v, restored)


def _weight_slot(user: Node, value: Value) -> bool:
    """``value`` is the data input of a Gemm/MatMul whose 2-D weight is a constant."""
    if user.domain or user.op not in ("Gemm", "MatMul") or user.inputs[0] is not value:
        return False
    w = user.input(1)
    if w is None or w.const is None or w.const.ndim != 2 or user.inputs.count(value) != 1:
        return False
    if user.op == "Gemm" and user.attr("transA", 0):
        return False
    features = w.const.shape[1] if user.op == "Gemm" and user.attr("transB", 0) else w.const.shape[0]
    return value.type.shape is not None and features == value.type.shape[-1]  # else the model is wrong
