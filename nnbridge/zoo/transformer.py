"""Transformer stacks: a BERT-style encoder (the zoo's transformer_tiny, the benchmarks' BERT-base)
and a LLaMA-style decoder (sweeps and benchmarks)."""

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


def llama_decoder(batch: int = 1, seq: int = 128, layers: int = 4, hidden: int = 512, heads: int = 8,
                  kv_heads: int = 2, ffn: int = 1376, seed: int = 2) -> onnx.ModelProto:
    """A LLaMA-style decoder stack: RMSNorm, rotary position embedding, grouped-query causal
    attention (``kv_heads`` key/value heads shared by ``heads`` query heads), SwiGLU feed-forward;
    projections without biases."""
    b = OnnxBuilder("llama_decoder", seed=seed)
    dh, rep = hidden // heads, heads // kv_heads
    x = b.input("input", [batch, seq, hidden])
    eps = b.const("rms_eps", np.array(1e-6, np.float32))
    last_axis = b.const("last_axis", np.array([-1], np.int64))
    inv_sqrt = b.const("inv_sqrt_dh", np.array(1 / np.sqrt(dh), np.float32))
    mask = b.const("causal_mask", np.triu(np.full((seq, seq), -1e9, np.float32), k=1)[None, None])
    angles = np.arange(seq)[:, None] / (10000 ** (np.arange(0, dh, 2) / dh))[None, :]
    cos = b.const("rope_cos", np.concatenate([np.cos(angles)] * 2, axis=-1).astype(np.float32))
    sin = b.const("rope_sin", np.concatenate([np.sin(angles)] * 2, axis=-1).astype(np.float32))
    lo_start, lo_end = b.const("lo_start", np.array([0], np.int64)), b.const("lo_end", np.array([dh // 2], np.int64))
    hi_end = b.const("hi_end", np.array([dh], np.int64))

    def shape(hint: str, dims: list[int]) -> str:
        return b.const(hint, np.array(dims, np.int64))

    def rmsnorm(x: str, hint: str) -> str:
        mean_sq = b.op("ReduceMean", [b.op("Mul", [x, x], f"{hint}_sq"), last_axis], f"{hint}_ms", keepdims=1)
        scale = b.op("Sqrt", [b.op("Add", [mean_sq, eps], f"{hint}_eps")], f"{hint}_rms")
        gamma = b.const(f"{hint}_gamma", (1 + 0.1 * b.rng.standard_normal(hidden)).astype(np.float32))
        return b.op("Mul", [b.op("Div", [x, scale], f"{hint}_norm"), gamma], hint)

    def project(x: str, n_in: int, n_out: int, hint: str) -> str:
        return b.op("MatMul", [x, b.weight(f"{hint}_w", (n_in, n_out), fan_in=n_in)], hint)

    def heads_of(x: str, n: int, hint: str) -> str:  # [b, seq, n·dh] → [b, n, seq, dh]
        y = b.op("Reshape", [x, shape(f"{hint}_shape", [batch, seq, n, dh])], f"{hint}_split")
        return b.op("Transpose", [y], f"{hint}_heads", perm=[0, 2, 1, 3])

    def rotary(x: str, hint: str) -> str:  # x·cos + rotate_half(x)·sin over the last axis
        lo = b.op("Slice", [x, lo_start, lo_end, last_axis], f"{hint}_lo")
        hi = b.op("Slice", [x, lo_end, hi_end, last_axis], f"{hint}_hi")
        rotated = b.op("Concat", [b.op("Neg", [hi], f"{hint}_neg"), lo], f"{hint}_rot", axis=-1)
        return b.op("Add", [b.op("Mul", [x, cos], f"{hint}_cos"), b.op("Mul", [rotated, sin], f"{hint}_sin")], hint)

    def shared(x: str, hint: str) -> str:  # [b, kv, seq, dh] → [b, heads, seq, dh], each kv head repeated
        y = b.op("Reshape", [x, shape(f"{hint}_5d", [batch, kv_heads, 1, seq, dh])], f"{hint}_5d")
        y = b.op("Expand", [y, shape(f"{hint}_rep", [batch, kv_heads, rep, seq, dh])], f"{hint}_expand")
        return b.op("Reshape", [y, shape(f"{hint}_4d", [batch, heads, seq, dh])], f"{hint}_shared")

    for i in range(layers):
        p = f"l{i}"
        h = rmsnorm(x, f"{p}_attn_norm")
        q = rotary(heads_of(project(h, hidden, hidden, f"{p}_q"), heads, f"{p}_q"), f"{p}_q_rope")
        k = rotary(heads_of(project(h, hidden, kv_heads * dh, f"{p}_k"), kv_heads, f"{p}_k"), f"{p}_k_rope")
        v = heads_of(project(h, hidden, kv_heads * dh, f"{p}_v"), kv_heads, f"{p}_v")
        kt = b.op("Transpose", [shared(k, f"{p}_k")], f"{p}_kT", perm=[0, 1, 3, 2])
        scores = b.op("Mul", [b.op("MatMul", [q, kt], f"{p}_qk"), inv_sqrt], f"{p}_scale")
        attn = b.op("Softmax", [b.op("Add", [scores, mask], f"{p}_masked")], f"{p}_softmax", axis=-1)
        ctx = b.op("Transpose", [b.op("MatMul", [attn, shared(v, f"{p}_v")], f"{p}_av")], f"{p}_ctxT",
                   perm=[0, 2, 1, 3])
        ctx = b.op("Reshape", [ctx, shape(f"{p}_merge", [batch, seq, hidden])], f"{p}_merge")
        x = b.op("Add", [x, project(ctx, hidden, hidden, f"{p}_o")], f"{p}_res1")
        h = rmsnorm(x, f"{p}_ffn_norm")
        gate = project(h, hidden, ffn, f"{p}_gate")
        silu = b.op("Mul", [gate, b.op("Sigmoid", [gate], f"{p}_gate_sigmoid")], f"{p}_silu")
        h = b.op("Mul", [silu, project(h, hidden, ffn, f"{p}_up")], f"{p}_swiglu")
        x = b.op("Add", [x, project(h, ffn, hidden, f"{p}_down")], f"{p}_res2")
    b.output(rmsnorm(x, "final_norm"))
    return b.model()
