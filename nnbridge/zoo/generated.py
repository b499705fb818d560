"""Large generated graphs for the pass-scaling benchmark and the pass-work test.

A repeated CNN+attention-shaped block (convolution, batch norm, activation,
NCHW↔NHWC transposes, a matmul/softmax attention, residual adds) with small
tensors, so that compile time is all graph work and no arithmetic.
"""

from __future__ import annotations

import numpy as np
import onnx
from onnx import TensorProto, helper, numpy_helper

CHANNELS = 8
SIZE = 4


def _block(i: int, x: str, inits: list[onnx.TensorProto]) -> tuple[list[onnx.NodeProto], str]:
    rng = np.random.default_rng(i)
    p = f"b{i}_"

    def const(name: str, array: np.ndarray) -> str:
        kept = array if array.dtype == np.int64 else array.astype(np.float32)
        inits.append(numpy_helper.from_array(kept, p + name))
        return p + name

    c = CHANNELS
    nodes = [
        helper.make_node("Conv", [x, const("w", rng.standard_normal((c, c, 3, 3)) * 0.1), const("b", np.zeros(c))],
                         [p + "conv"], pads=[1, 1, 1, 1]),
        helper.make_node("BatchNormalization", [p + "conv", const("g", np.ones(c)), const("beta", np.zeros(c)),
                                                const("m", np.zeros(c)), const("v", np.ones(c))], [p + "bn"]),
        helper.make_node("Relu", [p + "bn"], [p + "relu"]),
        helper.make_node("Transpose", [p + "relu"], [p + "nhwc"], perm=[0, 2, 3, 1]),
        helper.make_node(
            "Reshape", [p + "nhwc", const("tokens", np.array([1, SIZE * SIZE, c], np.int64))], [p + "seq"]
        ),
        helper.make_node("MatMul", [p + "seq", const("wq", rng.standard_normal((c, c)) * 0.1)], [p + "q"]),
        helper.make_node("Transpose", [p + "seq"], [p + "kt"], perm=[0, 2, 1]),
        helper.make_node("MatMul", [p + "q", p + "kt"], [p + "scores"]),
        helper.make_node("Softmax", [p + "scores"], [p + "attn"], axis=-1),
        helper.make_node("MatMul", [p + "attn", p + "seq"], [p + "mixed"]),
        helper.make_node("Reshape", [p + "mixed", const("image", np.array([1, SIZE, SIZE, c], np.int64))], [p + "img"]),
        helper.make_node("Transpose", [p + "img"], [p + "nchw"], perm=[0, 3, 1, 2]),
        helper.make_node("Add", [p + "nchw", x], [p + "out"]),
    ]
    return nodes, p + "out"


NODES_PER_BLOCK = 13


def generated_model(nodes: int) -> onnx.ModelProto:
    """A valid opset-18 model of about ``nodes`` nodes (a multiple of the block size)."""
    inits: list[onnx.TensorProto] = []
    graph_nodes: list[onnx.NodeProto] = []
    x = "input"
    for i in range(max(1, nodes // NODES_PER_BLOCK)):
        block, x = _block(i, x, inits)
        graph_nodes += block
    shape = [1, CHANNELS, SIZE, SIZE]
    graph = helper.make_graph(graph_nodes, f"generated_{nodes}",
                              [helper.make_tensor_value_info("input", TensorProto.FLOAT, shape)],
                              [helper.make_tensor_value_info(x, TensorProto.FLOAT, shape)], inits)
    return helper.make_model(graph, opset_imports=[helper.make_opsetid("", 18)], ir_version=9)
