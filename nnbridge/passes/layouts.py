"""Which ops are layout-sensitive and how NCHW and NHWC relate (shared by passes; no pass).

Convention (docs/passes.md): a Value's shape is listed in its *physical* layout
order. The spatial ops (``spatial_slots`` in the op-traits table) compute "as if
NCHW" when their data input is laid out NHWC (their NHWC conv weights are
``[K, kH, kW, C]``); every other op works on the physical array, so an NHWC
``Flatten`` yields features in (h, w, c) order.
"""

from __future__ import annotations

from ..ir import Layout, Node, op_traits

#: perm that turns a tensor of the first layout into the second (physical transpose).
PERMS: dict[tuple[Layout, Layout], tuple[int, ...]] = {
    (Layout.NCHW, Layout.NHWC): (0, 2, 3, 1),
    (Layout.NHWC, Layout.NCHW): (0, 3, 1, 2),
}

IMAGE_LAYOUTS = (Layout.NCHW, Layout.NHWC)


def image_layout(value) -> Layout | None:
    """NCHW / NHWC for 4-D values carrying one of them, else None (layout-free)."""
    if value is None or value.type.rank != 4 or value.type.layout not in IMAGE_LAYOUTS:
        return None
    return value.type.layout


def is_spatial(node: Node) -> bool:
    """A layout-sensitive op the layout pass can move between NCHW and NHWC."""
    if node.domain or not op_traits(node.op).spatial_slots or len(node.outputs) != 1:
        return False
    x = node.input(0)
    return x is not None and x.type.rank == 4


def spatial_layout(node: Node) -> Layout:
    """The layout a spatial op computes in (that of its data input)."""
    return image_layout(node.input(0)) or Layout.NCHW


def permute_shape(shape, perm):
    return None if shape is None else tuple(shape[p] for p in perm)
