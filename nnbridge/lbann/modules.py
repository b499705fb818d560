"""``lbann.modules``-style building blocks: a module owns its weights and makes new layers each
time it is called, so calling it twice shares the weights (LBANN's ``modules/base.py``).

Names follow LBANN's frontend, so files built here name layers and weights as LBANN's do:
``<module>_instance<k>`` for the layer (``…_fc`` / ``…_conv`` plus ``…_activation`` when an
activation is given), ``<module>_matrix`` / ``<module>_kernel`` and ``<module>_bias`` for the
default weights (He-normal and zero initialized).
"""

from __future__ import annotations

import itertools
import math
from abc import ABC, abstractmethod
from collections.abc import Sequence
from typing import Any

from ..base.errors import InputError
from .classes import ALL
from .core import Layer, Weights, _as_list


class Module(ABC):
    """A callable block of layers: ``y = module(x)``; subclasses define ``forward``."""

    def __call__(self, *args: Any, **kwargs: Any) -> Layer:
        return self.forward(*args, **kwargs)

    @abstractmethod
    def forward(self, *args: Any, **kwargs: Any) -> Layer:
        """The block's layers on ``args``; returns the last one."""

    #: calls so far: the k-th call names its layers ``<module>_instance<k>``
    instance = 0

    def _call_name(self) -> str:
        """The name of this call's layers, as LBANN's frontend counts the calls of a module."""
        self.instance += 1
        return f"{self.name}_instance{self.instance}"


class _LayerModule(Module):
    """One weighted layer (+ an optional activation layer) with its weights shared across calls."""

    name: str

    def _own(self, name: str, weights: Weights | Sequence[Weights], first: str, bias: bool, activation: Any,
             what: str) -> None:
        """The module's name, its weights (by default ``<name>_<first>`` and ``<name>_bias``), and its
        activation layer class."""
        self.name = name
        self.weights = _default_weights(weights, name, first, bias, what)
        self.activation = _activation(activation)

    def _activated(self, y: Layer, name: str, **options: Any) -> Layer:
        """``y``, through the activation layer when there is one."""
        return y if self.activation is None else self.activation(y, name=f"{name}_activation", **options)


def _activation(activation: Any) -> type[Layer] | None:
    if activation is None:
        return None
    cls = activation if isinstance(activation, type) else type(activation)
    if not issubclass(cls, Layer):
        raise InputError(f"activation must be a layer class such as lbann.Relu, not {activation!r}")
    return cls


def _default_weights(given: Weights | Sequence[Weights], name: str, first: str, bias: bool, what: str
                     ) -> list[Weights]:
    weights = _as_list(given)
    if len(weights) > 2:
        raise InputError(f"{what} has at most two weights (the {first} and the bias), got {len(weights)}")
    if not weights:
        weights.append(Weights(initializer=ALL["HeNormalInitializer"](), name=f"{name}_{first}"))
    if bias and len(weights) == 1:
        weights.append(Weights(initializer=ALL["ConstantInitializer"](value=0.0), name=f"{name}_bias"))
    return weights


def _per_dim(value: Any, num_dims: int, what: str, name: str) -> list[int]:
    values = [int(v) for v in _as_list(value)]
    if len(values) == 1:
        return values * num_dims
    if len(values) != num_dims:
        raise InputError(f"{name}: {what} {values} for {num_dims} dims")
    return values


class FullyConnectedModule(_LayerModule):
    """A fully_connected layer (+ an optional activation layer) with weights shared across calls."""

    _count = itertools.count(1)

    def __init__(self, size: int, bias: bool = True, transpose: bool = False,
                 weights: Weights | Sequence[Weights] = (), activation: Any = None, name: str | None = None,
                 data_layout: str = "data_parallel", parallel_strategy: dict | None = None):
        self.size, self.bias, self.transpose = size, bias, transpose
        self.data_layout, self.parallel_strategy = data_layout, parallel_strategy or {}
        self._own(name or f"fcmodule{next(self._count)}", weights, "matrix", bias, activation,
                  "FullyConnectedModule")

    def forward(self, x: Layer) -> Layer:
        name = self._call_name()
        y = ALL["FullyConnected"](x, weights=self.weights, name=f"{name}_fc" if self.activation else name,
                                  data_layout=self.data_layout, num_neurons=self.size, has_bias=self.bias,
                                  transpose=self.transpose, parallel_strategy=self.parallel_strategy)
        return self._activated(y, name, data_layout=self.data_layout, parallel_strategy=self.parallel_strategy)


class ConvolutionModule(_LayerModule):
    """A convolution (``transpose``: deconvolution) layer (+ an optional activation) with weights
    shared across calls; kernel, stride, padding and dilation are one value or one per dim."""

    _count = itertools.count(1)

    def __init__(self, num_dims: int, out_channels: int, kernel_size: Any, stride: Any = 1, padding: Any = 0,
                 dilation: Any = 1, groups: int = 1, bias: bool = True, weights: Weights | Sequence[Weights] = (),
                 activation: Any = None, name: str | None = None, transpose: bool = False,
                 parallel_strategy: dict | None = None):
        name = name or f"convmodule{next(self._count)}"
        self.num_dims, self.out_channels, self.groups, self.bias = num_dims, out_channels, groups, bias
        self.kernel_size = _per_dim(kernel_size, num_dims, "kernel_size", name)
        self.stride = _per_dim(stride, num_dims, "stride", name)
        self.padding = _per_dim(padding, num_dims, "padding", name)
        self.dilation = _per_dim(dilation, num_dims, "dilation", name)
        self.transpose, self.parallel_strategy = transpose, parallel_strategy or {}
        self._own(name, weights, "kernel", bias, activation, "ConvolutionModule")

    def forward(self, x: Layer) -> Layer:
        name = self._call_name()
        kind = "deconv" if self.transpose else "conv"
        layer = ALL["Deconvolution" if self.transpose else "Convolution"]
        y = layer(x, weights=self.weights, name=f"{name}_{kind}" if self.activation else name,
                  num_dims=self.num_dims, out_channels=self.out_channels, has_bias=self.bias, groups=self.groups,
                  parallel_strategy=self.parallel_strategy, kernel_size=self.kernel_size, padding=self.padding,
                  dilation=self.dilation, stride=self.stride)
        return self._activated(y, name)


class Convolution2dModule(ConvolutionModule):
    def __init__(self, *args: Any, **kwargs: Any):
        super().__init__(2, *args, **kwargs)


class Convolution3dModule(ConvolutionModule):
    def __init__(self, *args: Any, **kwargs: Any):
        super().__init__(3, *args, **kwargs)


class MultiheadAttention(Module):
    """Scaled dot-product attention in ``num_heads`` parallel heads (Vaswani et al. 2017), as
    LBANN's ``lbann.modules.MultiheadAttention`` builds it: inputs and output are sequences (the
    first dim), projected by channel-wise fully connected layers (one [q|k|v] projection for
    self-attention on one tensor); the heads batched in tensor contractions (permute, reshape,
    matmul) or, with ``batch_heads=False`` or ``subgraph_branches``, sliced one by one (each
    branch of heads on its own grid). Weights ``<name>_qkv_*`` or ``_query_*`` / ``_key_*`` /
    ``_value_*``, and ``_output_*``: Glorot-normal matrices, zero biases."""

    _count = itertools.count(1)

    def __init__(self, embed_dim: int, num_heads: int, self_attention: bool = False, batch_heads: bool = True,
                 dropout: float = 0.0, subgraph_branches: int = 0, bias: Layer | None = None,
                 positional_encoding: Any = None, name: str | None = None):
        number = next(self._count)
        if embed_dim % num_heads:
            raise InputError(f"MultiheadAttention: embed_dim {embed_dim} does not split into {num_heads} heads")
        if subgraph_branches and num_heads % subgraph_branches:
            raise InputError(f"MultiheadAttention: {num_heads} heads do not split into {subgraph_branches} branches")
        if positional_encoding is not None:
            raise InputError("MultiheadAttention: positional_encoding is not supported by nnbridge.lbann")
        self.name = name or f"multiheadattention{number}"
        self.embed_dim, self.num_heads, self.head_dim = embed_dim, num_heads, embed_dim // num_heads
        self.dropout, self.bias, self.self_attention = dropout, bias, self_attention
        self.subgraph_branches = subgraph_branches
        self.separate_heads = bool(subgraph_branches) or not batch_heads
        roles = ("qkv",) if self_attention else ("query", "key", "value")
        self.projections = {role: _glorot_pair(f"{self.name}_{role}") for role in (*roles, "output")}

    def forward(self, queries: Layer, keys: Layer, values: Layer, mask: Any = None, seqlen: int | None = None,
                **extra: Any) -> Layer:
        name = self._call_name()
        cfc = ALL["ChannelwiseFullyConnected"]
        if self.self_attention and queries is keys is values:
            both = cfc(queries, weights=self.projections["qkv"], output_channel_dims=[3 * self.embed_dim],
                       name=f"{name}_qkv_fc", bias=True, transpose=False, **extra)
            parts = ALL["Slice"](both, axis=1, slice_points=[i * self.embed_dim for i in range(4)], **extra)
            q, k, v = (ALL["Identity"](parts, **extra) for _ in range(3))
        else:
            q, k, v = (cfc(x, weights=self.projections[role], output_channel_dims=[self.embed_dim],
                           name=f"{name}_{plural}_fc", **extra)
                       for x, role, plural in ((queries, "query", "queries"), (keys, "key", "keys"),
                                               (values, "value", "values")))
        heads = self._separate(name, q, k, v, mask, extra) if self.separate_heads else \
            self._batched(name, q, k, v, mask, extra)
        return cfc(heads, weights=self.projections["output"], output_channel_dims=[self.embed_dim], name=name,
                   **extra)

    def _masked(self, y: Layer, mask: Any, name: str, extra: dict) -> Layer:
        if mask:
            y = ALL["Add"](y, mask, name=f"{name}_mask", **extra)
        if self.bias:
            y = ALL["Add"](y, self.bias, name=f"{name}_attnbias", **extra)
        return y

    def _dropped(self, y: Layer, name: str, extra: dict) -> Layer:
        return ALL["Dropout"](y, keep_prob=1 - self.dropout, name=f"{name}_drop", **extra) if self.dropout > 0 else y

    def _batched(self, name: str, q: Layer, k: Layer, v: Layer, mask: Any, extra: dict) -> Layer:
        """All heads at once: each of q, k, v as [heads, head_dim, sequence]."""
        head = f"{name}_all_heads"
        q = ALL["Scale"](q, constant=1 / math.sqrt(self.head_dim), name=f"{head}_scale", **extra)
        q, k, v = (ALL["Reshape"](ALL["TensorPermute"](t, axes=(1, 0), **extra),
                                  dims=(self.num_heads, self.head_dim, -1), **extra) for t in (q, k, v))
        y = ALL["MatMul"](q, k, transpose_a=True, transpose_b=False, name=f"{head}_matmul", **extra)
        y = ALL["ChannelwiseSoftmax"](self._masked(y, mask, head, extra), dim=-1, single_dim_mode=True,
                                      name=f"{head}_softmax", **extra)
        y = ALL["MatMul"](self._dropped(y, head, extra), v, transpose_b=True, name=head, **extra)
        return ALL["Reshape"](ALL["TensorPermute"](y, axes=(1, 0, 2), **extra), dims=(-1, self.embed_dim), **extra)

    def _separate(self, name: str, q: Layer, k: Layer, v: Layer, mask: Any, extra: dict) -> Layer:
        """Head by head: q, k, v sliced along the features, each head's branch on its grid."""
        grid = (lambda tag: {"grid_tag": tag}) if self.subgraph_branches else (lambda tag: None)
        points = [self.head_dim * i for i in range(self.num_heads + 1)]
        slices = [ALL["Slice"](t, axis=1, slice_points=points, name=f"{name}_{role}_slice", parallel_strategy=grid(0),
                               **extra) for t, role in ((q, "queries"), (k, "keys"), (v, "values"))]
        per_branch = self.num_heads // self.subgraph_branches if self.subgraph_branches else 0
        heads, tag = [], 0
        for index in range(self.num_heads):
            head = f"{name}_head{index}"
            if per_branch and index % per_branch == 0:
                tag += 1
            hq, hk, hv = (ALL["Identity"](s, parallel_strategy=grid(tag), **extra) for s in slices)
            y = ALL["MatMul"](hq, hk, transpose_b=True, name=f"{head}_matmul", **extra)
            y = ALL["Scale"](y, constant=1 / math.sqrt(self.head_dim), name=f"{head}_scale", **extra)
            y = self._masked(y, mask[tag - 1] if mask and self.subgraph_branches else mask, head, extra)
            y = self._dropped(ALL["ChannelwiseSoftmax"](y, name=f"{head}_softmax", **extra), head, extra)
            heads.append(ALL["MatMul"](y, hv, name=head, **extra))
        return ALL["Concatenation"](heads, axis=1, name=f"{name}_heads_concat", parallel_strategy=grid(0), **extra)


def _glorot_pair(name: str) -> list[Weights]:
    """A projection's weights: a Glorot-normal matrix and a zero bias."""
    return [Weights(initializer=ALL["GlorotNormalInitializer"](), name=f"{name}_matrix"),
            Weights(initializer=ALL["ConstantInitializer"](value=0), name=f"{name}_bias")]
