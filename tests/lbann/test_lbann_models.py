"""``nnbridge.lbann.models`` builds what LBANN's ``lbann.models`` builds, message for message: the
experiments LBANN's frontend wrote around its model zoo (tests/fixtures/lbann_corpus/frontend/models__*)
and the builders' variants it wrote alone (tests/fixtures/lbann_corpus/models, tools/lbann_corpus.py:
other depths, widths, batch-norm settings, pre-layer-norm Transformers with heads on grids,
encoder-only). Equal up to LBANN's generated layer names (``layer<count>``, compared by position)
and its set-ordered weights lists."""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pytest
from google.protobuf import text_format
from lbann_helpers import canonical, read_experiment, verified_corpus
from shared_paths import LBANN_CORPUS

import nnbridge
import nnbridge.lbann as lbann
from nnbridge.api.inputs import random_inputs

MODELS = lbann.models
#: the zoo experiments of ../frontend: file → the model on the images (names as LBANN's defaults)
VISION = {
    "models__lenet": lambda x: MODELS.LeNet(10, name="lenet_module1")(x),
    "models__alexnet": lambda x: MODELS.AlexNet(1000, name="alexnet_module1")(x),
    "models__resnet18": lambda x: MODELS.ResNet18(1000, name="resnet18_module1")(x),
    "models__resnet50": lambda x: MODELS.ResNet50(1000, name="resnet50_module1")(x),
    "models__resnet101": lambda x: MODELS.ResNet101(1000, name="resnet101_module1")(x),
    "models__wide_resnet50_2": lambda x: MODELS.ResNet50(1000, name="wide_resnet50_module1", width=2)(x),
}


def _differences(ours: Path, theirs: Path, model_only: bool = False) -> list[str]:
    """A diff of the canonical experiments (or models), empty when they are equal."""
    import difflib

    a, b = (text_format.MessageToString(canonical(read_experiment(p), rename=True).model if model_only else
                                        canonical(read_experiment(p), rename=True)).splitlines()
            for p in (ours, theirs))
    return list(difflib.unified_diff(b, a, "lbann", "nnbridge", lineterm="", n=1))[:40]


def _vision_experiment(build, path: Path) -> Path:
    """The experiment ../frontend wraps around a zoo model: softmax, cross entropy, accuracy, L2
    on every weights object, SGD, 64 per mini-batch."""
    images = lbann.Input(data_field="samples", name="images")
    labels = lbann.Input(data_field="labels", name="labels")
    probs = lbann.Softmax(build(images), name="probs")
    loss = lbann.CrossEntropy(probs, labels, name="cross_entropy")
    accuracy = lbann.CategoricalAccuracy(probs, labels, name="accuracy")
    layers = lbann.traverse_layer_graph(images)
    weights = {w.name: w for layer in layers for w in layer.weights}
    model = lbann.Model(10, layers=layers,
                        objective_function=[loss, lbann.L2WeightRegularization(weights=weights.values(), scale=1e-4)],
                        metrics=[lbann.Metric(accuracy, name="accuracy", unit="%")],
                        callbacks=[lbann.CallbackPrint(), lbann.CallbackTimer()])
    return lbann.save_prototext(path, model=model, optimizer=lbann.SGD(learn_rate=0.01, momentum=0.9),
                                trainer=lbann.Trainer(mini_batch_size=64))


@pytest.mark.parametrize("stem", sorted(VISION))
def test_zoo_image_models_are_lbanns(shared_data, tmp_path, stem):
    ours = _vision_experiment(VISION[stem], tmp_path / f"{stem}.prototext")
    assert not _differences(ours, shared_data / "lbann" / "frontend" / f"{stem}.prototext")


def test_the_transformer_is_lbanns(shared_data, tmp_path):
    """models__transformer: a [16, 64] sequence as source and (through an identity) target, two
    encoder and two decoder layers, the subsequent-position mask, Adam."""
    src = lbann.Input(data_field="samples", name="src")
    sequence = lbann.Reshape(lbann.Identity(src), dims=[16, 64])
    MODELS.Transformer(hidden_size=64, num_heads=4, num_encoder_layers=2, num_decoder_layers=2, feedforward_size=128,
                       dropout=0.1, name="transformer")(sequence, lbann.Identity(sequence), 16)
    model = lbann.Model(1, layers=lbann.traverse_layer_graph(src), callbacks=[lbann.CallbackPrint()])
    ours = lbann.save_prototext(tmp_path / "t.prototext", model=model, trainer=lbann.Trainer(mini_batch_size=8),
                                optimizer=lbann.Adam(learn_rate=1e-4, beta1=0.9, beta2=0.98, eps=1e-9))
    assert not _differences(ours, shared_data / "lbann" / "frontend" / "models__transformer.prototext")
    graph = nnbridge.load(ours, input_shapes={"src": (16 * 64,)}, batch_size=2)
    out = nnbridge.run(graph, random_inputs(graph, seed=0))
    assert all(np.isfinite(v).all() for v in out.values())


CORPUS = LBANN_CORPUS / "models"


def test_every_builder_variant_lbann_wrote(tmp_path):
    """Each builder and arguments of models/index.json, applied as LBANN's frontend applied it
    (image models to the input, the Transformer to it reshaped to [16, 64] as source and
    target), writes what LBANN wrote."""
    index = json.loads((verified_corpus(LBANN_CORPUS, "models") / "index.json").read_text())
    assert len(index) >= 12
    different = {}
    for stem, entry in index.items():
        x = lbann.Input(data_field="samples", name="samples")
        model = getattr(MODELS, entry["builder"])(**entry["kwargs"])
        if entry["builder"] == "Transformer":
            sequence = lbann.Reshape(x, dims=[16, 64])
            model(sequence, sequence, 16)
        else:
            model(x)
        ours = lbann.save_prototext(tmp_path / f"{stem}.prototext",
                                    model=lbann.Model(0, layers=lbann.traverse_layer_graph(x)))
        if diff := _differences(ours, CORPUS / f"{stem}.prototext", model_only=True):
            different[stem] = diff
    assert not different, different


def test_densenet_is_the_network_of_lbanns_vision_application(shared_data, tmp_path):
    """apps__vision_densenet121 was written by applications/vision/densenet.py with its default
    arguments, whose --model is 169 (the file's name notwithstanding): 66 dense layers in blocks of
    6, 12, 32 and 16. Its layers (network, loss and metrics) are ours, by position."""
    images, labels = lbann.Input(data_field="samples"), lbann.Input(data_field="labels")
    probs = MODELS.DenseNet(169)(images)
    lbann.CrossEntropy([probs, labels])
    lbann.CategoricalAccuracy([probs, labels])
    lbann.TopKCategoricalAccuracy([probs, labels], k=5)
    ours = lbann.save_prototext(tmp_path / "d.prototext",
                                model=lbann.Model(90, layers=lbann.traverse_layer_graph([images, labels])))
    theirs = shared_data / "lbann" / "frontend" / "apps__vision_densenet121.prototext"
    assert list(canonical(read_experiment(ours), rename=True).model.layer) == \
        list(canonical(read_experiment(theirs), rename=True).model.layer)
    with pytest.raises(nnbridge.base.errors.InputError, match="DenseNet-120: LBANN builds 121, 161, 169, 201"):
        MODELS.DenseNet(120)
