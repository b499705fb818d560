"""Real architectures for the speed benchmark, exported with ``torch.onnx.export``.

Transformers come from HF ``transformers`` (random weights, small or full configs);
CNN families are written here in plain torch because torchvision cannot be
installed on this machine. Every builder is seeded, so an export is repeatable.
Needs the ``bench`` extra (torch, transformers); nothing here is imported by
nnbridge itself.
"""

from __future__ import annotations

import importlib
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

import numpy as np


@dataclass(frozen=True)
class Architecture:
    name: str
    build: Callable[[], tuple[object, tuple]]  # () -> (torch module, example inputs)
    full_size: bool = False  # a full-size model (BERT-base, ResNet-50): slow to export, left out of quick runs
    input_names: tuple[str, ...] = ()  # default: input0, input1, …
    dynamic: dict[str, dict[int, str]] | None = None  # named dynamic dims (torch's dynamic_axes)
    # after export, dims declared as real models declare them: -1 or unnamed (None)
    declare: dict[str, dict[int, int | None]] | None = None
    about: str = ""

    def names(self, count: int) -> list[str]:
        return list(self.input_names) or [f"input{i}" for i in range(count)]


def _torch():
    import torch

    torch.manual_seed(0)
    return torch


# -- plain-torch CNN blocks ----------------------------------------------------------------------

def _conv_bn(torch, cin, cout, k=3, stride=1, groups=1, act=None):
    nn = torch.nn
    layers = [nn.Conv2d(cin, cout, k, stride, k // 2, groups=groups, bias=False), nn.BatchNorm2d(cout)]
    if act is not None:
        layers.append(act())
    return nn.Sequential(*layers)


def _resnet50():
    torch = _torch()
    nn = torch.nn

    class Bottleneck(nn.Module):
        def __init__(self, cin, width, stride):
            super().__init__()
            cout = width * 4
            self.body = nn.Sequential(_conv_bn(torch, cin, width, 1, act=nn.ReLU),
                                      _conv_bn(torch, width, width, 3, stride, act=nn.ReLU),
                                      _conv_bn(torch, width, cout, 1))
            self.skip = _conv_bn(torch, cin, cout, 1, stride) if (stride != 1 or cin != cout) else nn.Identity()

        def forward(self, x):
            return torch.relu(self.body(x) + self.skip(x))

    layers, cin = [], 64
    for width, blocks, stride in ((64, 3, 1), (128, 4, 2), (256, 6, 2), (512, 3, 2)):
        for i in range(blocks):
            layers.append(Bottleneck(cin, width, stride if i == 0 else 1))
            cin = width * 4
    model = nn.Sequential(_conv_bn(torch, 3, 64, 7, 2, act=nn.ReLU), nn.MaxPool2d(3, 2, 1), *layers,
                          nn.AdaptiveAvgPool2d(1), nn.Flatten(), nn.Linear(2048, 1000))
    return model, (torch.randn(1, 3, 224, 224),)


def _squeeze_excite(torch, channels, reduced, gate):
    nn = torch.nn

    class SE(nn.Module):
        def __init__(self):
            super().__init__()
            self.reduce = nn.Conv2d(channels, reduced, 1)
            self.expand = nn.Conv2d(reduced, channels, 1)
            self.act = nn.ReLU() if gate is nn.Hardsigmoid else nn.SiLU()
            self.gate = gate()

        def forward(self, x):
            s = x.mean((2, 3), keepdim=True)
            return x * self.gate(self.expand(self.act(self.reduce(s))))

    return SE()


def _inverted_residual(torch, cin, cout, expand, k, stride, act, se_gate):
    """An inverted residual block whose expansion is a ratio of its input width."""
    return _bneck(torch, cin, cin * expand, cout, k, stride, act, se_gate)


def _mobilenet_v3_tiny():
    """Three MobileNetV3-style blocks for the test fixture: depthwise convs, SE with HardSigmoid,
    HardSwish (the bench's full models: ``_mobilenet_v3_paper``)."""
    torch = _torch()
    nn = torch.nn
    hs, re, hsig = nn.Hardswish, nn.ReLU, nn.Hardsigmoid
    stem, head, classes, image = 8, 32, 10, 32
    spec = [(8, 8, 1, 3, 2, re, hsig), (8, 16, 4, 3, 2, re, None), (16, 16, 3, 5, 1, hs, hsig)]
    blocks = [_inverted_residual(torch, *s) for s in spec]
    model = nn.Sequential(_conv_bn(torch, 3, stem, 3, 2, act=hs), *blocks,
                          _conv_bn(torch, spec[-1][1], head, 1, act=hs),
                          nn.AdaptiveAvgPool2d(1), nn.Flatten(), nn.Linear(head, classes))
    return model, (torch.randn(1, 3, image, image),)


def _bneck(torch, cin, expanded, cout, k, stride, act, se_gate):
    """A MobileNetV3 / EfficientNet block with an explicit expansion size (the paper's: a ratio
    rounds it): 1×1 expansion, depthwise conv, squeeze-excite gated by ``se_gate`` (none when
    None), 1×1 projection, the skip where shapes allow."""
    nn = torch.nn

    class Block(nn.Module):
        def __init__(self):
            super().__init__()
            parts = [] if expanded == cin else [_conv_bn(torch, cin, expanded, 1, act=act)]
            parts.append(_conv_bn(torch, expanded, expanded, k, stride, groups=expanded, act=act))
            if se_gate is not None:
                parts.append(_squeeze_excite(torch, expanded, max(8, expanded // 4), se_gate))
            parts.append(_conv_bn(torch, expanded, cout, 1))
            self.body = nn.Sequential(*parts)
            self.residual = stride == 1 and cin == cout

        def forward(self, x):
            y = self.body(x)
            return x + y if self.residual else y

    return Block()


# MobileNetV3's blocks (Howard et al., "Searching for MobileNetV3", tables 1 and 2):
# (kernel, expansion, output, squeeze-excite, hard swish, stride)
_V3_LARGE = [(3, 16, 16, 0, 0, 1), (3, 64, 24, 0, 0, 2), (3, 72, 24, 0, 0, 1), (5, 72, 40, 1, 0, 2),
             (5, 120, 40, 1, 0, 1), (5, 120, 40, 1, 0, 1), (3, 240, 80, 0, 1, 2), (3, 200, 80, 0, 1, 1),
             (3, 184, 80, 0, 1, 1), (3, 184, 80, 0, 1, 1), (3, 480, 112, 1, 1, 1), (3, 672, 112, 1, 1, 1),
             (5, 672, 160, 1, 1, 2), (5, 960, 160, 1, 1, 1), (5, 960, 160, 1, 1, 1)]
_V3_SMALL = [(3, 16, 16, 1, 0, 2), (3, 72, 24, 0, 0, 2), (3, 88, 24, 0, 0, 1), (5, 96, 40, 1, 1, 2),
             (5, 240, 40, 1, 1, 1), (5, 240, 40, 1, 1, 1), (5, 120, 48, 1, 1, 1), (5, 144, 48, 1, 1, 1),
             (5, 288, 96, 1, 1, 2), (5, 576, 96, 1, 1, 1), (5, 576, 96, 1, 1, 1)]


def _mobilenet_v3_paper(blocks, last: int, head: int, scale: float = 1.0, image=(224, 224), classes: int = 1000):
    """MobileNetV3 as published (large or small), channels scaled by ``scale`` (rounded to 8 as the
    reference implementations do)."""
    torch = _torch()
    nn = torch.nn

    def width(c: float) -> int:
        return max(8, int(c * scale + 4) // 8 * 8)

    layers, cin = [_conv_bn(torch, 3, width(16), 3, 2, act=nn.Hardswish)], width(16)
    for k, expanded, out, se, hs, stride in blocks:
        layers.append(_bneck(torch, cin, width(expanded), width(out), k, stride, nn.Hardswish if hs else nn.ReLU,
                             nn.Hardsigmoid if se else None))
        cin = width(out)
    layers += [_conv_bn(torch, cin, width(last), 1, act=nn.Hardswish), nn.AdaptiveAvgPool2d(1),
               nn.Conv2d(width(last), head, 1), nn.Hardswish(), nn.Flatten(), nn.Linear(head, classes)]
    return nn.Sequential(*layers), (torch.randn(1, 3, *image),)


def _densenet121(growth: int = 32, blocks=(6, 12, 24, 16), classes: int = 1000, image: int = 224):
    """DenseNet-121 (Huang et al.): dense blocks of BN-ReLU-1×1-BN-ReLU-3×3 layers whose outputs are
    concatenated, transitions of BN-ReLU-1×1 halving the channels and 2×2 average pooling."""
    torch = _torch()
    nn = torch.nn

    class Layer(nn.Module):
        def __init__(self, cin):
            super().__init__()
            self.body = nn.Sequential(nn.BatchNorm2d(cin), nn.ReLU(), nn.Conv2d(cin, 4 * growth, 1, bias=False),
                                      nn.BatchNorm2d(4 * growth), nn.ReLU(),
                                      nn.Conv2d(4 * growth, growth, 3, padding=1, bias=False))

        def forward(self, x):
            return torch.cat([x, self.body(x)], 1)

    layers = [nn.Conv2d(3, 64, 7, 2, 3, bias=False), nn.BatchNorm2d(64), nn.ReLU(), nn.MaxPool2d(3, 2, 1)]
    channels = 64
    for i, count in enumerate(blocks):
        for _ in range(count):
            layers.append(Layer(channels))
            channels += growth
        if i < len(blocks) - 1:
            layers += [nn.BatchNorm2d(channels), nn.ReLU(), nn.Conv2d(channels, channels // 2, 1, bias=False),
                       nn.AvgPool2d(2, 2)]
            channels //= 2
    layers += [nn.BatchNorm2d(channels), nn.ReLU(), nn.AdaptiveAvgPool2d(1), nn.Flatten(), nn.Linear(channels, classes)]
    return nn.Sequential(*layers), (torch.randn(1, 3, image, image),)


def _efficientnet_b0(tiny: bool = False):
    """EfficientNet-B0-shaped MBConv stages with SiLU and SE (sigmoid gate)."""
    torch = _torch()
    nn = torch.nn
    if tiny:
        stages, stem, head, classes, image = [(1, 8, 1, 1, 3), (6, 16, 2, 2, 3), (6, 24, 1, 2, 5)], 8, 64, 10, 32
    else:
        stages = [(1, 16, 1, 1, 3), (6, 24, 2, 2, 3), (6, 40, 2, 2, 5), (6, 80, 3, 2, 3), (6, 112, 3, 1, 5),
                  (6, 192, 4, 2, 5), (6, 320, 1, 1, 3)]
        stem, head, classes, image = 32, 1280, 1000, 224
    blocks, cin = [], stem
    for expand, cout, repeats, stride, k in stages:
        for i in range(repeats):
            blocks.append(_inverted_residual(torch, cin, cout, expand, k, stride if i == 0 else 1, nn.SiLU,
                                             nn.Sigmoid))
            cin = cout
    model = nn.Sequential(_conv_bn(torch, 3, stem, 3, 2, act=nn.SiLU), *blocks,
                          _conv_bn(torch, cin, head, 1, act=nn.SiLU),
                          nn.AdaptiveAvgPool2d(1), nn.Flatten(), nn.Linear(head, classes))
    return model, (torch.randn(1, 3, image, image),)


def _convnext(depths=(3, 3, 9, 3), dims=(96, 192, 384, 768), classes=1000, image=224):
    """ConvNeXt: 7×7 depthwise conv, channels-last LayerNorm, MLP with GELU, layer scale."""
    torch = _torch()
    nn = torch.nn

    class LayerNorm2d(nn.LayerNorm):
        def forward(self, x):
            return super().forward(x.permute(0, 2, 3, 1)).permute(0, 3, 1, 2)

    class Block(nn.Module):
        def __init__(self, dim):
            super().__init__()
            self.dw = nn.Conv2d(dim, dim, 7, padding=3, groups=dim)
            self.norm = nn.LayerNorm(dim)
            self.mlp = nn.Sequential(nn.Linear(dim, 4 * dim), nn.GELU(), nn.Linear(4 * dim, dim))
            self.gamma = nn.Parameter(torch.full((dim,), 0.1))

        def forward(self, x):
            y = self.dw(x).permute(0, 2, 3, 1)
            y = self.gamma * self.mlp(self.norm(y))
            return x + y.permute(0, 3, 1, 2)

    layers = [nn.Conv2d(3, dims[0], 4, 4), LayerNorm2d(dims[0])]
    for i, (depth, dim) in enumerate(zip(depths, dims)):
        if i:
            layers += [LayerNorm2d(dims[i - 1]), nn.Conv2d(dims[i - 1], dim, 2, 2)]
        layers += [Block(dim) for _ in range(depth)]
    model = nn.Sequential(*layers, nn.AdaptiveAvgPool2d(1), nn.Flatten(), nn.LayerNorm(dims[-1]),
                          nn.Linear(dims[-1], classes))
    return model, (torch.randn(1, 3, image, image),)


def _regnet(stages=((32, 1), (64, 2), (160, 7), (384, 12)), group_width=16, classes=1000, image=224):
    """RegNetX-400MF-shaped: grouped 3×3 convs (group width 16) in bottleneck blocks."""
    torch = _torch()
    nn = torch.nn

    class Block(nn.Module):
        def __init__(self, cin, cout, stride):
            super().__init__()
            self.body = nn.Sequential(_conv_bn(torch, cin, cout, 1, act=nn.ReLU),
                                      _conv_bn(torch, cout, cout, 3, stride, groups=cout // group_width, act=nn.ReLU),
                                      _conv_bn(torch, cout, cout, 1))
            self.skip = _conv_bn(torch, cin, cout, 1, stride) if (stride != 1 or cin != cout) else nn.Identity()

        def forward(self, x):
            return torch.relu(self.body(x) + self.skip(x))

    stem = stages[0][0]
    blocks, cin = [], stem
    for cout, depth in stages:
        for i in range(depth):
            blocks.append(Block(cin, cout, 2 if i == 0 else 1))
            cin = cout
    model = nn.Sequential(_conv_bn(torch, 3, stem, 3, 2, act=nn.ReLU), *blocks, nn.AdaptiveAvgPool2d(1),
                          nn.Flatten(), nn.Linear(cin, classes))
    return model, (torch.randn(1, 3, image, image),)


def _poolformer(dims=(64, 128, 320, 512), depths=(2, 2, 6, 2), classes=1000, image=224):
    """PoolFormer-S12-shaped: 3×3 average-pool token mixer, GroupNorm(1), MLP with GELU."""
    torch = _torch()
    nn = torch.nn

    class Block(nn.Module):
        def __init__(self, dim):
            super().__init__()
            self.norm1, self.norm2 = nn.GroupNorm(1, dim), nn.GroupNorm(1, dim)
            self.pool = nn.AvgPool2d(3, 1, 1, count_include_pad=False)
            self.mlp = nn.Sequential(nn.Conv2d(dim, 4 * dim, 1), nn.GELU(), nn.Conv2d(4 * dim, dim, 1))

        def forward(self, x):
            y = self.norm1(x)
            x = x + (self.pool(y) - y)
            return x + self.mlp(self.norm2(x))

    layers = [nn.Conv2d(3, dims[0], 7, 4, 2)]
    for i, (depth, dim) in enumerate(zip(depths, dims)):
        if i:
            layers.append(nn.Conv2d(dims[i - 1], dim, 3, 2, 1))
        layers += [Block(dim) for _ in range(depth)]
    model = nn.Sequential(*layers, nn.GroupNorm(1, dims[-1]), nn.AdaptiveAvgPool2d(1), nn.Flatten(),
                          nn.Linear(dims[-1], classes))
    return model, (torch.randn(1, 3, image, image),)


def _recurrent(kind: str):
    """Two bidirectional layers of 128 over 100 steps of 64 features, batch 4."""
    torch = _torch()
    nn = torch.nn
    cell = {"lstm": nn.LSTM, "gru": nn.GRU}[kind]

    class Model(nn.Module):
        def __init__(self):
            super().__init__()
            self.rnn = cell(64, 128, num_layers=2, batch_first=True, bidirectional=True)
            self.head = nn.Linear(256, 10)

        def forward(self, x):
            out = self.rnn(x)[0]
            return self.head(out[:, -1])

    return Model(), (torch.randn(4, 100, 64),)


def _embedding_bag():
    torch = _torch()
    nn = torch.nn

    class Model(nn.Module):
        def __init__(self):
            super().__init__()
            self.bag = nn.EmbeddingBag(50000, 64, mode="mean")
            self.head = nn.Linear(64, 2)

        def forward(self, ids):
            return self.head(self.bag(ids))

    return Model(), (torch.randint(0, 50000, (64, 40)),)


def _einsum():
    torch = _torch()
    nn = torch.nn

    class Model(nn.Module):
        """Bilinear attention written with einsum, as in many research models."""

        def __init__(self):
            super().__init__()
            self.q = nn.Linear(128, 128)
            self.k = nn.Linear(128, 128)
            self.v = nn.Linear(128, 128)

        def forward(self, x):
            q, k, v = (t.view(2, 64, 4, 32) for t in (self.q(x), self.k(x), self.v(x)))
            a = torch.einsum("bqhd,bkhd->bhqk", q, k).softmax(-1)
            return torch.einsum("bhqk,bkhd->bqhd", a, v).reshape(2, 64, 128)

    return Model(), (torch.randn(2, 64, 128),)


# -- HF transformers ----------------------------------------------------------------------------

def _hf(model_cls_name: str, config_cls_name: str, input_kind: str, shape: tuple[int, ...], **config):
    torch = _torch()
    import transformers

    if "vocab_size" in config:  # special tokens inside a small vocabulary
        config = {"bos_token_id": 0, "eos_token_id": 0, "pad_token_id": 0} | config

    model_cls = getattr(transformers, model_cls_name, None)
    if model_cls is None:  # a part of a model (WhisperEncoder) lives in its model's module only
        module = model_cls_name.removesuffix("Encoder").lower()
        model_cls = getattr(importlib.import_module(f"transformers.models.{module}.modeling_{module}"), model_cls_name)
    # eager attention: SDPA's grouped-query path (enable_gqa) has no ONNX export
    model = model_cls(getattr(transformers, config_cls_name)(**config, attn_implementation="eager")).eval()

    class Wrapped(torch.nn.Module):
        def __init__(self):
            super().__init__()
            self.inner = model

        def forward(self, x):
            return self.inner(**{input_kind: x}).last_hidden_state

    if input_kind == "input_ids":
        example = torch.randint(0, config.get("vocab_size", 1000), shape)
    else:
        example = torch.randn(*shape)
    return Wrapped(), (example,)


def _bert(layers: int, hidden: int, heads: int, seq: int = 128, vocab: int = 30522):
    return _hf("BertModel", "BertConfig", "input_ids", (1, seq), hidden_size=hidden, num_hidden_layers=layers,
               num_attention_heads=heads, intermediate_size=4 * hidden, vocab_size=vocab,
               max_position_embeddings=max(seq, 64) if vocab < 30522 else 512)


def _gpt2_decode_step(layers: int = 2, hidden: int = 32, heads: int = 2, past: int = 7, vocab: int = 128):
    """One GPT-2 decode step with past keys and values as inputs and the grown cache as outputs."""
    torch = _torch()
    import transformers

    config = transformers.GPT2Config(n_layer=layers, n_embd=hidden, n_head=heads, vocab_size=vocab, n_positions=64,
                                     bos_token_id=0, eos_token_id=0, attn_implementation="eager")
    model = transformers.GPT2Model(config).eval()

    class DecodeStep(torch.nn.Module):
        def __init__(self):
            super().__init__()
            self.inner = model

        def forward(self, input_ids, *past_kv):
            cache = transformers.DynamicCache(config=config)
            for layer in range(layers):
                cache.update(past_kv[2 * layer], past_kv[2 * layer + 1], layer)
            out = self.inner(input_ids=input_ids, cache=cache, use_cache=True)
            grown = [t for layer in out.past_key_values.layers for t in (layer.keys, layer.values)]
            return (out.last_hidden_state, *grown)

    kv = [torch.randn(1, heads, past, hidden // heads) for _ in range(2 * layers)]
    return DecodeStep(), (torch.randint(0, vocab, (1, 1)), *kv)


ARCHITECTURES: list[Architecture] = [
    Architecture("bert-mini", lambda: _bert(4, 256, 4)),
    Architecture("bert-base", lambda: _bert(12, 768, 12), full_size=True),
    Architecture("gpt2-small4", lambda: _hf("GPT2Model", "GPT2Config", "input_ids", (1, 128), n_layer=4, n_embd=256,
                                            n_head=4, vocab_size=50257)),
    Architecture("deit-tiny", lambda: _hf("ViTModel", "ViTConfig", "pixel_values", (1, 3, 224, 224), hidden_size=192,
                                          num_hidden_layers=12, num_attention_heads=3, intermediate_size=768)),
    Architecture("llama-gqa", lambda: _hf("LlamaModel", "LlamaConfig", "input_ids", (1, 128), hidden_size=256,
                                          num_hidden_layers=4, num_attention_heads=8, num_key_value_heads=2,
                                          intermediate_size=688, vocab_size=32000)),
    Architecture("whisper-encoder", lambda: _hf("WhisperEncoder", "WhisperConfig", "input_features", (1, 80, 3000),
                                                d_model=256, encoder_layers=4, encoder_attention_heads=4,
                                                encoder_ffn_dim=1024, max_source_positions=1500)),
    Architecture("t5-encoder", lambda: _hf("T5EncoderModel", "T5Config", "input_ids", (1, 128), d_model=256,
                                           d_ff=1024, num_layers=4, num_heads=4, d_kv=64, vocab_size=32128)),
    Architecture("resnet50", _resnet50, full_size=True),
    Architecture("densenet121", _densenet121, full_size=True),
    Architecture("mobilenetv3-small", lambda: _mobilenet_v3_paper(_V3_SMALL, 576, 1024)),
    Architecture("mobilenetv3-large", lambda: _mobilenet_v3_paper(_V3_LARGE, 960, 1280)),
    # PaddleOCR's text-direction classifier: MobileNetV3-small at 0.35 width on 48×192 text lines, 2 classes
    Architecture("ocr-direction-cls", lambda: _mobilenet_v3_paper(_V3_SMALL, 576, 1024, scale=0.35,
                                                                  image=(48, 192), classes=2)),
    Architecture("efficientnet-b0", _efficientnet_b0),
    Architecture("convnext-t", _convnext),
    Architecture("regnetx-400mf", _regnet),
    Architecture("poolformer-s12", _poolformer),
    Architecture("bilstm", lambda: _recurrent("lstm")),
    Architecture("bigru", lambda: _recurrent("gru")),
    Architecture("embedding-bag", _embedding_bag),
    Architecture("einsum-attention", _einsum),
]


# Small configurations of the same families, committed as test fixtures (tests/fixtures/architectures,
# regenerated by `make fixtures`): a few hundred kB each, inputs that declare static, named, -1 and
# unnamed dims.
_TINY_LLM = dict(num_hidden_layers=2, num_attention_heads=4, intermediate_size=64, vocab_size=128,
                 max_position_embeddings=64)
FIXTURES: list[Architecture] = [
    Architecture("bert", lambda: _bert(2, 32, 2, seq=16, vocab=128), input_names=("input_ids",),
                 about="HF BertModel: 2 layers, hidden 32, 2 heads, vocabulary 128, 16 tokens"),
    Architecture("bert-dynamic", lambda: _bert(2, 32, 2, seq=16, vocab=128), input_names=("input_ids",),
                 dynamic={"input_ids": {0: "batch", 1: "sequence"}},
                 about="the BERT fixture with named dynamic batch and sequence dims"),
    Architecture("gpt2", lambda: _hf("GPT2Model", "GPT2Config", "input_ids", (1, 16), n_layer=2, n_embd=32,
                                     n_head=2, vocab_size=128, n_positions=64), input_names=("input_ids",),
                 about="HF GPT2Model: 2 layers, hidden 32, 2 heads, 16 tokens"),
    Architecture("gpt2-past", _gpt2_decode_step,
                 input_names=("input_ids", "past_key0", "past_value0", "past_key1", "past_value1"),
                 about="one GPT-2 decode step with 7 cached positions as inputs (past key values)"),
    Architecture("t5-encoder", lambda: _hf("T5EncoderModel", "T5Config", "input_ids", (1, 16), d_model=32,
                                           d_ff=64, num_layers=2, num_heads=2, d_kv=16, vocab_size=128),
                 input_names=("input_ids",), about="HF T5EncoderModel: 2 layers, d_model 32, relative positions"),
    Architecture("vit", lambda: _hf("ViTModel", "ViTConfig", "pixel_values", (1, 3, 32, 32), hidden_size=32,
                                    num_hidden_layers=2, num_attention_heads=2, intermediate_size=64,
                                    image_size=32, patch_size=8), input_names=("pixel_values",),
                 about="HF ViTModel: 32×32 image, 8×8 patches, 2 layers, hidden 32"),
    Architecture("llama-gqa", lambda: _hf("LlamaModel", "LlamaConfig", "input_ids", (1, 16), hidden_size=32,
                                          num_key_value_heads=2, **_TINY_LLM), input_names=("input_ids",),
                 about="HF LlamaModel: 2 layers, 4 query heads sharing 2 key/value heads (GQA), RoPE, RMSNorm"),
    Architecture("whisper-encoder", lambda: _hf("WhisperEncoder", "WhisperConfig", "input_features", (1, 16, 64),
                                                d_model=32, encoder_layers=2, encoder_attention_heads=2,
                                                encoder_ffn_dim=64, num_mel_bins=16, max_source_positions=32),
                 input_names=("input_features",), about="HF Whisper encoder: 16 mel bins, 64 frames, 2 layers"),
    Architecture("mobilenetv3", lambda: _mobilenet_v3_tiny(), input_names=("image",),
                 about="MobileNetV3 blocks: depthwise convs, squeeze-and-excite with HardSigmoid, HardSwish"),
    Architecture("mobilenetv3-dynamic", lambda: _mobilenet_v3_tiny(), input_names=("image",),
                 dynamic={"image": {0: "batch", 2: "height", 3: "width"}},
                 about="the MobileNetV3 fixture with named dynamic batch, height and width"),
    Architecture("efficientnet", lambda: _efficientnet_b0(tiny=True), input_names=("image",),
                 declare={"image": {0: -1}},
                 about="EfficientNet MBConv blocks with SiLU and SE; the batch dim declared -1 (as PaddleOCR's)"),
    Architecture("convnext", lambda: _convnext(depths=(1, 1), dims=(16, 32), classes=10, image=32),
                 input_names=("image",), about="ConvNeXt blocks: 7×7 depthwise conv, LayerNorm, GELU MLP"),
    Architecture("convnext-unnamed", lambda: _convnext(depths=(1, 1), dims=(16, 32), classes=10, image=32),
                 input_names=("image",), declare={"image": {0: None}},
                 about="the ConvNeXt fixture with an unnamed batch dim"),
    Architecture("regnet", lambda: _regnet(stages=((16, 1), (32, 2)), group_width=8, classes=10, image=32),
                 input_names=("image",), about="RegNetX blocks: grouped 3×3 convs (group width 8)"),
    Architecture("poolformer", lambda: _poolformer(dims=(16, 32), depths=(1, 1), classes=10, image=32),
                 input_names=("image",), about="PoolFormer blocks: average-pool token mixer, GroupNorm, GELU MLP"),
]


def export(arch: Architecture, directory: Path, opset: int = 18, *,
           overwrite: bool = False) -> tuple[Path, dict[str, np.ndarray]]:
    """Export ``arch`` to ``directory/<name>.onnx``; returns the path and its example feeds."""
    import onnx
    import torch

    path = directory / f"{arch.name}.onnx"
    model, example = arch.build()
    names = arch.names(len(example))
    if overwrite or not path.exists():
        with torch.no_grad():
            torch.onnx.export(model.eval(), example, str(path), input_names=names, opset_version=opset,
                              dynamic_axes=arch.dynamic, dynamo=False)
        if arch.declare:
            exported = onnx.load(str(path))
            for value in exported.graph.input:
                for axis, dim in arch.declare.get(value.name, {}).items():
                    entry = value.type.tensor_type.shape.dim[axis]
                    entry.Clear()
                    if dim is not None:
                        entry.dim_value = dim
            onnx.save(exported, str(path))
    return path, {n: t.numpy() for n, t in zip(names, example)}
