"""SMAUG's shipped SMV models (../shared/data/smaug), loaded once per session."""

from __future__ import annotations

import pytest

import nnbridge

SMV_FILES = {
    "minerva": "minerva/minerva_smv_topo.pbtxt",
    "lenet5": "lenet5/lenet5_smv_topo.pbtxt",
    "cnn10": "cifar10-cnn/cnn_smv_topo.pbtxt",
    "vgg": "cifar10-vgg/vgg_smv_topo.pbtxt",
    "resnet50": "imagenet-resnet/resnet_smv_topo.pbtxt",
}


@pytest.fixture(scope="session")
def smaug_graphs(shared_data):
    return {name: nnbridge.load(shared_data / "smaug" / path) for name, path in SMV_FILES.items()}
