"""LBANN's own unit-test experiments as LBANN's frontend writes them (tests/fixtures/lbann_corpus/unit_tests,
written by tools/lbann_corpus.py from LLNL/lbann develop 04c297bd): each file loads (loss and
metric layers included) and runs once; and where LBANN's test checks a metric against its numpy
expectation (a ``check_metric`` callback on the test set, before any training), nnbridge's value on
the test's own samples falls within LBANN's bounds."""

from __future__ import annotations

import json
import math
from pathlib import Path

import numpy as np
from google.protobuf import text_format
from lbann_helpers import verified_corpus
from shared_paths import LBANN_CORPUS

import nnbridge
from nnbridge.api.inputs import random_inputs
from nnbridge.base.errors import NNBridgeError
from nnbridge.protos.lbann import lbann_pb2

CORPUS = LBANN_CORPUS / "unit_tests"
MNIST = {"samples": (1, 28, 28), "labels": (10,)}
#: inputs of the files whose readers are not Python readers (their dims come from the reader's data)
READER_DIMS = {
    # imagenet reader resized to 32 × 32 (the files' transforms)
    **{name: {"samples": (3, 32, 32)} for name in (
        "test_data_store_cache_explicit", "test_data_store_cache_preloading", "test_data_store_checkpoint_explicit",
        "test_data_store_checkpoint_preload", "test_data_store_explicit", "test_data_store_preload",
        "test_data_store_test_cache", "test_nodatastore")},
    "test_unit_callback_poly_learning_rate": {"samples": (1,)},  # synthetic reader, synth_dimensions "1"
    "test_unit_checkpoint_lenet": MNIST, "test_unit_load_weights_lenet": MNIST,
}
#: the files that do not load and run, each with its one-line reason
REFUSED: dict[str, str] = {}
AT_LEAST = 76


def _index() -> dict[str, dict]:
    index = json.loads((CORPUS / "index.json").read_text())
    index.pop("_not_generated", None)
    return index


def _experiment(name: str) -> lbann_pb2.LbannPB:
    return text_format.Parse((CORPUS / f"{name}.prototext").read_text(), lbann_pb2.LbannPB())


def _shapes(name: str, info: dict) -> dict[str, tuple[int, ...]]:
    if name in READER_DIMS:
        return READER_DIMS[name]
    dims = info["dims"].get("test") or info["dims"].get("train")
    return {"samples": tuple(dims)}


def _source(name: str, tmp_path: Path) -> Path:
    """The file, with the numpy_initializer paths of LBANN's checkout pointing at the corpus' copies
    (``/opt/lbann/ci_test/unit_tests/temp/x.npy`` → a copy beside it)."""
    path = CORPUS / f"{name}.prototext"
    text = path.read_text()
    if "/opt/lbann/ci_test/unit_tests/temp/" not in text:
        return path
    for npy in (CORPUS / "temp").glob("*.npy"):
        (tmp_path / npy.name).write_bytes(npy.read_bytes())
    copy = tmp_path / path.name
    copy.write_text(text.replace("/opt/lbann/ci_test/unit_tests/temp/", f"{tmp_path}/"))
    return copy


def _load(name: str, info: dict, tmp_path: Path, batch: int = 2) -> nnbridge.Graph:
    return nnbridge.load(_source(name, tmp_path), input_shapes=_shapes(name, info), batch_size=batch,
                         lbann_training_layers=True)


def test_lbanns_unit_test_experiments_load_and_run(tmp_path):
    """≥ 76 of the experiments with data readers load and run; every other one is refused in one
    line, for the reason written down."""
    index = _index()
    ran, refused = [], {}
    for name, info in sorted(index.items()):
        try:
            graph = _load(name, info, tmp_path)
            outputs = nnbridge.run(graph, random_inputs(graph, seed=0))
            assert outputs, name
            ran.append(name)
        except NNBridgeError as exc:
            refused[name] = str(exc)
    with_readers = [name for name, info in index.items() if info["reader"]]
    assert len(with_readers) >= 80
    unexpected = {n: why for n, why in refused.items() if n not in REFUSED or REFUSED[n] not in why}
    assert not unexpected, unexpected
    assert all("\n" not in why for why in refused.values())
    assert len([n for n in ran if n in with_readers]) >= AT_LEAST, refused


def _checks(pb: lbann_pb2.LbannPB) -> list[tuple[str, float, float]]:
    """(metric, lower, upper) of the test-set checks LBANN's test makes before any training."""
    if pb.model.num_epochs:
        return []
    found = []
    for callback in pb.model.callback:
        if callback.HasField("check_metric"):
            check = callback.check_metric
            if "test" in check.execution_modes.split():
                found.append((check.metric, check.lower_bound, check.upper_bound))
    return found


def _metric_values(name: str, info: dict, pb: lbann_pb2.LbannPB, tmp_path: Path) -> dict[str, float]:
    """Each layer metric over the test samples as LBANN computes it: the metric layer's entries
    summed over every sample, divided by the number of samples (× 100 for '%'), the samples taken
    in the trainer's mini-batches."""
    samples = np.load(CORPUS / f"{name}.npz")
    data = samples["test"] if "test" in samples.files else samples["train"]
    metrics = {m.layer_metric.name: m.layer_metric for m in pb.model.metric if m.HasField("layer_metric")}
    batch = pb.trainer.mini_batch_size or len(data)
    totals = dict.fromkeys(metrics, 0.0)
    graphs: dict[int, nnbridge.Graph] = {}
    for start in range(0, len(data), batch):
        rows = data[start:start + batch]
        if len(rows) not in graphs:
            graph = _load(name, info, tmp_path, batch=len(rows))
            by_name = {v.name: v for node in graph.nodes for v in node.outputs}
            graph.outputs[:] = [by_name[m.layer] for m in metrics.values()]
            graphs[len(rows)] = graph
        graph = graphs[len(rows)]
        (sample_input,) = [v for v in graph.inputs]
        feeds = {sample_input.name: rows.reshape(len(rows), *sample_input.type.shape[1:]).astype(np.float32)}
        out = nnbridge.run(graph, feeds)
        for metric_name, metric in metrics.items():
            totals[metric_name] += float(np.sum(out[metric.layer], dtype=np.float64))
    return {n: totals[n] / len(data) * (100.0 if m.unit == "%" else 1.0) for n, m in metrics.items()}


#: unit tests whose samples do not have the size their sample_dims() declares (LBANN's test bug:
#: cross entropy's get_sample returns 448 values, sample_dims says 832)
MISSIZED = {"test_unit_layer_cross_entropy"}


def test_lbanns_unit_test_checks_hold_on_nnbridges_values(tmp_path):
    """Every check_metric of the corpus on the test set (LBANN's numpy expectation ± its
    tolerance) holds for the value nnbridge computes on the test's samples."""
    checked, failed, missized = 0, [], set()
    for name, info in sorted(_index().items()):
        pb = _experiment(name)
        checks = _checks(pb)
        if not checks or not (CORPUS / f"{name}.npz").is_file() or name in REFUSED:
            continue
        samples = np.load(CORPUS / f"{name}.npz")
        if any(samples[role].shape[1] != math.prod(dims) for role, dims in info["dims"].items()):
            missized.add(name)
            continue
        values = _metric_values(name, info, pb, tmp_path)
        for metric, lower, upper in checks:
            checked += 1
            if not lower <= values[metric] <= upper:
                failed.append(f"{name}: {metric} = {values[metric]!r}, LBANN expects [{lower!r}, {upper!r}]")
    assert not failed, "\n".join(failed)
    assert missized == MISSIZED
    assert checked >= 100


def test_the_files_are_those_their_readme_lists():
    """Each file's SHA-256 is the one tools/lbann_corpus.py listed when it wrote them."""
    assert verified_corpus(LBANN_CORPUS, "unit_tests") == CORPUS
