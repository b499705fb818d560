"""``sg.nn``, as in SMAUG: the neural-network ops (``nn_ops``), the recurrent layers (``recurrent``) and the
attention layers (``attention``)."""

from __future__ import annotations

from .attention import AttentionBase, BahdanauAttention
from .nn_ops import (
    ACTIVATION_OPS,
    ACTIVATIONS,
    avg_pool,
    batch_norm,
    convolution,
    elu,
    hard_tanh,
    lrelu,
    mat_mul,
    max_pool,
    relu,
    selu,
    sigmoid,
    softmax,
    tanh,
)
from .recurrent import LSTM, BidirectionalLSTM

__all__ = ["ACTIVATIONS", "ACTIVATION_OPS", "convolution", "max_pool", "avg_pool", "mat_mul", "batch_norm", "relu",
           "lrelu", "elu", "selu", "tanh", "hard_tanh", "sigmoid", "softmax", "LSTM", "BidirectionalLSTM",
           "AttentionBase", "BahdanauAttention"]
