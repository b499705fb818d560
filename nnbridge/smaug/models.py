"""SMAUG's example networks (``experiments/models/*_network.py``) built with this API.

Architectures from ../shared/data/README.md §1.2; weights follow SMAUG's random-data recipe
(every tensor ``RandomState(1234).rand(*dims) * scale``, fp16 for SMV, fp32 for Reference), so
the written files equal the shipped ones (Minerva, LeNet-5: topology and params; CNN10, VGG:
topology). Tensors are declared NHWC/NC as SMAUG's scripts do; a Reference graph therefore gets
the frontend's automatic Reorders.
"""

from __future__ import annotations

from collections.abc import Callable

import numpy as np

from ..base.errors import InputError
from . import nn
from .graph import Graph, Tensor, input_data
from .tensor import pb


def _factory(backend: str, scale: float) -> Callable[..., Tensor]:
    dtype = np.float16 if backend == "SMV" else np.float32

    def tensor(shape, layout=pb.NHWC) -> Tensor:
        return Tensor(data_layout=layout, tensor_data=(np.random.RandomState(1234).rand(*shape) * scale).astype(dtype))

    return tensor


def minerva(backend: str = "SMV", name: str | None = None) -> Graph:
    """784 → FC 256 ×3 (ReLU) → FC 10."""
    t = _factory(backend, 0.005)
    with Graph(name=name or f"minerva_{_suffix(backend)}", backend=backend) as g:
        act = input_data(t((1, 28, 28, 1)))
        for i, shape in enumerate([(256, 784), (256, 256), (256, 256), (10, 256)]):
            act = nn.mat_mul(act, t(shape, pb.NC), activation="relu" if i < 3 else None)
    return g


def lenet5(backend: str = "SMV", name: str | None = None) -> Graph:
    """conv 32 3×3 valid ReLU ×2 → max-pool 2×2 → FC 128 ReLU → FC 10."""
    t = _factory(backend, 0.005)
    with Graph(name=name or f"lenet5_{_suffix(backend)}", backend=backend) as g:
        act = input_data(t((1, 28, 28, 1)))
        for shape in [(32, 3, 3, 1), (32, 3, 3, 32)]:
            act = nn.convolution(act, t(shape), stride=[1, 1], padding="valid", activation="relu")
        act = nn.max_pool(act, pool_size=[2, 2], stride=[2, 2])
        act = nn.mat_mul(act, t((128, 4608), pb.NC), activation="relu")
        nn.mat_mul(act, t((10, 128), pb.NC))
    return g


def cnn10(backend: str = "SMV", name: str | None = None) -> Graph:
    """CIFAR-10 CNN: conv/BN blocks 32, 32 | 64, 64 with pools, FC 512 ReLU, FC 10."""
    t = _factory(backend, 0.005)

    def batch_norm(act, channels):
        return nn.batch_norm(act, *(t((1, channels), pb.NC) for _ in range(4)))

    with Graph(name=name or f"cnn_{_suffix(backend)}", backend=backend) as g:
        act = input_data(t((1, 32, 32, 3)))
        act = nn.convolution(act, t((32, 3, 3, 3)), stride=[1, 1], padding="same", activation="relu")
        act = batch_norm(act, 32)
        act = nn.convolution(act, t((32, 3, 3, 32)), stride=[1, 1], padding="same", activation="relu")
        act = batch_norm(nn.max_pool(act, pool_size=[2, 2], stride=[2, 2]), 32)
        act = nn.convolution(act, t((64, 3, 3, 32)), stride=[1, 1], padding="same", activation="relu")
        act = nn.convolution(act, t((64, 3, 3, 64)), stride=[1, 1], padding="same", activation="relu")
        act = batch_norm(nn.max_pool(act, pool_size=[2, 2], stride=[2, 2]), 64)
        act = nn.mat_mul(act, t((512, 4096), pb.NC), activation="relu")
        nn.mat_mul(act, t((10, 512), pb.NC))
    return g


def vgg(backend: str = "SMV", name: str | None = None) -> Graph:
    """The paper's "VGG16" for CIFAR-10: 10 convs 3×3 same ReLU in 4 pooled stages, FC 512, FC 10."""
    t = _factory(backend, 0.005)
    stages = [[64, 128], [128, 128], [256, 256, 256], [512, 512, 512]]
    with Graph(name=name or f"vgg_{_suffix(backend)}", backend=backend) as g:
        act = input_data(t((1, 32, 32, 3)))
        channels = 3
        for stage in stages:
            for out in stage:
                act = nn.convolution(act, t((out, 3, 3, channels)), stride=[1, 1], padding="same", activation="relu")
                channels = out
            act = nn.max_pool(act, pool_size=[2, 2], stride=[2, 2])
        act = nn.mat_mul(act, t((512, 2048), pb.NC), activation="relu")
        nn.mat_mul(act, t((10, 512), pb.NC))
    return g


def _suffix(backend: str) -> str:
    return "smv" if backend == "SMV" else "ref"


BUILDERS: dict[str, Callable[..., Graph]] = {"minerva": minerva, "lenet5": lenet5, "cnn10": cnn10, "vgg": vgg}


def build(name: str, backend: str = "SMV") -> Graph:
    if name not in BUILDERS:
        raise InputError(f"no SMAUG example network '{name}'; choose from {', '.join(BUILDERS)}")
    return BUILDERS[name](backend)
