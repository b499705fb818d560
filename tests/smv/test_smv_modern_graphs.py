"""Graphs that used to crash the SMV backend (KeyError, matmul/reshape ValueError): an If whose
branches read outer values, torch's EmbeddingBag (a Loop), a ConvNeXt block and a CoAtNet-style
block (both with the LayerNorm2d Transpose sandwich). Each must run and agree with onnxruntime."""

from __future__ import annotations

import io
import warnings

import numpy as np
import onnx
import pytest
from onnx import TensorProto, helper, numpy_helper

import nnbridge

torch = pytest.importorskip("torch")  # installed by make test (the torch extra)


def _export(module, args, names) -> onnx.ModelProto:
    buffer = io.BytesIO()
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        torch.onnx.export(module, args, buffer, input_names=names, opset_version=17, dynamo=False)
    return onnx.load_from_string(buffer.getvalue())


class _Bag(torch.nn.Module):
    def __init__(self):
        super().__init__()
        self.bag, self.out = torch.nn.EmbeddingBag(50, 8, mode="mean"), torch.nn.Linear(8, 4)

    def forward(self, idx, offsets):
        return self.out(self.bag(idx, offsets))


class _LayerNorm2d(torch.nn.Module):
    def __init__(self, c):
        super().__init__()
        self.ln = torch.nn.LayerNorm(c)

    def forward(self, x):
        return self.ln(x.permute(0, 2, 3, 1)).permute(0, 3, 1, 2)


class _ConvNeXtBlock(torch.nn.Module):
    def __init__(self, c=16):
        super().__init__()
        self.dw, self.ln = torch.nn.Conv2d(c, c, 7, padding=3, groups=c), torch.nn.LayerNorm(c)
        self.up, self.down = torch.nn.Linear(c, 4 * c), torch.nn.Linear(4 * c, c)

    def forward(self, x):
        y = self.ln(self.dw(x).permute(0, 2, 3, 1))
        y = self.down(torch.nn.functional.gelu(self.up(y))).permute(0, 3, 1, 2)
        return torch.nn.functional.max_pool2d(x + y, 2)


class _CoAtBlock(torch.nn.Module):
    def __init__(self, c=16):
        super().__init__()
        self.conv, self.norm = torch.nn.Conv2d(3, c, 3, padding=1), _LayerNorm2d(c)
        self.qkv, self.proj = torch.nn.Linear(c, 3 * c), torch.nn.Linear(c, c)

    def forward(self, x):
        x = self.norm(self.conv(x))
        b, c, h, w = x.shape
        q, k, v = self.qkv(x.flatten(2).transpose(1, 2)).chunk(3, dim=-1)
        attended = torch.softmax(q @ k.transpose(1, 2) / c ** 0.5, -1) @ v
        return torch.nn.functional.avg_pool2d(self.proj(attended).transpose(1, 2).reshape(b, c, h, w) + x, 2)


def _if_reading_outer_values() -> onnx.ModelProto:
    branch = {name: helper.make_graph([helper.make_node(op, ["x"], [name])], name, [],
                                      [helper.make_tensor_value_info(name, TensorProto.FLOAT, [2, 4])])
              for name, op in (("then", "Relu"), ("else", "Neg"))}
    nodes = [helper.make_node("ReduceSum", ["x"], ["s"], keepdims=0), helper.make_node("Greater", ["s", "zero"], ["c"]),
             helper.make_node("If", ["c"], ["y"], then_branch=branch["then"], else_branch=branch["else"])]
    graph = helper.make_graph(nodes, "if", [helper.make_tensor_value_info("x", TensorProto.FLOAT, [2, 4])],
                              [helper.make_tensor_value_info("y", TensorProto.FLOAT, None)],
                              [numpy_helper.from_array(np.array(0, np.float32), "zero")])
    return helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)])


def _model(name: str) -> onnx.ModelProto:
    torch.manual_seed(0)
    if name == "if reading outer values":
        return _if_reading_outer_values()
    if name == "embeddingbag":
        return _export(_Bag(), (torch.randint(0, 50, (12,)), torch.tensor([0, 5, 9])), ["idx", "offsets"])
    if name == "convnext block":
        return _export(_ConvNeXtBlock(), (torch.randn(1, 16, 8, 8),), ["x"])
    return _export(_CoAtBlock(), (torch.randn(1, 3, 8, 8),), ["x"])


@pytest.mark.parametrize("name", ["if reading outer values", "embeddingbag", "convnext block", "coatnet block"])
def test_modern_graphs_run_on_smv_and_agree_with_onnxruntime(name):
    result = nnbridge.check(_model(name), backend="smv")
    assert result.ok, [(o.name, o.max_abs_err) for o in result.outputs]
