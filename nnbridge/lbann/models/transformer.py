"""The Transformer of ``lbann.models`` (Vaswani et al. 2017): encoder and decoder layers of
multi-head attention and a channel-wise feed-forward network, each with dropout, a residual sum
and layer normalization (after it, or before the sublayer with ``pre_layernorm``). Sequences are
[length, features] samples. Names follow LBANN's frontend: ``transformer<k>``, its layers
``<name>_encoder<i>`` / ``_decoder<i>``, their calls ``…_instance<n>_<sublayer>``."""

from __future__ import annotations

import itertools
from typing import Any

import numpy as np

from ...base.errors import InputError
from ..classes import ALL
from ..core import Layer, Weights, _as_list
from ..modules import Module, MultiheadAttention


class LayerNorm(Module):
    """Normalization over the last dim with a scale (ones) and a bias (zeros): LBANN's
    ``layer_norm`` (``builtin``) or instance norm × tessellated scale + bias; weights
    ``<name>_weight`` and ``<name>_bias``."""

    _count = itertools.count(1)

    def __init__(self, normalized_shape: Any, name: str | None = None, builtin: bool = True):
        number = next(self._count)
        self.normalized_shape = [int(d) for d in _as_list(normalized_shape)]
        self.name, self.builtin = name or f"layernorm{number}", builtin
        constant = ALL["ConstantInitializer"]
        self.weight = Weights(initializer=constant(value=1), name=f"{self.name}_weight")
        self.bias = Weights(initializer=constant(value=0), name=f"{self.name}_bias")

    def forward(self, x: Layer, **extra: Any) -> Layer:
        if self.builtin:
            return ALL["LayerNorm"](x, scale=True, bias=True, start_dim=-1, name=self.name,
                                    weights=[self.weight, self.bias], **extra)
        x = ALL["InstanceNorm"](x, **extra)
        scale, shift = (ALL["Tessellate"](ALL["WeightsLayer"](weights=w, dims=[1, *self.normalized_shape], **extra),
                                          hint_layer=x, **extra) for w in (self.weight, self.bias))
        return ALL["Add"](ALL["Multiply"](scale, x, **extra), shift, **extra)


class _Sublayers(Module):
    """What encoder and decoder layers share: attention sublayers, norms, the feed-forward
    network (He-normal then Glorot-normal matrices, zero biases) and the residual pattern."""

    kind = ""
    _count: itertools.count

    def __init_subclass__(cls, **kwargs: Any) -> None:
        super().__init_subclass__(**kwargs)
        cls._count = itertools.count(1)

    def __init__(self, embed_dim: int, num_heads: int, feedforward_dim: int, dropout: float, attn_dropout: float,
                 pre_layernorm: bool = False, activation: Any = None, parallel_attention_heads: int = 0,
                 attention_bias: Layer | None = None, positional_encoding: Any = None,
                 attention_module: type = MultiheadAttention, name: str | None = None):
        number = next(type(self)._count)
        self.name = name or f"transformer{self.kind}layer{number}"
        self.instance, self.embed_dim, self.feedforward_dim = 0, embed_dim, feedforward_dim
        self.dropout, self.pre_layernorm = dropout, pre_layernorm
        self.activation = activation or ALL["Relu"]
        attention = {"dropout": attn_dropout, "subgraph_branches": parallel_attention_heads, "bias": attention_bias}
        self.attentions = self._attentions(attention_module, embed_dim, num_heads, attention, positional_encoding)
        self.norms = [LayerNorm(embed_dim, name=f"{self.name}_norm{i}") for i in range(1, len(self.attentions) + 2)]
        he, glorot, zero = ALL["HeNormalInitializer"], ALL["GlorotNormalInitializer"], ALL["ConstantInitializer"]
        self.fc_weights = [[Weights(initializer=init(), name=f"{self.name}_fc{i}_matrix"),
                            Weights(initializer=zero(value=0), name=f"{self.name}_fc{i}_bias")]
                           for i, init in ((1, he), (2, glorot))]

    def _attentions(self, module: type, embed_dim: int, num_heads: int, settings: dict, encoding: Any) -> list:
        raise NotImplementedError

    def _residual(self, x: Layer, norm: LayerNorm, sublayer, name: str, drop: str, total: str) -> Layer:
        """x + dropout(sublayer(x)), normalized after (or x normalized before) the sublayer."""
        y = sublayer(norm(x) if self.pre_layernorm else x)
        if self.dropout > 0:
            y = ALL["Dropout"](y, keep_prob=1 - self.dropout, name=f"{name}_{drop}")
        z = ALL["Sum"](x, y, name=f"{name}_{total}")
        return z if self.pre_layernorm else norm(z)

    def _feedforward(self, name: str, drops: tuple[str, str]) -> Any:
        def network(y: Layer) -> Layer:
            cfc = ALL["ChannelwiseFullyConnected"]
            y = cfc(y, weights=self.fc_weights[0], output_channel_dims=[self.feedforward_dim], name=f"{name}_fc1")
            y = self.activation(y, name=f"{name}_ffn_act")
            if self.dropout > 0:
                y = ALL["Dropout"](y, keep_prob=1 - self.dropout, name=f"{name}_{drops[0]}")
            return cfc(y, weights=self.fc_weights[1], output_channel_dims=[self.embed_dim], name=f"{name}_fc2")
        return network


class TransformerEncoderLayer(_Sublayers):
    """Self-attention, then the feed-forward network."""

    kind = "encoder"

    def _attentions(self, module, embed_dim, num_heads, settings, encoding):
        self.attention = module(embed_dim, num_heads, self_attention=True, positional_encoding=encoding,
                                name=f"{self.name}_attention", **_renamed(settings))
        return [self.attention]

    def forward(self, x: Layer, mask: Any = None) -> Layer:
        self.instance += 1
        name = f"{self.name}_instance{self.instance}"
        x = self._residual(x, self.norms[0], lambda y: self.attention(y, y, y, mask=mask), name, "drop1", "sum1")
        return self._residual(x, self.norms[1], self._feedforward(name, ("drop2",)), name, "drop3", "sum2")


class TransformerDecoderLayer(_Sublayers):
    """Masked self-attention, attention to the encoder's memory (when given), then the
    feed-forward network."""

    kind = "decoder"

    def _attentions(self, module, embed_dim, num_heads, settings, encoding):
        self.attention1 = module(embed_dim, num_heads, self_attention=True, positional_encoding=encoding,
                                 name=f"{self.name}_attention1", **_renamed(settings))
        self.attention2 = module(embed_dim, num_heads, name=f"{self.name}_attention2", **_renamed(settings))
        return [self.attention1, self.attention2]

    def forward(self, x: Layer, memory: Layer | None, src_mask: Any = None, tgt_mask: Any = None) -> Layer:
        self.instance += 1
        name = f"{self.name}_instance{self.instance}"
        x = self._residual(x, self.norms[0], lambda y: self.attention1(y, y, y, mask=tgt_mask), name, "drop1",
                           "sum1")
        if memory is not None:
            x = self._residual(x, self.norms[1], lambda y: self.attention2(y, memory, memory, mask=src_mask), name,
                               "drop2", "sum2")
        return self._residual(x, self.norms[2], self._feedforward(name, ("drop3",)), name, "drop4", "sum3")


def _renamed(settings: dict) -> dict:
    """The layers' attention settings as MultiheadAttention's keywords."""
    return {"dropout": settings["dropout"], "subgraph_branches": settings["subgraph_branches"],
            "bias": settings["bias"]}


class Transformer(Module):
    """``num_encoder_layers`` encoder layers on the source and ``num_decoder_layers`` decoder
    layers on the target (each attending to the encoder's output, its self-attention masked by
    ``target_mask`` or the subsequent-position mask: −1e9 above the diagonal, a frozen weights
    layer ``<name>_mask<length>``); ``feedforward_size`` defaults to 4 × ``hidden_size``."""

    _count = itertools.count(1)

    def __init__(self, hidden_size: int = 512, num_heads: int = 8, num_encoder_layers: int = 6,
                 num_decoder_layers: int = 6, feedforward_size: int | None = None, dropout: float = 0.1,
                 attn_dropout: float = 0.0, pre_layernorm: bool = False, activation: Any = None,
                 parallel_attention_heads: int = 0, attention_bias: Layer | None = None,
                 positional_encoding: Any = None, attention_module: type = MultiheadAttention,
                 name: str | None = None):
        number = next(self._count)
        self.name, self.instance = name or f"transformer{number}", 0
        self.hidden_size, self.num_heads = hidden_size, num_heads
        self.parallel_attention_heads = parallel_attention_heads
        self.feedforward_size = feedforward_size or 4 * hidden_size
        settings = {"embed_dim": hidden_size, "num_heads": num_heads, "feedforward_dim": self.feedforward_size,
                    "dropout": dropout, "attn_dropout": attn_dropout, "pre_layernorm": pre_layernorm,
                    "activation": activation, "parallel_attention_heads": parallel_attention_heads,
                    "attention_bias": attention_bias, "positional_encoding": positional_encoding,
                    "attention_module": attention_module}
        self.encoder = [TransformerEncoderLayer(**settings, name=f"{self.name}_encoder{i}")
                        for i in range(num_encoder_layers)]
        self.decoder = [TransformerDecoderLayer(**settings, name=f"{self.name}_decoder{i}")
                        for i in range(num_decoder_layers)]
        attentions = [d.attention1 for d in self.decoder] or [e.attention for e in self.encoder]
        self.separate_heads = bool(attentions) and attentions[0].separate_heads
        self._masks: dict[int, Layer] = {}

    def _subsequent_mask(self, size: int) -> Layer:
        """−1e9 where a position would attend to a later one (per head unless heads are separate)."""
        if size not in self._masks:
            values = np.triu(np.full((size, size), -1e9), k=1)
            if not self.separate_heads:
                values = np.tile(values, (self.num_heads, 1, 1))
            weights = Weights(initializer=ALL["ValueInitializer"](values=values.flat),
                              optimizer=ALL["NoOptimizer"](), name=f"{self.name}_mask{size}_weights")
            self._masks[size] = ALL["WeightsLayer"](dims=values.shape, weights=weights, name=f"{self.name}_mask{size}")
        return self._masks[size]

    def forward(self, source: Layer, target: Layer, target_length: int, target_mask: Any = None,
                cross_attention: Layer | None = None) -> Layer:
        self.instance += 1
        memory = cross_attention
        x = source
        for layer in self.encoder:
            x = layer(x)
        if self.encoder:
            memory = x
        if not self.decoder:
            if not self.encoder:
                raise InputError(f"Transformer '{self.name}' has neither encoder nor decoder layers")
            return x
        if target_mask is None:
            target_mask = self._subsequent_mask(target_length)
        if self.parallel_attention_heads > 0:
            target_mask = [ALL["Identity"](target_mask, name=f"tgtmask_branch{i}", parallel_strategy={"grid_tag": i})
                           for i in range(1, self.parallel_attention_heads + 1)]
        x = target
        for layer in self.decoder:
            x = layer(x, memory, tgt_mask=target_mask)
        return x
