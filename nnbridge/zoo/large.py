"""Larger reference networks, built on demand (not in ``names()``, so sweeps over
the zoo stay fast): the RDU validation points use them.

* ``squeezenet11``: SqueezeNet 1.1 (224×224, 1000 classes), the network of the
  Plasticine model-analyzer sample (specs/rdu-architecture.md §6.1).
* ``bert_base``: a 12-layer, hidden-768 BERT-base-sized encoder.
"""

from __future__ import annotations

import onnx

from .builder import OnnxBuilder
from .transformer import transformer


def squeezenet11(batch: int = 1, seed: int = 0) -> onnx.ModelProto:
    b = OnnxBuilder("squeezenet1_1", seed=seed)
    x = b.input("data", [batch, 3, 224, 224])

    def conv_relu(x: str, c_in: int, c_out: int, k: int, stride: int, pad: int, hint: str) -> str:
        return b.op("Relu", [b.conv(x, c_in, c_out, k, stride, pad, hint=hint)], f"{hint}_relu")

    def pool(x: str, hint: str) -> str:
        return b.op("MaxPool", [x], hint, kernel_shape=[3, 3], strides=[2, 2], ceil_mode=1)

    def fire(x: str, c_in: int, squeeze: int, expand: int, hint: str) -> str:
        s = conv_relu(x, c_in, squeeze, 1, 1, 0, f"{hint}_squeeze1x1")
        e1 = conv_relu(s, squeeze, expand, 1, 1, 0, f"{hint}_expand1x1")
        e3 = conv_relu(s, squeeze, expand, 3, 1, 1, f"{hint}_expand3x3")
        return b.op("Concat", [e1, e3], f"{hint}_concat", axis=1)

    x = pool(conv_relu(x, 3, 64, 3, 2, 0, "conv1"), "pool1")
    x = fire(x, 64, 16, 64, "fire2")
    x = pool(fire(x, 128, 16, 64, "fire3"), "pool3")
    x = fire(x, 128, 32, 128, "fire4")
    x = pool(fire(x, 256, 32, 128, "fire5"), "pool5")
    x = fire(x, 256, 48, 192, "fire6")
    x = fire(x, 384, 48, 192, "fire7")
    x = fire(x, 384, 64, 256, "fire8")
    x = fire(x, 512, 64, 256, "fire9")
    x = conv_relu(x, 512, 1000, 1, 1, 0, "conv10")
    x = b.op("Flatten", [b.op("GlobalAveragePool", [x], "pool10")], "flatten")
    b.output(x)
    return b.model()


def bert_base(batch: int = 1, seq: int = 128, layers: int = 12) -> onnx.ModelProto:
    """BERT-base encoder dimensions: hidden 768, 12 heads, FFN 3072."""
    return transformer("bert_base", batch, layers=layers, seq=seq, hidden=768, heads=12, ffn=3072, seed=1)
