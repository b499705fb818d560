"""Generated graph families for the simulators' physics property tests (hypothesis strategies):
MLP chains, convolution stacks, residual blocks, attention blocks, Llama-style decoders with a KV
cache, recurrent cells. Each draws a small graph (a case must stay cheap: the properties run 500
cases each in ``make test``), built once per distinct drawing and handed out as an ``ir.Graph``
(compile copies it, so examples share it)."""

from __future__ import annotations

import functools

import numpy as np
from hypothesis import strategies as st

import nnbridge
from nnbridge.ir import Graph
from nnbridge.zoo import OnnxBuilder, transformer
from nnbridge.zoo.llm import LlamaConfig, llama_graph

FAMILIES = ("mlp", "conv", "residual", "attention", "decoder", "recurrent")


@functools.lru_cache(maxsize=256)
def graph_of(family: str, params: tuple) -> Graph:
    """One drawing's graph, built and imported once (hypothesis often repeats a drawing)."""
    built = BUILDERS[family](*params)
    return built if isinstance(built, Graph) else nnbridge.load(built)


def mlp(batch: int, widths: tuple[int, ...], gemm: bool) -> object:
    """Linear layers with ReLU: Gemm (SMV's inner product with its bias) or MatMul + Add."""
    b = OnnxBuilder("mlp", seed=0)
    x = b.input("x", [batch, widths[0]])
    for i, (n_in, n_out) in enumerate(zip(widths, widths[1:])):
        layer = b.dense(x, n_in, n_out, f"fc{i}") if gemm else b.linear(x, n_in, n_out, f"l{i}")
        x = b.op("Relu", [layer])
    b.output(x)
    return b.model()


def conv(batch: int, channels: tuple[int, ...], image: int, kernels: tuple[int, ...], strides: tuple[int, ...],
         norm: bool, pool: bool) -> object:
    """A convolution stack: conv (+ batch norm) + ReLU per layer, a max pool at the end."""
    b = OnnxBuilder("convs", seed=0)
    x = b.input("x", [batch, channels[0], image, image])
    for i, (c_in, c_out, k, s) in enumerate(zip(channels, channels[1:], kernels, strides)):
        x = b.conv(x, c_in, c_out, k, stride=s, bias=not norm, hint=f"c{i}")
        if norm:
            x = b.batchnorm(x, c_out, f"bn{i}")
        x = b.op("Relu", [x])
    if pool:
        x = b.maxpool(x)
    b.output(x)
    return b.model()


def residual(batch: int, c_in: int, widths: tuple[int, ...], image: int, strides: tuple[int, ...]) -> object:
    """ResNet basic blocks: conv-BN-ReLU-conv-BN plus the skip (a 1×1 projection when the width or
    the stride changes), added, then ReLU."""
    b = OnnxBuilder("residual", seed=0)
    x = b.input("x", [batch, c_in, image, image])
    for i, (c_out, s) in enumerate(zip(widths, strides)):
        y = b.op("Relu", [b.batchnorm(b.conv(x, c_in, c_out, 3, s, bias=False, hint=f"b{i}a"), c_out, f"b{i}bna")])
        y = b.batchnorm(b.conv(y, c_out, c_out, 3, bias=False, hint=f"b{i}b"), c_out, f"b{i}bnb")
        skip = x
        if s != 1 or c_in != c_out:
            skip = b.batchnorm(b.conv(x, c_in, c_out, 1, s, pad=0, bias=False, hint=f"b{i}p"), c_out, f"b{i}bnp")
        x = b.op("Relu", [b.op("Add", [y, skip])])
        c_in = c_out
    b.output(x)
    return b.model()


def attention(batch: int, layers: int, seq: int, heads: int, head_dim: int, ffn_mult: int) -> object:
    """Pre-norm encoder layers: layer norm, Q/K/V projections, softmax(QKᵀ/√d)V, output projection
    and residual, layer norm, GELU MLP and residual (``zoo.transformer``)."""
    hidden = heads * head_dim
    return transformer("attention", batch, layers=layers, seq=seq, hidden=hidden, heads=heads,
                       ffn=hidden * ffn_mult, seed=0)


def decoder(batch: int, layers: int, heads: int, kv_heads: int, head_dim: int, ffn_mult: int, vocab: int,
            phase: str, context: int, prompt: int) -> Graph:
    """A Llama-style decoder (``zoo.llm``): RMS norm, grouped-query attention over a KV cache given
    as inputs (decode) or over the prompt (prefill), SwiGLU MLP, LM head."""
    hidden = heads * head_dim
    config = LlamaConfig("tiny", hidden, layers, heads, kv_heads, hidden * ffn_mult, vocab)
    return llama_graph(config, phase=phase, batch=batch, context=context, prompt=prompt)


def recurrent(batch: int, features: int, hidden: int, steps: int, cell: str) -> object:
    """An unrolled LSTM cell over ``steps`` time steps from its elementary ops (gate projections,
    sigmoid/tanh gates, the cell update), or ONNX's own LSTM or GRU op over the sequence."""
    b = OnnxBuilder("recurrent", seed=0)
    if cell in ("LSTM", "GRU"):
        gates = 4 if cell == "LSTM" else 3
        x = b.input("x", [batch, steps, features])  # batch first (layout 1): the samples lead
        w = b.weight("w", (1, gates * hidden, features), fan_in=features)
        r = b.weight("r", (1, gates * hidden, hidden), fan_in=hidden)
        outs = b.op(cell, [x, w, r], cell.lower(), n_out=2, hidden_size=hidden, layout=1)
        b.output(outs[1])
        return b.model()
    x = b.input("x", [batch, steps, features])
    h = b.input("h0", [batch, hidden])
    c = b.input("c0", [batch, hidden])
    w, r = b.weight("w", (features, 4 * hidden), fan_in=features), b.weight("r", (hidden, 4 * hidden), fan_in=hidden)
    bias = b.bias("bias", 4 * hidden)
    bounds = [b.const(f"at{i}", np.array([i * hidden], np.int64)) for i in range(5)]
    last = b.const("last_axis", np.array([-1], np.int64))
    for t in range(steps):
        xt = b.op("Gather", [x, b.const(f"t{t}", np.array(t, np.int64))], f"x{t}", axis=1)
        z = b.op("Add", [b.op("Add", [b.op("MatMul", [xt, w]), b.op("MatMul", [h, r])]), bias])
        i, f, g, o = (b.op("Slice", [z, bounds[k], bounds[k + 1], last]) for k in range(4))
        c = b.op("Add", [b.op("Mul", [b.op("Sigmoid", [f]), c]),
                         b.op("Mul", [b.op("Sigmoid", [i]), b.op("Tanh", [g])])])
        h = b.op("Mul", [b.op("Sigmoid", [o]), b.op("Tanh", [c])], f"hidden{t}")
    b.output(h)
    return b.model()


BUILDERS = {"mlp": mlp, "conv": conv, "residual": residual, "attention": attention, "decoder": decoder,
            "recurrent": recurrent}


def _tuple(draw, element, low: int, high: int) -> tuple:
    return tuple(draw(st.lists(element, min_size=low, max_size=high)))


@st.composite
def drawings(draw, family: str, batches=(1, 2, 4), big: bool = True) -> tuple[str, tuple]:
    """The parameters of one graph of ``family`` (``big``: widths for a chip of many units; else
    shapes a simulator compiles in milliseconds: short sequences, contexts and unrolled loops)."""
    batch = draw(st.sampled_from(batches))
    if family == "mlp":
        width = st.integers(8, 2048 if big else 512)
        return family, (batch, _tuple(draw, width, 2, 5), draw(st.booleans()))
    if family == "conv":
        layers = draw(st.integers(1, 4))
        channels = (draw(st.integers(1, 64)), *(draw(st.integers(1, 96)) for _ in range(layers)))
        kernels = tuple(draw(st.sampled_from([1, 3, 5])) for _ in range(layers))
        strides = tuple(draw(st.sampled_from([1, 1, 2])) for _ in range(layers))
        return family, (batch, channels, draw(st.integers(5, 32)), kernels, strides, draw(st.booleans()),
                        draw(st.booleans()))
    if family == "residual":
        blocks = draw(st.integers(1, 2))
        widths = tuple(draw(st.sampled_from([8, 16, 24, 32, 48])) for _ in range(blocks))
        strides = tuple(draw(st.sampled_from([1, 2])) for _ in range(blocks))
        return family, (batch, draw(st.sampled_from([3, 8, 16])), widths, draw(st.integers(6, 24)), strides)
    if family == "attention":  # a big one compiles in seconds on the RDU: small ones in milliseconds
        return family, (batch, draw(st.integers(1, 2 if big else 1)),
                        draw(st.sampled_from([4, 8, 16, 32] if big else [4, 8])),
                        draw(st.sampled_from([1, 2, 4, 8] if big else [1, 2, 4])),
                        draw(st.sampled_from([8, 16, 32] if big else [8, 16])), draw(st.sampled_from([1, 2, 4])))
    if family == "decoder":
        heads = draw(st.sampled_from([2, 4, 8]))
        kv = draw(st.sampled_from([h for h in (1, 2, heads) if heads % h == 0]))
        return family, (batch, draw(st.integers(1, 2 if big else 1)), heads, kv, draw(st.sampled_from([16, 32])),
                        draw(st.sampled_from([2, 4])), draw(st.sampled_from([256, 1024] if big else [256])),
                        draw(st.sampled_from(["decode", "prefill"])),
                        draw(st.sampled_from([8, 64, 256] if big else [8, 64])),
                        draw(st.sampled_from([4, 16] if big else [4])))
    return family, (batch, draw(st.integers(4, 64)), draw(st.integers(4, 64)),
                    draw(st.integers(1, 4 if big else 2)), draw(st.sampled_from(["unrolled", "LSTM", "GRU"])))


@st.composite
def graphs(draw, families=FAMILIES, batches=(1, 2, 4), big: bool = True) -> tuple[str, Graph]:
    """(family, graph): a graph of one of ``families``, shared by every example that draws it."""
    family, params = draw(drawings(draw(st.sampled_from(families)), batches, big))
    return family, graph_of(family, params)


def batched(family: str, params: tuple, batch: int) -> Graph:
    """The graph of a drawing with another batch (its first parameter)."""
    return graph_of(family, (batch, *params[1:]))
