"""Passes that cannot lie about layouts: Transpose sandwiches around every kind of op (the
"LayerNorm2d" of ConvNeXt/CoAtNet: NCHW → NHWC → a channels-last op → NCHW), followed by spatial
readers, agree with onnxruntime on every backend's pipeline. A cancelled transpose pair once left
NHWC data labelled NCHW, and the following MaxPool was silently wrong on SMV."""

from __future__ import annotations

import numpy as np
import pytest
from onnx import TensorProto, helper, numpy_helper

import nnbridge

C = 8
RNG = np.random.default_rng(0)


def _const(name, shape, low=-1.0, high=1.0):
    return numpy_helper.from_array(RNG.uniform(low, high, shape).astype(np.float32), name)


MIDDLES = {  # a channels-last op on the NHWC view
    "layernorm": ([helper.make_node("LayerNormalization", ["t", "g", "b"], ["n"], axis=-1)],
                  [_const("g", [C], 0.5, 1.5), _const("b", [C])]),
    "relu": ([helper.make_node("Relu", ["t"], ["n"])], []),
    "softmax": ([helper.make_node("Softmax", ["t"], ["n"], axis=-1)], []),
    "channel scale": ([helper.make_node("Mul", ["t", "s"], ["n"])], [_const("s", [C], 0.5, 1.5)]),
}
TAILS = {  # what reads the NCHW result
    "maxpool": ([helper.make_node("MaxPool", ["u"], ["y"], kernel_shape=[2, 2], strides=[2, 2])], []),
    "conv": ([helper.make_node("Conv", ["u", "w"], ["y"], pads=[1, 1, 1, 1])], [_const("w", [4, C, 3, 3])]),
    "depthwise conv": ([helper.make_node("Conv", ["u", "dw"], ["y"], pads=[1, 1, 1, 1], group=C)],
                       [_const("dw", [C, 1, 3, 3])]),
    "reduce over channels": ([helper.make_node("ReduceMean", ["u"], ["y"], axes=[1], keepdims=1)], []),
    "elementwise": ([helper.make_node("Sigmoid", ["u"], ["y"])], []),
}


def _sandwich(middle: str, tail: str):
    mid_nodes, mid_inits = MIDDLES[middle]
    tail_nodes, tail_inits = TAILS[tail]
    nodes = [helper.make_node("Transpose", ["x"], ["t"], perm=[0, 2, 3, 1]), *mid_nodes,
             helper.make_node("Transpose", ["n"], ["u"], perm=[0, 3, 1, 2]), *tail_nodes]
    graph = helper.make_graph(nodes, f"{middle}-{tail}", [helper.make_tensor_value_info("x", TensorProto.FLOAT,
                                                                                        [1, C, 6, 6])],
                              [helper.make_tensor_value_info("y", TensorProto.FLOAT, None)], [*mid_inits, *tail_inits])
    return helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)])


@pytest.mark.parametrize("backend", ["reference", "smv", "rdu"])
@pytest.mark.parametrize("tail", list(TAILS))
@pytest.mark.parametrize("middle", list(MIDDLES))
def test_a_transpose_sandwich_agrees_with_onnxruntime(middle, tail, backend):
    for level in (1, 3):
        result = nnbridge.check(_sandwich(middle, tail), backend=backend, opt_level=level)
        assert result.ok, (level, [(o.name, o.max_abs_err) for o in result.outputs])
