"""A BERT-style encoder stack: the zoo's transformer_tiny and the benchmarks' BERT-base."""

from __future__ import annotations

import numpy as np
import onnx

from .builder import OnnxBuilder


def transformer(name: str, batch: int, layers: int, seq: int, hidden: int, heads: int, ffn: int,
                seed: int = 0) -> onnx.ModelProto:
    """A BERT-style encoder stack (also used by benchmarks at BERT-base size)."""
    b = OnnxBuilder(name, seed=seed)
    dh = hidden // heads
    x = b.input("input", [batch, seq, hidden])
    split_shape = b.const("heads_shape", np.array([batch, seq, heads, dh], np.int64))
    merge_shape = b.const("merge_shape", np.array([batch, seq, hidden], np.int64))
    inv_sqrt = b.const("inv_sqrt_dh", np.array(1 / np.sqrt(dh), np.float32))

    def layernorm(x: str, hint: str) -> str:
        gamma = b.const(f"{hint}_gamma", (1 + 0.1 * b.rng.standard_normal(hidden)).astype(np.float32))
        beta = b.const(f"{hint}_beta", (0.1 * b.rng.standard_normal(hidden)).astype(np.float32))
        return b.op("LayerNormalization", [x, gamma, beta], hint, axis=-1, epsilon=1e-5)

    def heads_of(x: str, hint: str) -> str:
        y = b.op("Reshape", [x, split_shape], f"{hint}_split")
        return b.op("Transpose", [y], f"{hint}_heads", perm=[0, 2, 1, 3])

    for i in range(layers):
        p = f"l{i}"
        h = layernorm(x, f"{p}_ln1")
        q = heads_of(b.linear(h, hidden, hidden, f"{p}_q"), f"{p}_q")
        k = heads_of(b.linear(h, hidden, hidden, f"{p}_k"), f"{p}_k")
        v = heads_of(b.linear(h, hidden, hidden, f"{p}_v"), f"{p}_v")
        kt = b.op("Transpose", [k], f"{p}_kT", perm=[0, 1, 3, 2])
        scores = b.op("Mul", [b.op("MatMul", [q, kt], f"{p}_qk"), inv_sqrt], f"{p}_scale")
        attn = b.op("Softmax", [scores], f"{p}_softmax", axis=-1)
        ctx = b.op("Transpose", [b.op("MatMul", [attn, v], f"{p}_av")], f"{p}_ctxT", perm=[0, 2, 1, 3])
        ctx = b.op("Reshape", [ctx, merge_shape], f"{p}_merge")
        x = b.op("Add", [x, b.linear(ctx, hidden, hidden, f"{p}_o")], f"{p}_res1")
        h = layernorm(x, f"{p}_ln2")
        h = b.op("Gelu", [b.linear(h, hidden, ffn, f"{p}_ff1")], f"{p}_gelu")
        x = b.op("Add", [x, b.linear(h, ffn, hidden, f"{p}_ff2")], f"{p}_res2")
    b.output(x)
    return b.model()
