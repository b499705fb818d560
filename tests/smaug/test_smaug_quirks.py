"""ONNX → SMAUG honours the runtime quirks of the spec (§9) and keeps ONNX semantics (checked in
onnxruntime after the round trip)."""

from __future__ import annotations

import numpy as np
import onnx
import onnxruntime as ort
import pytest
from onnx import TensorProto, helper, numpy_helper

from nnbridge.base.errors import UnsupportedOpError
from nnbridge.converters.onnx import graph_to_model, load_onnx
from nnbridge.converters.smaug import load_smaug, read_topology, save_smaug
from nnbridge.protos.smaug import smaug_types_pb2 as pb

RNG = np.random.default_rng(7)


def model(nodes, inits: dict, x_shape, y_shape) -> onnx.ModelProto:
    graph = helper.make_graph(
        nodes, "quirk", [helper.make_tensor_value_info("x", TensorProto.FLOAT, x_shape)],
        [helper.make_tensor_value_info("y", TensorProto.FLOAT, y_shape)],
        [numpy_helper.from_array(v.astype(np.float32), k) for k, v in inits.items()])
    return helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)], ir_version=8)


def convert(m: onnx.ModelProto, tmp_path, backend="SMV"):
    """Returns the SMAUG topology and max |error| / max |expected| of the reloaded model in ORT."""
    topo, _ = save_smaug(load_onnx(m), tmp_path / "q_topo.pbtxt", smaug_backend=backend)
    loaded = load_smaug(topo, compute_dtype="float32")
    x = RNG.standard_normal([d.dim_value for d in m.graph.input[0].type.tensor_type.shape.dim]).astype(np.float32)
    stored = x.transpose(0, 2, 3, 1) if loaded.inputs[0].type.layout.value == "NHWC" and x.ndim == 4 else x
    run = [ort.InferenceSession(p.SerializeToString(), providers=["CPUExecutionProvider"]).run(None, {"x": v})[0]
           for p, v in ((m, x), (graph_to_model(loaded), stored))]
    return read_topology(topo), np.abs(run[1] - run[0]).max() / np.abs(run[0]).max()


def ops(topology) -> list[str]:
    return [pb.OpType.Name(n.op) for n in topology.nodes if n.op != pb.Data]


def node(topology, op: str):
    return next(n for n in topology.nodes if pb.OpType.Name(n.op) == op)


CONV_W = RNG.standard_normal((4, 3, 3, 3))


def test_fused_leaky_relu_keeps_its_slope(tmp_path):
    m = model([helper.make_node("Conv", ["x", "w"], ["c"], pads=[1, 1, 1, 1]),
               helper.make_node("LeakyRelu", ["c"], ["y"], alpha=0.2)], {"w": CONV_W}, [1, 3, 8, 8], [1, 4, 8, 8])
    topology, err = convert(m, tmp_path, "Reference")
    conv = node(topology, "Convolution3d")
    assert conv.params.conv_params.padding == pb.SamePadding
    assert conv.params.act_params.activation == pb.LReLU
    assert conv.params.act_params.lrelu_params.slope == pytest.approx(0.2)
    assert ops(topology) == ["Convolution3d"] and err < 1e-5


def test_elu_alpha_is_written_explicitly(tmp_path):
    m = model([helper.make_node("Conv", ["x", "w"], ["c"]), helper.make_node("Elu", ["c"], ["y"])],
              {"w": CONV_W}, [1, 3, 8, 8], [1, 4, 6, 6])
    topology, err = convert(m, tmp_path, "Reference")
    act = node(topology, "Convolution3d").params.act_params
    assert act.activation == pb.ELU and act.elu_params.alpha == 1.0  # ONNX's alpha, not SMAUG's 0.1
    assert node(topology, "Convolution3d").params.conv_params.padding == pb.ValidPadding and err < 1e-5


def test_softmax_is_never_fused(tmp_path):
    m = model([helper.make_node("Gemm", ["x", "w"], ["g"], transB=1), helper.make_node("Softmax", ["g"], ["y"])],
              {"w": RNG.standard_normal((5, 12))}, [2, 12], [2, 5])
    topology, err = convert(m, tmp_path, "Reference")
    assert ops(topology) == ["InnerProduct", "Softmax"]
    assert not node(topology, "InnerProduct").params.HasField("act_params") and err < 1e-5


def test_standalone_leaky_relu_needs_the_runtime_slope(tmp_path):
    def add_then(alpha):
        return model([helper.make_node("Add", ["x", "x"], ["a"]), helper.make_node("LeakyRelu", ["a"], ["y"],
                                                                                alpha=alpha)],
                     {}, [1, 8], [1, 8])

    topology, err = convert(add_then(0.1), tmp_path, "Reference")
    assert ops(topology) == ["EltwiseAdd", "LReLU"] and err < 1e-5
    assert node(topology, "LReLU").params.act_params.lrelu_params.slope == pytest.approx(0.1)
    # another slope: a standalone LReLU would compute with 0.1 (Q1), so it is fused into an identity
    # BatchNorm, which writes its parameters (ir/decompositions.py; real runtime: test_smaug_decompositions)
    topology, err = convert(add_then(0.2), tmp_path, "Reference")
    assert ops(topology) == ["EltwiseAdd", "BatchNorm"] and err < 1e-5
    assert node(topology, "BatchNorm").params.act_params.lrelu_params.slope == pytest.approx(0.2)


def test_depthwise_convolution(tmp_path):
    m = model([helper.make_node("Conv", ["x", "w"], ["y"], group=3, pads=[1, 1, 1, 1])],
              {"w": RNG.standard_normal((3, 1, 3, 3))}, [1, 3, 6, 6], [1, 3, 6, 6])
    with pytest.raises(UnsupportedOpError, match="depthwise convolution does nothing on SMV.*Q10"):
        convert(m, tmp_path, "SMV")
    topology, err = convert(m, tmp_path, "Reference")
    assert ops(topology) == ["ConvolutionDepthwise"] and err < 1e-5
    kernel = node(topology, "ConvolutionDepthwise").input_tensors[1].shape
    assert list(kernel.dims) == [1, 3, 3, 3] and kernel.layout == pb.NCHW


@pytest.mark.parametrize("backend", ["Reference", "SMV"])
@pytest.mark.parametrize("attrs, kernel, padding_node", [
    ({"pads": [1, 1, 1, 1]}, 3, False),  # symmetric (k−1)/2: SamePadding
    ({"pads": [0, 0, 1, 1]}, 3, True),  # asymmetric: explicit zero padding
    ({"auto_pad": "SAME_UPPER"}, 4, True),  # even kernel: ONNX puts the extra row bottom, SMAUG top
    ({"pads": [2, 2, 1, 1], "strides": [2, 2]}, 4, False),  # SMAUG's rule (extra on top/left), any stride
])
def test_padding_is_mapped_exactly(tmp_path, attrs, kernel, padding_node, backend):
    """Explicit padding is a Padding node on Reference; on SMV, where Padding aborts, a Concat of
    repeated zero pixels per padded axis."""
    weights = {"w": RNG.standard_normal((2, 3, kernel, kernel))}
    m = model([helper.make_node("Conv", ["x", "w"], ["y"], **attrs)], weights, [1, 3, 9, 9], None)
    m.graph.output[0].type.tensor_type.ClearField("shape")
    topology, err = convert(m, tmp_path, backend)
    pad_op = "Padding" if backend == "Reference" else "Concat"
    assert (pad_op in ops(topology)) == padding_node and ("Padding" in ops(topology)) == (
        padding_node and backend == "Reference")
    expected = pb.ValidPadding if padding_node else pb.SamePadding
    assert node(topology, "Convolution3d").params.conv_params.padding == expected
    assert err < (2e-2 if backend == "SMV" else 1e-5)


def test_conv_bias_becomes_a_batch_norm(tmp_path):
    bias = np.array([1.0, -2.0, 3.0, 0.5])
    m = model([helper.make_node("Conv", ["x", "w", "b"], ["c"]), helper.make_node("Relu", ["c"], ["y"])],
              {"w": CONV_W, "b": bias}, [1, 3, 5, 5], [1, 4, 3, 3])
    topology, err = convert(m, tmp_path, "Reference")
    assert ops(topology) == ["Convolution3d", "BatchNorm"] and err < 1e-5
    bn = node(topology, "BatchNorm")
    assert bn.params.act_params.activation == pb.ReLU  # the activation moves to the bias carrier
    assert not node(topology, "Convolution3d").params.HasField("act_params")


def test_padded_max_pool_only_after_relu(tmp_path):
    def pool_after(first):
        nodes = ([helper.make_node("Relu", ["x"], ["r"])] if first else []) + [
            helper.make_node("MaxPool", ["r" if first else "x"], ["y"], kernel_shape=[3, 3], strides=[2, 2],
                             pads=[1, 1, 1, 1])]
        return model(nodes, {}, [1, 2, 8, 8], [1, 2, 4, 4])

    topology, err = convert(pool_after(True), tmp_path, "Reference")
    assert ops(topology) == ["ReLU", "Padding", "MaxPooling"] and err < 1e-6
    with pytest.raises(UnsupportedOpError, match="padded max pooling"):
        convert(pool_after(False), tmp_path)


def test_every_inexpressible_node_is_listed(tmp_path):
    m = model([helper.make_node("Erf", ["x"], ["a"]), helper.make_node("LRN", ["a"], ["b"], size=3),
               helper.make_node("Conv", ["b", "w"], ["y"], dilations=[2, 2])],
              {"w": CONV_W}, [1, 3, 9, 9], [1, 4, 5, 5])
    with pytest.raises(UnsupportedOpError) as info:
        convert(m, tmp_path)
    assert [(i.op, bool(i.reason)) for i in info.value.items] == [("Erf", True), ("LRN", True), ("Conv", True)]
    assert "dilation" in info.value.items[2].reason
