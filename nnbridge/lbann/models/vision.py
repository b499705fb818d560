"""Image models of ``lbann.models``: LeNet and AlexNet as tables of stages, ResNets as residual
blocks. Names follow LBANN's frontend: ``<model>_module<k>`` per model class unless named, a
module's layers ``<model>_<stage>_instance<i>`` (i counts the calls), the modules' weights
``<model>_<stage>_kernel`` / ``_matrix`` / ``_bias``."""

from __future__ import annotations

import itertools
from collections.abc import Sequence
from typing import Any

from ...base.errors import InputError
from ..classes import ALL
from ..core import Layer, Weights
from ..modules import Convolution2dModule, FullyConnectedModule, Module

#: a stage of a plain network: (kind, stage name, settings) — kind 'conv' and 'fc' own weights
#: (a module, ReLU unless ``relu`` is False), 'pool' / 'lrn' / 'drop' are layers made per call
Stage = tuple[str, str, dict[str, Any]]

LENET: list[Stage] = [
    ("conv", "conv1", {"out_channels": 6, "kernel_size": 5}), ("pool", "pool1", {"size": 2, "stride": 2}),
    ("conv", "conv2", {"out_channels": 16, "kernel_size": 5}), ("pool", "pool2", {"size": 2, "stride": 2}),
    ("fc", "fc1", {"size": 120}), ("fc", "fc2", {"size": 84}), ("fc", "fc3", {"relu": False}),
]
ALEXNET: list[Stage] = [
    ("conv", "conv1", {"out_channels": 96, "kernel_size": 11, "stride": 4}), ("lrn", "norm1", {}),
    ("pool", "pool1", {"size": 3, "stride": 2}),
    ("conv", "conv2", {"out_channels": 256, "kernel_size": 5, "padding": 2}), ("lrn", "norm2", {}),
    ("pool", "pool2", {"size": 3, "stride": 2}),
    *(("conv", f"conv{i}", {"out_channels": c, "kernel_size": 3, "padding": 1})
      for i, c in ((3, 384), (4, 384), (5, 256))),
    ("pool", "pool5", {"size": 3, "stride": 2}),
    ("fc", "fc6", {"size": 4096}), ("drop", "drop6", {}), ("fc", "fc7", {"size": 4096}), ("drop", "drop7", {}),
    ("fc", "fc8", {"relu": False}),
]


def _max_pool(x: Layer, size: int, stride: int, pads: int, name: str) -> Layer:
    return ALL["Pooling"](x, num_dims=2, has_vectors=False, pool_dims_i=size, pool_pads_i=pads,
                          pool_strides_i=stride, pool_mode="max", name=name)


class _Stacked(Module):
    """A network of ``Stage``s; the last fully connected stage has ``output_size`` neurons."""

    stages: list[Stage] = []
    label = ""
    _count: itertools.count

    def __init_subclass__(cls, **kwargs: Any) -> None:
        super().__init_subclass__(**kwargs)
        cls._count = itertools.count(1)

    def __init__(self, output_size: int, name: str | None = None):
        self.name = name or f"{self.label}_module{next(type(self)._count)}"
        self.instance = 0
        self.modules: dict[str, Module] = {}
        for kind, stage, settings in self.stages:
            relu = ALL["Relu"] if settings.get("relu", True) else None
            if kind == "conv":
                self.modules[stage] = Convolution2dModule(
                    settings["out_channels"], settings["kernel_size"], stride=settings.get("stride", 1),
                    padding=settings.get("padding", 0), activation=relu, name=f"{self.name}_{stage}")
            elif kind == "fc":
                self.modules[stage] = FullyConnectedModule(settings.get("size", output_size), activation=relu,
                                                           name=f"{self.name}_{stage}")

    def forward(self, x: Layer) -> Layer:
        self.instance += 1
        for kind, stage, settings in self.stages:
            name = f"{self.name}_{stage}_instance{self.instance}"
            if kind in ("conv", "fc"):
                x = self.modules[stage](x)
            elif kind == "pool":
                x = _max_pool(x, settings["size"], settings["stride"], 0, name)
            elif kind == "lrn":
                x = ALL["LocalResponseNormalization"](x, window_width=5, lrn_alpha=0.0001, lrn_beta=0.75, lrn_k=2,
                                                      name=name)
            else:
                x = ALL["Dropout"](x, keep_prob=0.5, name=name)
        return x


class LeNet(_Stacked):
    """LeCun et al. 1998: two 5 × 5 convolutions with max pooling, then 120, 84 and
    ``output_size`` neurons (NCHW images)."""

    stages, label = LENET, "lenet"


class AlexNet(_Stacked):
    """Krizhevsky et al. 2012 as LBANN builds it: five convolutions (LRN after the first two),
    three max pools, two 4096-neuron layers with dropout, then ``output_size`` neurons."""

    stages, label = ALEXNET, "alexnet"


class ConvBNRelu(Module):
    """A convolution without bias, batch normalization (scale initialized to 0 with
    ``bn_zero_init``) and, with ``relu``, a ReLU: the unit of LBANN's ResNets."""

    def __init__(self, out_channels: int, kernel_size: int, stride: int, padding: int, bn_zero_init: bool,
                 bn_statistics_group_size: int, relu: bool, name: str):
        self.name, self.instance, self.relu = name, 0, relu
        self.conv = Convolution2dModule(out_channels, kernel_size, stride=stride, padding=padding, bias=False,
                                        name=f"{name}_conv")
        constant = ALL["ConstantInitializer"]
        self.bn_weights = [Weights(initializer=constant(value=0.0 if bn_zero_init else 1.0), name=f"{name}_bn_scale"),
                           Weights(initializer=constant(value=0.0), name=f"{name}_bn_bias")]
        self.group_size = -1 if bn_statistics_group_size == 0 else bn_statistics_group_size

    def forward(self, x: Layer) -> Layer:
        self.instance += 1
        y = ALL["BatchNormalization"](self.conv(x), weights=self.bn_weights, statistics_group_size=self.group_size,
                                      name=f"{self.name}_bn_instance{self.instance}")
        return ALL["Relu"](y, name=f"{self.name}_relu_instance{self.instance}") if self.relu else y


class _Residual(Module):
    """A residual block: the branch of ConvBNRelu units (the last one without ReLU, its scale
    zero-initialized with ``zero_init_residual``) added to the input — through a 1 × 1
    ConvBNRelu when the block downsamples (stride 2, the first block of every layer but the
    first) or changes the channel count — then a ReLU."""

    #: the branch's units: (kernel size, padding, strides when downsampling, channels: 'mid' or 'out')
    units: tuple[tuple[int, int, bool, str], ...] = ()
    expansion = 1

    def __init__(self, in_channels: int, mid_channels: int, downsample: bool, zero_init_residual: bool,
                 bn_statistics_group_size: int, name: str, width: float = 1):
        self.name, self.instance = name, 0
        self.out_channels = self.expansion * (mid_channels if self.expansion > 1 else int(mid_channels * width))
        mid = int(mid_channels * width)
        group = bn_statistics_group_size
        self.branch1 = None
        if downsample or in_channels != self.out_channels:
            self.branch1 = ConvBNRelu(self.out_channels, 1, 2 if downsample else 1, 0, False, group, False,
                                      f"{name}_branch1")
        last = len(self.units) - 1
        self.branch2 = [ConvBNRelu(self.out_channels if channels == "out" else mid, kernel,
                                   2 if downsample and strided else 1, padding, i == last and zero_init_residual,
                                   group, i != last, f"{name}_branch2{'abc'[i]}")
                        for i, (kernel, padding, strided, channels) in enumerate(self.units)]

    def forward(self, x: Layer) -> Layer:
        self.instance += 1
        shortcut = self.branch1(x) if self.branch1 is not None else x
        y = x
        for unit in self.branch2:
            y = unit(y)
        total = ALL["Add"](shortcut, y, name=f"{self.name}_sum_instance{self.instance}")
        return ALL["Relu"](total, name=f"{self.name}_relu_instance{self.instance}")


class BasicBlock(_Residual):
    """Two 3 × 3 units (ResNet-18 and -34); as many output channels as internal ones."""

    units = ((3, 1, True, "mid"), (3, 1, False, "out"))


class BottleneckBlock(_Residual):
    """1 × 1, 3 × 3, 1 × 1 units (ResNet-50, -101, -152); four times the internal channels out."""

    units = ((1, 0, False, "mid"), (3, 1, True, "mid"), (1, 0, False, "out"))
    expansion = 4


class ResNet(Module):
    """He et al. 2016: a 7 × 7 stride-2 ConvBNRelu and a 3 × 3 stride-2 max pool, ``layer_sizes[l]``
    blocks with ``layer_channels[l]`` internal channels per layer, a channel-wise mean and a
    fully connected layer of ``output_size`` without bias (NCHW images)."""

    def __init__(self, block: type[_Residual], output_size: int, layer_sizes: Sequence[int],
                 layer_channels: Sequence[int], zero_init_residual: bool, bn_statistics_group_size: int, name: str,
                 width: float = 1):
        self.name, self.instance = name, 0
        self.conv1 = ConvBNRelu(layer_channels[0], 7, 2, 3, False, bn_statistics_group_size, True, f"{name}_conv1")
        self.blocks: list[_Residual] = []
        for layer, (count, channels) in enumerate(zip(layer_sizes, layer_channels)):
            for i in range(count):
                in_channels = self.blocks[-1].out_channels if self.blocks else channels
                self.blocks.append(block(in_channels, channels, i == 0 and layer > 0, zero_init_residual,
                                         bn_statistics_group_size, f"{name}_layer{layer}_block{i}", width=width))
        self.fc = FullyConnectedModule(output_size, bias=False, name=f"{name}_fc")

    def forward(self, x: Layer) -> Layer:
        self.instance += 1
        x = _max_pool(self.conv1(x), 3, 2, 1, f"{self.name}_pool1_instance{self.instance}")
        for block in self.blocks:
            x = block(x)
        return self.fc(ALL["ChannelwiseMean"](x, name=f"{self.name}_avgpool_instance{self.instance}"))


def _resnet(depth: int, block: type[_Residual], sizes: tuple[int, ...]) -> type[ResNet]:
    counter = itertools.count(1)

    def __init__(self, output_size: int, zero_init_residual: bool = True, bn_statistics_group_size: int = 1,
                 name: str | None = None, width: float = 1):
        ResNet.__init__(self, block, output_size, sizes, (64, 128, 256, 512), zero_init_residual,
                        bn_statistics_group_size, name or f"resnet{depth}_module{next(counter)}", width=width)

    doc = f"ResNet-{depth}: {block.__name__}s in layers of {', '.join(map(str, sizes))} (``width`` widens them)."
    return type(f"ResNet{depth}", (ResNet,), {"__init__": __init__, "__doc__": doc})


ResNet18 = _resnet(18, BasicBlock, (2, 2, 2, 2))
ResNet34 = _resnet(34, BasicBlock, (3, 4, 6, 3))
ResNet50 = _resnet(50, BottleneckBlock, (3, 4, 6, 3))
ResNet101 = _resnet(101, BottleneckBlock, (3, 4, 23, 3))
ResNet152 = _resnet(152, BottleneckBlock, (3, 8, 36, 3))


#: DenseNet versions: (growth rate k, layers per dense block, initial features)
DENSENETS = {121: (32, (6, 12, 24, 16), 64), 169: (32, (6, 12, 32, 16), 64), 201: (32, (6, 12, 48, 32), 64),
             161: (48, (96, 48, 36, 24), 96)}


class DenseNet(Module):
    """Huang et al. 2017 as LBANN's vision application builds it (applications/vision/densenet.py;
    ``lbann.models`` has no DenseNet): a 7 × 7 stride-2 convolution, batch norm, ReLU and a 3 × 3
    max pool; dense blocks whose every layer (BN, ReLU, 1 × 1 convolution to 4k channels, BN, ReLU,
    3 × 3 convolution to k) reads the concatenation of everything before it in the block;
    transitions (BN, ReLU, 1 × 1 convolution halving the channels, 2 × 2 average pool) between
    blocks; then BN, ReLU, a 7 × 7 average pool, 1000 neurons without bias and a softmax (the
    output is the class probabilities). Layers take LBANN's generated names."""

    def __init__(self, version: int = 121, statistics_group_size: int = 1):
        if version not in DENSENETS:
            raise InputError(f"DenseNet-{version}: LBANN builds {', '.join(map(str, sorted(DENSENETS)))}")
        self.growth, self.blocks, self.initial = DENSENETS[version]
        self.group_size = statistics_group_size

    def _norm_relu(self, x: Layer) -> Layer:
        bn = ALL["BatchNormalization"](x, bias_init=0.0, decay=0.9, epsilon=1e-5, scale_init=1.0,
                                       statistics_group_size=self.group_size)
        return ALL["Relu"](bn)

    @staticmethod
    def _conv(x: Layer, channels: int, kernel: int, padding: int, stride: int = 1) -> Layer:
        return ALL["Convolution"](x, kernel_size=kernel, padding=padding, stride=stride, has_bias=False, num_dims=2,
                                  out_channels=channels)

    def forward(self, images: Layer) -> Layer:
        x = self._norm_relu(self._conv(images, self.initial, 7, 3, stride=2))
        x = ALL["Pooling"](x, num_dims=2, pool_dims_i=3, pool_mode="max", pool_pads_i=1, pool_strides_i=2)
        features = self.initial
        for number, layers in enumerate(self.blocks, start=1):
            block = [x]
            for _ in range(layers):
                y = self._conv(self._norm_relu(ALL["Concatenation"](list(block))), 4 * self.growth, 1, 0)
                block.append(self._conv(self._norm_relu(y), self.growth, 3, 1))
            features += layers * self.growth
            x = ALL["Concatenation"](block)
            if number < len(self.blocks):
                features //= 2
                x = self._conv(self._norm_relu(x), features, 1, 0)
                x = ALL["Pooling"](x, num_dims=2, pool_dims_i=2, pool_mode="average", pool_pads_i=0, pool_strides_i=2)
        x = ALL["Pooling"](self._norm_relu(x), num_dims=2, pool_dims_i=7, pool_mode="average", pool_pads_i=1,
                           pool_strides_i=1)
        return ALL["Softmax"](ALL["FullyConnected"](x, num_neurons=1000, has_bias=False))
