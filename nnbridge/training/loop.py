"""Training on the reference backend: the compiled training step and optimizer stepped over seeded,
shuffled mini-batches, validation after each epoch, the trained model and how it was trained."""

from __future__ import annotations

import os
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np

from ..api.compiler import compile as compile_graph
from ..base.errors import NonFiniteError
from ..ir import Graph
from .checks import (
    CheckedOnce,
    NonFiniteStep,
    all_finite,
    check_data,
    check_labels,
    check_settings,
    check_training_algorithm,
    resolve_semantics,
    warn_lost_layers,
)
from .data import split_indices
from .graph import logits, pinned, redeclared, training_graph
from .optimizer import Optimizer


@dataclass(kw_only=True)
class Epoch:
    """One epoch's figures: mean training loss/accuracy over its steps, validation after it."""

    epoch: int
    loss: float
    accuracy: float | None
    val_loss: float | None = None
    val_accuracy: float | None = None
    seconds: float = 0.0
    skipped: int = 0  # batches left out for a non-finite loss, gradient or update (skip_nonfinite)


@dataclass
class TrainResult:
    graph: Graph  # the model with its trained weights (inference form)
    history: list[Epoch] = field(default_factory=list)
    settings: dict[str, Any] = field(default_factory=dict)  # how it was trained (loss, optimizer, …)
    data: tuple[np.ndarray, np.ndarray] | None = None  # what it was trained on

    def save(self, path: str | os.PathLike, **options: Any) -> Path:
        """The trained model in the format ``path`` names. An LBANN file also describes the
        training run — objective, metric, optimizer, mini-batch size and a ``numpy_npz`` reader of
        ``<stem>_data.npz`` (written beside it: ``data`` and ``labels`` or ``responses``) — so
        that LBANN trains it as nnbridge did."""
        from ..converters import format_for, save_model

        path = Path(path)
        if format_for(path).name != "lbann" or self.data is None:
            save_model(self.graph, path, **options)
            return path
        from ..base.fileio import atomic_write
        from ..converters.lbann.experiment import training_setup

        x, y = self.data
        graph = redeclared(self.graph, x.shape[1:], self.settings["batch_size"])
        data_file = path.with_name(f"{path.stem}_data.npz")
        settings = {k: v for k, v in self.settings.items() if k not in ("semantics", "skip_nonfinite")}
        training_setup(graph, **settings, data_file=str(data_file),
                       classes=int(y.max()) + 1 if self.settings["loss"] == "cross-entropy" else 0)
        save_model(graph, path, **options)
        target = {"labels": y.astype(np.int32)} if self.settings["loss"] == "cross-entropy" else {"responses": y}
        with atomic_write(data_file, "wb") as fh:
            np.savez(fh, data=x.astype(np.float32), **target)
        return path


def train(model: Any, x: np.ndarray, y: np.ndarray, *, loss: str = "cross-entropy", optimizer: str = "sgd",
          lr: float = 0.05, momentum: float = 0.9, weight_decay: float = 0.0, nesterov: bool = False,
          epochs: int = 10, batch_size: int = 32, val_split: float = 0.2, seed: int = 0, semantics: str = "auto",
          skip_nonfinite: bool = False,
          progress: Callable[[int, int, int, dict[str, float]], None] | None = None) -> TrainResult:
    """Train ``model`` (a file, ModelProto or Graph with one input and one output) on ``x``/``y``.
    ``semantics``: see ``SEMANTICS``. A non-finite loss, gradient or new weight stops training with
    a ``NonFiniteError`` naming the step, the batch and the first such tensor, or with
    ``skip_nonfinite`` leaves that batch out (counted in ``Epoch.skipped``).
    ``progress(epoch, step, steps, figures)`` is called after every step."""
    from ..api.model_io import as_graph

    check_settings(loss, optimizer, lr, momentum, weight_decay, epochs, batch_size, val_split, nesterov, semantics)
    graph = as_graph(model).copy()
    semantics = resolve_semantics(model, graph, semantics)
    warn_lost_layers(graph)
    check_training_algorithm(graph)
    x, y = check_data(graph, x, y, loss)
    train_idx, val_idx = split_indices(len(x), val_split, seed, batch_size, "one batch")
    step = TrainingStep(graph, x.shape[1:], y, batch_size, loss, semantics)
    if loss == "cross-entropy":
        check_labels(y, step.classes, step.scores_name)
    update = Optimizer(step.params, optimizer, momentum, weight_decay, lr, nesterov, semantics)
    evaluate = Evaluation(graph, x.shape[1:], len(val_idx), step) if len(val_idx) else None

    def one_step(xb, yb, t, rng):
        value, scores, grads, states = step.run(xb, yb, rng)
        step.params.update(update.step(step.params, grads, t))
        step.states.update(states)
        return value, scores

    history = run_epochs(x, y, train_idx, batch_size, epochs, loss, seed, one_step, progress, skip_nonfinite,
                      validate=(lambda: evaluate.run(x[val_idx], y[val_idx], loss)) if evaluate else None)
    trained = graph.copy()
    for name, array in {**step.params, **step.states}.items():
        _set_tensor(trained, name, array)
    settings = {"loss": loss, "optimizer": optimizer, "lr": lr, "momentum": momentum, "weight_decay": weight_decay,
                "nesterov": nesterov, "epochs": epochs, "batch_size": batch_size, "val_split": val_split,
                "semantics": semantics, "skip_nonfinite": skip_nonfinite}
    return TrainResult(trained, history, settings, (x, y))


def _set_tensor(graph: Graph, name: str, array: np.ndarray) -> None:
    """Store a trained tensor; one the exporter had aliased to another (an Identity of it) becomes
    a tensor of its own, as it was in training."""
    value = graph.get(name)
    if name not in graph.initializers:
        graph.remove_node(value.producer)
        own = graph.add_initializer(name, array, exact=True)
        graph.replace_uses(value, own)
        return
    graph.set_initializer(value, array)


def run_epochs(x: np.ndarray, y: np.ndarray, train_idx: np.ndarray, batch: int, epochs: int, loss: str, seed: int,
            one_step: Callable, progress: Callable | None, skip_nonfinite: bool,
            validate: Callable | None) -> list[Epoch]:
    """The loop both trainers share: each epoch a seeded reshuffle, full batches only (the graph
    has one batch size), ``one_step(x, y, step count, rng) -> (loss, scores)`` per batch, running
    figures to ``progress``, then ``validate() -> (loss, accuracy)``. A step that raises
    ``NonFiniteStep`` (nothing updated) stops training, or is skipped and counted."""
    rng, history, t = np.random.default_rng(seed + 1), [], 0
    steps = len(train_idx) // batch
    for epoch in range(1, epochs + 1):
        start, losses, hits, skipped = time.perf_counter(), [], 0, 0
        shuffled = rng.permutation(train_idx)
        for k in range(steps):
            chosen = shuffled[k * batch:(k + 1) * batch]
            try:
                value, scores = one_step(x[chosen], y[chosen], t, rng)
            except NonFiniteStep as exc:
                if not skip_nonfinite:
                    raise NonFiniteError(f"step {t + 1} (epoch {epoch}, batch {k + 1}, samples {chosen[:4].tolist()}"
                                         f"{'…' if len(chosen) > 4 else ''}): {exc} is not finite; training stopped "
                                         f"and nothing written (lower the learning rate or check the data; "
                                         f"skip_nonfinite / --skip-nonfinite leaves such batches out)") from None
                skipped += 1
                continue
            t += 1
            losses.append(value)
            hits += correct_count(scores, y[chosen], loss)
            if progress:
                figures = {"loss": float(np.mean(losses))}
                if loss == "cross-entropy":
                    figures["accuracy"] = hits / (len(losses) * batch)
                progress(epoch, len(losses), steps - skipped, figures)
        if not losses:
            raise NonFiniteError(f"epoch {epoch}: every one of its {steps} batches had a non-finite loss, gradient "
                                 f"or update; training stopped and nothing written")
        record = Epoch(epoch=epoch, loss=float(np.mean(losses)),
                       accuracy=hits / (len(losses) * batch) if loss == "cross-entropy" else None, skipped=skipped)
        if validate is not None:
            record.val_loss, record.val_accuracy = validate()
        record.seconds = time.perf_counter() - start
        history.append(record)
    return history


def correct_count(scores: np.ndarray, labels: np.ndarray, loss: str) -> int:
    return int((scores.argmax(1) == labels).sum()) if loss == "cross-entropy" else 0


class TrainingStep:
    """The compiled training graph: feeds a batch and the current weights, returns the loss, the
    scores, every weight's gradient and the batch-norm statistics' updates."""

    def __init__(self, graph: Graph, sample: tuple, y: np.ndarray, batch: int, loss: str, semantics: str = "onnx"):
        built = training_graph(graph, sample, tuple(y.shape[1:]), batch, loss, semantics)
        self.params, self.states, self.fixed, self.masks = built.params, built.states, built.fixed, built.masks
        self.names = (built.loss.name, built.scores.name, [g.name for g in built.grads.values()],
                      [u.name for u in built.updates.values()])
        self.scores_name, self.classes = built.scores.name, built.scores.type.shape[-1]
        self.input, self.target = built.graph.inputs[0].name, built.target
        self.exe = compile_graph(built.graph, backend="reference")
        self._checked_run = CheckedOnce(self.exe)

    def run(self, xb: np.ndarray, yb: np.ndarray, rng: np.random.Generator):
        """(loss, scores, gradients, new batch-norm statistics); ``NonFiniteStep`` naming the first
        non-finite tensor of the step if the loss, a gradient or a statistic is not finite."""
        feeds = {self.input: xb, self.target: yb, **self.params, **self.states, **self.fixed}
        for name, (shape, ratio) in self.masks.items():
            feeds[name] = (rng.random(shape) >= ratio).astype(xb.dtype)
        out = self._checked_run(feeds)
        loss_name, score_name, grad_names, update_names = self.names
        if not all(all_finite(out[n]) for n in [loss_name, *grad_names, *update_names]):
            raise NonFiniteStep(self._first_nonfinite(feeds))
        states = {state: out[name] for state, name in zip(self.states, update_names)}
        return float(out[loss_name]), out[score_name], [out[n] for n in grad_names], states

    def _first_nonfinite(self, feeds: dict[str, np.ndarray]) -> str:
        """The first tensor of the step, in the order it is computed, that is not finite."""
        for name, array in feeds.items():
            if np.asarray(array).dtype.kind == "f" and not np.isfinite(array).all():
                return f"the fed tensor '{name}'"
        found: list[str] = []

        def observe(node, outputs):
            for value, array in zip(node.outputs, outputs):
                if not found and isinstance(array, np.ndarray) and array.dtype.kind == "f" \
                        and not np.isfinite(array).all():
                    found.append(f"'{value.name}' ({node.op} node '{node.name}')")

        self.exe.plan.execute(feeds, observe=observe)
        return found[0] if found else "the loss"


class Evaluation:
    """The model in inference form over the whole validation set, fed the current weights."""

    def __init__(self, graph: Graph, sample: tuple, count: int, step: TrainingStep):
        eg, _ = pinned(graph, sample, count)
        self.scores = logits(eg)
        eg.outputs[:] = [self.scores]
        self.step, self.input = step, eg.inputs[0].name
        self.exe = compile_graph(eg, backend="reference")

    def run(self, x: np.ndarray, y: np.ndarray, loss: str) -> tuple[float, float | None]:
        feeds = {self.input: x, **self.step.params, **self.step.states, **self.step.fixed}
        scores = self.exe.run(feeds)[self.scores.name]
        scores = scores.astype(np.float64)
        if loss == "mse":
            return float(((scores - y) ** 2).mean()), None
        shifted = scores - scores.max(1, keepdims=True)
        log_probs = shifted - np.log(np.exp(shifted).sum(1, keepdims=True))
        return float(-log_probs[np.arange(len(y)), y].mean()), float((scores.argmax(1) == y).mean())
