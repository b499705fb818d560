"""Llama-style decoder-only LLMs for serving estimates: prefill and decode with a KV cache
(MHA or GQA), one tensor-parallel socket's share of the model, weights as shapes only.

The graph is built directly in the IR. Its weights are zero-stride views of one scalar (shape and
dtype without memory), so a 405B model costs kilobytes and estimates in seconds; running it
computes with zero weights. What one socket of ``sockets`` holds (Megatron-style tensor
parallelism): its share of the query heads, of the key/value heads (replicated when there are
fewer than sockets), of the FFN width and of the vocabulary; the attention output and the FFN
down projection end in an ``nnbridge.AllReduce`` over the sockets.

Inputs: ``x`` — the embedded tokens ``[batch, tokens, hidden]`` (the embedding lookup reads
``batch × tokens`` rows of the table, which the host does), and for decode each layer's cache,
keys stored transposed (``past_key{i}`` ``[batch, kv, head_dim, context]``, ``past_value{i}``
``[batch, kv, context, head_dim]``). Outputs: the last position's logits (this socket's vocabulary
share) and each layer's new keys and values (what the cache appends). RoPE (elementwise, < 0.1 %
of the FLOPs) and the causal mask are left out.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

import numpy as np

from ..base.errors import InputError
from ..ir import DType, Graph, TensorType, Value
from ..ir.schema import NNBRIDGE_DOMAIN


@dataclass(frozen=True)
class LlamaConfig:
    name: str
    hidden: int
    layers: int
    heads: int
    kv_heads: int
    ffn: int
    vocab: int

    @property
    def head_dim(self) -> int:
        return self.hidden // self.heads

    @property
    def parameters(self) -> int:
        """Weights of the decoder and the LM head (the embedding table is the host's)."""
        attention = self.hidden * self.head_dim * (2 * self.heads + 2 * self.kv_heads)
        return self.layers * (attention + 3 * self.hidden * self.ffn + 2 * self.hidden) + \
            self.hidden * (self.vocab + 1)


#: Meta's published Llama 3.1 configurations (the models' config.json on their model cards)
LLAMA_3_1 = {
    "8b": LlamaConfig("llama-3.1-8b", 4096, 32, 32, 8, 14336, 128256),
    "70b": LlamaConfig("llama-3.1-70b", 8192, 80, 64, 8, 28672, 128256),
    "405b": LlamaConfig("llama-3.1-405b", 16384, 126, 128, 8, 53248, 128256),
}


def llama_config(name: str) -> LlamaConfig:
    key = name.lower().removeprefix("llama-3.1-").removeprefix("llama3.1-")
    if key not in LLAMA_3_1:
        raise InputError(f"unknown Llama configuration '{name}'; choose from {', '.join(LLAMA_3_1)}")
    return LLAMA_3_1[key]


class _Builder:
    def __init__(self, name: str):
        self.graph = Graph(name)

    def input(self, name: str, shape: tuple[int, ...]) -> Value:
        return self.graph.add_input(name, TensorType(DType.FLOAT32, shape))

    def weight(self, name: str, shape: tuple[int, ...], fill: float = 0.0) -> Value:
        return self.graph.add_initializer(name, np.broadcast_to(np.float32(fill), shape))

    def ints(self, name: str, values: list[int]) -> Value:
        return self.graph.add_initializer(name, np.array(values, np.int64))

    def op(self, op: str, inputs: list[Value], shape: tuple[int, ...], name: str, domain: str = "",
           **attrs) -> Value:
        out = self.graph.add_value(name, TensorType(DType.FLOAT32, tuple(shape)))
        self.graph.add_node(op, inputs, [out], attrs, name=name, domain=domain)
        return out


def llama_graph(config: LlamaConfig, *, phase: str = "decode", batch: int = 1, context: int = 4096,
                prompt: int = 128, sockets: int = 1) -> Graph:
    """One socket's graph for one decode step over ``context`` cached tokens, or for the prefill of
    a ``prompt``-token prompt; ``sockets`` is the tensor-parallel degree."""
    if phase not in ("decode", "prefill"):
        raise InputError(f"phase must be 'decode' or 'prefill', not '{phase}'")
    for what, value in (("batch", batch), ("context", context), ("prompt", prompt), ("sockets", sockets)):
        if not isinstance(value, int) or value < 1:
            raise InputError(f"{what} must be a positive integer, not {value!r}")
    if config.heads % sockets or config.ffn % sockets:
        raise InputError(f"{config.name}: {config.heads} heads and FFN {config.ffn} do not split over {sockets} "
                         f"sockets")
    b = _Builder(f"{config.name}-{phase}-tp{sockets}")
    d, hidden = config.head_dim, config.hidden
    heads = config.heads // sockets
    kv = max(1, config.kv_heads // sockets)  # fewer key/value heads than sockets: each socket keeps one
    group, ffn, vocab = heads // kv, config.ffn // sockets, math.ceil(config.vocab / sockets)
    tokens = 1 if phase == "decode" else prompt
    x = b.input("x", (batch, tokens, hidden))

    def norm(v: Value, name: str) -> Value:
        return b.op("RMSNormalization", [v, b.weight(f"{name}.weight", (hidden,), 1.0)], v.type.shape, name,
                    axis=-1, epsilon=1e-5)

    def linear(v: Value, n_in: int, n_out: int, name: str) -> Value:
        return b.op("MatMul", [v, b.weight(f"{name}.weight", (n_in, n_out))], (*v.type.shape[:-1], n_out), name)

    def all_reduce(v: Value, name: str) -> Value:
        if sockets == 1:
            return v
        return b.op("AllReduce", [v], v.type.shape, name, domain=NNBRIDGE_DOMAIN, sockets=sockets)

    outputs: list[Value] = []
    for i in range(config.layers):
        p = f"layers.{i}"
        h = norm(x, f"{p}.input_layernorm")
        q = linear(h, hidden, heads * d, f"{p}.q_proj")
        k = linear(h, hidden, kv * d, f"{p}.k_proj")
        v = linear(h, hidden, kv * d, f"{p}.v_proj")
        outputs += [k, v]
        if phase == "decode":  # the new token's queries against the whole cache
            past_k = b.input(f"past_key{i}", (batch, kv, d, context))
            past_v = b.input(f"past_value{i}", (batch, kv, context, d))
            q4 = b.op("Reshape", [q, b.ints(f"{p}.q_shape", [batch, kv, group, d])], (batch, kv, group, d),
                      f"{p}.q_heads")
            scores = b.op("MatMul", [q4, past_k], (batch, kv, group, context), f"{p}.scores")
            probs = b.op("Softmax", [scores], scores.type.shape, f"{p}.softmax", axis=-1)
            ctx = b.op("MatMul", [probs, past_v], (batch, kv, group, d), f"{p}.context")
        else:  # every prompt token against the prompt's own keys and values
            q5 = b.op("Reshape", [q, b.ints(f"{p}.q_shape", [batch, tokens, kv, group, d])],
                      (batch, tokens, kv, group, d), f"{p}.q_split")
            q5 = b.op("Transpose", [q5], (batch, kv, group, tokens, d), f"{p}.q_heads", perm=[0, 2, 3, 1, 4])
            k5 = b.op("Reshape", [k, b.ints(f"{p}.k_shape", [batch, tokens, kv, 1, d])],
                      (batch, tokens, kv, 1, d), f"{p}.k_split")
            kt = b.op("Transpose", [k5], (batch, kv, 1, d, tokens), f"{p}.k_heads", perm=[0, 2, 3, 4, 1])
            v5 = b.op("Reshape", [v, b.ints(f"{p}.v_shape", [batch, tokens, kv, 1, d])],
                      (batch, tokens, kv, 1, d), f"{p}.v_split")
            vh = b.op("Transpose", [v5], (batch, kv, 1, tokens, d), f"{p}.v_heads", perm=[0, 2, 3, 1, 4])
            scores = b.op("MatMul", [q5, kt], (batch, kv, group, tokens, tokens), f"{p}.scores")
            probs = b.op("Softmax", [scores], scores.type.shape, f"{p}.softmax", axis=-1)
            ctx = b.op("MatMul", [probs, vh], (batch, kv, group, tokens, d), f"{p}.context")
            ctx = b.op("Transpose", [ctx], (batch, tokens, kv, group, d), f"{p}.context_tokens",
                       perm=[0, 3, 1, 2, 4])
        ctx = b.op("Reshape", [ctx, b.ints(f"{p}.merge", [batch, tokens, heads * d])], (batch, tokens, heads * d),
                   f"{p}.merge")
        attn = all_reduce(linear(ctx, heads * d, hidden, f"{p}.o_proj"), f"{p}.o_proj.all_reduce")
        x = b.op("Add", [x, attn], x.type.shape, f"{p}.attention_residual")
        h = norm(x, f"{p}.post_attention_layernorm")
        gate = linear(h, hidden, ffn, f"{p}.gate_proj")
        silu = b.op("Mul", [gate, b.op("Sigmoid", [gate], gate.type.shape, f"{p}.gate_sigmoid")], gate.type.shape,
                    f"{p}.silu")
        up = b.op("Mul", [silu, linear(h, hidden, ffn, f"{p}.up_proj")], gate.type.shape, f"{p}.swiglu")
        down = all_reduce(linear(up, ffn, hidden, f"{p}.down_proj"), f"{p}.down_proj.all_reduce")
        x = b.op("Add", [x, down], x.type.shape, f"{p}.mlp_residual")
    if tokens > 1:  # only the last position's logits are sampled
        x = b.op("Slice", [x, b.ints("last.start", [tokens - 1]), b.ints("last.end", [tokens]),
                           b.ints("last.axis", [1])], (batch, 1, hidden), "last_position")
    logits = linear(norm(x, "norm"), hidden, vocab, "lm_head")
    b.graph.outputs = [logits, *outputs]
    b.graph.metadata["llm.tokens"] = str(tokens)  # tokens one sample of the graph produces or reads in
    b.graph.metadata["llm"] = (f"{config.name} {phase}: batch {batch}, "
                               f"{'context ' + str(context) if phase == 'decode' else 'prompt ' + str(prompt)}, "
                               f"one of {sockets} tensor-parallel socket(s)")
    return b.graph
