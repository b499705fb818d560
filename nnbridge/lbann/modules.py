"""``lbann.modules``-style building blocks: a module owns its weights and makes new layers each
time it is called, so calling it twice shares the weights (LBANN's ``modules/base.py``).

Names follow LBANN's frontend, so files built here name layers and weights as LBANN's do:
``<module>_instance<k>`` for the layer (``…_fc`` / ``…_conv`` plus ``…_activation`` when an
activation is given), ``<module>_matrix`` / ``<module>_kernel`` and ``<module>_bias`` for the
default weights (He-normal and zero initialized).
"""

from __future__ import annotations

import itertools
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


class FullyConnectedModule(Module):
    """A fully_connected layer (+ an optional activation layer) with weights shared across calls."""

    _count = itertools.count(1)

    def __init__(self, size: int, bias: bool = True, transpose: bool = False,
                 weights: Weights | Sequence[Weights] = (), activation: Any = None, name: str | None = None,
                 data_layout: str = "data_parallel", parallel_strategy: dict | None = None):
        self.name = name or f"fcmodule{next(self._count)}"
        self.size, self.bias, self.transpose = size, bias, transpose
        self.data_layout, self.parallel_strategy = data_layout, parallel_strategy or {}
        self.weights = _default_weights(weights, self.name, "matrix", bias, "FullyConnectedModule")
        self.activation = _activation(activation)
        self.instance = 0

    def forward(self, x: Layer) -> Layer:
        self.instance += 1
        name = f"{self.name}_instance{self.instance}"
        y = ALL["FullyConnected"](x, weights=self.weights, name=f"{name}_fc" if self.activation else name,
                                  data_layout=self.data_layout, num_neurons=self.size, has_bias=self.bias,
                                  transpose=self.transpose, parallel_strategy=self.parallel_strategy)
        if self.activation is None:
            return y
        return self.activation(y, name=f"{name}_activation", data_layout=self.data_layout,
                               parallel_strategy=self.parallel_strategy)


class ConvolutionModule(Module):
    """A convolution (``transpose``: deconvolution) layer (+ an optional activation) with weights
    shared across calls; kernel, stride, padding and dilation are one value or one per dim."""

    _count = itertools.count(1)

    def __init__(self, num_dims: int, out_channels: int, kernel_size: Any, stride: Any = 1, padding: Any = 0,
                 dilation: Any = 1, groups: int = 1, bias: bool = True, weights: Weights | Sequence[Weights] = (),
                 activation: Any = None, name: str | None = None, transpose: bool = False,
                 parallel_strategy: dict | None = None):
        self.name = name or f"convmodule{next(self._count)}"
        self.num_dims, self.out_channels, self.groups, self.bias = num_dims, out_channels, groups, bias
        self.kernel_size = _per_dim(kernel_size, num_dims, "kernel_size", self.name)
        self.stride = _per_dim(stride, num_dims, "stride", self.name)
        self.padding = _per_dim(padding, num_dims, "padding", self.name)
        self.dilation = _per_dim(dilation, num_dims, "dilation", self.name)
        self.transpose, self.parallel_strategy = transpose, parallel_strategy or {}
        self.weights = _default_weights(weights, self.name, "kernel", bias, "ConvolutionModule")
        self.activation = _activation(activation)
        self.instance = 0

    def forward(self, x: Layer) -> Layer:
        self.instance += 1
        name = f"{self.name}_instance{self.instance}"
        kind = "deconv" if self.transpose else "conv"
        layer = ALL["Deconvolution" if self.transpose else "Convolution"]
        y = layer(x, weights=self.weights, name=f"{name}_{kind}" if self.activation else name,
                  num_dims=self.num_dims, out_channels=self.out_channels, has_bias=self.bias, groups=self.groups,
                  parallel_strategy=self.parallel_strategy, kernel_size=self.kernel_size, padding=self.padding,
                  dilation=self.dilation, stride=self.stride)
        return y if self.activation is None else self.activation(y, name=f"{name}_activation")


class Convolution2dModule(ConvolutionModule):
    def __init__(self, *args: Any, **kwargs: Any):
        super().__init__(2, *args, **kwargs)


class Convolution3dModule(ConvolutionModule):
    def __init__(self, *args: Any, **kwargs: Any):
        super().__init__(3, *args, **kwargs)
