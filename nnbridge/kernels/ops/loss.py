"""Losses: NegativeLogLikelihoodLoss and SoftmaxCrossEntropyLoss (weights, ignore_index, reductions).

The per-element loss is one gather along the class axis; "mean" divides by the
total weight of the counted (not ignored) targets, as the ONNX definition says.
"""

from __future__ import annotations

import numpy as np

from ...ir import Node
from ..registry import kernel
from ._windows import WITH_BF16, compute_dtype
from .softmax import log_softmax_along


def _check_reduction(node: Node, *, reduction="mean") -> str | None:
    return None if reduction in ("none", "sum", "mean") else f"reduction={reduction} is not implemented"


def nll(log_prob: np.ndarray, target: np.ndarray, weight: np.ndarray | None, ignore: int | None,
        reduction: str) -> np.ndarray:
    """-log_prob[n, target[n, ...], ...] weighted and reduced (``ignore``: the ignore_index attribute);
    computed in log_prob's dtype."""
    classes = log_prob.shape[1]
    target = target.astype(np.int64)
    counted = np.ones(target.shape, bool) if ignore is None else target != ignore
    safe = np.where(counted, target, 0).clip(0, classes - 1)
    picked = np.take_along_axis(log_prob, safe[:, None], axis=1)[:, 0]
    w = (np.ones(target.shape, log_prob.dtype) if weight is None
         else weight.astype(log_prob.dtype, copy=False)[safe]) * counted
    loss = -picked * w
    if reduction == "sum":
        return np.asarray(loss.sum(), dtype=log_prob.dtype)
    if reduction == "mean":
        return np.asarray(loss.sum() / w.sum(), dtype=log_prob.dtype)
    return loss


@kernel("NegativeLogLikelihoodLoss", dtypes=WITH_BF16, check=_check_reduction)
def negative_log_likelihood_loss(ctx, x, target, weight=None, *, ignore_index=None, reduction="mean"):
    log_prob = x.astype(compute_dtype(x.dtype), copy=False)
    return nll(log_prob, target, weight, ignore_index, reduction).astype(x.dtype, copy=False)


@kernel("SoftmaxCrossEntropyLoss", dtypes=WITH_BF16, check=_check_reduction)
def softmax_cross_entropy_loss(ctx, scores, labels, weights=None, *, ignore_index=None, reduction="mean"):
    log_prob = log_softmax_along(scores.astype(compute_dtype(scores.dtype), copy=False), 1)
    loss = nll(log_prob, labels, weights, ignore_index, reduction).astype(scores.dtype, copy=False)
    if len(ctx.node.outputs) > 1:
        return loss, log_prob.astype(scores.dtype, copy=False)
    return loss
