"""What training refuses or reports instead of going on silently (issue 32): non-finite steps,
labels outside the classes, token ids outside the embedding, nothing to train, statistics that are
not stored tensors; what a torch export keeps (Dropout, BatchNorm, a symbolic batch dim); and
SambaFlow's own forms (forward returning (loss, scores), ``bckwd``, run() training by default)."""

from __future__ import annotations

import subprocess
import sys
import warnings

import numpy as np
import onnx
import pytest
from onnx import TensorProto, helper, numpy_helper

torch = pytest.importorskip("torch")  # the optional extra; make test / .ci/run install it

import nnbridge  # noqa: E402
from nnbridge import sambaflow  # noqa: E402
from nnbridge.base.errors import InputError, NNBridgeWarning, NonFiniteError  # noqa: E402
from nnbridge.training import train  # noqa: E402

pytestmark = pytest.mark.usefixtures("one_torch_thread")


def _mlp_model(batch=8, features=6, classes=4):
    rng = np.random.default_rng(0)
    nodes = [helper.make_node("Gemm", ["x", "w1", "b1"], ["h"]), helper.make_node("Relu", ["h"], ["r"]),
             helper.make_node("Gemm", ["r", "w2", "b2"], ["y"])]
    inits = [numpy_helper.from_array(rng.normal(size=s).astype(np.float32) * 0.5, n)
             for n, s in (("w1", (features, 16)), ("b1", (16,)), ("w2", (16, classes)), ("b2", (classes,)))]
    graph = helper.make_graph(nodes, "mlp", [helper.make_tensor_value_info("x", TensorProto.FLOAT, ["n", features])],
                              [helper.make_tensor_value_info("y", TensorProto.FLOAT, ["n", classes])], inits)
    return helper.make_model(graph, opset_imports=[helper.make_opsetid("", 21)])


def _data(n=32, features=6, classes=4):
    rng = np.random.default_rng(1)
    return rng.normal(size=(n, features)).astype(np.float32), rng.integers(0, classes, n)


# -- non-finite steps ----------------------------------------------------------------------------
def test_a_nan_sample_stops_training_naming_the_step_the_batch_and_the_tensor():
    x, y = _data()
    x[5, 2] = np.nan
    with pytest.raises(NonFiniteError, match=r"step \d+ \(epoch 1, batch \d+, samples .*\): the fed tensor 'x' "
                                             r"is not finite; training stopped"):
        train(_mlp_model(), x, y, batch_size=8, val_split=0, epochs=2)


def test_a_diverging_loss_names_the_first_non_finite_tensor_computed():
    x, y = _data()
    with pytest.raises(NonFiniteError, match=r"step \d+ .*: ('.*' \(\w+ node '.*'\)|the new weight '\w+') is not "
                                             r"finite"):
        train(_mlp_model(), x * 1e18, y, lr=1e18, momentum=0.0, batch_size=8, val_split=0, epochs=5)


def test_skip_nonfinite_leaves_such_batches_out_and_counts_them():
    x, y = _data()
    x[5, 2] = np.nan
    result = train(_mlp_model(), x, y, batch_size=8, val_split=0, epochs=2, skip_nonfinite=True)
    assert [e.skipped for e in result.history] == [1, 1]
    assert all(np.isfinite(a).all() for a in result.graph.initializers.values())


def test_cli_stops_on_a_nan_loss_exits_non_zero_and_writes_nothing(tmp_path):
    x, y = _data()
    x[5, 2] = np.nan
    np.savez(tmp_path / "nan.npz", x=x, y=y)
    onnx.save(_mlp_model(), tmp_path / "mlp.onnx")
    out = tmp_path / "trained.onnx"
    run = [sys.executable, "-m", "nnbridge", "train", str(tmp_path / "mlp.onnx"), "--data", str(tmp_path / "nan.npz"),
           "--batch-size", "8", "--epochs", "2", "--val-split", "0", "-o", str(out)]
    done = subprocess.run(run, capture_output=True, text=True)
    assert done.returncode != 0 and not out.exists()
    assert len(done.stderr.strip().splitlines()) == 1 and "is not finite" in done.stderr, done.stderr
    done = subprocess.run([*run, "--skip-nonfinite"], capture_output=True, text=True)
    assert done.returncode == 0 and out.exists(), done.stderr
    assert "skipped 1 non-finite batch" in done.stdout


def test_the_rdu_training_program_applies_no_non_finite_step():
    from nnbridge.training import compile_training

    exe = compile_training(_mlp_model(), batch_size=8, lr=0.05)
    x, y = _data()
    before = {k: np.array(v) for k, v in exe.graph.initializers.items()}
    x[1, 1] = np.inf
    with pytest.raises(NonFiniteError, match=r"step 1: 'loss' of the training program .* is not finite"):
        sambaflow.run(exe, [x[:8], y[:8]])
    assert all(np.array_equal(before[k], v) for k, v in exe.graph.initializers.items())
    assert exe.steps == 0


# -- labels, ids, nothing to train -----------------------------------------------------------------
@pytest.mark.parametrize("label", [-1, 4])
def test_a_label_outside_the_classes_is_one_line(label):
    x, y = _data()
    y[3] = label
    with pytest.raises(InputError, match=rf"label {label} of sample 3 \(1 such\): cross-entropy takes labels 0 to 3"):
        train(_mlp_model(), x, y, batch_size=8)


@pytest.mark.parametrize("label", [-1, 4])
def test_a_label_outside_the_classes_is_refused_by_the_rdu_program_too(label):
    from nnbridge.training import compile_training, train_compiled

    exe = compile_training(_mlp_model(), batch_size=8)
    x, y = _data()
    y[3] = label
    with pytest.raises(InputError, match=rf"label {label} of sample 3"):
        train_compiled(exe, x, y)
    with pytest.raises(InputError, match=rf"label {label} of sample 0"):
        sambaflow.run(exe, [x[3:11], y[3:11]])


def test_token_ids_train_an_embedding_and_out_of_range_ids_are_one_line():
    module = torch.nn.Sequential(torch.nn.Embedding(10, 4), torch.nn.Flatten(), torch.nn.Linear(12, 3))
    ids = np.random.default_rng(0).integers(0, 10, (32, 3))
    graph = nnbridge.from_torch(module, [torch.from_numpy(ids[:8])], for_training=True)
    labels = np.arange(32) % 3
    result = train(graph, ids, labels, batch_size=8, epochs=3, lr=0.1)
    assert result.history[-1].loss < result.history[0].loss
    ids[7, 1] = 10
    with pytest.raises(InputError, match=r"sample 7 holds a token id outside 0 to 9, the rows of the embedding"):
        train(graph, ids, labels, batch_size=8)


def test_a_model_with_nothing_to_train_is_refused():
    node = helper.make_node("Relu", ["x"], ["y"])
    graph = helper.make_graph([node], "nothing", [helper.make_tensor_value_info("x", TensorProto.FLOAT, [8, 4])],
                              [helper.make_tensor_value_info("y", TensorProto.FLOAT, [8, 4])])
    x, y = _data(features=4)
    with pytest.raises(InputError, match="no float weights to train"):
        train(helper.make_model(graph, opset_imports=[helper.make_opsetid("", 21)]), x, y, batch_size=8)


def test_batch_norm_statistics_that_are_computed_are_one_line():
    nodes = [helper.make_node("Constant", [], ["mean"], value=numpy_helper.from_array(np.zeros(4, np.float32))),
             helper.make_node("BatchNormalization", ["x", "s", "b", "mean", "var"], ["y"])]
    inits = [numpy_helper.from_array(np.ones(4, np.float32), n) for n in ("s", "b", "var")]
    graph = helper.make_graph(nodes, "bn", [helper.make_tensor_value_info("x", TensorProto.FLOAT, [8, 4])],
                              [helper.make_tensor_value_info("y", TensorProto.FLOAT, [8, 4])], inits)
    x, y = _data(features=4)
    with pytest.raises(InputError, match=r"BatchNormalization's running statistic 'mean' is a constant of the graph"):
        train(helper.make_model(graph, opset_imports=[helper.make_opsetid("", 21)]), x, y, batch_size=8)


def test_a_recurrence_the_unrolled_form_does_not_cover_is_refused_naming_the_op():
    from nnbridge.base.errors import UnsupportedOpError

    class Recurrent(torch.nn.Module):
        def __init__(self):
            super().__init__()
            self.gru = torch.nn.GRU(4, 3, batch_first=True, bidirectional=True)
            self.head = torch.nn.Linear(6, 3)

        def forward(self, x):
            return self.head(self.gru(x)[0][:, -1])

    x = np.random.default_rng(0).normal(size=(16, 5, 4)).astype(np.float32)
    graph = nnbridge.from_torch(Recurrent(), [torch.from_numpy(x[:8])], for_training=True)
    with pytest.raises(UnsupportedOpError, match="GRU"):
        train(graph, x, np.arange(16) % 3, batch_size=8, val_split=0)


def test_cli_follows_torch_for_a_file_torch_exported(tmp_path):
    import json

    module = _cnn()
    model = nnbridge.converters.pytorch.from_torch(module, [torch.randn(8, 1, 6, 6)], for_training=True)
    del model.metadata_props[:]  # as torch.onnx.export writes it: only its producer says torch
    onnx.save(model, tmp_path / "cnn.onnx")
    x = np.random.default_rng(0).normal(size=(16, 1, 6, 6)).astype(np.float32)
    np.savez(tmp_path / "d.npz", x=x, y=np.arange(16) % 3)
    done = subprocess.run([sys.executable, "-m", "nnbridge", "train", str(tmp_path / "cnn.onnx"), "--data",
                           str(tmp_path / "d.npz"), "--batch-size", "8", "--epochs", "1", "--val-split", "0",
                           "--json", "-"], capture_output=True, text=True)
    assert done.returncode == 0, done.stderr
    assert json.loads(done.stdout)["semantics"] == "torch"


# -- what a torch export keeps -------------------------------------------------------------------
def _cnn():
    torch.manual_seed(0)
    return torch.nn.Sequential(
        torch.nn.Conv2d(1, 4, 3, padding=1), torch.nn.BatchNorm2d(4), torch.nn.ReLU(), torch.nn.Flatten(),
        torch.nn.Dropout(0.3), torch.nn.Linear(4 * 6 * 6, 3))


def test_a_training_export_keeps_dropout_and_batch_norm_and_validates_in_eval_form(tmp_path):
    from nnbridge.check import run_onnxruntime

    module = _cnn()
    graph = nnbridge.from_torch(module, [torch.randn(8, 1, 6, 6)], for_training=True)
    assert module.training  # the module's mode is left as it was
    ops = [n.op for n in graph.nodes]
    assert "Dropout" in ops and "BatchNormalization" in ops
    x = np.random.default_rng(0).normal(size=(60, 1, 6, 6)).astype(np.float32)
    y = np.arange(60) % 3
    result = train(graph, x, y, batch_size=8, epochs=2)  # the default validation split
    assert result.history[-1].val_accuracy is not None
    path = result.save(tmp_path / "trained.onnx")
    model = onnx.load(path)
    assert model.graph.input[0].type.tensor_type.shape.dim[0].dim_param  # the batch dim stays symbolic
    scores = next(iter(run_onnxruntime(model, {model.graph.input[0].name: x[:13]}).values()))
    ours = nnbridge.run(nnbridge.load(model), {model.graph.input[0].name: x[:13]})
    np.testing.assert_allclose(scores, next(iter(ours.values())), rtol=1e-4, atol=1e-5)


def test_training_an_inference_export_of_a_module_with_dropout_warns():
    module = _cnn()
    graph = nnbridge.from_torch(module, [torch.randn(8, 1, 6, 6)])
    x = np.random.default_rng(0).normal(size=(16, 1, 6, 6)).astype(np.float32)
    with pytest.warns(NNBridgeWarning, match=r"exported from torch for inference, which leaves out or folds its "
                                             r"Dropout, BatchNorm; export it with .*for_training=True"):
        train(graph, x, np.arange(16) % 3, batch_size=8, epochs=1, val_split=0)


@pytest.mark.parametrize("for_training", [False, True])
def test_from_torch_exports_torchs_transformer_encoder_layer(for_training):
    layer = torch.nn.TransformerEncoderLayer(8, 2, dim_feedforward=16, batch_first=True)
    graph = nnbridge.from_torch(layer, [torch.randn(2, 5, 8)], for_training=for_training)
    assert any(n.op == "MatMul" for n in graph.nodes)


def test_a_module_torch_cannot_export_is_one_line():
    class Branchy(torch.nn.Module):
        def forward(self, x):
            return x.numpy()  # not traceable

    with pytest.raises(InputError, match=r"torch.onnx.export could not export Branchy: ") as info:
        nnbridge.from_torch(Branchy(), [torch.randn(2, 3)])
    assert "\n" not in str(info.value)


# -- SambaFlow's forms ---------------------------------------------------------------------------
class FFNLogReg(torch.nn.Module):
    """seed 004's model: forward(inputs, targets) returns (loss, out)."""

    def __init__(self, criterion=None):
        super().__init__()
        self.gemm1, self.norm1 = torch.nn.Linear(12, 16), torch.nn.LayerNorm(16)
        self.gemm2 = torch.nn.Linear(16, 4)
        self.criterion = criterion or torch.nn.CrossEntropyLoss()

    def forward(self, inputs, targets):
        out = self.gemm2(torch.tanh(self.norm1(self.gemm1(inputs))))
        return self.criterion(out, targets), out


def test_sambaflows_own_form_compiles_and_run_trains_by_default():
    torch.manual_seed(0)
    model = FFNLogReg()
    x, y = torch.randn(8, 12), torch.randint(0, 4, (8,))
    optimizer = torch.optim.SGD(model.parameters(), lr=0.1, momentum=0.9, weight_decay=1e-4)
    program = sambaflow.compile(model, (x, y), optimizer)
    assert program.training and [s.kind for s in program.sections] == ["fwd", "bwd", "opt"]
    first = float(sambaflow.run(program, [x, y])["loss"])  # trains: fwd, bwd and opt
    assert first == pytest.approx(float(model(x, y)[0].detach()), rel=2e-2)  # bf16 forward
    weights = {k: np.array(v) for k, v in program.graph.initializers.items()}
    forward = sambaflow.run(program, [x, y], section_types=["fwd"])  # forward only: nothing changes
    assert all(np.array_equal(weights[k], v) for k, v in program.graph.initializers.items())
    for _ in range(10):
        last = float(sambaflow.run(program, [x, y], section_types=["fwd", "bckwd", "opt"])["loss"])
    assert last < 0.5 * float(forward["loss"]) and program.steps == 11


def test_a_one_input_module_given_inputs_and_labels_takes_the_labels_as_such():
    torch.manual_seed(0)
    module = torch.nn.Sequential(torch.nn.Linear(12, 4))
    x, y = torch.randn(8, 12), torch.randint(0, 4, (8,))
    program = sambaflow.compile(module, (x, y), torch.optim.SGD(module.parameters(), lr=0.1))
    assert program.input_names == ["input", "labels", "T"]
    first = float(sambaflow.run(program, [x, y])["loss"])
    assert first == pytest.approx(float(torch.nn.functional.cross_entropy(module(x), y)), rel=2e-2)


def test_sambaflows_own_form_with_a_loss_nnbridge_cannot_follow_is_one_line():
    model = FFNLogReg(criterion=lambda out, y: out.abs().mean())
    with pytest.raises(InputError, match="returns its own loss .* neither cross-entropy nor mse"):
        sambaflow.compile(model, (torch.randn(8, 12), torch.randint(0, 4, (8,))), "sgd")


def test_a_torch_optimizer_setting_nnbridge_does_not_follow_is_refused():
    model = FFNLogReg()
    inputs = (torch.randn(8, 12), torch.randint(0, 4, (8,)))
    with pytest.raises(InputError, match=r"amsgrad=True is not followed"):
        sambaflow.compile(model, inputs, torch.optim.Adam(model.parameters(), amsgrad=True))
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        program = sambaflow.compile(model, inputs, torch.optim.SGD(model.parameters(), lr=0.1, momentum=0.9,
                                                                   nesterov=True))
    node = next(n for n in program.graph.nodes if n.op == "Momentum")
    assert node.attrs["mode"] == "nesterov"


def test_a_sambaflow_program_keeps_dropout_and_feeds_its_masks():
    """Dropout survives sambaflow.compile(module, …) (issue 32, item 2); run() draws its masks for a
    training step and turns it off for a forward-only run; train_compiled feeds them too."""
    import json

    from nnbridge.passes.autodiff import UPDATES_KEY
    from nnbridge.training import train_compiled

    module = _cnn()
    x = np.random.default_rng(0).normal(size=(48, 1, 6, 6)).astype(np.float32)
    y = np.arange(48) % 3
    program = sambaflow.compile(module, [torch.from_numpy(x[:8])], "sgd")
    masks = [n for n in program.input_names if n.endswith("_mask")]
    updated = json.loads(program.graph.metadata[UPDATES_KEY]).values()
    assert len(masks) == 1 and "1.running_var" in updated  # Dropout kept, BatchNorm not folded
    forward = [float(sambaflow.run(program, [x[:8], y[:8]], section_types=["fwd"])["loss"]) for _ in range(2)]
    assert forward[0] == forward[1]  # no Dropout in a forward-only run
    sambaflow.run(program, [x[:8], y[:8]])
    history = train_compiled(program, x, y, epochs=1, val_split=0.25)
    assert np.isfinite(history[0].loss) and history[0].val_loss is not None


def test_the_rdu_optimizer_phase_keeps_fp32_master_weights():
    """Torch's AdamW decays the weights before the op, in the opt phase; that runs in fp32 on the
    master weights, so a step of ~1e-6 is not lost to bf16 rounding (~1e-3 of these weights)."""
    from nnbridge.training import compile_training

    exe = compile_training(_mlp_model(), batch_size=8, optimizer="adamw", lr=1e-6, weight_decay=0.5,
                           semantics="torch")
    before = {k: np.array(v, np.float32) for k, v in exe.graph.initializers.items() if k in ("w1", "w2")}
    x, y = _data()
    sambaflow.run(exe, [x[:8], y[:8]])
    for name, old in before.items():
        moved = np.abs(exe.graph.initializers[name] - old)
        assert moved.max() < 3e-6 and np.median(moved) > 1e-7, name


def test_the_finite_check_sums_once_and_is_not_fooled_by_an_overflowing_sum():
    from nnbridge.training.checks import all_finite

    big = np.full(4, 3e38, np.float32)  # finite elements whose float32 sum overflows
    with warnings.catch_warnings():
        warnings.simplefilter("error")  # the check's own sum warns of nothing
        assert all_finite(big) and all_finite(np.arange(5))
    for bad in (np.nan, np.inf, -np.inf):
        assert not all_finite(np.array([1.0, bad, 2.0], np.float32))
    assert not all_finite(np.array([np.inf, -np.inf]))  # their sum is NaN
