"""nnbridge train: the digits CNN learns (judged by onnxruntime on the saved model), a seed repeats
a run bit for bit, the CLI writes the model and the curves, and bad input is one line."""

from __future__ import annotations

import json
import subprocess
import sys

import numpy as np
import onnx
import pytest
from onnx import TensorProto, helper

import nnbridge
import nnbridge.zoo
from nnbridge.base.errors import FormatError, InputError, UnsupportedOpError
from nnbridge.check import run_onnxruntime
from nnbridge.training import digits, train

pytest.importorskip("sklearn")  # the digits data (make test installs it)


@pytest.fixture(scope="module")
def data():
    return digits()


@pytest.fixture(scope="module")
def trained(data):
    x, y = data
    return train(nnbridge.zoo.build("digits_cnn", batch=32), x, y, epochs=10, batch_size=32, lr=0.05, seed=0)


def test_the_digits_cnn_reaches_95_percent_as_onnxruntime_measures_it(data, trained, tmp_path):
    x, y = data
    assert trained.history[-1].val_accuracy >= 0.95
    assert trained.history[-1].loss < trained.history[0].loss
    path = trained.save(tmp_path / "trained.onnx")
    model = onnx.load(path)
    order = np.random.default_rng(0).permutation(len(x))[: round(len(x) * 0.2)]  # train()'s validation split
    hits = 0
    for start in range(0, len(order) - 31, 32):
        batch = order[start:start + 32]
        scores = next(iter(run_onnxruntime(model, {"image": x[batch]}).values()))
        hits += int((scores.argmax(1) == y[batch]).sum())
    assert hits / (len(order) // 32 * 32) >= 0.95


def test_the_same_seed_gives_the_same_weights_and_another_seed_others(data):
    x, y = data
    x, y = x[:400], y[:400]
    runs = [train(nnbridge.zoo.build("digits_cnn", batch=16), x, y, epochs=2, batch_size=16, seed=s).graph
            for s in (3, 3, 4)]
    for name, array in runs[0].initializers.items():
        np.testing.assert_array_equal(array, runs[1].initializers[name], err_msg=name)
    assert any(not np.array_equal(a, runs[2].initializers[n]) for n, a in runs[0].initializers.items())


@pytest.mark.parametrize("optimizer", ["sgd", "adam", "adamw"])
def test_every_optimizer_lowers_the_loss(data, optimizer):
    x, y = data
    result = train(nnbridge.zoo.build("mlp", batch=16), x[:480].reshape(480, 64), y[:480], optimizer=optimizer,
                   lr=0.05 if optimizer == "sgd" else 0.005, weight_decay=1e-4, epochs=3, batch_size=16)
    assert result.history[-1].loss < 0.6 * result.history[0].loss


def test_a_training_run_checks_its_step_feeds_once_per_executable(monkeypatch):
    """The step and the optimizer each check their feeds on the first step only (the same names,
    dtypes and shapes follow); validation runs once per epoch through its own executable."""
    import nnbridge.backends.base as base

    calls: list[str] = []
    real = base.match_inputs

    def counted(graph, inputs, **kwargs):
        calls.append(graph.name)
        return real(graph, inputs, **kwargs)

    monkeypatch.setattr(base, "match_inputs", counted)
    x = np.random.default_rng(0).normal(size=(64, 4)).astype(np.float32)
    node = helper.make_node("MatMul", ["x", "w"], ["y"])
    graph = helper.make_graph([node], "lin", [helper.make_tensor_value_info("x", TensorProto.FLOAT, [8, 4])],
                              [helper.make_tensor_value_info("y", TensorProto.FLOAT, [8, 2])],
                              [onnx.numpy_helper.from_array(np.ones((4, 2), np.float32), "w")])
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 21)])
    result = train(model, x, np.arange(64) % 2, optimizer="adam", lr=0.01, epochs=3, batch_size=8, val_split=0.25)
    assert len(result.history) == 3
    assert len(calls) == 2 + 3, calls  # 18 steps: the step's and the optimizer's first; 3 validations


def test_mse_fits_a_linear_map():
    rng = np.random.default_rng(0)
    x = rng.normal(size=(256, 4)).astype(np.float32)
    w = np.array([[1.0, -2.0], [0.5, 0.0], [0.0, 3.0], [-1.0, 1.0]], np.float32)
    node = helper.make_node("MatMul", ["x", "w"], ["y"])
    graph = helper.make_graph([node], "lin", [helper.make_tensor_value_info("x", TensorProto.FLOAT, [8, 4])],
                              [helper.make_tensor_value_info("y", TensorProto.FLOAT, [8, 2])],
                              [onnx.numpy_helper.from_array(np.zeros((4, 2), np.float32), "w")])
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 21)])
    result = train(model, x, x @ w, loss="mse", optimizer="adam", lr=0.05, epochs=30, batch_size=8, val_split=0)
    np.testing.assert_allclose(result.graph.initializers["w"], w, atol=2e-2)


def test_cli_trains_saves_plots_and_reports_json(data, tmp_path):
    x, y = data
    np.savez(tmp_path / "train.npz", x=x[:320], y=y[:320])
    onnx.save(nnbridge.zoo.build("digits_cnn", batch=16), tmp_path / "cnn.onnx")
    done = subprocess.run([sys.executable, "-m", "nnbridge", "train", str(tmp_path / "cnn.onnx"), "--data",
                           str(tmp_path / "train.npz"), "--epochs", "2", "--batch-size", "16", "--out",
                           str(tmp_path / "trained.prototext"), "--plot", str(tmp_path / "curve.png"), "--json",
                           str(tmp_path / "history.json")], capture_output=True, text=True)
    assert done.returncode == 0, done.stderr
    assert "epoch   2" in done.stdout and "val accuracy" in done.stdout
    assert (tmp_path / "curve.png").read_bytes()[:4] == b"\x89PNG"
    history = json.loads((tmp_path / "history.json").read_text())
    assert len(history["epochs"]) == 2 and history["optimizer"] == "sgd"
    back = nnbridge.load(tmp_path / "trained.prototext")  # LBANN by the name, with the trained weights
    assert back.initializers


def _cli_error(tmp_path, *args) -> str:
    done = subprocess.run([sys.executable, "-m", "nnbridge", "train", *map(str, args)], capture_output=True,
                          text=True)
    assert done.returncode != 0
    assert "Traceback" not in done.stderr and len(done.stderr.strip().splitlines()) == 1, done.stderr
    return done.stderr


def test_bad_input_is_one_line_and_writes_nothing(data, tmp_path):
    x, y = data
    onnx.save(nnbridge.zoo.build("digits_cnn", batch=16), tmp_path / "cnn.onnx")
    np.savez(tmp_path / "noy.npz", x=x[:64])
    np.savez(tmp_path / "floaty.npz", x=x[:64], y=y[:64].astype(np.float32))
    np.savez(tmp_path / "ok.npz", x=x[:64], y=y[:64])
    out = tmp_path / "out.onnx"
    assert "has no array 'y'" in _cli_error(tmp_path, tmp_path / "cnn.onnx", "--data", tmp_path / "noy.npz", "-o", out)
    assert "one integer class label" in _cli_error(tmp_path, tmp_path / "cnn.onnx", "--data",
                                                   tmp_path / "floaty.npz", "-o", out)
    for lr in ("0", "nan", "-1"):
        assert "learning rate" in _cli_error(tmp_path, tmp_path / "cnn.onnx", "--data", tmp_path / "ok.npz",
                                             "--lr", lr, "-o", out)
    assert not out.exists()
    with pytest.raises(InputError, match=r"samples of shape \[64\]"):
        train(nnbridge.zoo.build("digits_cnn", batch=16), x.reshape(-1, 64), y)
    with pytest.raises(InputError, match="y has 10 entries for 64 samples"):
        train(nnbridge.zoo.build("digits_cnn", batch=16), x[:64], y[:10])
    with pytest.raises(FormatError, match="not a readable .npz"):
        from nnbridge.training import load_data

        (tmp_path / "junk.npz").write_bytes(b"not a zip")
        load_data(tmp_path / "junk.npz")


def test_a_model_without_scores_for_the_loss_is_refused(data):
    x, y = data
    nodes = [helper.make_node("Flatten", ["x"], ["f"]), helper.make_node("ArgMax", ["f"], ["y"], axis=1)]
    graph = helper.make_graph(nodes, "picks", [helper.make_tensor_value_info("x", TensorProto.FLOAT, [16, 1, 8, 8])],
                              [helper.make_tensor_value_info("y", TensorProto.INT64, [16, 1])])
    with pytest.raises(InputError, match="output 'y' is int64; the loss takes float scores"):
        train(helper.make_model(graph, opset_imports=[helper.make_opsetid("", 21)]), x[:64], y[:64], batch_size=16)
    no_output = helper.make_graph([], "empty", [helper.make_tensor_value_info("x", TensorProto.FLOAT, [16, 64])], [])
    with pytest.raises(nnbridge.NNBridgeError):
        train(helper.make_model(no_output, opset_imports=[helper.make_opsetid("", 21)]), x[:64].reshape(64, 64),
              y[:64], batch_size=16)


def test_a_model_with_ops_without_gradients_lists_them_all(data):
    x, y = data
    nodes = [helper.make_node("Flatten", ["x"], ["f"]), helper.make_node("Tan", ["f"], ["c"]),
             helper.make_node("MatMul", ["c", "w"], ["m"]), helper.make_node("Atan", ["m"], ["y"])]
    graph = helper.make_graph(nodes, "odd", [helper.make_tensor_value_info("x", TensorProto.FLOAT, [16, 1, 8, 8])],
                              [helper.make_tensor_value_info("y", TensorProto.FLOAT, [16, 10])],
                              [onnx.numpy_helper.from_array(np.ones((64, 10), np.float32), "w")])
    with pytest.raises(UnsupportedOpError) as info:
        train(helper.make_model(graph, opset_imports=[helper.make_opsetid("", 21)]), x[:64], y[:64], batch_size=16)
    assert [i.op for i in info.value.items] == ["Atan"]  # the weight's path: Tan lies before it, off the path
