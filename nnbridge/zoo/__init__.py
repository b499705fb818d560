"""The model zoo: ONNX models built in code, with deterministic weights.

SMAUG's example networks (Minerva, LeNet-5, CNN10, VGG for CIFAR-10 — same
architectures as SMAUG's shipped models, in ONNX's NCHW form) plus small
ResNet, LSTM and transformer models, so every converter and backend has the
same corpus to be tested on and nothing needs downloading.

    import nnbridge.zoo
    model = nnbridge.zoo.build("lenet5")          # onnx.ModelProto
    nnbridge.zoo.names()
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass

import numpy as np
import onnx

from ..base.registry import Registry
from .builder import OnnxBuilder
from .large import bert_base, squeezenet11
from .transformer import llama_decoder, transformer


@dataclass(frozen=True)
class ZooModel:
    build: Callable[[int], onnx.ModelProto]  # batch size → model
    doc: str


MODELS: Registry[str, ZooModel] = Registry("zoo models")


def _register(name: str, doc: str):
    return MODELS.decorator(name, value=lambda _, fn: ZooModel(fn, doc))


def names() -> list[str]:
    return list(MODELS)


def describe(name: str) -> str:
    return MODELS[name].doc


def build(name: str, batch: int = 1) -> onnx.ModelProto:
    if name not in MODELS:
        from ..base.errors import InputError

        raise InputError(f"no zoo model '{name}'; choose from {', '.join(MODELS)}")
    return MODELS[name].build(batch)


def _classified(b: OnnxBuilder, x: str, features: int, hidden: int) -> onnx.ModelProto:
    """The model of ``b`` with the CNNs' classifier on ``x``: flatten, a fully connected layer of
    ``hidden`` with ReLU, and the 10 logits as the output."""
    x = b.op("Flatten", [x], "flatten", axis=1)
    x = b.op("Relu", [b.dense(x, features, hidden, "fc0")])
    b.output(b.dense(x, hidden, 10, "fc1"))
    return b.model()


@_register("mlp", "2-layer perceptron 64→32→10 with softmax")
def mlp(batch: int) -> onnx.ModelProto:
    b = OnnxBuilder("mlp", seed=1)
    x = b.input("input", [batch, 64])
    h = b.op("Relu", [b.dense(x, 64, 32, "fc1")])
    b.output(b.op("Softmax", [b.dense(h, 32, 10, "fc2")], "prob", axis=-1))
    return b.model()


@_register("digits_cnn", "CNN for 8×8 digits: conv16 3×3 + BN + ReLU → pool → conv32 3×3 + ReLU → pool → FC64 → FC10")
def digits_cnn(batch: int) -> onnx.ModelProto:
    """The training demo's model (scikit-learn's digits: nnbridge train --data digits)."""
    b = OnnxBuilder("digits_cnn", seed=7)
    x = b.input("image", [batch, 1, 8, 8])
    x = b.op("Relu", [b.batchnorm(b.conv(x, 1, 16, 3, hint="conv0"), 16, "bn0")])
    x = b.op("Relu", [b.conv(b.maxpool(x, hint="pool0"), 16, 32, 3, hint="conv1")])
    return _classified(b, b.maxpool(x, hint="pool1"), 32 * 2 * 2, 64)


@_register("minerva", "SMAUG's Minerva: flatten 784 → FC256 ×3 (ReLU) → FC10")
def minerva(batch: int) -> onnx.ModelProto:
    b = OnnxBuilder("minerva", seed=2)
    x = b.op("Flatten", [b.input("input", [batch, 1, 28, 28])], "flatten", axis=1)
    for i, n_in in enumerate([784, 256, 256]):
        x = b.op("Relu", [b.dense(x, n_in, 256, f"fc{i}")], f"relu{i}")
    b.output(b.dense(x, 256, 10, "fc3"))
    return b.model()


@_register("lenet5", "SMAUG's LeNet-5: conv32 3×3 ×2 (valid, ReLU) → max-pool → FC128 → FC10")
def lenet5(batch: int) -> onnx.ModelProto:
    b = OnnxBuilder("lenet5", seed=3)
    x = b.input("input", [batch, 1, 28, 28])
    x = b.op("Relu", [b.conv(x, 1, 32, 3, pad=0, hint="conv0")])
    x = b.op("Relu", [b.conv(x, 32, 32, 3, pad=0, hint="conv1")])
    return _classified(b, b.maxpool(x), 32 * 12 * 12, 128)


@_register("cnn10", "SMAUG's CIFAR-10 CNN10: 4 convs (same, ReLU), 3 batch norms, 2 pools, FC512, FC10")
def cnn10(batch: int) -> onnx.ModelProto:
    b = OnnxBuilder("cnn10", seed=4)
    x = b.input("input", [batch, 3, 32, 32])
    x = b.op("Relu", [b.conv(x, 3, 32, 3, hint="conv0")])
    x = b.batchnorm(x, 32, "bn0")
    x = b.op("Relu", [b.conv(x, 32, 32, 3, hint="conv1")])
    x = b.batchnorm(b.maxpool(x), 32, "bn1")
    x = b.op("Relu", [b.conv(x, 32, 64, 3, hint="conv2")])
    x = b.op("Relu", [b.conv(x, 64, 64, 3, hint="conv3")])
    return _classified(b, b.batchnorm(b.maxpool(x), 64, "bn2"), 64 * 8 * 8, 512)


@_register("vgg_cifar", "SMAUG's VGG for CIFAR-10: 10 convs 3×3 (ReLU), 4 pools, FC512, FC10")
def vgg_cifar(batch: int) -> onnx.ModelProto:
    b = OnnxBuilder("vgg_cifar", seed=5)
    x = b.input("input", [batch, 3, 32, 32])
    c_in = 3
    for stage, widths in enumerate([[64, 128], [128, 128], [256, 256, 256], [512, 512, 512]]):
        for i, c_out in enumerate(widths):
            x = b.op("Relu", [b.conv(x, c_in, c_out, 3, hint=f"conv{stage}_{i}")])
            c_in = c_out
        x = b.maxpool(x, hint=f"pool{stage}")
    return _classified(b, x, 512 * 2 * 2, 512)


@_register("resnet_tiny", "ResNet for 32×32 images: stem, 3 basic blocks (one with projection), GAP, FC10")
def resnet_tiny(batch: int) -> onnx.ModelProto:
    b = OnnxBuilder("resnet_tiny", seed=6)
    x = b.input("input", [batch, 3, 32, 32])
    x = b.op("Relu", [b.batchnorm(b.conv(x, 3, 16, 3, bias=False, hint="stem"), 16, "stem_bn")])

    def block(x: str, c_in: int, c_out: int, stride: int, name: str) -> str:
        y = b.op("Relu", [b.batchnorm(b.conv(x, c_in, c_out, 3, stride, bias=False, hint=f"{name}_a"),
                                      c_out, f"{name}_bn_a")])
        y = b.batchnorm(b.conv(y, c_out, c_out, 3, bias=False, hint=f"{name}_b"), c_out, f"{name}_bn_b")
        if stride != 1 or c_in != c_out:
            x = b.batchnorm(b.conv(x, c_in, c_out, 1, stride, pad=0, bias=False, hint=f"{name}_proj"),
                            c_out, f"{name}_bn_proj")
        return b.op("Relu", [b.op("Add", [y, x], f"{name}_add")], f"{name}_relu")

    x = block(x, 16, 16, 1, "block0")
    x = block(x, 16, 32, 2, "block1")
    x = block(x, 32, 32, 1, "block2")
    x = b.op("Flatten", [b.op("GlobalAveragePool", [x], "gap")], "flatten", axis=1)
    b.output(b.dense(x, 32, 10, "fc"))
    return b.model()


@_register("lstm_small", "one-layer LSTM (5 steps, 8 features, hidden 16) → FC4 on the last hidden state")
def lstm_small(batch: int) -> onnx.ModelProto:
    b = OnnxBuilder("lstm_small", seed=7)
    steps, feat, hidden = 5, 8, 16
    x = b.input("input", [steps, batch, feat])
    w = b.weight("lstm_w", (1, 4 * hidden, feat), fan_in=feat)
    r = b.weight("lstm_r", (1, 4 * hidden, hidden), fan_in=hidden)
    bias = b.const("lstm_b", (0.05 * b.rng.standard_normal((1, 8 * hidden))).astype(np.float32))
    _, y_h, _ = b.op("LSTM", [x, w, r, bias], "lstm", n_out=3, hidden_size=hidden)
    h = b.op("Squeeze", [y_h, b.const("axes0", np.array([0], np.int64))], "last_hidden")
    b.output(b.dense(h, hidden, 4, "fc"))
    return b.model()


@_register("transformer_tiny", "2 pre-norm encoder layers (hidden 32, 4 heads, FFN 64, GELU), seq 8")
def transformer_tiny(batch: int) -> onnx.ModelProto:
    return transformer("transformer_tiny", batch, layers=2, seq=8, hidden=32, heads=4, ffn=64, seed=8)


__all__ = ["build", "names", "describe", "transformer", "llama_decoder", "squeezenet11", "bert_base", "OnnxBuilder"]
