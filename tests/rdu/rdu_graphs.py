"""Small hand-built ONNX graphs for the RDU partitioner and numerics tests."""

from __future__ import annotations

import numpy as np
import onnx
from onnx import TensorProto, helper, numpy_helper

from nnbridge.ir import IR_OPSET


def make_model(nodes, inputs, outputs, inits, name="g") -> onnx.ModelProto:
    graph = helper.make_graph(nodes, name, inputs, outputs, [numpy_helper.from_array(a, n) for n, a in inits.items()])
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", IR_OPSET)], ir_version=10)
    return onnx.shape_inference.infer_shapes(model)


def conv_chain(ops: list[str], channels: int = 4, size: int = 8, seed: int = 0) -> onnx.ModelProto:
    """A chain of ops on a [1, C, H, W] tensor: "conv", "relu", "sigmoid", "bias" (broadcast add),
    "reshape" (to itself via a flat shape and back is two ops; here a no-op reshape)."""
    rng = np.random.default_rng(seed)
    nodes, inits = [], {}
    x = "x"
    for i, op in enumerate(ops):
        y = f"{op}{i}"
        if op == "conv":
            inits[f"w{i}"] = (rng.standard_normal((channels, channels, 3, 3)) * 0.3).astype(np.float32)
            nodes.append(helper.make_node("Conv", [x, f"w{i}"], [y], pads=[1, 1, 1, 1], name=y))
        elif op == "bias":
            inits[f"b{i}"] = rng.standard_normal((1, channels, 1, 1)).astype(np.float32)
            nodes.append(helper.make_node("Add", [x, f"b{i}"], [y], name=y))
        elif op == "reshape":
            inits[f"s{i}"] = np.array([1, channels, size, size], np.int64)
            nodes.append(helper.make_node("Reshape", [x, f"s{i}"], [y], name=y))
        else:
            nodes.append(helper.make_node(op.capitalize(), [x], [y], name=y))
        x = y
    shape = [1, channels, size, size]
    return make_model(nodes, [helper.make_tensor_value_info("x", TensorProto.FLOAT, shape)],
                      [helper.make_tensor_value_info(x, TensorProto.FLOAT, shape)], inits)


def linear_relu(n_in: int = 16, n_out: int = 8, seed: int = 0) -> onnx.ModelProto:
    """y = relu(x @ W + b): one kernel (anchor MatMul + Add/Relu epilogue)."""
    rng = np.random.default_rng(seed)
    inits = {"W": rng.standard_normal((n_in, n_out)).astype(np.float32),
             "b": rng.standard_normal(n_out).astype(np.float32)}
    nodes = [helper.make_node("MatMul", ["x", "W"], ["mm"], name="mm"),
             helper.make_node("Add", ["mm", "b"], ["add"], name="add"),
             helper.make_node("Relu", ["add"], ["y"], name="relu")]
    return make_model(nodes, [helper.make_tensor_value_info("x", TensorProto.FLOAT, [2, n_in])],
                      [helper.make_tensor_value_info("y", TensorProto.FLOAT, [2, n_out])], inits)
