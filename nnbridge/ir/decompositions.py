"""Per-target decompositions, filed into the op-traits table's ``decompositions`` slot.

A rule is ``rule(b, node, target) -> [output values] | None``. It rewrites ``node`` into ONNX ops
the target's exporter expresses, emitted with ``b`` (the builder of ``passes/autodiff.py``), and
returns the values that replace the node's outputs (new ones, or values the graph already has);
or None when the target takes the node as it is (or the rule does not cover it: the exporter then
refuses it with its own reason). Nodes a rewrite leaves unread are removed. Each rule
computes exactly what the node does (tests check every rule against onnxruntime and the converted
files against the source model). The ``decompose`` pass applies the rows for one target before
that target's exporter runs; ``convert --dry-run`` lists what it rewrote.

Targets are named by format (``smaug``, ``lbann``); ``Target.features`` says what a target's
version can express natively (e.g. LBANN develop's ``layer_norm`` with ``start_dim``).
"""

from __future__ import annotations

import math
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

import numpy as np

from ..base.registry import Registry


@dataclass(frozen=True)
class Target:
    name: str
    features: frozenset[str] = field(default_factory=frozenset)


#: LBANN's layer_norm normalizes a trailing part of the sample (develop's ``start_dim``)
LAYER_NORM_START_DIM = "layer_norm_start_dim"

Rule = Callable[[Any, Any, Target], list | None]
#: (domain, op, target) → rule; an op's traits read them live (``OpTraits.decompositions``)
DECOMPOSITIONS: Registry[tuple[str, str, str], Rule] = Registry("decompositions")


def decomposes(op: str, *targets: str, domain: str = "") -> Callable[[Rule], Rule]:
    """Register ``fn`` as the rewrite of ``op`` for each target in ``targets``."""
    return DECOMPOSITIONS.decorator(*((domain, op, target) for target in targets))


def _affine_then_unit_clip(b, x, alpha: float, beta: float, target: Target):
    """clip(alpha·x + beta, 0, 1): scalar operators on LBANN; on SMAUG a BatchNorm whose fused
    HardTanh(0, 1) SMAUG writes with its parameters."""
    if target.name == "smaug":
        t = _channel_affine(b, x, alpha, beta)
        if t is None:
            return None
    else:
        t = b.op("Add", b.op("Mul", x, b.scalar(alpha, x), like=x), b.scalar(beta, x), like=x)
    return b.op("Clip", t, b.scalar(0.0, x), b.scalar(1.0, x), like=x)


def _channel_affine(b, x, scale: float, shift: float):
    """x·scale + shift as a BatchNormalization (mean 0, variance 1, ε 0: exact), which SMAUG has
    for 2-D and 4-D tensors; None for other ranks."""
    if x.type.rank not in (2, 4) or not isinstance(x.type.shape[1], int):
        return None
    dtype, channels = b.numpy_dtype(x), x.type.shape[1]
    stats = [np.full(channels, v, dtype) for v in (scale, shift, 0.0, 1.0)]
    return b.op("BatchNormalization", x, *(b.const(s) for s in stats), attrs={"epsilon": 0.0}, like=x)


#: SMAUG writes an activation's parameters only when it is fused into these (quirks Q1, Q2, Q4)
_SMAUG_FUSES_INTO = ("Conv", "Gemm", "MatMul", "BatchNormalization")
#: what a standalone SMAUG activation computes whatever its parameters say
_SMAUG_STANDALONE = {"Clip": (-1.0, 1.0), "LeakyRelu": (0.1,), "Elu": (0.1,)}


@decomposes("Clip", "smaug")
@decomposes("LeakyRelu", "smaug")
@decomposes("Elu", "smaug")
def _standalone_activation(b, node, target):
    """An activation SMAUG cannot fuse (after an Add, a pool, …) runs with SMAUG's default
    parameters: with others (ReLU6's Clip(0, 6)), it follows an identity BatchNorm it fuses into."""
    x = node.inputs[0]
    producer = x.producer
    if producer is not None and producer.op in _SMAUG_FUSES_INTO and b.uses(x) == 1:
        return None
    if node.op == "Clip":
        bounds = [(node.input(i), b.constant(node.input(i))) for i in (1, 2)]
        if any(given is not None and value is None for given, value in bounds):
            return None  # a computed bound
        params = tuple(default if value is None else float(np.reshape(value, -1)[0])
                       for (_, value), default in zip(bounds, (-np.inf, np.inf)))
    else:
        params = (float(node.attr("alpha", 0.01 if node.op == "LeakyRelu" else 1.0)),)
    if np.allclose(params, _SMAUG_STANDALONE[node.op], rtol=1e-3):
        return None
    t = _channel_affine(b, x, 1.0, 0.0)
    if t is None:
        return None
    return [b.op(node.op, t, *node.inputs[1:], attrs=dict(node.attrs), like=x)]


@decomposes("HardSigmoid", "smaug", "lbann")
def _hard_sigmoid(b, node, target):
    x = node.inputs[0]
    y = _affine_then_unit_clip(b, x, float(node.attr("alpha", 0.2)), float(node.attr("beta", 0.5)), target)
    return None if y is None else [y]


@decomposes("HardSwish", "smaug", "lbann")
def _hard_swish(b, node, target):
    x = node.inputs[0]
    gate = _affine_then_unit_clip(b, x, 1.0 / 6.0, 0.5, target)
    return None if gate is None else [b.op("Mul", x, gate, like=x)]


@decomposes("ReduceMean", "smaug")
def _spatial_mean(b, node, target):
    """A mean over all spatial axes of an NCHW tensor (squeeze-and-excite) is a global average pool."""
    x = node.inputs[0]
    axes = node.attr("axes") if node.input(1) is None else b.constant(node.input(1))
    if x.type.rank != 4 or axes is None or sorted(int(a) % 4 for a in np.reshape(axes, -1)) != [2, 3]:
        return None
    n, c = x.type.shape[:2]
    pooled = b.op("GlobalAveragePool", x, shape=(n, c, 1, 1), like=x)
    if int(node.attr("keepdims", 1)):
        return [pooled]
    return [b.op("Reshape", pooled, b.ints([n, c]), shape=(n, c), like=x)]


@decomposes("Gelu", "lbann")
def _exact_gelu(b, node, target):
    """x/2 · (1 + erf(x/√2)): LBANN's GeluOperator is the tanh approximation, so the exact Gelu is
    written over its ErfOperator (the tanh one maps as it is)."""
    if node.attr("approximate", "none") == "tanh":
        return None
    x = node.inputs[0]
    erf = b.op("Erf", b.op("Mul", x, b.scalar(1 / math.sqrt(2), x), like=x), like=x)
    half = b.op("Mul", x, b.scalar(0.5, x), like=x)
    return [b.op("Mul", half, b.op("Add", erf, b.scalar(1.0, x), like=x), like=x)]


@decomposes("LayerNormalization", "lbann")
def _layer_norm_over_trailing_dims(b, node, target):
    """Normalizing the trailing dims of a sample: the sample seen as [rows, normalized] is
    instance-normalized per row (LBANN's instance_norm), then scaled and shifted."""
    x = node.inputs[0]
    if LAYER_NORM_START_DIM in target.features or any(b.uses(o) for o in node.outputs[1:]):
        return None
    shape = tuple(x.type.shape)
    axis = int(node.attr("axis", -1)) % len(shape)
    if axis <= 1 or not all(isinstance(d, int) for d in shape):
        return None  # the whole sample: LBANN's layer_norm as it is
    rows, width = math.prod(shape[1:axis]), math.prod(shape[axis:])
    eps = float(node.attr("epsilon", 1e-5))
    dtype = b.numpy_dtype(x)
    table = b.op("Reshape", x, b.ints([shape[0], rows, width]), shape=(shape[0], rows, width), like=x)
    norm = b.op("InstanceNormalization", table, b.const(np.ones(rows, dtype)), b.const(np.zeros(rows, dtype)),
                attrs={"epsilon": eps}, like=table)
    y = b.op("Mul", b.op("Reshape", norm, b.ints(shape), shape=shape, like=x), node.inputs[1], like=x)
    return [y if node.input(2) is None else b.op("Add", y, node.inputs[2], like=x)]


@decomposes("Add", "lbann")
@decomposes("Sub", "lbann")
@decomposes("Mul", "lbann")
@decomposes("Div", "lbann")
def _broadcast_between_activations(b, node, target):
    """LBANN's operators take same-shape operands: a computed operand that broadcasts is tiled to
    the output's shape first (LBANN's tessellate)."""
    out = node.outputs[0]
    shape = tuple(out.type.shape or ())
    if len(node.inputs) != 2 or any(b.is_constant(v) for v in node.inputs) or \
            not all(isinstance(d, int) for d in shape) or all(tuple(v.type.shape) == shape for v in node.inputs):
        return None
    operands = []
    for v in node.inputs:
        if tuple(v.type.shape) != shape:
            if v.type.rank < len(shape):
                lifted = (1,) * (len(shape) - v.type.rank) + tuple(v.type.shape)
                v = b.op("Reshape", v, b.ints(lifted), shape=lifted, like=v)
            v = b.op("Expand", v, b.ints(shape), shape=shape, like=v)
        operands.append(v)
    return [b.op(node.op, *operands, like=out)]


@decomposes("Reshape", "lbann")
def _rows_of_the_batch(b, node, target):
    """A same-shape Reshape is nothing (GPT-2 reshapes its int64 token ids to their own shape,
    which LBANN cannot hold); torch's ``x.view(-1, k) @ W + c`` then ``.view(*x.shape[:-1], n)``
    (HF's Conv1D) merges the batch into rows, which LBANN tensors cannot: it is a MatMul over the
    last axis of ``x``, which keeps the batch first."""
    y, flat_y = node.outputs[0], node.inputs[0]
    if not (y.type.is_static and flat_y.type.is_static):
        return None
    if tuple(y.type.shape) == tuple(flat_y.type.shape):
        return [flat_y]
    gemm = flat_y.producer
    if gemm is None or gemm.op != "Gemm" or b.uses(flat_y) != 1 or int(gemm.attr("transA", 0)):
        return None
    operands = _gemm_of_flattened_rows(b, gemm)
    if operands is None:
        return None
    flat_x, x, weight, bias = operands
    xs, ys = tuple(x.type.shape or ()), tuple(y.type.shape)
    if not x.type.is_static or len(xs) < 3 or xs[:-1] != ys[:-1] or \
            tuple(flat_x.type.shape) != (math.prod(xs[:-1]), xs[-1]):
        return None
    weight = (weight.T if int(gemm.attr("transB", 0)) else weight) * float(gemm.attr("alpha", 1.0))
    out = b.op("MatMul", x, b.const(weight.astype(weight.dtype)), shape=ys, like=y)
    if bias is not None:
        out = b.op("Add", out, b.const((bias * float(gemm.attr("beta", 1.0))).astype(bias.dtype)), like=y)
    return [out]


def _gemm_of_flattened_rows(b, gemm):
    """(flattened rows, unflattened x, weight, bias) of a Gemm with constant operands that reads
    (alone) a Reshape of ``x``; None for any other Gemm."""
    flat_x, weight, bias = gemm.inputs[0], b.constant(gemm.input(1)), b.constant(gemm.input(2))
    inner = flat_x.producer
    if inner is None or inner.op != "Reshape" or b.uses(flat_x) != 1 or weight is None or \
            (gemm.input(2) is not None and bias is None):
        return None
    return flat_x, inner.inputs[0], weight, bias


def _static(*values) -> bool:
    return all(v.type.shape is not None and all(isinstance(d, int) for d in v.type.shape) for v in values)


@decomposes("Transpose", "lbann")
def _transpose_of_unit_dims(b, node, target):
    """A Transpose that keeps the order of the dims bigger than 1 moves no data: a Reshape
    (LBANN's reshape runs everywhere; its permute needs GPUs and cuTENSOR)."""
    x, y = node.inputs[0], node.outputs[0]
    if not _static(x, y) or tuple(x.type.shape) == tuple(y.type.shape):
        return None
    perm = [int(p) for p in node.attr("perm", list(range(x.type.rank))[::-1])]
    if perm[0] != 0 or [p for p in perm if x.type.shape[p] != 1] != [i for i, d in enumerate(x.type.shape) if d != 1]:
        return None
    return [b.op("Reshape", x, b.ints(y.type.shape), shape=tuple(y.type.shape), like=x)]


#: at most this many entries in the 0/1 matrix that sums over a block of inner axes
_SUM_MATRIX_LIMIT = 1 << 22


@decomposes("ReduceSum", "lbann")
@decomposes("ReduceMean", "lbann")
def _reduce_over_a_block_of_axes(b, node, target):
    """A sum (or mean) over consecutive axes of a sample — LBANN's reduction takes whole samples
    and channelwise_mean the spatial dims of each channel — is a MatMul by a constant: the sample
    seen as [pre, n·post] times the (n·post) × post matrix that adds the n entries of each
    position (ones for the trailing axes), i.e. LBANN's (channelwise_)fully_connected. A non-finite
    entry also spreads NaN to the other sums of its row when post > 1."""
    x, y = node.inputs[0], node.outputs[0]
    if not _static(x, y) or x.type.rank < 3:
        return None
    rank, shape = x.type.rank, tuple(x.type.shape)
    given = node.attr("axes") if node.input(1) is None else b.constant(node.input(1))
    if given is None or np.size(given) == 0:
        return None  # every axis (or none, with noop_with_empty_axes): not this rule's case
    axes = sorted(int(a) % rank for a in np.reshape(given, -1))
    first, last = axes[0], axes[-1]
    if 0 in axes or axes != list(range(first, last + 1)) or axes == list(range(1, rank)) or \
            (node.op == "ReduceMean" and axes == list(range(2, rank))):
        return None  # the batch, scattered axes, or what LBANN's layers do as they are
    pre, n, post = math.prod(shape[1:first]), math.prod(shape[first:last + 1]), math.prod(shape[last + 1:])
    if n * post * post > _SUM_MATRIX_LIMIT:
        return None
    dtype = b.numpy_dtype(x)
    weight = np.kron(np.ones((n, 1), dtype), np.eye(post, dtype=dtype))
    if node.op == "ReduceMean":
        weight /= n
    rows = (shape[0], n * post) if pre == 1 else (shape[0], pre, n * post)
    summed = (shape[0], post) if pre == 1 else (shape[0], pre, post)
    table = b.op("Reshape", x, b.ints(rows), shape=rows, like=x)
    out = b.op("MatMul", table, b.const(weight.astype(dtype)), shape=summed, like=x)
    return [b.op("Reshape", out, b.ints(y.type.shape), shape=tuple(y.type.shape), like=x)]


#: (coordinate transformation, nearest mode) pairs that give out[i] = in[i // s] for integer s
_NEAREST_FLOOR = {("half_pixel", "round_prefer_floor"), ("half_pixel", "round_prefer_ceil"),
                  ("pytorch_half_pixel", "round_prefer_floor"), ("pytorch_half_pixel", "round_prefer_ceil"),
                  ("asymmetric", "floor")}


@decomposes("Resize", "lbann")
def _nearest_upsample(b, node, target):
    """A nearest Resize by whole factors repeats each entry s times along each dim: every dim d
    seen as [d, 1], tiled to [d, s] (LBANN's tessellate), and merged back."""
    x, y = node.inputs[0], node.outputs[0]
    if node.attr("mode", "nearest") != "nearest" or not _static(x, y) or \
            (node.attr("coordinate_transformation_mode", "half_pixel"),
             node.attr("nearest_mode", "round_prefer_floor")) not in _NEAREST_FLOOR or \
            node.attr("axes") is not None or (node.input(1) is not None and b.constant(node.input(1)) is None):
        return None
    xs, ys = tuple(x.type.shape), tuple(y.type.shape)
    if len(xs) != len(ys) or xs[0] != ys[0] or any(o % i for o, i in zip(ys, xs)) or xs == ys:
        return None
    split = tuple(d for i in xs[1:] for d in (i, 1))
    tiled = tuple(d for i, o in zip(xs[1:], ys[1:]) for d in (i, o // i))
    t = b.op("Reshape", x, b.ints((xs[0], *split)), shape=(xs[0], *split), like=x)
    t = b.op("Expand", t, b.ints((xs[0], *tiled)), shape=(xs[0], *tiled), like=x)
    return [b.op("Reshape", t, b.ints(ys), shape=ys, like=x)]
