"""``convert … --lbann-train`` writes an experiment LBANN trains (#36 item 1): in LBANN's schema,
weights trainable, and — read back by nnbridge — it trains step for step as ``nnbridge train``
trains the source; without the option ``convert`` warns that the file is inference-only."""

from __future__ import annotations

import subprocess
import sys

import numpy as np
import onnx
import pytest
from lbann_helpers import assert_fields_in_spec, strict_parse
from onnx import helper, numpy_helper

import nnbridge
from nnbridge.base.errors import InputError
from nnbridge.converters.lbann.experiment import trained_with
from nnbridge.training import train


def _mlp(path, softmax: bool = True):
    rng = np.random.default_rng(0)
    inits = [numpy_helper.from_array((rng.standard_normal(shape) * 0.5).astype(np.float32), name)
             for name, shape in (("w1", (6, 8)), ("b1", (8,)), ("w2", (8, 3)), ("b2", (3,)))]
    nodes = [helper.make_node("Gemm", ["x", "w1", "b1"], ["h"]), helper.make_node("Relu", ["h"], ["r"]),
             helper.make_node("Gemm", ["r", "w2", "b2"], ["z" if softmax else "y"])]
    if softmax:
        nodes.append(helper.make_node("Softmax", ["z"], ["y"]))
    graph = helper.make_graph(nodes, "mlp", [helper.make_tensor_value_info("x", 1, [4, 6])],
                              [helper.make_tensor_value_info("y", 1, [4, 3])], inits)
    onnx.save(helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)]), path)
    return path


def _convert(*args):
    return subprocess.run([sys.executable, "-m", "nnbridge", "convert", *map(str, args)], capture_output=True,
                          text=True)


def _steps(model, x, y, **settings):
    """The running mean loss after each of the 100 steps, and the trained weights."""
    seen = []
    result = train(model, x, y, val_split=0.0, progress=lambda e, k, n, f: seen.append(f["loss"]), **settings)
    return np.array(seen), {k: v for k, v in result.graph.initializers.items() if v.ndim}


@pytest.mark.parametrize("given, loss", [("lr=0.1,momentum=0.5,epochs=10", "cross-entropy"),
                                         ("loss=mse,optimizer=adam,lr=0.01,weight_decay=0.001", "mse")])
def test_a_converted_model_trains_as_nnbridge_train_trains_the_source(tmp_path, given, loss):
    src, dst = _mlp(tmp_path / "m.onnx", softmax=loss == "cross-entropy"), tmp_path / "m.prototext"
    run = _convert(src, dst, "--lbann-train", given)
    assert run.returncode == 0 and "inference-only" not in run.stderr, run.stderr
    pb = strict_parse(dst)
    assert_fields_in_spec(pb, "0.104")
    assert all(not w.HasField("optimizer") for w in pb.model.weights)  # trainable: the top-level optimizer
    assert pb.model.objective_function.layer_term[0].layer == ("cross_entropy" if loss == "cross-entropy"
                                                               else "mean_squared_error")
    assert pb.optimizer.WhichOneof("optimizer_type") == ("sgd" if loss == "cross-entropy" else "adam")
    assert pb.trainer.mini_batch_size == 4

    graph = nnbridge.load(dst)
    settings = trained_with(graph)
    assert settings["loss"] == loss and settings["batch_size"] == 4 and settings["epochs"] == 10
    rng = np.random.default_rng(1)
    x = rng.standard_normal((40, 6)).astype(np.float32)  # 10 steps of 4 a epoch, 10 epochs
    y = rng.integers(0, 3, 40) if loss == "cross-entropy" else rng.standard_normal((40, 3)).astype(np.float32)
    want_loss, want_weights = _steps(str(src), x, y, **settings)
    got_loss, got_weights = _steps(graph, x, y, **settings)
    assert len(got_loss) == 100
    np.testing.assert_allclose(got_loss, want_loss, rtol=0, atol=1e-5)
    for name, w in want_weights.items():
        np.testing.assert_allclose(got_weights[name].reshape(w.shape), w, atol=1e-5)


def test_convert_without_the_option_warns_that_the_file_is_inference_only(tmp_path):
    run = _convert(_mlp(tmp_path / "m.onnx"), tmp_path / "m.prototext")
    assert run.returncode == 0
    assert "warning:" in run.stderr and "inference-only" in run.stderr and "--lbann-train" in run.stderr


def test_freeze_keeps_every_weight_fixed(tmp_path):
    dst = tmp_path / "m.prototext"
    assert _convert(_mlp(tmp_path / "m.onnx"), dst, "--lbann-train", "freeze=true").returncode == 0
    pb = strict_parse(dst)
    assert pb.model.weights and all(w.optimizer.HasField("no_optimizer") for w in pb.model.weights)
    assert pb.optimizer.HasField("sgd")


@pytest.mark.parametrize("given, message", [
    ("lr=0.1", "output of 'mlp' is not a softmax; name the loss"),
    ("loss=hinge", "loss=hinge: choose from cross-entropy, mse"),
    ("rate=0.1", "unknown setting 'rate'"), ("lr=-1", "lr=-1: out of range")])
def test_bad_training_settings_are_refused_and_nothing_is_written(tmp_path, given, message):
    dst = tmp_path / "m.prototext"
    run = _convert(_mlp(tmp_path / "m.onnx", softmax=False), dst, "--lbann-train", given)
    assert run.returncode in (1, 2) and message in run.stderr and "Traceback" not in run.stderr  # a user error
    assert not dst.exists()
    with pytest.raises(InputError, match=message.split(";")[0].replace("(", r"\(")):
        nnbridge.convert(str(tmp_path / "m.onnx"), dst, lbann_train=given)


def test_given_data_the_experiment_reads_it(tmp_path):
    """``data=FILE.npz`` (x, y as ``nnbridge train`` takes): written beside the file as
    ``<stem>_data.npz`` and read by a ``numpy_npz`` reader, as ``nnbridge train --out`` does."""
    rng = np.random.default_rng(2)
    np.savez(tmp_path / "train.npz", x=rng.standard_normal((12, 6)).astype(np.float32), y=rng.integers(0, 3, 12))
    dst = tmp_path / "m.prototext"
    run = _convert(_mlp(tmp_path / "m.onnx"), dst, "--lbann-train", f"data={tmp_path / 'train.npz'},val_split=0.25")
    assert run.returncode == 0, run.stderr
    reader = strict_parse(dst).data_reader.reader[0]
    assert reader.name == "numpy_npz" and reader.validation_fraction == 0.25 and reader.num_labels == 3
    with np.load(reader.data_filedir + reader.data_filename) as data:
        assert data["data"].shape == (12, 6) and data["labels"].dtype == np.int32
    np.savez(tmp_path / "wrong.npz", x=np.zeros((4, 5), np.float32), y=np.zeros(4))
    run = _convert(tmp_path / "m.onnx", tmp_path / "w.prototext", "--lbann-train", f"data={tmp_path / 'wrong.npz'}")
    assert run.returncode in (1, 2) and "samples of shape [5], but 'mlp' takes [6]" in run.stderr
    assert not (tmp_path / "w.prototext").exists()


def test_optimizer_state_cannot_travel_in_the_file_and_convert_says_so(tmp_path):
    """LBANN's schema (facts of develop and v0.104): every optimizer message holds scalar
    hyper-parameters and a weights object its values, so momentum and Adam moments have no place
    in a prototext (LBANN keeps them in checkpoints); convert --lbann-train says so in one line
    when the optimizer has state, and not for plain SGD."""
    from lbann_facts import facts

    for version in ("develop", "0.104"):
        messages = facts(version)["messages"]
        optimizers = [name for name in messages if name.startswith("lbann_data.Optimizer.")]
        assert len(optimizers) >= 6
        for name in optimizers:
            for field in messages[name]["fields"]:
                assert field.get("label") != "repeated" and field["type"] in ("double", "float", "bool"), (name, field)
        assert {f["name"] for f in messages["lbann_data.Weights"]["fields"]} <= {
            "name", "optimizer", "initializer", "datatype", "sharded", "sharding_strategy"}
    source = _mlp(tmp_path / "m.onnx")
    for given, state in (("optimizer=adam", "Adam moments"), ("momentum=0.9", "momentum"), ("momentum=0", None)):
        done = _convert(source, tmp_path / "m.prototext", "--lbann-train", given)
        assert done.returncode == 0, done.stderr
        lines = [line for line in done.stdout.splitlines() if "optimizer state" in line]
        if state is None:
            assert not lines
        else:
            assert lines == [f"  note: optimizer state ({state}) is not written: an LBANN prototext has no field "
                             f"for it (LBANN keeps it in its checkpoints), so LBANN starts it from zero"]
