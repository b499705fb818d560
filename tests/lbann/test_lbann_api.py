"""The nnbridge.lbann layer-graph API: build in Python, export to LBANN, ONNX and SMAUG."""

from __future__ import annotations

import numpy as np
import onnx
import pytest
from lbann_helpers import assert_fields_in_spec, onnx_outputs, strict_parse

import nnbridge
import nnbridge.converters
from nnbridge import lbann
from nnbridge.base.errors import InputError


def _lenet():
    rng = np.random.default_rng(0)
    image = lbann.Input(dims=(1, 28, 28), name="image")
    label = lbann.Input(data_field="labels", name="label")
    kernel = lbann.Weights(lbann.ValueInitializer(values=rng.normal(0, 0.1, 20 * 25)), name="conv1_kernel")
    x = lbann.Convolution(image, num_dims=2, out_channels=20, kernel_size=[5], stride=[1], has_bias=True,
                          weights=[kernel], name="conv1")
    x = lbann.Pooling(x, num_dims=2, pool_dims_i=2, pool_strides_i=2, pool_mode="max", name="pool1")
    x = lbann.Tanh(x, name="tanh")
    x = lbann.FullyConnected(x, num_neurons=32, has_bias=True, name="ip1")
    x = lbann.Relu(x, name="relu1")
    x = lbann.FullyConnected(x, num_neurons=10, has_bias=True, name="ip2")
    prob = lbann.Softmax(x, name="prob")
    loss = lbann.CrossEntropy([prob, label], name="cross_entropy")
    accuracy = lbann.CategoricalAccuracy([prob, label], name="accuracy")
    return lbann.Model(20, layers=[prob],
                       objective_function=lbann.ObjectiveFunction([loss, lbann.L2WeightRegularization(scale=1e-4)]),
                       metrics=[lbann.Metric(accuracy, name="categorical accuracy", unit="%")],
                       callbacks=[lbann.CallbackPrint(), lbann.CallbackTimer()], name="lenet")


def test_save_prototext_is_strict_and_listed(tmp_path):
    model = _lenet()
    path = lbann.save_prototext(tmp_path / "lenet.prototext", model=model,
                                trainer=lbann.Trainer(mini_batch_size=64), optimizer=lbann.SGD(learn_rate=0.01))
    pb = strict_parse(path)
    assert_fields_in_spec(pb)
    names = [layer.name for layer in pb.model.layer]
    assert names[0] == "image" and "label" in names  # LBANN's traversal order (see the frontend test)
    assert pb.model.objective_function.layer_term[0].layer == "cross_entropy"
    assert pb.optimizer.sgd.learn_rate == 0.01 and pb.trainer.mini_batch_size == 64
    graph = nnbridge.load(path)  # input dims come from the nnbridge header
    assert graph.inputs[0].shape == (64, 1, 28, 28) and [v.name for v in graph.outputs] == ["prob"]


def test_model_runs_and_exports_to_onnx(tmp_path):
    model = _lenet()
    graph = model.to_graph(batch_size=2)
    assert [n.op for n in graph.nodes] == ["Conv", "MaxPool", "Tanh", "Flatten", "Gemm", "Relu", "Gemm", "Softmax"]
    x = np.random.default_rng(1).random((2, 1, 28, 28), dtype=np.float32)
    got = nnbridge.run(graph, {"image": x})["prob"]
    model.save(tmp_path / "lenet.onnx", batch_size=2)
    exported = onnx.load(tmp_path / "lenet.onnx")
    np.testing.assert_allclose(got, onnx_outputs(exported, {"image": x})[0], rtol=1e-4, atol=1e-6)
    kernel = graph.initializers["conv1_kernel"]
    assert kernel.shape == (20, 1, 5, 5)


def test_model_exports_to_smaug(tmp_path):
    model = _lenet()
    model.save(tmp_path / "lenet_topo.pbtxt")
    assert (tmp_path / "lenet_topo.pbtxt").is_file() and (tmp_path / "lenet_params.pb").is_file()


def test_operator_classes_and_field_errors():
    x = lbann.Input(dims=(3,), name="x")
    y = lbann.Scale(lbann.Add([x, x], name="twice"), constant=0.5, name="half")
    graph = lbann.Model(y).to_graph()
    v = np.array([[1.0, 2.0, 3.0]], np.float32)
    np.testing.assert_allclose(nnbridge.run(graph, {"x": v})["half"], v)
    with pytest.raises(InputError, match="FullyConnected has no field 'neurons'"):
        lbann.FullyConnected(x, neurons=3).export_proto()
