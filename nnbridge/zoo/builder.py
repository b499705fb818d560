"""A small ONNX graph builder for the zoo: names nodes, creates weights, tracks shapes.

Weights are drawn from a seeded generator with He-style scaling so that
activations stay in a sensible range through deep networks (all-equal or
exploding activations would make numerical cross-checks meaningless).
"""

from __future__ import annotations

import numpy as np
import onnx
from onnx import TensorProto, helper, numpy_helper

from ..ir.schema import IR_OPSET


class OnnxBuilder:
    def __init__(self, name: str, seed: int = 0):
        self.name = name
        self.rng = np.random.default_rng(seed)
        self.nodes: list[onnx.NodeProto] = []
        self.inits: list[onnx.TensorProto] = []
        self.inputs: list[onnx.ValueInfoProto] = []
        self.outputs: list[onnx.ValueInfoProto] = []
        self._count: dict[str, int] = {}

    def _name(self, hint: str) -> str:
        n = self._count.get(hint, 0)
        self._count[hint] = n + 1
        return hint if n == 0 else f"{hint}_{n}"

    def input(self, name: str, shape: list[int | str], dtype: int = TensorProto.FLOAT) -> str:
        self.inputs.append(helper.make_tensor_value_info(name, dtype, shape))
        return name

    def output(self, name: str) -> None:
        self.outputs.append(helper.make_tensor_value_info(name, TensorProto.UNDEFINED, None))

    def const(self, hint: str, array: np.ndarray) -> str:
        name = self._name(hint)
        self.inits.append(numpy_helper.from_array(np.asarray(array), name))
        return name

    def weight(self, hint: str, shape: tuple[int, ...], fan_in: int | None = None) -> str:
        fan_in = fan_in or int(np.prod(shape[1:])) or 1
        w = self.rng.standard_normal(shape) * np.sqrt(2.0 / fan_in)
        return self.const(hint, w.astype(np.float32))

    def bias(self, hint: str, n: int) -> str:
        return self.const(hint, (self.rng.standard_normal(n) * 0.05).astype(np.float32))

    def op(self, op_type: str, inputs: list[str], hint: str | None = None, n_out: int = 1, **attrs) -> str | list[str]:
        name = self._name(hint or op_type.lower())
        outs = [name if n_out == 1 else f"{name}_{i}" for i in range(n_out)]
        self.nodes.append(helper.make_node(op_type, inputs, outs, name=name, **attrs))
        return outs[0] if n_out == 1 else outs

    # -- layers ---------------------------------------------------------------
    def conv(self, x: str, c_in: int, c_out: int, k: int, stride: int = 1, pad: int | None = None,
             bias: bool = True, hint: str = "conv") -> str:
        pad = k // 2 if pad is None else pad
        ins = [x, self.weight(f"{hint}_w", (c_out, c_in, k, k))]
        if bias:
            ins.append(self.bias(f"{hint}_b", c_out))
        return self.op("Conv", ins, hint, kernel_shape=[k, k], strides=[stride, stride], pads=[pad] * 4)

    def batchnorm(self, x: str, c: int, hint: str = "bn") -> str:
        scale = self.const(f"{hint}_scale", (1 + 0.1 * self.rng.standard_normal(c)).astype(np.float32))
        shift = self.const(f"{hint}_shift", (0.1 * self.rng.standard_normal(c)).astype(np.float32))
        mean = self.const(f"{hint}_mean", (0.1 * self.rng.standard_normal(c)).astype(np.float32))
        var = self.const(f"{hint}_var", (0.5 + self.rng.random(c)).astype(np.float32))
        return self.op("BatchNormalization", [x, scale, shift, mean, var], hint, epsilon=1e-5)

    def dense(self, x: str, n_in: int, n_out: int, hint: str = "fc") -> str:
        w = self.weight(f"{hint}_w", (n_out, n_in), fan_in=n_in)
        return self.op("Gemm", [x, w, self.bias(f"{hint}_b", n_out)], hint, transB=1)

    def linear(self, x: str, n_in: int, n_out: int, hint: str = "linear") -> str:
        """MatMul + Add (the transformer form, on [..., n_in] tensors)."""
        w = self.weight(f"{hint}_w", (n_in, n_out), fan_in=n_in)
        y = self.op("MatMul", [x, w], f"{hint}_mm")
        return self.op("Add", [y, self.bias(f"{hint}_b", n_out)], f"{hint}_add")

    def maxpool(self, x: str, k: int = 2, stride: int = 2, hint: str = "pool") -> str:
        return self.op("MaxPool", [x], hint, kernel_shape=[k, k], strides=[stride, stride])

    def model(self) -> onnx.ModelProto:
        graph = helper.make_graph(self.nodes, self.name, self.inputs, self.outputs, self.inits)
        model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", IR_OPSET)],
                                  ir_version=10, producer_name="nnbridge.zoo")
        model = onnx.shape_inference.infer_shapes(model)
        for out in model.graph.output:  # fill in the output types that inference found
            for vi in model.graph.value_info:
                if vi.name == out.name:
                    out.CopyFrom(vi)
        onnx.checker.check_model(model, full_check=True)
        return model
