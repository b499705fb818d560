"""A training step compiled for the RDU as SambaFlow compiles one: sections typed fwd, bwd and opt
in that order, kept in the .pef, priced by measure-performance; the program computes what the
reference training loop computes for the same step."""

from __future__ import annotations

import subprocess
import sys

import numpy as np
import onnx
import pytest

import nnbridge
import nnbridge.zoo
from nnbridge.backends.rdu import load_pef
from nnbridge.training import Optimizer, TrainingStep, training_program


@pytest.fixture(scope="module")
def program():
    return training_program(nnbridge.zoo.build("digits_cnn", batch=16), batch_size=16, lr=0.05, momentum=0.9)


def test_sections_are_typed_fwd_bwd_opt_in_order_and_kept_in_the_pef(program, tmp_path):
    exe = nnbridge.compile(program, backend="rdu", batch_size=16)
    kinds = [s.kind for s in exe.sections]
    assert set(kinds) == {"fwd", "bwd", "opt"}
    assert kinds == sorted(kinds, key=["fwd", "bwd", "opt"].index)
    totals = exe.estimate.totals
    assert sum(totals["latency_us_by_kind"].values()) == pytest.approx(totals["latency_us"])
    exe.save(tmp_path / "step.pef")
    assert [s.kind for s in load_pef(tmp_path / "step.pef").sections] == kinds


def test_a_training_step_costs_about_three_forward_passes_of_work(program):
    """Backward work is twice the forward's for convolutions and matrix products (the gradients of
    the input and of the weights), so a step does at least 2.5× the inference FLOP."""
    inference = nnbridge.compile(nnbridge.zoo.build("digits_cnn", batch=16), backend="rdu", batch_size=16)
    step = nnbridge.compile(program, backend="rdu", batch_size=16)
    ratio = step.estimate.totals["flop_per_sample"] / inference.estimate.totals["flop_per_sample"]
    assert 2.5 <= ratio <= 4.5


def test_the_program_computes_the_reference_loops_step(program):
    x, y = np.random.default_rng(0).random((16, 1, 8, 8), np.float32), np.arange(16) % 10
    out = nnbridge.compile(program, backend="reference", passes=[]).run({"image": x, "labels": y, "T": np.int64(0)})
    model = nnbridge.load(nnbridge.zoo.build("digits_cnn", batch=16))
    step = TrainingStep(model, (1, 8, 8), y, 16, "cross-entropy")
    loss, _, grads, _ = step.run(x, y, np.random.default_rng(0))
    optimizer = Optimizer(step.params, "sgd", 0.9, 0.0, 0.05)
    optimizer.apply(step.params, grads, 0)
    assert float(out["loss"]) == pytest.approx(loss, rel=1e-6)
    for i, (name, want) in enumerate(step.params.items()):
        np.testing.assert_allclose(out[f"X{i}_new"], want, rtol=1e-5, atol=1e-7, err_msg=name)


def test_cli_compiles_a_training_step_and_reports_the_split(tmp_path):
    onnx.save(nnbridge.zoo.build("digits_cnn", batch=16), tmp_path / "cnn.onnx")
    run = [sys.executable, "-m", "nnbridge"]
    done = subprocess.run([*run, "compile", str(tmp_path / "cnn.onnx"), "--backend", "rdu", "--optimizer", "adam",
                           "--lr", "0.001", "--batch-size", "16", "-o", str(tmp_path / "step.pef")],
                          capture_output=True, text=True)
    assert done.returncode == 0, done.stderr
    assert "(1 fwd, 1 bwd, 1 opt)" in done.stdout
    done = subprocess.run([*run, "measure-performance", str(tmp_path / "step.pef")], capture_output=True, text=True)
    assert done.returncode == 0 and "training: " in done.stdout and "bwd" in done.stdout
    done = subprocess.run([*run, "compile", str(tmp_path / "cnn.onnx"), "--backend", "rdu", "--optimizer", "sgd",
                           "--inference"], capture_output=True, text=True)
    assert done.returncode == 2 and "exclude each other" in done.stderr


@pytest.mark.slow
def test_training_from_the_pef_in_bf16_tracks_the_reference_and_learns(tmp_path):
    """bf16 forward and backward with fp32 master weights, on the same batches as the fp32 reference
    loop: each of the first 10 steps' losses within 5 % and the running loss of the whole first
    epoch within 2 % (bf16 keeps 8 mantissa bits, ~0.4 % per rounding; later single steps part as the
    two trajectories do); five epochs reach 93 % validation accuracy."""
    from nnbridge.training import compile_training, digits, train, train_compiled

    pytest.importorskip("sklearn")
    x, y = digits()
    reference, ours = [], []
    train(nnbridge.zoo.build("digits_cnn", batch=32), x, y, epochs=1, batch_size=32, lr=0.05,
          progress=lambda epoch, step, steps, figures: reference.append(figures["loss"]))
    compile_training(nnbridge.zoo.build("digits_cnn", batch=32), batch_size=32, lr=0.05).save(tmp_path / "step.pef")
    exe = load_pef(tmp_path / "step.pef")
    history = train_compiled(exe, x, y, epochs=5,
                             progress=lambda epoch, step, steps, figures: epoch == 1 and ours.append(figures["loss"]))
    assert np.max(np.abs(np.array(ours) - reference) / np.array(reference)) <= 0.02

    def per_step(running):
        totals = np.array(running) * np.arange(1, len(running) + 1)
        return np.diff(totals, prepend=0.0)

    steps, reference_steps = per_step(ours)[:10], per_step(reference)[:10]
    assert np.max(np.abs(steps - reference_steps) / reference_steps) <= 0.05
    assert history[-1].val_accuracy >= 0.93


@pytest.mark.slow
def test_run_trains_a_training_pef_and_refuses_to_train_an_inference_one(tmp_path):
    pytest.importorskip("sklearn")
    onnx.save(nnbridge.zoo.build("digits_cnn", batch=32), tmp_path / "cnn.onnx")
    run = [sys.executable, "-m", "nnbridge"]
    subprocess.run([*run, "compile", str(tmp_path / "cnn.onnx"), "--backend", "rdu", "--optimizer", "sgd",
                    "--batch-size", "32", "-o", str(tmp_path / "step.pef")], check=True, capture_output=True)
    done = subprocess.run([*run, "run", str(tmp_path / "step.pef"), "--data", "digits", "--epochs", "1"],
                          capture_output=True, text=True)
    assert done.returncode == 0 and "epoch   1" in done.stdout and "val accuracy" in done.stdout, done.stderr
    subprocess.run([*run, "compile", str(tmp_path / "cnn.onnx"), "--backend", "rdu", "-o",
                    str(tmp_path / "infer.pef")], check=True, capture_output=True)
    done = subprocess.run([*run, "run", str(tmp_path / "infer.pef"), "--data", "digits"], capture_output=True,
                          text=True)
    assert done.returncode == 1 and "compile it with --optimizer" in done.stderr


def test_check_compares_one_training_step_with_the_reference(tmp_path):
    """SambaFlow's test on a training .pef: loss, scores and the new weights and batch-norm
    statistics of one bf16 step agree with the fp32 reference by the bf16 rule."""
    from nnbridge.training import compile_training

    compile_training(nnbridge.zoo.build("digits_cnn", batch=16), batch_size=16).save(tmp_path / "step.pef")
    result = nnbridge.check(tmp_path / "step.pef")
    assert result.ok, [o.name for o in result.outputs if not o.ok]
    names = {o.name for o in result.outputs}
    assert "loss" in names and "X0_new" in names and not any(n.startswith("V") for n in names)
    assert any("optimizer state" in note for note in result.notes)
