"""``nnbridge.lbann`` takes LBANN's frontend idioms, judged by LBANN's own frontend: models written
here with them are message-equal to the files LBANN's Python frontend wrote for the same models
(../shared/data/lbann/frontend), up to LBANN's generated layer names and set-ordered lists."""

from __future__ import annotations

import numpy as np
import pytest
from google.protobuf import text_format
from lbann_helpers import canonical, read_experiment
from shared_paths import SHARED_DATA

import nnbridge
import nnbridge.lbann as lbann
from nnbridge.base.errors import InputError
from nnbridge.protos.lbann import lbann_pb2


def test_the_lenet_of_lbanns_vision_application_written_with_its_idioms(shared_data, tmp_path):
    """As applications/vision/lenet.py builds it: parents positional, scalars for repeated fields,
    Model(epochs, layers=traverse_layer_graph(…), objective_function=…, metrics=…, callbacks=…)."""
    images = lbann.Input(data_field="samples")
    labels = lbann.Input(data_field="labels")
    x = images
    for channels in (6, 16):
        x = lbann.Convolution(x, num_dims=2, out_channels=channels, groups=1, kernel_size=5, stride=1, dilation=1,
                              has_bias=True)
        x = lbann.Pooling(lbann.Relu(x), num_dims=2, pool_dims_i=2, pool_strides_i=2, pool_mode="max")
    for width in (120, 84):
        x = lbann.Relu(lbann.FullyConnected(x, num_neurons=width, has_bias=True))
    probs = lbann.Softmax(lbann.FullyConnected(x, num_neurons=10, has_bias=True))
    loss = lbann.CrossEntropy(probs, labels)
    acc = lbann.CategoricalAccuracy(probs, labels)
    model = lbann.Model(20, layers=lbann.traverse_layer_graph([images, labels]), objective_function=loss,
                        metrics=[lbann.Metric(acc, name="accuracy", unit="%")],
                        callbacks=[lbann.CallbackPrintModelDescription(), lbann.CallbackPrint(),
                                   lbann.CallbackTimer()])
    path = lbann.save_prototext(tmp_path / "lenet.prototext", model=model,
                                optimizer=lbann.SGD(learn_rate=0.01, momentum=0.9),
                                trainer=lbann.Trainer(mini_batch_size=64))
    theirs = read_experiment(shared_data / "lbann" / "frontend" / "apps__vision_lenet.prototext")
    assert canonical(read_experiment(path), rename=True) == canonical(theirs, rename=True)


def test_the_model_zoo_lenet_built_from_modules_matches_names_and_all(shared_data, tmp_path):
    """lbann.models.LeNet is made of Convolution2dModule / FullyConnectedModule: layer and weights
    names come out exactly as LBANN's frontend makes them; L2WeightRegularization(weights=, scale=)."""
    conv, fc = lbann.modules.Convolution2dModule, lbann.modules.FullyConnectedModule
    prefix = "lenet_module1"
    blocks = [conv(6, 5, activation=lbann.Relu, name=f"{prefix}_conv1"),
              conv(16, 5, activation=lbann.Relu, name=f"{prefix}_conv2")]
    images = lbann.Input(data_field="samples", name="images")
    labels = lbann.Input(data_field="labels", name="labels")
    x = images
    for i, block in enumerate(blocks, start=1):
        x = lbann.Pooling(block(x), num_dims=2, has_vectors=False, pool_dims_i=2, pool_pads_i=0, pool_strides_i=2,
                          pool_mode="max", name=f"{prefix}_pool{i}_instance1")
    for width, name, activation in ((120, "fc1", lbann.Relu), (84, "fc2", lbann.Relu), (10, "fc3", None)):
        x = fc(width, activation=activation, name=f"{prefix}_{name}")(x)
    probs = lbann.Softmax(x, name="probs")
    loss = lbann.CrossEntropy(probs, labels, name="cross_entropy")
    acc = lbann.CategoricalAccuracy(probs, labels, name="accuracy")
    layers = lbann.traverse_layer_graph(images)
    weights = {w.name: w for layer in layers for w in layer.weights}
    model = lbann.Model(10, layers=layers, objective_function=[
        loss, lbann.L2WeightRegularization(weights=weights.values(), scale=1e-4)],
        metrics=[lbann.Metric(acc, name="accuracy", unit="%")],
        callbacks=[lbann.CallbackPrint(), lbann.CallbackTimer()])
    path = lbann.save_prototext(tmp_path / "lenet.prototext", model=model,
                                optimizer=lbann.SGD(learn_rate=0.01, momentum=0.9),
                                trainer=lbann.Trainer(mini_batch_size=64))
    theirs = read_experiment(shared_data / "lbann" / "frontend" / "models__lenet.prototext")
    assert canonical(read_experiment(path), rename=False) == canonical(theirs, rename=False)


def test_frontend_idioms_that_take_any_form(tmp_path):
    x = lbann.Input(data_field="samples", dims=(4,), name="x")
    w = lbann.Weights(initializer=lbann.ValueInitializer(values=(v / 10 for v in range(8))), name="w")
    y = lbann.FullyConnected(x, weights=[w], num_neurons=2, has_bias=False, device="CPU", name="y")
    z = lbann.Sum(y, y, name="z")  # parents as positional arguments
    model = lbann.Model(1, layers=lbann.traverse_layer_graph(x))
    pb = model.export_proto()
    by_name = {layer.name: layer for layer in pb.layer}
    assert list(by_name["z"].parents) == ["y", "y"] and by_name["y"].device_allocation == "CPU"
    assert list(pb.weights[0].initializer.value_initializer.values) == pytest.approx([v / 10 for v in range(8)])
    out = nnbridge.run(model.to_graph(), {"x": np.ones((1, 4), np.float32)})
    matrix = np.arange(8, dtype=np.float32).reshape(4, 2).T / 10  # 2 × 4, listed column-major
    np.testing.assert_allclose(out["z"], 2 * matrix.sum(1, keepdims=True).T, rtol=1e-6)
    with pytest.raises(InputError, match="epochs first"):
        lbann.Model([z], [z])
    every_callback = {f.message_type.name for f in lbann_pb2.Callback.DESCRIPTOR.oneofs_by_name["callback_type"].fields}
    assert every_callback <= set(dir(lbann))


def test_weights_from_nditer_in_fortran_order_as_lbanns_unit_tests_write_them():
    """LBANN's unit tests: ``ValueInitializer(values=np.nditer(w, order='F'))`` (column-major)."""
    rng = np.random.default_rng(0)
    w, x = rng.normal(size=(3, 4)).astype(np.float32), rng.normal(size=(2, 4)).astype(np.float32)
    weights = lbann.Weights(initializer=lbann.ValueInitializer(values=np.nditer(w, order="F")), name="w")
    inp = lbann.Input(dims=(4,), name="x")
    y = lbann.FullyConnected(inp, weights=weights, num_neurons=3, has_bias=False, name="y")
    model = lbann.Model(0, layers=lbann.traverse_layer_graph(inp))
    assert list(weights.export_proto().initializer.value_initializer.values) == w.flatten(order="F").tolist()
    graph = model.to_graph(batch_size=2)
    np.testing.assert_allclose(nnbridge.run(graph, {"x": x})[y.name], x @ w.T, rtol=1e-5)


def test_calling_a_layer_on_its_parent_and_the_batched_iterative_optimizer(shared_data, tmp_path):
    """``layer(parent)`` adds a parent (LBANN's ``add_parent``); the trainer's training algorithm is
    written as LBANN's frontend writes DenseNet's (``BatchedIterativeOptimizer("sgd", epoch_count=90)``)."""
    x = lbann.Input(dims=(3,), name="x")
    y = lbann.Relu(name="y")
    y(x)
    assert y.parents == [x] and x.children == [y]
    trainer = lbann.Trainer(mini_batch_size=256, training_algo=lbann.BatchedIterativeOptimizer("sgd", epoch_count=90))
    path = lbann.save_prototext(tmp_path / "m.prototext", model=lbann.Model(1, layers=[x, y]), trainer=trainer)
    written = read_experiment(path)
    assert list(written.model.layer[1].parents) == ["x"]
    densenet = read_experiment(shared_data / "lbann" / "frontend" / "apps__vision_densenet121.prototext")
    assert written.trainer == densenet.trainer


#: the trainer LBANN's frontend writes for ci_test/unit_tests/test_unit_algo_kfac_conv.py
#: (lbann.KFAC("kfac", lbann.BatchedIterativeOptimizer("sgd", epoch_count=1), damping_act="1e-30",
#: damping_err="1e-30", compute_interval=1) in Trainer(mini_batch_size=11))
LBANNS_KFAC_TRAINER = """mini_batch_size: 11
training_algorithm {
  name: "kfac"
  parameters {
    [type.googleapis.com/lbann_data.KFAC] {
      sgd { stopping_criteria { max_epochs: 1 } }
      damping_act: "1e-30"
      damping_err: "1e-30"
      compute_interval: 1
    }
  }
}
"""


def _kfac_trainer() -> lbann.Trainer:
    kfac = lbann.KFAC("kfac", lbann.BatchedIterativeOptimizer("sgd", epoch_count=1), damping_act="1e-30",
                      damping_err="1e-30", compute_interval=1)
    return lbann.Trainer(mini_batch_size=11, training_algo=kfac)


def test_kfac_is_written_as_lbanns_frontend_writes_it(tmp_path):
    assert _kfac_trainer().export_proto() == text_format.Parse(LBANNS_KFAC_TRAINER, lbann_pb2.Trainer())
    corpus = SHARED_DATA / "lbann" / "unit_tests" / "test_unit_algo_kfac_conv.prototext"
    if corpus.is_file():  # the file LBANN's frontend wrote (tools/lbann_corpus.py)
        assert read_experiment(corpus).trainer.training_algorithm == _kfac_trainer().export_proto().training_algorithm
    with pytest.raises(InputError, match="KFAC has no field 'dampign_act'; fields: compute_interval, damping_act"):
        lbann.KFAC("kfac", lbann.BatchedIterativeOptimizer("sgd"), dampign_act="1e-3")
    with pytest.raises(InputError, match="first_order_optimizer is a BatchedIterativeOptimizer, not SGD"):
        lbann.KFAC("kfac", lbann.SGD(learn_rate=0.1))


def test_a_kfac_experiment_converts_whole_and_training_it_is_refused_in_one_line(tmp_path):
    """LBANN → LBANN keeps the KFAC trainer message-equal; nnbridge train trains first-order only,
    so an experiment that says K-FAC is refused, saying what is not supported."""
    x = lbann.Input(data_field="samples", name="x")
    y = lbann.FullyConnected(x, num_neurons=3, has_bias=True, name="y")
    prob = lbann.Softmax(y, name="prob")
    labels = lbann.Input(data_field="labels", name="labels")
    loss = lbann.CrossEntropy(prob, labels, name="loss")
    model = lbann.Model(2, layers=lbann.traverse_layer_graph([x, labels]), objective_function=[loss])
    source = lbann.save_prototext(tmp_path / "kfac.prototext", model=model, trainer=_kfac_trainer(),
                                  optimizer=lbann.SGD(learn_rate=0.1))
    copy = tmp_path / "copy.prototext"
    nnbridge.convert(source, copy, input_shapes={"x": (4,)}, lbann_version="develop")
    assert read_experiment(copy).trainer.training_algorithm == _kfac_trainer().export_proto().training_algorithm
    data = np.random.default_rng(0).normal(size=(8, 4)).astype(np.float32), np.arange(8) % 3
    with pytest.raises(InputError, match=r"trains with 'kfac' \(K-FAC: gradients preconditioned by per-layer "
                                         r"Kronecker factors .*\), which nnbridge train does not do"):
        nnbridge.train(nnbridge.load(source, input_shapes={"x": (4,)}), *data, epochs=1, batch_size=4)
    from nnbridge.converters.lbann.experiment import trained_with

    with pytest.raises(InputError, match="which nnbridge train does not do"):
        trained_with(nnbridge.load(copy, input_shapes={"x": (4,)}))
