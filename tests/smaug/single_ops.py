"""Small ONNX models, one SMAUG operator (or one quirk) each, for the real-runtime tests.

Together they cover every SMAUG op nnbridge emits, each fused activation, C < 8, C not a
multiple of 8, odd channel counts, asymmetric pads, padded pooling, concat, split, repeat,
reshape/flatten and LSTM. ``MODELS[name]()`` builds the ONNX model.
"""

from __future__ import annotations

from collections.abc import Callable

import numpy as np
import onnx

from nnbridge.zoo import OnnxBuilder

MODELS: dict[str, Callable[[], onnx.ModelProto]] = {}


def model(fn: Callable[[OnnxBuilder], None]) -> Callable[[OnnxBuilder], None]:
    def build() -> onnx.ModelProto:
        b = OnnxBuilder(fn.__name__, seed=len(fn.__name__))
        fn(b)
        return b.model()

    MODELS[fn.__name__] = build
    return fn


def image(b: OnnxBuilder, c: int, h: int = 8, w: int | None = None) -> str:
    return b.input("x", [1, c, h, h if w is None else w])


def conv(b: OnnxBuilder, x: str, c_in: int, c_out: int, k: int = 3, pads=None, stride: int = 1,
         bias: bool = False) -> str:
    ins = [x, b.weight("w", (c_out, c_in, k, k))]
    if bias:
        ins.append(b.bias("b", c_out))
    pads = [k // 2] * 4 if pads is None else pads
    return b.op("Conv", ins, "conv", kernel_shape=[k, k], strides=[stride, stride], pads=pads)


def out(b: OnnxBuilder, y: str) -> None:
    b.output(y)


# -- convolution and its fused activations ------------------------------------------------------
@model
def conv_c8_relu(b):
    out(b, b.op("Relu", [conv(b, image(b, 8), 8, 8)]))


@model
def conv_c3_relu(b):  # C < 8: the input's alignment lanes
    out(b, b.op("Relu", [conv(b, image(b, 3), 3, 16)]))


@model
def conv_c5_k10_bias(b):  # odd C, K not a multiple of 8, bias
    out(b, conv(b, image(b, 5), 5, 10, bias=True))


@model
def conv_bias_sigmoid(b):
    out(b, b.op("Sigmoid", [conv(b, image(b, 8), 8, 8, bias=True)]))


@model
def conv_elu(b):
    out(b, b.op("Elu", [conv(b, image(b, 3), 3, 8)], alpha=1.0))


@model
def conv_selu(b):
    out(b, b.op("Selu", [conv(b, image(b, 4), 4, 8)]))


@model
def conv_tanh(b):
    out(b, b.op("Tanh", [conv(b, image(b, 8), 8, 12, bias=True)]))


@model
def conv_leaky_relu(b):
    out(b, b.op("LeakyRelu", [conv(b, image(b, 6), 6, 8)], alpha=0.2))


@model
def conv_hard_tanh(b):
    lo, hi = b.const("lo", np.array(-1.0, np.float32)), b.const("hi", np.array(1.0, np.float32))
    out(b, b.op("Clip", [conv(b, image(b, 8), 8, 8), lo, hi]))


@model
def conv_asymmetric_pads(b):
    out(b, b.op("Relu", [conv(b, image(b, 3), 3, 8, pads=[0, 0, 1, 1])]))


@model
def conv_stride2_valid(b):
    out(b, conv(b, image(b, 8, 9), 8, 16, pads=[0, 0, 0, 0], stride=2))


@model
def conv_1x1_k12(b):
    out(b, conv(b, image(b, 16), 16, 12, k=1))


@model
def conv_even_kernel_same(b):  # SMAUG "same" for k = 2: the extra row/column top/left
    out(b, conv(b, image(b, 8), 8, 8, k=2, pads=[1, 1, 0, 0]))


# -- pooling -----------------------------------------------------------------------------------
@model
def max_pool(b):
    out(b, b.maxpool(b.op("Relu", [conv(b, image(b, 8), 8, 8)])))


@model
def max_pool_padded(b):  # zero padding is exact on a ReLU output
    x = b.op("Relu", [conv(b, image(b, 8, 7), 8, 8)])
    out(b, b.op("MaxPool", [x], "pool", kernel_shape=[3, 3], strides=[2, 2], pads=[1, 1, 1, 1]))


@model
def avg_pool_padded(b):
    out(b, b.op("AveragePool", [image(b, 8)], "pool", kernel_shape=[3, 3], strides=[1, 1], pads=[1, 1, 1, 1],
                count_include_pad=1))


@model
def global_avg_pool_fc(b):
    x = b.op("Flatten", [b.op("GlobalAveragePool", [conv(b, image(b, 8), 8, 16)])], "flat", axis=1)
    out(b, b.dense(x, 16, 8, "fc"))


# -- inner product, softmax, batch norm ----------------------------------------------------------
@model
def fc10_bias_softmax(b):  # 10 classes: the SMV softmax/post-FC kernels' row tails
    x = b.input("x", [1, 32])
    out(b, b.op("Softmax", [b.dense(x, 32, 10, "fc")], "prob", axis=-1))


@model
def fc4_bias(b):
    out(b, b.dense(b.input("x", [1, 24]), 24, 4, "fc"))


@model
def fc16_relu(b):
    out(b, b.op("Relu", [b.dense(b.input("x", [1, 40]), 40, 16, "fc")]))


@model
def matmul_k7(b):
    x = b.input("x", [1, 20])
    out(b, b.op("MatMul", [x, b.weight("w", (20, 7), fan_in=20)], "mm"))


@model
def fc_batch3(b):
    out(b, b.op("Relu", [b.dense(b.input("x", [3, 16]), 16, 12, "fc")]))


@model
def softmax_c8(b):
    out(b, b.op("Softmax", [b.dense(b.input("x", [2, 16]), 16, 8, "fc")], "prob", axis=-1))


@model
def batch_norm_c5(b):
    out(b, b.batchnorm(conv(b, image(b, 5), 5, 5), 5, "bn"))


@model
def batch_norm_fc10(b):
    out(b, b.batchnorm(b.op("MatMul", [b.input("x", [1, 12]), b.weight("w", (12, 10), fan_in=12)], "mm"), 10))


# -- element-wise -----------------------------------------------------------------------------
@model
def residual_add_c6(b):
    x = image(b, 6)
    y = conv(b, x, 6, 6)
    out(b, b.op("Relu", [b.op("Add", [y, x], "add")]))


@model
def mul_broadcast(b):
    x = image(b, 8)
    scale = b.const("scale", (1 + 0.5 * b.rng.standard_normal((1, 8, 1, 1))).astype(np.float32))
    out(b, b.op("Mul", [conv(b, x, 8, 8), scale], "mul"))


@model
def sub_div_constant(b):
    x = b.input("x", [2, 16])
    y = b.op("Sub", [x, b.const("c", np.full((16,), 0.25, np.float32))], "sub")
    out(b, b.op("Div", [y, b.const("d", np.full((1, 16), 2.0, np.float32))], "div"))


@model
def sigmoid_c12(b):
    out(b, b.op("Sigmoid", [b.input("x", [1, 12])]))


@model
def tanh_c10(b):
    out(b, b.op("Tanh", [b.input("x", [2, 10])]))


@model
def relu_after_add_c3(b):
    x = image(b, 3)
    out(b, b.op("Relu", [b.op("Add", [x, x], "add")]))


@model
def greater(b):
    x = b.input("x", [1, 16])
    out(b, b.op("Greater", [x, b.const("t", np.zeros((1, 16), np.float32))], "gt"))


# -- tensor ops --------------------------------------------------------------------------------
@model
def concat_c3_c5(b):  # channel concat with C % 8 != 0
    x = image(b, 3)
    y = b.op("Relu", [conv(b, x, 3, 5)])
    out(b, conv(b, b.op("Concat", [x, y], "cat", axis=1), 8, 8))


@model
def concat_c8_c8(b):
    x = image(b, 8)
    out(b, b.op("Concat", [conv(b, x, 8, 8), conv(b, x, 8, 8)], "cat", axis=1))


@model
def split_channels(b):
    y = conv(b, image(b, 8), 8, 16)
    s = b.const("sizes", np.array([8, 8], np.int64))
    lo, hi = b.op("Split", [y, s], "split", n_out=2, axis=1)
    out(b, b.op("Add", [lo, hi], "add"))


@model
def tile_rows(b):
    x = b.input("x", [1, 16])
    out(b, b.op("Tile", [x, b.const("reps", np.array([3, 1], np.int64))], "tile"))


@model
def flatten_fc(b):  # NHWC flatten on SMV: the FC weights absorb the order
    x = b.op("Flatten", [b.op("Relu", [conv(b, image(b, 3, 5), 3, 6)])], "flat", axis=1)
    out(b, b.dense(x, 6 * 5 * 5, 8, "fc"))


@model
def reshape_fc(b):
    x = b.op("Relu", [conv(b, image(b, 8, 4), 8, 8)])
    y = b.op("Reshape", [x, b.const("shape", np.array([1, 128], np.int64))], "reshape")
    out(b, b.dense(y, 128, 16, "fc"))


@model
def lstm(b):
    steps, feat, hidden = 3, 8, 8
    x = b.input("x", [steps, 1, feat])
    w = b.weight("w", (1, 4 * hidden, feat), fan_in=feat)
    r = b.weight("r", (1, 4 * hidden, hidden), fan_in=hidden)
    bias = b.const("bias", (0.05 * b.rng.standard_normal((1, 8 * hidden))).astype(np.float32))
    _, y_h, _ = b.op("LSTM", [x, w, r, bias], "lstm", n_out=3, hidden_size=hidden)
    out(b, b.op("Squeeze", [y_h, b.const("axes", np.array([0], np.int64))], "h"))


@model
def less_equal(b):
    x = b.input("x", [2, 8])
    out(b, b.op("LessOrEqual", [x, b.const("t", np.full((2, 8), 0.5, np.float32))], "le"))


@model
def standalone_hard_tanh_and_leaky_relu(b):  # standalone nodes with the runtime's own parameters
    x = b.input("x", [1, 16])
    lo, hi = b.const("lo", np.array(-1.0, np.float32)), b.const("hi", np.array(1.0, np.float32))
    y = b.op("Clip", [b.op("Add", [x, x], "add"), lo, hi], "clip")
    out(b, b.op("LeakyRelu", [b.op("Mul", [y, x], "mul")], "lrelu", alpha=0.1))


@model
def depthwise_conv(b):  # SMAUG's ConvolutionDepthwise: Reference only (a no-op on SMV)
    x = image(b, 8)
    w = b.weight("w", (8, 1, 3, 3))
    out(b, b.op("Conv", [x, w], "dw", kernel_shape=[3, 3], pads=[1, 1, 1, 1], group=8))


@model
def softmax_input_c10(b):  # a row SMV would cut short, not made by an FC: padded by an identity FC
    out(b, b.op("Softmax", [b.input("x", [2, 10])], "prob", axis=-1))
