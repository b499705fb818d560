"""Models the check tests build (onnx.helper), each made to exercise one rule."""

from __future__ import annotations

import numpy as np
import onnx
from onnx import TensorProto, helper, numpy_helper

OPSET = [helper.make_opsetid("", 17)]


def model(nodes, inputs, outputs, weights=(), name="m", metadata=None) -> onnx.ModelProto:
    graph = helper.make_graph(nodes, name, inputs, outputs, [numpy_helper.from_array(w, n) for n, w in weights])
    m = helper.make_model(graph, opset_imports=OPSET)
    for key, value in (metadata or {}).items():
        m.metadata_props.add(key=key, value=value)
    return m


def tensor(name, shape, dtype=TensorProto.FLOAT):
    return helper.make_tensor_value_info(name, dtype, shape)


def deep_cnn(depth: int = 30, channels: int = 8, size: int = 16, seed: int = 0) -> onnx.ModelProto:
    """Conv(3x3)+Relu repeated ``depth`` times with He-initialised weights: conv<i> reads w<i>."""
    rng = np.random.default_rng(seed)
    nodes, weights, x = [], [], "x"
    for i in range(depth):
        fan_in = (3 if i == 0 else channels) * 9
        w = (rng.standard_normal((channels, fan_in // 9, 3, 3)) * np.sqrt(2.0 / fan_in)).astype(np.float32)
        weights += [(f"w{i}", w), (f"b{i}", (rng.standard_normal(channels) * 0.1).astype(np.float32))]
        nodes += [helper.make_node("Conv", [x, f"w{i}", f"b{i}"], [f"c{i}"], name=f"conv{i}", pads=[1, 1, 1, 1]),
                  helper.make_node("Relu", [f"c{i}"], [f"r{i}"], name=f"relu{i}")]
        x = f"r{i}"
    return model(nodes, [tensor("x", [1, 3, size, size])], [tensor(x, [1, channels, size, size])], weights,
                 name=f"cnn{depth}")


def large_outputs(seed: int = 0) -> onnx.ModelProto:
    """A dense layer whose outputs are ≈ 300 (a detector's box coordinates in pixels)."""
    rng = np.random.default_rng(seed)
    w = rng.uniform(0.5, 1.5, (64, 16)).astype(np.float32) * 10
    b = np.full(16, 300.0, np.float32)
    nodes = [helper.make_node("MatMul", ["x", "w"], ["xw"], name="fc"),
             helper.make_node("Add", ["xw", "b"], ["boxes"], name="bias")]
    return model(nodes, [tensor("x", [4, 64])], [tensor("boxes", [4, 16])], [("w", w), ("b", b)], name="boxes")


def overflowing() -> onnx.ModelProto:
    """scale (×40: ≈ 20 for inputs near 0.5, fine in fp16) → fc (256 × 20 × 16 ≈ 82 000 > 65504) → relu."""
    w = np.full((256, 8), 16.0, np.float32)
    nodes = [helper.make_node("Mul", ["x", "k"], ["scaled"], name="scale"),
             helper.make_node("MatMul", ["scaled", "w"], ["fc_out"], name="fc"),
             helper.make_node("Relu", ["fc_out"], ["y"], name="relu")]
    return model(nodes, [tensor("x", [1, 256])], [tensor("y", [1, 8])],
                 [("k", np.array(40.0, np.float32)), ("w", w)], name="overflow")


def log_of(metadata=None) -> onnx.ModelProto:
    """y = log(x): NaN wherever x < 0, on every runtime."""
    return model([helper.make_node("Log", ["x"], ["y"], name="log")], [tensor("x", [2, 8])],
                 [tensor("y", [2, 8])], name="log", metadata=metadata)


def embedding(vocab: int = 7, dim: int = 4) -> onnx.ModelProto:
    """ids (int64) → Reshape → Gather from a [vocab, dim] table: only ids in [0, vocab) are valid."""
    table = np.arange(vocab * dim, dtype=np.float32).reshape(vocab, dim)
    nodes = [helper.make_node("Reshape", ["ids", "flat"], ["ids_flat"], name="flatten_ids"),
             helper.make_node("Gather", ["table", "ids_flat"], ["rows"], name="lookup", axis=0),
             helper.make_node("Mul", ["rows", "x"], ["y"], name="weigh")]
    return model(nodes, [tensor("ids", [2, 3], TensorProto.INT64), tensor("x", [6, dim])],
                 [tensor("y", [6, dim])], [("table", table), ("flat", np.array([-1], np.int64))], name="emb")


def scaled_softmax(k: float = 100.0) -> onnx.ModelProto:
    """softmax(k·x): logits of 100–200 for x in [1, 2) — fine with the row maximum subtracted."""
    nodes = [helper.make_node("Mul", ["x", "k"], ["z"], name="scale"),
             helper.make_node("Softmax", ["z"], ["y"], name="softmax", axis=-1)]
    return model(nodes, [tensor("x", [2, 16])], [tensor("y", [2, 16])], [("k", np.array(k, np.float32))],
                 name="softmax")


def sigmoid_head(bias: float = -14.0, conv: bool = False, seed: int = 0) -> onnx.ModelProto:
    """A detector's score map: sigmoid(fc(x) + bias) ≈ 1e-6 everywhere for bias −14, where
    float32 sigmoid (onnxruntime's too) has no relative precision. ``conv``: a 1x1 Conv instead
    of the MatMul (onnxruntime has no float64 Conv: onnx.reference evaluates it in float64)."""
    rng = np.random.default_rng(seed)
    w = (rng.standard_normal((16, 16)) * 0.1).astype(np.float32)
    b = np.full(16, bias, np.float32)
    if conv:
        nodes = [helper.make_node("Conv", ["x", "w", "b"], ["z"], name="head")]
        weights, shape = [("w", w.reshape(16, 16, 1, 1)), ("b", b)], [1, 16, 4, 4]
    else:
        nodes = [helper.make_node("MatMul", ["x", "w"], ["xw"], name="head"),
                 helper.make_node("Add", ["xw", "b"], ["z"], name="bias")]
        weights, shape = [("w", w), ("b", b)], [8, 16]
    nodes.append(helper.make_node("Sigmoid", ["z"], ["scores"], name="sigmoid"))
    return model(nodes, [tensor("x", shape)], [tensor("scores", shape)], weights, name="scores")


def rms_norm(features: int = 256) -> onnx.ModelProto:
    """x / sqrt(sum(x²) / n): for x ≈ 20–25 the sum over 256 features reaches 1.3e5, beyond fp16's
    65 504, while the output stays finite (x / inf = 0)."""
    nodes = [helper.make_node("Mul", ["x", "x"], ["sq"], name="square"),
             helper.make_node("ReduceSum", ["sq", "axes"], ["sum"], name="sum", keepdims=1),
             helper.make_node("Div", ["sum", "n"], ["ms"], name="mean"),
             helper.make_node("Sqrt", ["ms"], ["rms"], name="root"),
             helper.make_node("Div", ["x", "rms"], ["y"], name="normalise")]
    return model(nodes, [tensor("x", [2, features])], [tensor("y", [2, features])],
                 [("axes", np.array([-1], np.int64)), ("n", np.array(features, np.float32))], name="rmsnorm")


def scales_then_squeeze(scales: int = 4) -> onnx.ModelProto:
    """``scales`` Muls of x by 1 (each an output), then a Squeeze of x: the Squeeze comes last."""
    nodes = [helper.make_node("Mul", ["x", "k"], [f"m{i}"], name=f"scale{i}") for i in range(scales)]
    nodes.append(helper.make_node("Squeeze", ["x", "axes"], ["s"], name="squeeze"))
    return model(nodes, [tensor("x", [1, 64])], [*(tensor(f"m{i}", [1, 64]) for i in range(scales)), tensor("s", [64])],
                 [("k", np.array(1.0, np.float32)), ("axes", np.array([0], np.int64))], name="squeeze")
