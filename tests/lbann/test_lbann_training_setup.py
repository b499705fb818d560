"""A model trained by nnbridge, saved as LBANN, describes its training run in LBANN's own schema:
objective, metric, optimizer with its hyper-parameters, mini-batch size and a numpy_npz reader of
the data written beside it — and an LBANN → IR → LBANN conversion keeps all of it."""

from __future__ import annotations

import numpy as np
import pytest
from lbann_helpers import assert_fields_in_spec, strict_parse

import nnbridge
import nnbridge.zoo
from nnbridge.training import digits, train

pytest.importorskip("sklearn")


@pytest.fixture(scope="module")
def trained():
    x, y = digits()
    return train(nnbridge.zoo.build("digits_cnn", batch=32), x[:320], y[:320], optimizer="sgd", lr=0.05,
                 momentum=0.8, epochs=1, batch_size=16, val_split=0.25)


def _setup(pb):
    out = type(pb)()
    out.CopyFrom(pb)
    for field in ("layer", "weights", "name"):
        out.model.ClearField(field)
    return out


def test_the_digits_training_file_describes_the_run_in_lbanns_schema(trained, tmp_path):
    path = trained.save(tmp_path / "digits.prototext")
    pb = strict_parse(path)
    assert_fields_in_spec(pb, "0.104")
    kinds = {layer.name: layer.WhichOneof("layer_type") for layer in pb.model.layer}
    assert kinds["cross_entropy"] == "cross_entropy" and kinds["accuracy"] == "categorical_accuracy"
    assert kinds["labels"] == "input" and "softmax" in kinds.values()
    assert [t.layer for t in pb.model.objective_function.layer_term] == ["cross_entropy"]
    assert pb.model.metric[0].layer_metric.layer == "accuracy" and pb.model.num_epochs == 1
    assert pb.optimizer.sgd.learn_rate == pytest.approx(0.05) and pb.optimizer.sgd.momentum == pytest.approx(0.8)
    assert pb.trainer.mini_batch_size == 16
    reader = pb.data_reader.reader[0]
    assert reader.name == "numpy_npz" and reader.role == "train" and reader.num_labels == 10
    assert reader.validation_fraction == pytest.approx(0.25) and reader.disable_responses
    with np.load(reader.data_filedir + reader.data_filename) as data:
        assert data["data"].shape == (320, 1, 8, 8) and data["labels"].dtype == np.int32
    # LBANN → IR → LBANN: the objective, metrics, optimizer, reader and trainer come back unchanged
    again = tmp_path / "again.prototext"
    nnbridge.convert(path, again)
    assert _setup(strict_parse(again)) == _setup(pb)
    x = digits()[0][:16]
    first, second = (next(iter(nnbridge.run(nnbridge.load(p), {"image": x}).values())) for p in (path, again))
    np.testing.assert_allclose(second, first, rtol=1e-5)


def test_imported_with_its_training_layers_the_file_evaluates_its_loss(trained, tmp_path):
    path = trained.save(tmp_path / "digits.prototext")
    graph = nnbridge.load(path, lbann_training_layers=True, input_shapes={"labels": (10,)})
    x, y = digits()
    out = nnbridge.run(graph, {"image": x[:16], "labels": np.eye(10, dtype=np.float32)[y[:16]]})
    assert out["cross_entropy"].shape == (16, 1) and np.isfinite(out["cross_entropy"]).all()
    assert set(np.unique(out["accuracy"])) <= {0.0, 1.0}
