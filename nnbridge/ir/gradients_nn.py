"""Reverse-mode rules of the normalization layers (the fused training BatchNorm, LayerNorm,
InstanceNormalization, LRN) and of the losses, filed into ``gradient_registry.RULES`` as the other
rules are (``ir/gradients.py`` explains a rule's form)."""

from __future__ import annotations

import math

import numpy as np

from .gradient_registry import rule
from .schema import NNBRIDGE_TRAINING_DOMAIN

# -- normalization ------------------------------------------------------------------------------

@rule("BatchNormTraining", domain=NNBRIDGE_TRAINING_DOMAIN)
def _batch_norm_training(b, node, grads):
    """One BatchNormTrainingGrad from the 1 / std the forward kept: dX, dscale, dB. The running
    statistics are states, not on the loss's path."""
    if any(g is not None for g in grads[1:]):
        b.unsupported("a loss that reads the running or saved statistics")
    x, scale, bias = node.inputs[:3]
    dx, dscale, dbias = b.op("BatchNormTrainingGrad", grads[0], x, scale, node.outputs[3],
                             domain=NNBRIDGE_TRAINING_DOMAIN,
                             outputs=[(x.type.shape, None), (scale.type.shape, None), (bias.type.shape, None)])
    return [dx, dscale, dbias, None, None]


@rule("LayerNormalization")
def _layer_norm(b, node, grads):
    """One LayerNormalizationGrad (dX, dscale, dB); a scale or bias broadcast to the normalized shape
    is left to training_form, which spells such a node out in primitives."""
    if any(g is not None for g in grads[1:]):
        b.unsupported("a loss that reads LayerNormalization's Mean or InvStdDev")
    x, scale = node.inputs[:2]
    if not layer_norm_fusable(node):
        b.unsupported("a scale or bias broadcast to the normalized shape")
    axis = node.attr("axis", -1) % x.type.rank
    dx, dscale, dbias = b.op("LayerNormalizationGrad", grads[0], x, scale, domain=NNBRIDGE_TRAINING_DOMAIN,
                             attrs={"axis": axis, "epsilon": float(node.attr("epsilon", 1e-5))},
                             outputs=[(x.type.shape, None), (scale.type.shape, None), (scale.type.shape, None)])
    return [dx, dscale, dbias if node.input(2) is not None else None]


def layer_norm_fusable(node) -> bool:
    """Whether LayerNormalizationGrad covers ``node``: scale and bias of the normalized shape."""
    x = node.inputs[0]
    normalized = tuple(x.type.shape[node.attr("axis", -1) % x.type.rank:])
    return all(v is None or tuple(v.type.shape) == normalized for v in (node.input(1), node.input(2)))


def _attr_float(node, name: str, default: float) -> float:
    return float(node.attr(name, default))


@rule("InstanceNormalization")
def _instance_norm(b, node, grads):
    """With x̂ the input standardized per sample and channel over m spatial values:
    dB = Σ dy, dscale = Σ dy·x̂ (over the batch and space), dx = scale·inv_std·(dy − mean(dy) −
    x̂·mean(dy·x̂)), the means over space. The statistics are taken again from x."""
    g, (x, scale) = grads[0], node.inputs[:2]
    shape, rank = tuple(x.type.shape), x.type.rank
    space = list(range(2, rank))
    kept = (*shape[:2], *([1] * len(space)))
    channel = (1, shape[1], *([1] * len(space)))

    def mean(v):
        return b.op("ReduceMean", v, b.ints(space), attrs={"keepdims": 1}, shape=kept, like=v)

    def per_channel(v):
        return b.op("ReduceSum", v, b.ints([0, *space]), attrs={"keepdims": 0}, shape=(shape[1],), like=v)

    centred = b.op("Sub", x, mean(x), like=x)
    var = mean(b.op("Mul", centred, centred, like=x))
    inv = b.op("Reciprocal", b.op("Sqrt", b.op("Add", var, b.scalar(_attr_float(node, "epsilon", 1e-5), x),
                                                 like=var), like=var), like=var)
    normed = b.op("Mul", centred, inv, like=x)
    g_normed = b.op("Mul", g, normed, like=x)
    inner = b.op("Sub", b.op("Sub", g, mean(g), like=x), b.op("Mul", normed, mean(g_normed), like=x), like=x)
    scale_c = b.op("Reshape", scale, b.ints(channel), shape=channel, like=scale)
    dx = b.op("Mul", inner, b.op("Mul", inv, scale_c, shape=kept, like=inv), like=x)
    return [dx, per_channel(g_normed), per_channel(g)]


def _channel_window_band(size: int, channels: int, dtype: np.dtype) -> np.ndarray:
    """The (C, C) 0/1 matrix whose row c marks LRN's window of channel c: ONNX's ⌊(size − 1)/2⌋
    channels before it and ⌈(size − 1)/2⌉ after."""
    before, after = (size - 1) // 2, size - 1 - (size - 1) // 2
    c = np.arange(channels)
    return ((c[None, :] >= c[:, None] - before) & (c[None, :] <= c[:, None] + after)).astype(dtype)


@rule("LRN")
def _lrn(b, node, grads):
    """y = x·s^(−β), s = bias + (α/size)·Σ_window x²: dx = dy·s^(−β) − (2αβ/size)·x·Σ_window'(dy·x·s^(−β−1)),
    the window sums as a (C, C) band matrix times the (N, C, rest) tensor (its transpose backward)."""
    g, x = grads[0], node.inputs[0]
    size = int(node.attr("size"))
    alpha, beta = _attr_float(node, "alpha", 1e-4), _attr_float(node, "beta", 0.75)
    shape = tuple(x.type.shape)
    flat = (shape[0], shape[1], math.prod(shape[2:]))
    band = _channel_window_band(size, shape[1], b.numpy_dtype(x))

    def window_sum(matrix, v):
        rows = b.op("Reshape", v, b.ints(flat), shape=flat, like=v)
        return b.op("Reshape", b.op("MatMul", b.const(matrix), rows, shape=flat, like=v), b.ints(shape),
                    shape=shape, like=v)

    total = window_sum(band, b.op("Mul", x, x, like=x))
    s = b.op("Add", b.op("Mul", total, b.scalar(alpha / size, x), like=x), b.scalar(_attr_float(node, "bias", 1.0), x),
             like=x)
    scaled = b.op("Pow", s, b.scalar(-beta, x), like=x)
    direct = b.op("Mul", g, scaled, like=x)
    through = b.op("Div", b.op("Mul", b.op("Mul", g, x, like=x), scaled, like=x), s, like=x)
    back = b.op("Mul", b.op("Mul", window_sum(np.ascontiguousarray(band.T), through), x, like=x),
                b.scalar(2 * alpha * beta / size, x), like=x)
    return [b.op("Sub", direct, back, like=x)]


# -- losses ---------------------------------------------------------------------------------------

def _one_hot(b, labels, scores):
    classes = scores.type.shape[1]
    hot = b.op("OneHot", labels, b.ints([classes]), b.const(np.array([0, 1], b.numpy_dtype(scores))),
               attrs={"axis": 1}, shape=scores.type.shape, like=scores)
    return hot


def _loss_scale(b, node, g, scores):
    """dL/d(each sample's loss): the output gradient spread over the samples (mean: divided by N)."""
    reduction = node.attr("reduction", "mean")
    per_sample = tuple(d for i, d in enumerate(scores.type.shape) if i != 1)
    if node.input(2) is not None or node.attr("ignore_index") is not None:
        b.unsupported("class weights or ignore_index")
    if reduction == "none":
        return b.op("Unsqueeze", g, b.ints([1]), shape=(per_sample[0], 1, *per_sample[1:]), like=g)
    if reduction == "mean":
        g = b.op("Div", g, b.scalar(float(math.prod(per_sample)), g))
    shape = (1,) * scores.type.rank
    return b.op("Reshape", g, b.ints(shape), shape=shape, like=g)


@rule("SoftmaxCrossEntropyLoss")
def _softmax_cross_entropy(b, node, grads):
    """d(scores) = (softmax(scores) − onehot(labels)) · dL/d(sample loss)."""
    g, scores, labels = grads[0], node.inputs[0], node.inputs[1]
    probs = b.op("Softmax", scores, attrs={"axis": 1}, like=scores)
    diff = b.op("Sub", probs, _one_hot(b, labels, scores), like=scores)
    return [b.op("Mul", diff, _loss_scale(b, node, g, scores), like=scores), None, *([None] * (len(node.inputs) - 2))]


@rule("NegativeLogLikelihoodLoss")
def _nll(b, node, grads):
    """d(log-probabilities) = −onehot(labels) · dL/d(sample loss)."""
    g, scores, labels = grads[0], node.inputs[0], node.inputs[1]
    picked = b.op("Neg", _one_hot(b, labels, scores), like=scores)
    return [b.op("Mul", picked, _loss_scale(b, node, g, scores), like=scores), None,
            *([None] * (len(node.inputs) - 2))]
