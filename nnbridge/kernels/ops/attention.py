"""Attention (opset 23+: 3-D/4-D inputs, GQA, KV cache, masks, causal, softcap) and RotaryEmbedding.

Attention is two batched matmuls around a masked softmax. The additive bias
collects the boolean/float mask (padded with "masked" up to the KV length),
the bottom-right-aligned causal mask and the per-batch non-padding lengths;
sliding windows; rows with nothing to attend to produce zeros.
"""

from __future__ import annotations

import numpy as np

from ...ir import DType, Node
from ..parallel import matmul
from ..registry import kernel
from ._windows import FLOATS, WITH_BF16, compute_dtype


def _check_attention(node: Node, *, left_window_size=-1, qk_matmul_output_mode=0, right_window_size=-1,
                     softmax_precision=None) -> str | None:
    mode = int(qk_matmul_output_mode or 0)
    if mode not in (0, 1, 2, 3):
        return f"qk_matmul_output_mode={mode} is not implemented"
    for name, value in (("left_window_size", left_window_size), ("right_window_size", right_window_size)):
        if value < -1:
            return f"{name}={value} is invalid"
    precision = softmax_precision
    if precision is not None and DType(precision) not in FLOATS:
        return f"softmax_precision={precision} is not implemented"
    return None


def _split_heads(x: np.ndarray, heads: int | None) -> np.ndarray:
    """(B, S, heads*H) -> (B, heads, S, H); 4-D inputs are already split."""
    if x.ndim == 4:
        return x
    b, s, hidden = x.shape
    return x.reshape(b, s, heads, hidden // heads).transpose(0, 2, 1, 3)


def _bias(q_len: int, kv_len: int, past_len: int, mask, lengths, dtype, causal: bool, left: int,
          right: int) -> np.ndarray:
    """Additive attention bias broadcastable to (B, heads, q, kv): 0 attends, -inf masks.

    Causal and sliding-window limits (``left``/``right``: -1 for none) are relative to each
    query's absolute position.
    """
    neg = dtype.type(-np.inf)
    bias = np.zeros((q_len, kv_len), dtype)
    if mask is not None:
        pad = kv_len - mask.shape[-1]
        if mask.dtype == np.bool_:
            mask = np.where(mask, dtype.type(0), neg)
        else:
            mask = mask.astype(dtype, copy=False)
        if pad > 0:
            mask = np.pad(mask, [(0, 0)] * (mask.ndim - 1) + [(0, pad)], constant_values=neg)
        bias = bias + mask
    cols = np.arange(kv_len)[None, :]
    # absolute position of each query: bottom-right aligned with the keys
    if lengths is not None and past_len == 0:
        position = np.arange(q_len)[:, None] + (np.asarray(lengths).reshape(-1) - q_len).reshape(-1, 1, 1, 1)
    else:
        position = np.arange(q_len)[:, None] + past_len
    allowed = np.ones((1, 1), bool)
    if causal:
        allowed = allowed & (cols <= position)
    if left >= 0:
        allowed = allowed & (position - cols <= left)
    if right >= 0:
        allowed = allowed & (cols - position <= right)
    if allowed.ndim > 2 or not allowed.all():
        bias = bias + np.where(allowed, dtype.type(0), neg)
    if lengths is not None:
        valid = cols < np.asarray(lengths).reshape(-1, 1, 1, 1)
        bias = bias + np.where(valid, dtype.type(0), neg)
    return bias


@kernel("Attention", dtypes=WITH_BF16, check=_check_attention)
def attention(ctx, q, k, v, mask=None, past_key=None, past_value=None, lengths=None, *, is_causal=0,
              kv_num_heads=None, left_window_size=-1, q_num_heads=None, qk_matmul_output_mode=0,
              right_window_size=-1, scale=None, softcap=0.0, softmax_precision=None):
    dt = compute_dtype(q.dtype)
    rank = q.ndim
    qh = _split_heads(q.astype(dt, copy=False), q_num_heads)
    kh = _split_heads(k.astype(dt, copy=False), kv_num_heads)
    vh = _split_heads(v.astype(dt, copy=False), kv_num_heads)
    past_len = 0
    if past_key is not None:
        past_len = past_key.shape[2]
        kh = np.concatenate([past_key.astype(dt, copy=False), kh], axis=2)
        vh = np.concatenate([past_value.astype(dt, copy=False), vh], axis=2)
    present_key, present_value = kh, vh
    heads, kv_heads = qh.shape[1], kh.shape[1]
    if heads != kv_heads:  # grouped-query attention: each KV head serves a block of query heads
        kh = np.repeat(kh, heads // kv_heads, axis=1)
        vh = np.repeat(vh, heads // kv_heads, axis=1)
    scale = 1 / np.sqrt(qh.shape[-1]) if scale is None else scale
    root = dt.type(np.sqrt(scale))
    scores = matmul(qh * root, (kh * root).transpose(0, 1, 3, 2))
    if softcap:
        scores = np.tanh(scores / dt.type(softcap)) * dt.type(softcap)
    bias = _bias(qh.shape[2], kh.shape[2], past_len, mask, lengths, dt, bool(is_causal), left_window_size,
                 right_window_size)
    biased = scores + bias
    mode = int(qk_matmul_output_mode or 0)
    logits = biased.astype(DType(softmax_precision).numpy, copy=False) if softmax_precision is not None else biased
    probs = _masked_softmax(logits)
    blocked = np.isneginf(np.max(bias, axis=-1, keepdims=True))
    probs = np.where(blocked, 0, probs).astype(dt, copy=False)
    y = matmul(probs, vh)
    if rank == 3:
        y = y.transpose(0, 2, 1, 3).reshape(y.shape[0], y.shape[2], -1)
    qk = {2: biased, 3: probs}.get(mode, scores)
    outs = (y, present_key, present_value, qk)
    return tuple(o.astype(q.dtype, copy=False) for o in outs[:len(ctx.node.outputs)])


def _masked_softmax(x: np.ndarray) -> np.ndarray:
    """Softmax over the last axis where a fully masked (-inf) row gives zeros, not NaN."""
    peak = np.max(x, axis=-1, keepdims=True)
    e = np.exp(x - np.where(np.isneginf(peak), 0, peak))
    total = e.sum(axis=-1, keepdims=True)
    return e / np.where(total == 0, 1, total)


@kernel("RotaryEmbedding", dtypes=WITH_BF16)
def rotary_embedding(ctx, x, cos_cache, sin_cache, position_ids=None, *, interleaved=0, num_heads=None,
                     rotary_embedding_dim=0):
    dt = compute_dtype(x.dtype)
    four_d = x.ndim == 4
    xs = x.astype(dt, copy=False)
    xs = xs.transpose(0, 2, 1, 3) if four_d else xs.reshape(x.shape[0], x.shape[1], num_heads, -1)
    rot = int(rotary_embedding_dim or 0) or xs.shape[-1]
    cos, sin = cos_cache.astype(dt, copy=False), sin_cache.astype(dt, copy=False)
    if position_ids is not None:
        cos, sin = cos[position_ids], sin[position_ids]
    cos, sin = cos[:, :, None, :], sin[:, :, None, :]  # (B, S, 1, rot/2)
    part = xs[..., :rot]
    interleaved = bool(interleaved)
    x1, x2 = (part[..., 0::2], part[..., 1::2]) if interleaved else (part[..., :rot // 2], part[..., rot // 2:])
    real, imag = cos * x1 - sin * x2, sin * x1 + cos * x2
    rotated = np.stack([real, imag], axis=-1).reshape(part.shape) if interleaved else np.concatenate([real, imag], -1)
    y = np.concatenate([rotated, xs[..., rot:]], axis=-1)
    y = y.transpose(0, 2, 1, 3) if four_d else y.reshape(x.shape)
    return y.astype(x.dtype, copy=False)
