"""Sequence and optional ops.

A sequence value is a Python list of arrays; an absent optional is None and a
present one is its element itself. Kernels never mutate an input list (values
may be shared between consumers), they build a new one.
"""

from __future__ import annotations

import numpy as np

from ...base.errors import KernelError
from ...ir import Graph
from ..registry import kernel


def _position(ctx, seq: list, pos, *, inserting: bool = False) -> int:
    """A (possibly negative) position checked against the sequence length."""
    n = len(seq)
    p = int(np.asarray(pos).reshape(-1)[0])
    low, high = -n, n if inserting else n - 1
    if not low <= p <= high:
        raise KernelError(f"node '{ctx.node.name}' ({ctx.node.op}): position {p} is out of range "
                          f"for a sequence of length {n}")
    return p + n if p < 0 else p


@kernel("SequenceEmpty")
def sequence_empty(ctx):
    return []


@kernel("SequenceConstruct")
def sequence_construct(ctx, *tensors):
    return list(tensors)


@kernel("SequenceInsert")
def sequence_insert(ctx, seq, tensor, position=None):
    out = list(seq)
    if position is None:
        out.append(tensor)
    else:
        out.insert(_position(ctx, seq, position, inserting=True), tensor)
    return out


@kernel("SequenceAt")
def sequence_at(ctx, seq, position):
    return seq[_position(ctx, seq, position)]


@kernel("SequenceErase")
def sequence_erase(ctx, seq, position=None):
    out = list(seq)
    del out[_position(ctx, seq, position) if position is not None else -1]
    return out


@kernel("SequenceLength")
def sequence_length(ctx, seq):
    return np.array(len(seq), np.int64)


@kernel("SplitToSequence")
def split_to_sequence(ctx, x, split=None, *, axis=0, keepdims=1):
    axis = axis + x.ndim if axis < 0 else axis
    if split is None:
        parts = np.split(x, x.shape[axis], axis=axis)
        return [np.squeeze(p, axis) for p in parts] if not keepdims else parts
    split = np.asarray(split, np.int64)
    if split.ndim == 0:  # equal chunks of this size; the last one may be shorter
        bounds = np.arange(int(split), x.shape[axis], int(split))
    else:
        if split.sum() != x.shape[axis]:
            raise KernelError(f"node '{ctx.node.name}' (SplitToSequence): sizes {split.tolist()} do not "
                              f"add up to {x.shape[axis]}")
        bounds = np.cumsum(split)[:-1]
    return np.split(x, bounds, axis=axis)


@kernel("ConcatFromSequence")
def concat_from_sequence(ctx, seq, *, axis, new_axis=0):
    if not seq:
        raise KernelError(f"node '{ctx.node.name}' (ConcatFromSequence): the sequence is empty")
    if new_axis:
        return np.stack(seq, axis=axis)
    return np.concatenate(seq, axis=axis)


@kernel("SequenceMap")
def sequence_map(ctx, *inputs, body: Graph):
    """Runs the body once per element of the first sequence; tensor inputs are passed unchanged."""
    count = len(inputs[0])
    is_seq = [isinstance(x, list) for x in inputs]
    if any(s and len(x) != count for s, x in zip(is_seq, inputs)):
        raise KernelError(f"node '{ctx.node.name}' (SequenceMap): input sequences differ in length")
    names = [v.name for v in body.inputs]
    results: list[list] = [[] for _ in body.outputs]
    for i in range(count):
        feeds = {n: (x[i] if s else x) for n, x, s in zip(names, inputs, is_seq)}
        for bucket, value in zip(results, ctx.run_graph(body, feeds)):
            bucket.append(value)
    return tuple(results)


def _check_optional(node, *, type=None) -> str | None:  # the attribute's name shadows the builtin here
    if node.input(0) is None and type is None:
        return "an empty Optional needs its 'type' attribute"
    return None


@kernel("Optional", check=_check_optional)
def optional(ctx, value=None):
    return value


@kernel("OptionalHasElement")
def optional_has_element(ctx, value=None):
    return np.array(value is not None, np.bool_)


@kernel("OptionalGetElement")
def optional_get_element(ctx, value):
    if value is None:
        raise KernelError(f"node '{ctx.node.name}' (OptionalGetElement): the optional is empty")
    return value

