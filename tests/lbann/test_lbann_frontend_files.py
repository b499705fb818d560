"""The experiments LBANN's own Python frontend writes (../shared/data/lbann/frontend): each loads,
runs on the reference backend, and comes back out of an LBANN → LBANN conversion with its data
readers, trainer, optimizer, training algorithm, objective, metrics and callbacks message-equal,
every name they refer to still defined, and the same numbers."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest
from google.protobuf import text_format

import nnbridge
from nnbridge.api.inputs import random_inputs
from nnbridge.protos.lbann import lbann_pb2

IMAGENET = {"samples": (3, 224, 224), "labels": (1000,)}
MNIST = {"samples": (1, 28, 28), "labels": (10,)}
#: file → its input layers' per-sample shapes (by data_field; LBANN files do not store them)
FILES = {
    "apps__autoencoders_mnist_vae_mnist": {"": (784,)},
    "apps__cosmoflow": {"samples": (4, 32, 32, 32), "responses": (4,)},
    "apps__vision_alexnet": IMAGENET, "apps__vision_densenet121": IMAGENET,
    "apps__vision_lenet": MNIST, "apps__vision_lenet_lp": MNIST,
    "apps__vision_resnet18": IMAGENET, "apps__vision_resnet50": IMAGENET,
    "integration__test_integration_lenet": MNIST,
    "models__alexnet": IMAGENET, "models__lenet": MNIST, "models__resnet101": IMAGENET,
    "models__resnet18": IMAGENET, "models__resnet50": IMAGENET, "models__wide_resnet50_2": IMAGENET,
    "models__transformer": {"samples": (16 * 64,)},
}
SLOW = {"apps__vision_alexnet", "apps__vision_densenet121", "apps__vision_resnet50", "models__alexnet",
        "models__resnet101", "models__resnet50", "models__wide_resnet50_2"}


def _parse(path: Path) -> lbann_pb2.LbannPB:
    return text_format.Parse(path.read_text(), lbann_pb2.LbannPB())


def _shapes(pb: lbann_pb2.LbannPB, stem: str) -> dict[str, tuple[int, ...]]:
    return {layer.name: FILES[stem][layer.input.data_field] for layer in pb.model.layer
            if layer.WhichOneof("layer_type") == "input"}


def _setup(pb: lbann_pb2.LbannPB) -> lbann_pb2.LbannPB:
    """Everything but the network: the layers and weights go, the mini-batch size is the graph's."""
    setup = lbann_pb2.LbannPB()
    setup.CopyFrom(pb)
    for field in ("layer", "weights", "name"):
        setup.model.ClearField(field)
    setup.trainer.ClearField("mini_batch_size")
    return setup


def _referential_problems(pb: lbann_pb2.LbannPB) -> list[str]:
    """Names LBANN would fail to resolve at setup."""
    layers = {layer.name for layer in pb.model.layer}
    weights = {w.name for w in pb.model.weights}
    problems = [f"parent {p} of {layer.name}" for layer in pb.model.layer for p in layer.parents if p not in layers]
    problems += [f"weights {w} of {layer.name}" for layer in pb.model.layer for w in layer.weights if w not in weights]
    objective = pb.model.objective_function
    problems += [f"objective layer {t.layer}" for t in objective.layer_term if t.layer not in layers]
    problems += [f"regularized weights {w}" for r in objective.l2_weight_regularization for w in r.weights
                 if w not in weights]
    problems += [f"metric layer {m.layer_metric.layer}" for m in pb.model.metric
                 if m.HasField("layer_metric") and m.layer_metric.layer not in layers]
    for callback in [*pb.model.callback, *pb.trainer.callback]:
        problems += [f"callback layer {name}" for name in _named(callback, "layer") if name not in layers]
        problems += [f"callback weights {name}" for name in _named(callback, "weights") if name not in weights]
    return problems


def _named(message, kind: str) -> list[str]:
    """Every name a callback gives in string fields called ``layer(s)`` / ``weights`` (lists are
    space-separated in some callbacks)."""
    names = []
    for field, value in message.ListFields():
        if field.message_type is not None:
            for item in value if field.is_repeated else [value]:
                names += _named(item, kind)
        elif field.name in (kind, kind + "s") and isinstance(value, str):
            names += value.split()
    return names


#: make bench's (matrix): the same architecture family as a file make test keeps (ResNet-101 and
#: Wide ResNet-50-2 as ResNet-50's bottleneck blocks; apps' ResNet-50 and AlexNet as models'; apps'
#: vision training setup through its ResNet-18, LeNet and DenseNet)
MATRIX = {"models__resnet101", "models__wide_resnet50_2", "apps__vision_resnet50", "apps__vision_alexnet"}


@pytest.mark.parametrize("stem", [pytest.param(s, marks=([pytest.mark.slow] if s in SLOW else [])
                                               + ([pytest.mark.matrix] if s in MATRIX else [])) for s in FILES])
def test_frontend_experiment_loads_runs_and_round_trips_with_its_training_setup(shared_data, tmp_path, stem):
    source = shared_data / "lbann" / "frontend" / f"{stem}.prototext"
    original = _parse(source)
    shapes = _shapes(original, stem)
    graph = nnbridge.load(source, input_shapes=shapes, batch_size=1)
    feeds = random_inputs(graph, seed=0)
    want = nnbridge.run(graph, feeds)
    assert all(np.isfinite(v).all() for v in want.values())

    written = tmp_path / f"{stem}.prototext"
    nnbridge.convert(source, written, input_shapes=shapes, batch_size=1, lbann_version="develop")
    back = _parse(written)  # strict: every field is in LBANN's develop schema
    assert _setup(back) == _setup(original), "the training setup changed on the way"
    assert back.trainer.mini_batch_size == 1
    assert not _referential_problems(back)
    regularized = {w for r in original.model.objective_function.l2_weight_regularization for w in r.weights}
    assert regularized <= {w.name for w in back.model.weights}

    again = nnbridge.load(written, input_shapes=shapes)
    got = nnbridge.run(again, feeds)
    assert list(got) == list(want)
    for name in want:
        np.testing.assert_allclose(got[name], want[name], rtol=1e-5, atol=1e-6, err_msg=name)
