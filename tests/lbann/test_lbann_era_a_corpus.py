"""LBANN v0.99's own model files (tests/fixtures/lbann_corpus/v099: every model file of the tag's
model_zoo/models, model_zoo/tests and bamboo/unit_tests that v0.99's schema parses, written there
byte for byte by tools/lbann_corpus.py): at least 60 of the 73 upgrade to Era C, load and run; the
others are refused in one line, for the reason written down."""

from __future__ import annotations

import gc
import re

import numpy as np
import pytest
from lbann_helpers import verified_corpus
from shared_paths import LBANN_CORPUS

import nnbridge
from nnbridge.api.inputs import random_inputs
from nnbridge.base.errors import NNBridgeError

CORPUS = LBANN_CORPUS / "v099"
#: the JAG reader's slice points: its independent variable groups (jag_100M_metadata.prototext) are
#: the images (3 views × 4 channels of 64 × 64) with the 15 scalars, then the 5 inputs. The models
#: size themselves from what the reader gives, so most run here with one 16 × 16 view (a few hundred
#: MB less); wae_fw_inv also slices at fixed points, which need the real images.
JAG_POINTS = {"independent": (0, 4 * 16 * 16 + 15, 4 * 16 * 16 + 15 + 5)}
JAG_REAL_POINTS = {"independent": (0, 3 * 4 * 64 * 64 + 15, 3 * 4 * 64 * 64 + 15 + 5)}
JAG_SAMPLE, JAG_REAL_SAMPLE = (JAG_POINTS["independent"][-1],), (JAG_REAL_POINTS["independent"][-1],)
#: the older JAG files slice their samples at fixed points: 50 × 50 images and 11 values
JAG_2511 = (2511,)
#: ImageNet models run on 127 × 127 images rather than 224 × 224 where their pools allow it: the
#: fully connected layers (sized by what reaches them) stay a quarter as big
MNIST, CIFAR, IMAGENET = (1, 28, 28), (3, 32, 32), (3, 127, 127)
#: per-sample input shapes by path (the first pattern that matches), as each file's data reader gives them
SHAPES: list[tuple[str, dict[str, tuple[int, ...]]]] = [
    (r"mnist|lenet", {"image": MNIST, "images": MNIST}),
    (r"cifar10", {"image": CIFAR}),
    (r"alexnet/", {"image": IMAGENET, "label": (1000,)}),
    (r"resnet50", {"images": (3, 224, 224)}),  # its last pool is a fixed 7 × 7
    (r"imagenet", {"image": IMAGENET}),
    (r"siamese/triplet", {"input_samples": (9, *IMAGENET[1:]), "label": (20,)}),  # three patches stacked
    (r"candle/pilot1/combo", {"data": (8579,)}),  # its slice points end at 8579
    (r"candle/pilot1", {"recon_data": (942,)}),
    (r"autoencoder_candle_pilot1", {"data": (3000,), "finetunedata": (3000,)}),  # ECFP fingerprints
    (r"molecular_autoencoder_candle_pilot2", {"input_samples": (1, 184, 12), "data": (2208,)}),
    (r"cosmoflow", {"DARK_MATTER": (4, 112, 112, 112)}),  # 128³ in the paper; its convolutions and pools need 112³
    (r"gan/jags/cycle_gan|jag/gan/", {"data_samples": JAG_2511, "data1_samples": JAG_2511,
                                      "data_labels": (10,), "data1_labels": (10,)}),
    (r"wae_fw_inv", {"data_samples": JAG_REAL_SAMPLE}),
    (r"jag/", {name: JAG_SAMPLE for name in ("data", "data_samples", "data1_samples")} | {"data_labels": (10,)}),
]
#: the files refused, each with its one-line reason: stale in v0.99 already (a parent or weights
#: the file does not define, which v0.99 refuses too)
REFUSED = {
    "model_zoo/models/jag/ae_cycle_gan/3models/ae_cyc.prototext":
        "layer 'gen1fc1' uses weights 'gen1fc1bias', which the model does not define",
    "model_zoo/models/autoencoder_candle_pilot1/model_autoencoder_chem_ecfp_500x250x100.prototext":
        "layer 'reconstruction' lists parent 'relu10', which does not exist",
    "model_zoo/models/autoencoder_candle_pilot1/model_autoencoder_chem_sigmoid.prototext":
        "layer 'reconstruction' lists parent 'relu10', which does not exist",
}


def _shapes(path: str, needed: list[str]) -> dict[str, tuple[int, ...]]:
    for pattern, shapes in SHAPES:
        if re.search(pattern, path):
            return {name: shapes[name] for name in needed}
    raise AssertionError(f"no input shapes written down for {path}")


def _needed(error: str) -> list[str]:
    found = re.search(r"of (.*?), e\.g\. --input-shape", error)
    assert found, error
    return [name.strip() for name in found.group(1).split(",")]


def _load_and_run(path: str) -> None:
    """One corpus file loaded and run (a function of its own: its model is freed before the next
    loads, so the test peaks at its largest model, not two of them: 3.3 GB before, 1.4 GB)."""
    points = JAG_REAL_POINTS if "wae_fw_inv" in path else JAG_POINTS
    try:
        graph = nnbridge.load(CORPUS / path, batch_size=1, lbann_slice_points=points)
    except nnbridge.ShapeError as exc:  # LBANN files hold no input shapes: give the reader's
        graph = nnbridge.load(CORPUS / path, batch_size=1, lbann_slice_points=points,
                              input_shapes=_shapes(path, _needed(str(exc))))
    outputs = nnbridge.run(graph, random_inputs(graph))  # seed 0
    assert outputs and all(np.isfinite(v).all() or v.dtype.kind != "f" for v in outputs.values()), path


@pytest.mark.slow  # 73 models loaded and run: ~60 CPU-s (make test runs it)
@pytest.mark.memory  # a triplet AlexNet's run peaks the worker over 1 GB
def test_lbann_v099_model_files_upgrade_load_and_run():
    files = sorted(str(p.relative_to(CORPUS)) for p in CORPUS.rglob("*.prototext"))
    assert len(files) == 73
    ran, refused = [], {}
    for path in files:
        try:
            _load_and_run(path)
            ran.append(path)
        except NNBridgeError as exc:
            refused[path] = str(exc)
        gc.collect()  # a graph's nodes and values refer to each other: freed by a collection
    assert {p: why for p, why in refused.items() if p not in REFUSED or REFUSED[p] not in why} == {}
    assert all("\n" not in why for why in refused.values())
    assert len(ran) >= 60, refused
    assert len(ran) == len(files) - len(REFUSED)


def test_the_files_are_those_their_readme_lists():
    """Each file's SHA-256 is the one tools/lbann_corpus.py listed when it wrote them."""
    assert verified_corpus(LBANN_CORPUS, "v099") == CORPUS
