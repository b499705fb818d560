"""Shape and layout ops: metadata queries, reshapes, transposes, joins and splits,
broadcast/tile, padding. Reshape-like ops return numpy views (kernels never write
to their inputs, so sharing memory is safe).
"""

from __future__ import annotations

import math

import numpy as np

from ...base.errors import Unsupported, UnsupportedOpError
from ...ir import Node
from ..evaluator import KernelContext
from ..registry import KernelFn, kernel
from ._common import all_constant, axes_of, axis_of, const_input, ints, static_shape


def _viewed(fn: KernelFn, node: Node, consts: tuple, **attrs) -> KernelFn | None:
    """The prepared callable of a kernel that only reshapes its first input, when that input's
    shape is static and its other inputs are constant: the output shape is the kernel's own on a
    probe of that shape (no data), and each call is one reshape to it (a call with another shape,
    a subgraph's, runs the kernel)."""
    shape = static_shape(node, 0)
    if shape is None or not all_constant(node, consts):
        return None
    probe = np.broadcast_to(np.zeros((), np.uint8), shape)
    try:
        out = fn(KernelContext(node), probe, *consts[1:], **attrs).shape
    except Exception:  # noqa: BLE001 - not prepared: the kernel reports the same error when the node runs
        return None

    def run(ctx, x, *rest):
        if x.shape == shape:
            return x.reshape(out)
        return fn(ctx, x, *rest, **attrs)

    return run


def _prepare_shape(node, consts, *, end=None, start=0):
    """The whole shape (the common case): no bounds to clamp on each call."""
    if end is None and start == 0:
        return lambda ctx, x: np.array(x.shape, dtype=np.int64)
    return None


@kernel("Shape", prepare=_prepare_shape)
def shape(ctx, x, *, end=None, start=0):
    rank = x.ndim
    end = rank if end is None else end
    start = min(max(start + rank if start < 0 else start, 0), rank)
    end = min(max(end + rank if end < 0 else end, 0), rank)
    return np.array(x.shape[start:end], dtype=np.int64)


@kernel("Size")
def size(ctx, x):
    return np.array(x.size, dtype=np.int64)


def _prepare_reshape(node, consts, *, allowzero=0):
    return _viewed(reshape, node, consts, allowzero=allowzero)


def _prepare_flatten(node, consts, *, axis=1):
    return _viewed(flatten, node, consts, axis=axis)


def _prepare_squeeze(node, consts):
    return _viewed(squeeze, node, consts)


def _prepare_unsqueeze(node, consts):
    return _viewed(unsqueeze, node, consts)


@kernel("Reshape", prepare=_prepare_reshape)
def reshape(ctx, x, target, *, allowzero=0):
    dims = ints(target)
    if not allowzero:  # 0 copies the input's dim unless allowzero
        dims = [x.shape[i] if d == 0 else d for i, d in enumerate(dims)]
    return x.reshape(dims)


@kernel("Flatten", prepare=_prepare_flatten)
def flatten(ctx, x, *, axis=1):
    at = axis + x.ndim if axis < 0 else axis
    if not 0 <= at <= x.ndim:
        raise ValueError(f"axis {axis} is out of range for rank {x.ndim}")
    return x.reshape(math.prod(x.shape[:at]), math.prod(x.shape[at:]))


def _prepare_transpose(node, consts, *, perm=None):
    """numpy reads negative axes and refuses bad ones itself: the permutation is ready once."""
    if perm is None:
        return lambda ctx, x: x.transpose()
    axes = tuple(int(p) for p in perm)
    return lambda ctx, x: x.transpose(axes)


@kernel("Transpose", prepare=_prepare_transpose)
def transpose(ctx, x, *, perm=None):
    return np.transpose(x, None if perm is None else axes_of(perm, x.ndim))


@kernel("Reorder", domain="nnbridge")
def reorder(ctx, x, *, perm):
    return np.transpose(x, axes_of(perm, x.ndim))


@kernel("AllReduce", domain="nnbridge")
def all_reduce(ctx, x):
    """One socket's view: its own partial sum (the other sockets are not simulated)."""
    return x


@kernel("Switch", domain="nnbridge")
def switch(ctx, x, pred):
    """Both branches of a SMAUG conditional are computed: each output is the data (the Where that
    joins them picks one)."""
    return x, x


@kernel("Squeeze", prepare=_prepare_squeeze)
def squeeze(ctx, x, axes=None):
    if axes is None:
        return np.squeeze(x)
    return np.squeeze(x, axis=axes_of(ints(axes), x.ndim))


@kernel("Unsqueeze", prepare=_prepare_unsqueeze)
def unsqueeze(ctx, x, axes=None):
    axes = ints(axes)
    rank = x.ndim + len(axes)
    positions = sorted(axes_of(axes, rank))
    if len(set(positions)) != len(positions):
        raise ValueError(f"repeated axes {axes}")
    dims = list(x.shape)
    for p in positions:
        dims.insert(p, 1)
    return x.reshape(dims)


def _prepare_concat(node, consts, *, axis):
    """Every input given: numpy reads a negative axis and refuses a bad one itself."""
    if any(v is None for v in node.inputs):
        return None
    axis = int(axis)
    return lambda ctx, *xs: np.concatenate(xs, axis=axis)


@kernel("Concat", prepare=_prepare_concat)
def concat(ctx, *xs, axis):
    xs = [x for x in xs if x is not None]
    return np.concatenate(xs, axis=axis_of(axis, xs[0].ndim))


def _split_index(shape: tuple[int, ...], sizes, axis: int, parts: int) -> list[tuple[slice, ...]]:
    """The index of each part of a Split of an input of ``shape``."""
    axis = axis_of(axis, len(shape))
    dim = shape[axis]
    if sizes is not None and len(ints(sizes)):
        sizes = ints(sizes)
        if sum(sizes) != dim:
            raise ValueError(f"split sizes {sizes} do not add up to dim {dim}")
    else:
        chunk = -(-dim // parts)  # ceil: every chunk but the last is full
        sizes = [min(chunk, max(dim - i * chunk, 0)) for i in range(parts)]
    lead = (slice(None),) * axis
    starts = [sum(sizes[:i]) for i in range(len(sizes))]
    return [lead + (slice(start, start + size),) for start, size in zip(starts, sizes)]


def _prepare_split(node, consts, *, axis=0, num_outputs=None):
    """A static input split by constant sizes: each part's index is worked out once."""
    shape = static_shape(node, 0)
    if shape is None or not all_constant(node, consts):
        return None
    try:
        index = _split_index(shape, consts[1] if len(consts) > 1 else None, axis, num_outputs or len(node.outputs))
    except ValueError:  # not prepared: the kernel reports it when the node runs
        return None

    def run(ctx, x, *sizes):
        if x.shape == shape:
            return tuple(x[i] for i in index)
        return split(ctx, x, *sizes, axis=axis, num_outputs=num_outputs)

    return run


@kernel("Split", prepare=_prepare_split)
def split(ctx, x, sizes=None, *, axis=0, num_outputs=None):
    index = _split_index(x.shape, sizes, axis, num_outputs or len(ctx.node.outputs))
    return tuple(x[i] for i in index)


def _prepare_expand(node, consts):
    """A static input expanded to a constant shape: the broadcast shape is worked out once."""
    shape = static_shape(node, 0)
    if shape is None or consts[1] is None:
        return None
    try:
        out = np.broadcast_shapes(shape, tuple(ints(consts[1])))
    except ValueError:  # not prepared: the kernel reports it when the node runs
        return None

    def run(ctx, x, target):
        if x.shape == shape:
            return np.broadcast_to(x, out)
        return expand(ctx, x, target)

    return run


@kernel("Expand", prepare=_prepare_expand)
def expand(ctx, x, target):
    return np.broadcast_to(x, np.broadcast_shapes(x.shape, tuple(ints(target))))


@kernel("Tile")
def tile(ctx, x, repeats):
    return np.tile(x, ints(repeats))


@kernel("Repeat", domain="nnbridge")
def repeat(ctx, x, *, multiples):
    return np.tile(x, ints(multiples))


@kernel("Identity")
def identity(ctx, x):
    return x  # tensors, sequences (lists) and optionals (None) alike


def _scalar(value) -> float:
    return float(np.asarray(value).reshape(-1)[0])


def _check_dropout(node):
    """Training-mode dropout is random: refuse it when constants prove it; inputs
    known only at run time are checked by the kernel."""
    flag, ratio = const_input(node, 2), const_input(node, 1)
    if node.input(2) is None or (flag is not None and not _scalar(flag)):
        return None
    if node.input(1) is None or (ratio is not None and _scalar(ratio) != 0.0):
        if flag is not None:
            return "training-mode dropout with a non-zero ratio is random"
    return None


@kernel("Dropout", check=_check_dropout)
def dropout(ctx, x, ratio=None, training=None):
    if training is not None and _scalar(training) and (ratio is None or _scalar(ratio) != 0.0):
        node = ctx.node
        raise UnsupportedOpError("the reference backend", [Unsupported(
            node.op, node.name, "training-mode dropout with a non-zero ratio is random")])
    if len(ctx.node.outputs) > 1:
        return x, np.ones(x.shape, dtype=bool)
    return x


_PAD_MODES = {"constant": "constant", "reflect": "reflect", "edge": "edge", "wrap": "wrap"}


def _check_pad(node, *, mode="constant"):
    return None if mode in _PAD_MODES else f"pad mode {mode!r} is not implemented"


@kernel("Pad", check=_check_pad)
def pad(ctx, x, pads=None, value=None, axes=None, *, mode="constant"):
    """Negative pads crop; what remains is padded with numpy's matching mode (the pads and value of
    Pad before opset 11 were attributes: the loader upgrades them to inputs)."""
    pads = ints(pads)
    axes = axes_of(ints(axes), x.ndim) if axes is not None else tuple(range(x.ndim))
    if len(pads) != 2 * len(axes):
        raise ValueError(f"{len(pads)} pads for {len(axes)} axes")
    before, after = [0] * x.ndim, [0] * x.ndim
    for i, axis in enumerate(axes):
        before[axis], after[axis] = pads[i], pads[i + len(axes)]
    crop = tuple(slice(max(-b, 0), x.shape[i] - max(-a, 0)) for i, (b, a) in enumerate(zip(before, after)))
    x = x[crop]
    widths = [(max(b, 0), max(a, 0)) for b, a in zip(before, after)]
    if mode == "constant":
        fill = np.asarray(0.0 if value is None else value).reshape(-1)
        return np.pad(x, widths, mode="constant", constant_values=fill[0] if fill.size else 0)
    return np.pad(x, widths, mode=_PAD_MODES[mode])
