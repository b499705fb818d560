"""Training on the reference backend: the model's training graph (forward, loss, gradients from
``passes/autodiff``) and an optimizer graph of ONNX's training ops (``Momentum`` for SGD, ``Adam``
for Adam/AdamW, run by the shared kernels) are compiled once and stepped over seeded, shuffled
mini-batches; the same seed gives the same weights.

    result = nnbridge.train("cnn.onnx", x, y, loss="cross-entropy", optimizer="sgd", lr=0.05, epochs=10)
    result.save("trained.onnx")          # or .prototext / _topo.pbtxt: the trained weights go along
"""

from __future__ import annotations

import math
import os
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np

from .compiler import compile as compile_graph
from .converters.pytorch import FRAMEWORK_KEY, LOST_LAYERS_KEY
from .errors import FormatError, InputError, NNBridgeWarning, NonFiniteError
from .ir import TRAINING_DOMAIN, DType, Graph, TensorType, Value

LOSSES = ("cross-entropy", "mse")
OPTIMIZERS = ("sgd", "adam", "adamw")
#: whose definitions training follows where ONNX's and torch's differ (docs/training.md): "torch"
#: (BatchNorm's running variance unbiased, Adam's ε added to √v̂, AdamW's decay before the step),
#: "onnx" (the biased variance of ONNX's BatchNormalization, ε added to √v and the decay after the
#: step as ONNX's Adam op has them), or "auto": torch's for a model that came from torch, else ONNX's
SEMANTICS = ("auto", "torch", "onnx")
ADAM_BETAS, ADAM_EPSILON = (0.9, 0.999), 1e-8  # torch.optim.Adam's defaults


@dataclass
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
        from .converters import format_for, save_model

        path = Path(path)
        if format_for(path).name != "lbann" or self.data is None:
            save_model(self.graph, path, **options)
            return path
        from .converters.lbann.experiment import training_setup
        from .fileio import atomic_write

        x, y = self.data
        graph = _redeclared(self.graph, x.shape[1:], self.settings["batch_size"])
        data_file = path.with_name(f"{path.stem}_data.npz")
        settings = {k: v for k, v in self.settings.items() if k not in ("semantics", "skip_nonfinite")}
        training_setup(graph, **settings, data_file=str(data_file),
                       classes=int(y.max()) + 1 if self.settings["loss"] == "cross-entropy" else 0)
        save_model(graph, path, **options)
        target = {"labels": y.astype(np.int32)} if self.settings["loss"] == "cross-entropy" else {"responses": y}
        with atomic_write(data_file, "wb") as fh:
            np.savez(fh, data=x.astype(np.float32), **target)
        return path


def load_data(path: str | os.PathLike) -> tuple[np.ndarray, np.ndarray]:
    """``x`` and ``y`` of an ``.npz`` file (no pickles)."""
    try:
        with np.load(path, allow_pickle=False) as data:
            missing = [k for k in ("x", "y") if k not in data.files]
            if missing:
                raise FormatError(f"{path}: has no array {' or '.join(map(repr, missing))}; training data is an "
                                  f".npz with x (samples) and y (labels or targets), e.g. np.savez(path, x=x, y=y)")
            return data["x"], data["y"]
    except (OSError, ValueError) as exc:
        raise FormatError(f"{path}: not a readable .npz file ({exc})") from None


def digits() -> tuple[np.ndarray, np.ndarray]:
    """scikit-learn's handwritten digits (1,797 8×8 images, 10 classes) as x (N,1,8,8) in [0, 1], y."""
    try:
        from sklearn.datasets import load_digits
    except ImportError:
        raise InputError("the digits data comes with scikit-learn: pip install scikit-learn") from None
    data = load_digits()
    return (data.images[:, None] / 16.0).astype(np.float32), data.target.astype(np.int64)


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
    from .model_io import as_graph

    _check_settings(loss, optimizer, lr, momentum, weight_decay, epochs, batch_size, val_split, nesterov, semantics)
    graph = as_graph(model).copy()
    semantics = resolve_semantics(model, graph, semantics)
    _warn_lost_layers(graph)
    x, y = _check_data(graph, x, y, loss)
    train_idx, val_idx = _split(len(x), val_split, seed, batch_size, "one batch")
    step = _TrainingStep(graph, x.shape[1:], y, batch_size, loss, semantics)
    if loss == "cross-entropy":
        check_labels(y, step.classes, step.scores_name)
    update = _Optimizer(step.params, optimizer, momentum, weight_decay, lr, nesterov, semantics)
    evaluate = _Evaluation(graph, x.shape[1:], len(val_idx), step) if len(val_idx) else None

    def one_step(xb, yb, t, rng):
        value, scores, grads, states = step.run(xb, yb, rng)
        step.params.update(update.step(step.params, grads, t))
        step.states.update(states)
        return value, scores

    history = _epochs(x, y, train_idx, batch_size, epochs, loss, seed, one_step, progress, skip_nonfinite,
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


def resolve_semantics(model: Any, graph: Graph, semantics: str) -> str:
    """"torch" or "onnx": ``semantics`` itself, or for "auto" torch's when the model came from
    torch (``from_torch`` marks it; a ModelProto or .onnx file by its producer)."""
    if semantics != "auto":
        return semantics
    if graph.metadata.get(FRAMEWORK_KEY) == "torch":
        return "torch"
    producer = getattr(model, "producer_name", None)
    if producer is None and isinstance(model, (str, os.PathLike)) and str(model).endswith(".onnx"):
        import onnx

        try:
            producer = onnx.load(model, load_external_data=False).producer_name
        except Exception:  # as_graph has read it already; a second read that fails changes nothing
            producer = None
    return "torch" if producer == "pytorch" else "onnx"


def _warn_lost_layers(graph: Graph) -> None:
    lost = graph.metadata.get(LOST_LAYERS_KEY)
    if lost:
        import warnings

        warnings.warn(f"graph '{graph.name}' was exported from torch for inference, which leaves out or folds its "
                      f"{lost}; export it with from_torch(..., for_training=True) to train those layers",
                      NNBridgeWarning, stacklevel=3)


def _check_settings(loss, optimizer, lr, momentum, weight_decay, epochs, batch_size, val_split, nesterov=False,
                    semantics="auto") -> None:
    if loss not in LOSSES:
        raise InputError(f"loss '{loss}': choose from {', '.join(LOSSES)}")
    if optimizer not in OPTIMIZERS:
        raise InputError(f"optimizer '{optimizer}': choose from {', '.join(OPTIMIZERS)}")
    if not (isinstance(lr, (int, float)) and math.isfinite(lr) and lr > 0):
        raise InputError(f"learning rate {lr}: it must be a finite number above 0")
    for name, value in (("momentum", momentum), ("weight decay", weight_decay)):
        if not (math.isfinite(value) and 0 <= value < (1 if name == "momentum" else math.inf)):
            raise InputError(f"{name} {value}: it must be finite, ≥ 0{' and below 1' if name == 'momentum' else ''}")
    if epochs < 1 or batch_size < 1:
        raise InputError(f"epochs ({epochs}) and batch size ({batch_size}) must be at least 1")
    if not 0 <= val_split < 1:
        raise InputError(f"validation split {val_split}: it must be in [0, 1)")
    if nesterov and (optimizer != "sgd" or momentum == 0):
        raise InputError(f"nesterov: it takes the sgd optimizer with a momentum above 0 (given {optimizer}, "
                         f"momentum {momentum})")
    if semantics not in SEMANTICS:
        raise InputError(f"semantics '{semantics}': choose from {', '.join(SEMANTICS)}")


def _check_data(graph: Graph, x: np.ndarray, y: np.ndarray, loss: str) -> tuple[np.ndarray, np.ndarray]:
    if len(graph.inputs) != 1 or len(graph.outputs) != 1:
        raise InputError(f"graph '{graph.name}' has {len(graph.inputs)} inputs and {len(graph.outputs)} outputs; "
                         f"training takes a model with one input and one output")
    scores = graph.outputs[0]
    if scores.type.dtype is not None and not scores.type.dtype.is_float:
        raise InputError(f"the model's output '{scores.name}' is {scores.type.dtype.short}; the loss takes float "
                         f"scores (train the model before its ArgMax or Cast)")
    x = np.asarray(x)
    feed = graph.inputs[0]
    ids = feed.type.dtype is not None and feed.type.dtype.is_int
    if x.dtype.kind not in ("iu" if ids else "f") or x.ndim < 1 or len(x) == 0:
        raise InputError(f"x has dtype {x.dtype} and shape {list(x.shape)}; the model's input '{feed.name}' takes "
                         f"{'integer ids' if ids else 'float samples'}")
    if ids:
        _check_ids(graph, x)
    declared = graph.inputs[0].type.shape
    if declared is not None and (len(declared) != x.ndim or any(
            isinstance(d, int) and d != s for d, s in zip(declared[1:], x.shape[1:]))):
        raise InputError(f"x has samples of shape {list(x.shape[1:])}; the model's input "
                         f"'{graph.inputs[0].name}' takes {list(declared[1:])}")
    y = np.asarray(y)
    if len(y) != len(x):
        raise InputError(f"y has {len(y)} entries for {len(x)} samples")
    if loss == "cross-entropy":
        if y.ndim != 1 or y.dtype.kind not in "iu":
            raise InputError(f"y has dtype {y.dtype} and shape {list(y.shape)}; cross-entropy takes one integer "
                             f"class label per sample")
        y = y.astype(np.int64)
        classes = (scores.type.shape or [None])[-1]
        if isinstance(classes, int):
            check_labels(y, classes, scores.name)
    elif y.dtype.kind != "f":
        raise InputError(f"y has dtype {y.dtype}; mse takes float targets shaped like the model's output")
    return x.astype(feed.type.dtype.numpy if feed.type.dtype else np.float32), y


def check_labels(y: np.ndarray, classes: int, scores: str) -> None:
    """Every label a class of the scores (0 ≤ label < classes), or one line naming the first that is not."""
    bad = np.flatnonzero((y < 0) | (y >= classes))
    if len(bad):
        raise InputError(f"label {int(y[bad[0]])} of sample {int(bad[0])} ({len(bad)} such): cross-entropy takes "
                         f"labels 0 to {classes - 1}, the classes of the model's output '{scores}'")


def _check_ids(graph: Graph, x: np.ndarray) -> None:
    """Token ids within the rows of each embedding table (a Gather of a tensor) the input indexes."""
    feed = graph.inputs[0]
    for node in graph.consumers(feed):
        if node.op == "Gather" and not node.domain and node.input(1) is feed and node.inputs[0].name in \
                graph.initializers and node.attr("axis", 0) == 0:
            rows = len(graph.initializers[node.inputs[0].name])
            bad = np.flatnonzero(((x < 0) | (x >= rows)).reshape(len(x), -1).any(axis=1))
            if len(bad):
                raise InputError(f"sample {int(bad[0])} holds a token id outside 0 to {rows - 1}, the rows of the "
                                 f"embedding '{node.inputs[0].name}' ({len(bad)} such samples)")


def _correct(scores: np.ndarray, labels: np.ndarray, loss: str) -> int:
    return int((scores.argmax(1) == labels).sum()) if loss == "cross-entropy" else 0


def _redeclared(graph: Graph, sample: tuple, batch: int, infer: bool = True) -> Graph:
    """A copy whose input takes batches of ``batch`` (a fixed batch dim too), every other
    activation's shape inferred again (``infer``) with shape arithmetic folded."""
    graph = graph.copy()
    x = graph.inputs[0]
    x.type = TensorType(x.type.dtype, (batch, *sample), x.type.layout)
    for value in graph.values.values():
        if value is not x and value.name not in graph.initializers:
            value.type = TensorType(value.type.dtype, None, value.type.layout)
    if infer:
        _infer(graph)
    return graph


def _infer(graph: Graph) -> None:
    from .passes import run_passes
    from .passes.manager import Fixpoint

    run_passes(graph, [Fixpoint("infer-shapes", "fold")])  # shape arithmetic on static shapes → constants


def _pinned(graph: Graph, sample: tuple, batch: int) -> tuple[Graph, dict[str, np.ndarray]]:
    """A copy for one batch size whose float tensors are inputs (fed each step, so nothing derived
    from a weight is precomputed), shape arithmetic folded and every shape inferred again; returns
    it and the tensors' values."""
    graph = _redeclared(graph, sample, batch, infer=False)
    weights = {n: np.array(a) for n, a in graph.initializers.items() if np.asarray(a).dtype.kind == "f" and a.ndim}
    for name in weights:
        graph.initializers.pop(name)
        graph.inputs.append(graph.get(name))
    for node in list(graph.nodes):  # exporters alias equal initial values (torch: every LayerNorm's
        source = node.inputs[0] if node.op == "Identity" and node.inputs else None  # ones): apart again
        if source is not None and source.name in weights and not node.domain:
            alias = node.outputs[0]
            graph.remove_node(node)
            own = graph.add_input(alias.name, TensorType(source.type.dtype, tuple(weights[source.name].shape)))
            graph.replace_uses(alias, own)
            weights[own.name] = weights[source.name].copy()
    _infer(graph)
    return graph, weights


def _logits(graph: Graph) -> Value:
    """The scores a classifier's loss starts from: the input of a final Softmax (a stable loss)."""
    out = graph.outputs[0]
    node = out.producer
    return node.inputs[0] if node is not None and node.op == "Softmax" and not node.domain else out


@dataclass
class TrainingGraph:
    """One training step as a graph: inputs the batch, its labels (or targets), the weights, the
    batch-norm states, the other float tensors and the dropout masks; outputs the loss, the scores,
    each weight's gradient and each state's update. ``forward`` holds the ids of the nodes that
    compute the loss (the rest is the backward pass)."""

    graph: Graph
    params: dict[str, np.ndarray]
    states: dict[str, np.ndarray]
    fixed: dict[str, np.ndarray]
    masks: dict[str, tuple[tuple[int, ...], float]]
    loss: Value
    scores: Value
    grads: dict[str, Value]
    updates: dict[str, Value]
    target: str
    forward: set[int]


def training_graph(graph: Graph, sample: tuple, target_shape: tuple, batch: int, loss: str,
                   semantics: str = "onnx") -> TrainingGraph:
    from .passes.autodiff import gradients, training_form

    tg, weights = _pinned(graph, sample, batch)
    form = training_form(tg, unbiased_running_var=semantics == "torch")
    scores = _logits(tg)
    trainable = [n for n in weights if n not in form.updates and tg.consumers(tg.get(n))]
    if not trainable:
        raise InputError(f"graph '{graph.name}' has no float weights to train (nothing to train: its tensors are "
                         f"constants, integers or none)")
    params = {n: weights[n] for n in trainable}
    constant = [n for n in form.updates if n not in weights]
    if constant:
        raise InputError(f"BatchNormalization's running statistic '{constant[0]}' is a constant of the graph, not a "
                         f"stored float tensor; training updates stored running statistics only")
    states = {n: weights[n] for n in form.updates}
    fixed = {n: a for n, a in weights.items() if n not in params and n not in states}
    if loss == "cross-entropy":
        labels = tg.add_input("labels", TensorType(DType.INT64, (batch,)))
        value = tg.add_node("SoftmaxCrossEntropyLoss", [scores, labels], ["loss"], {"reduction": "mean"}).outputs[0]
        value.type = TensorType(scores.type.dtype, ())
    else:
        targets = tg.add_input("targets", TensorType(scores.type.dtype, (batch, *target_shape)))
        diff = tg.add_node("Sub", [scores, targets], ["diff"]).outputs[0]
        diff.type = scores.type
        square = tg.add_node("Mul", [diff, diff], ["square"]).outputs[0]
        square.type = scores.type
        value = tg.add_node("ReduceMean", [square], ["loss"], {"keepdims": 0}).outputs[0]
        value.type = TensorType(scores.type.dtype, ())
    forward = {id(n) for n in tg.nodes}
    grads = gradients(tg, value, [tg.get(n) for n in trainable])
    masks = {name: (tuple(tg.get(name).type.shape), ratio) for name, ratio in form.masks.items()}
    tg.outputs[:] = [value, scores, *grads.values(), *form.updates.values()]
    return TrainingGraph(tg, params, states, fixed, masks, value, scores, grads, dict(form.updates),
                         "labels" if loss == "cross-entropy" else "targets", forward)


def training_program(model: Any, *, batch_size: int, loss: str = "cross-entropy", optimizer: str = "sgd",
                     lr: float = 0.05, momentum: float = 0.9, weight_decay: float = 0.0, nesterov: bool = False,
                     semantics: str = "auto") -> Graph:
    """One whole training step as one graph, for a compiler that runs it as SambaFlow does in
    sections typed fwd, bwd and opt: the forward pass and loss, the backward pass, and the
    optimizer op updating every weight and its states. Inputs: the batch, its labels (or targets),
    the steps taken before this one ``T`` (0 first) and dropout masks; the weights, optimizer
    states and batch-norm states are the graph's tensors (on chip); outputs: the loss, the
    scores, the new weights, the new optimizer states and the new batch-norm states. The
    learning rate is fixed at compile time, as SambaFlow's is."""
    import json

    from .model_io import as_graph
    from .passes.autodiff import MASKS_KEY, PHASES_KEY, UPDATES_KEY

    _check_settings(loss, optimizer, lr, momentum, weight_decay, 1, batch_size, 0.0, nesterov, semantics)
    graph = as_graph(model)
    semantics = resolve_semantics(model, graph, semantics)
    _warn_lost_layers(graph)
    shape = graph.inputs[0].type.shape if len(graph.inputs) == 1 else None
    if shape is None or not all(isinstance(d, int) for d in shape[1:]):
        raise InputError(f"graph '{graph.name}': a training program needs one input with static per-sample dims")
    out_shape = graph.outputs[0].type.shape or ()
    built = training_graph(graph, tuple(shape[1:]), tuple(out_shape[1:]), batch_size, loss, semantics)
    g = built.graph
    rate = g.add_initializer("learning_rate", np.asarray(lr, np.float32))
    step = g.add_input("T", TensorType(DType.INT64, ()))
    weights = [g.get(n) for n in built.params]
    tensors = {"X": weights, "G": list(built.grads.values())}
    for role in _roles(optimizer)[2:]:
        tensors[role] = [g.add_input(f"{w.name}.{role}", w.type) for w in weights]
    before = {id(n) for n in g.nodes}
    node = _optimizer_node(g, rate, step, tensors, optimizer, momentum, weight_decay, lr, nesterov, semantics)
    g.outputs[:] = [built.loss, built.scores, *node.outputs, *built.updates.values()]
    phases = {o.name: ("bwd" if id(n) in before else "opt") for n in g.nodes if id(n) not in built.forward
              for o in n.outputs}
    g.metadata[PHASES_KEY] = json.dumps(phases)
    kept = [t for role in ["X", *_roles(optimizer)[2:]] for t in tensors[role]]
    updates = {out.name: tensor.name for out, tensor in zip(node.outputs, kept)}
    updates.update({value.name: state for state, value in built.updates.items()})
    g.metadata[UPDATES_KEY] = json.dumps(updates)
    g.metadata[MASKS_KEY] = json.dumps({name: ratio for name, (_, ratio) in built.masks.items()})
    for name, array in {**built.params, **built.states, **built.fixed}.items():  # weights live on chip
        g.inputs.remove(g.get(name))
        g.initializers[name] = array
    for role in _roles(optimizer)[2:]:
        for w in weights:
            g.inputs.remove(g.get(f"{w.name}.{role}"))
            g.initializers[f"{w.name}.{role}"] = np.zeros(w.type.shape, np.float32)
    return g


def compile_training(model: Any, *, batch_size: int, loss: str = "cross-entropy", optimizer: str = "sgd",
                     lr: float = 0.05, momentum: float = 0.9, weight_decay: float = 0.0, nesterov: bool = False,
                     semantics: str = "auto", opt_level: int = 1, **rdu_options: Any):
    """A training program compiled for the RDU (SambaFlow's ``compile`` with an optimizer): its
    sections typed fwd, bwd and opt. Weights change every step, so nothing computed from them is
    folded into a constant at compile time."""
    from .backends import get_backend

    program = training_program(model, batch_size=batch_size, loss=loss, optimizer=optimizer, lr=lr,
                               momentum=momentum, weight_decay=weight_decay, nesterov=nesterov, semantics=semantics)
    passes = [p for p in get_backend("rdu").pipeline(opt_level) if p != "fold"]
    return compile_graph(program, backend="rdu", passes=passes, batch_size=batch_size, **rdu_options)


def train_compiled(exe: Any, x: np.ndarray, y: np.ndarray, *, epochs: int = 1, val_split: float = 0.2, seed: int = 0,
                   skip_nonfinite: bool = False,
                   progress: Callable[[int, int, int, dict[str, float]], None] | None = None) -> list[Epoch]:
    """Train with a compiled training program (an RDU executable or a loaded ``.pef``): its batch,
    its optimizer, bf16 forward and backward with fp32 master weights. Validation runs the program's
    forward on the held-out samples (batch statistics, no update). Non-finite steps as ``train``."""
    graph = exe.graph
    names = [v.name for v in graph.inputs]
    batch, target = graph.inputs[0].type.shape[0], "labels" if "labels" in names else "targets"
    loss = "cross-entropy" if target == "labels" else "mse"
    _check_settings(loss, "sgd", 1.0, 0.0, 0.0, epochs, batch, val_split)
    train_idx, val_idx = _split(len(x), val_split, seed, batch, "the program's batch")
    feed, loss_name, scores_name = graph.inputs[0].name, graph.outputs[0].name, graph.outputs[1].name
    if loss == "cross-entropy":
        check_labels(np.asarray(y), graph.outputs[1].type.shape[-1], scores_name)

    def one_step(xb, yb, t, rng):
        try:
            out = exe.train_step({feed: xb, target: yb, "T": np.int64(t), **dropout_masks(graph, rng)})
        except NonFiniteError as exc:
            raise _NonFiniteStep(str(exc)) from None
        return float(out[loss_name]), out[scores_name]

    def validate():
        losses, hits, count = [], 0, len(val_idx) // batch * batch
        for k in range(0, count, batch):
            chosen = val_idx[k:k + batch]
            out = exe.run({feed: x[chosen], target: y[chosen], "T": np.int64(0), **dropout_masks(graph, None)})
            losses.append(float(out[loss_name]))
            hits += _correct(out[scores_name], y[chosen], loss)
        return float(np.mean(losses)), hits / count if loss == "cross-entropy" else None

    return _epochs(x, y, train_idx, batch, epochs, loss, seed, one_step, progress, skip_nonfinite,
                   validate=validate if len(val_idx) >= batch else None)


def dropout_masks(program: Graph, rng: np.random.Generator | None) -> dict[str, np.ndarray]:
    """The Dropout masks a training program takes: kept at probability 1 − ratio (drawn from
    ``rng``), or with no ``rng`` filled with 1 − ratio, which makes each Dropout an identity (the
    program scales what it keeps by 1 / (1 − ratio)) — a forward-only run in eval form."""
    import json

    from .passes.autodiff import MASKS_KEY

    masks = {}
    for name, ratio in json.loads(program.metadata.get(MASKS_KEY, "{}")).items():
        value = program.get(name)
        shape, dtype = tuple(value.type.shape), value.type.dtype.numpy
        masks[name] = np.full(shape, 1 - ratio, dtype) if rng is None else (rng.random(shape) >= ratio).astype(dtype)
    return masks


def _split(count: int, val_split: float, seed: int, batch: int, what: str) -> tuple[np.ndarray, np.ndarray]:
    """Training and validation indices: a seeded shuffle, the validation share held out."""
    order = np.random.default_rng(seed).permutation(count)
    n_val = int(round(count * val_split))
    if count - n_val < batch:
        raise InputError(f"{count - n_val} training samples are fewer than {what} of {batch}")
    return order[n_val:], order[:n_val]


def _epochs(x: np.ndarray, y: np.ndarray, train_idx: np.ndarray, batch: int, epochs: int, loss: str, seed: int,
            one_step: Callable, progress: Callable | None, skip_nonfinite: bool,
            validate: Callable | None) -> list[Epoch]:
    """The loop both trainers share: each epoch a seeded reshuffle, full batches only (the graph
    has one batch size), ``one_step(x, y, step count, rng) -> (loss, scores)`` per batch, running
    figures to ``progress``, then ``validate() -> (loss, accuracy)``. A step that raises
    ``_NonFiniteStep`` (nothing updated) stops training, or is skipped and counted."""
    rng, history, t = np.random.default_rng(seed + 1), [], 0
    steps = len(train_idx) // batch
    for epoch in range(1, epochs + 1):
        start, losses, hits, skipped = time.perf_counter(), [], 0, 0
        shuffled = rng.permutation(train_idx)
        for k in range(steps):
            chosen = shuffled[k * batch:(k + 1) * batch]
            try:
                value, scores = one_step(x[chosen], y[chosen], t, rng)
            except _NonFiniteStep as exc:
                if not skip_nonfinite:
                    raise NonFiniteError(f"step {t + 1} (epoch {epoch}, batch {k + 1}, samples {chosen[:4].tolist()}"
                                         f"{'…' if len(chosen) > 4 else ''}): {exc} is not finite; training stopped "
                                         f"and nothing written (lower the learning rate or check the data; "
                                         f"skip_nonfinite / --skip-nonfinite leaves such batches out)") from None
                skipped += 1
                continue
            t += 1
            losses.append(value)
            hits += _correct(scores, y[chosen], loss)
            if progress:
                figures = {"loss": float(np.mean(losses))}
                if loss == "cross-entropy":
                    figures["accuracy"] = hits / (len(losses) * batch)
                progress(epoch, len(losses), steps - skipped, figures)
        if not losses:
            raise NonFiniteError(f"epoch {epoch}: every one of its {steps} batches had a non-finite loss, gradient "
                                 f"or update; training stopped and nothing written")
        record = Epoch(epoch, float(np.mean(losses)),
                       hits / (len(losses) * batch) if loss == "cross-entropy" else None, skipped=skipped)
        if validate is not None:
            record.val_loss, record.val_accuracy = validate()
        record.seconds = time.perf_counter() - start
        history.append(record)
    return history


class _NonFiniteStep(Exception):
    """A step met a non-finite tensor (the message names it); nothing was updated."""


def _check_finite(arrays: dict[str, np.ndarray], what: str) -> None:
    for name, array in arrays.items():
        if np.asarray(array).dtype.kind == "f" and not np.isfinite(array).all():
            raise _NonFiniteStep(f"{what} '{name}'")


class _TrainingStep:
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

    def run(self, xb: np.ndarray, yb: np.ndarray, rng: np.random.Generator):
        """(loss, scores, gradients, new batch-norm statistics); ``_NonFiniteStep`` naming the first
        non-finite tensor of the step if the loss, a gradient or a statistic is not finite."""
        feeds = {self.input: xb, self.target: yb, **self.params, **self.states, **self.fixed}
        for name, (shape, ratio) in self.masks.items():
            feeds[name] = (rng.random(shape) >= ratio).astype(xb.dtype)
        out = self.exe.run(feeds)
        loss_name, score_name, grad_names, update_names = self.names
        if not all(np.isfinite(out[n]).all() for n in [loss_name, *grad_names, *update_names]):
            raise _NonFiniteStep(self._first_nonfinite(feeds))
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


def _roles(kind: str) -> list[str]:
    """The tensor roles of the optimizer op: weights, gradients, then its states."""
    return ["X", "G", "V"] + (["H"] if kind != "sgd" else [])


def _optimizer_node(g: Graph, rate: Value, count: Value, tensors: dict[str, list[Value]], kind: str,
                    momentum: float, weight_decay: float, lr: float, nesterov: bool = False,
                    semantics: str = "onnx"):
    """ONNX's Momentum (sgd) or Adam (adam, adamw) op over every weight; outputs the new weights,
    then the new states, typed like them. ``count`` is the number of steps taken before this one;
    the op's T is ``count + 1``, so Adam's bias correction applies from the first step as in torch
    (ONNX's op skips it at T = 0). With torch's semantics Adam adds ε where torch.optim does and
    AdamW decays the weights before the step; with ONNX's, as its Adam op does
    (``norm_coefficient_post`` after the step)."""
    from .passes.autodiff import Builder

    b = Builder(g, tag="opt")
    step = b.op("Add", count, b.const(np.asarray(1, np.int64)), shape=())
    if kind == "sgd":
        op, attrs = "Momentum", {"alpha": momentum, "beta": 1.0, "norm_coefficient": weight_decay,
                                 "mode": "nesterov" if nesterov else "standard"}
    elif semantics == "onnx":
        decay = {"norm_coefficient": weight_decay} if kind == "adam" else {"norm_coefficient_post": lr * weight_decay}
        op, attrs = "Adam", {"alpha": ADAM_BETAS[0], "beta": ADAM_BETAS[1], "epsilon": ADAM_EPSILON, **decay}
    else:
        op, attrs = "Adam", {"alpha": ADAM_BETAS[0], "beta": ADAM_BETAS[1], "epsilon": ADAM_EPSILON}
        tensors = _torch_adam(b, step, tensors, kind, lr, weight_decay)
    roles = _roles(kind)
    count_of = len(tensors["X"])
    kept = ["X", *roles[2:]]
    outs = [f"{r}{i}_new" for r in kept for i in range(count_of)]
    node = g.add_node(op, [rate, step, *(v for r in roles for v in tensors[r])], outs, attrs, domain=TRAINING_DOMAIN)
    for out, source in zip(node.outputs, [v for r in kept for v in tensors[r]]):
        out.type = source.type
    return node


def _torch_adam(b: Any, step: Value, tensors: dict[str, list[Value]], kind: str, lr: float,
                weight_decay: float) -> dict[str, list[Value]]:
    """ONNX's Adam op fed so that it takes torch.optim's step. torch adds ε to √v̂ = √v / √(1 − β₂ᵀ),
    the op to √v: the op gets the gradients times s = 1 / √(1 − β₂ᵀ) and keeps its states in that
    scale (rescaled by s / s_prev each step), which moves its ε where torch's is. L2 decay (adam)
    joins the gradient before the scaling; AdamW decays the weights before the step."""
    beta = ADAM_BETAS[1]
    t = b.op("Cast", step, attrs={"to": DType.FLOAT32.onnx}, dtype="float32")

    def scale(power: Value) -> Value:  # 1 / sqrt(max(1 − β^power, tiny)): finite at power 0
        left = b.op("Sub", b.const(np.float32(1)), b.op("Pow", b.const(np.float32(beta)), power))
        return b.op("Reciprocal", b.op("Sqrt", b.op("Max", left, b.const(np.float32(1e-30)))))

    now = scale(t)
    ratio = b.op("Div", now, scale(b.op("Sub", t, b.const(np.float32(1)))))
    ratio2 = b.op("Mul", ratio, ratio)
    xs, gs = tensors["X"], tensors["G"]
    if kind == "adam" and weight_decay:
        gs = [b.op("Add", g, b.op("Mul", x, b.const(np.float32(weight_decay))), like=g) for x, g in zip(xs, gs)]
    if kind == "adamw" and weight_decay:
        xs = [b.op("Mul", x, b.const(np.float32(1 - lr * weight_decay)), like=x) for x in xs]
    return {"X": xs, "G": [b.op("Mul", g, now, like=g) for g in gs],
            "V": [b.op("Mul", v, ratio, like=v) for v in tensors["V"]],
            "H": [b.op("Mul", h, ratio2, like=h) for h in tensors["H"]]}


class _Optimizer:
    """One step of ONNX's Momentum (SGD) or Adam op over all weights at once, compiled once."""

    def __init__(self, params: dict[str, np.ndarray], kind: str, momentum: float, weight_decay: float, lr: float,
                 nesterov: bool = False, semantics: str = "onnx"):
        self.lr, self.kind = lr, kind
        g = Graph("optimizer")
        rate = g.add_input("R", TensorType(DType.FLOAT32, ()))
        step = g.add_input("T", TensorType(DType.INT64, ()))
        tensors = {r: [g.add_input(f"{r}{i}", TensorType(DType.from_numpy(a.dtype), a.shape))
                       for i, a in enumerate(params.values())] for r in _roles(kind)}
        g.outputs[:] = list(_optimizer_node(g, rate, step, tensors, kind, momentum, weight_decay, lr, nesterov,
                                            semantics).outputs)
        self.state = {r: [np.zeros_like(a) for a in params.values()] for r in _roles(kind)[2:]}
        self.exe = compile_graph(g, backend="reference", passes=[])

    def apply(self, params: dict[str, np.ndarray], grads: list[np.ndarray], t: int) -> None:
        params.update(self.step(params, grads, t))

    def step(self, params: dict[str, np.ndarray], grads: list[np.ndarray], t: int) -> dict[str, np.ndarray]:
        """The new weights after ``t`` steps taken (the optimizer's states move on)."""
        feeds = {"R": np.float32(self.lr), "T": np.int64(t)}
        for i, (array, grad) in enumerate(zip(params.values(), grads)):
            feeds[f"X{i}"], feeds[f"G{i}"] = array, grad
        for role, arrays in self.state.items():
            feeds.update({f"{role}{i}": a for i, a in enumerate(arrays)})
        out = self.exe.run(feeds)
        new = {name: out[f"X{i}_new"] for i, name in enumerate(params)}
        _check_finite(new, "the new weight")  # before the states move on: a skipped step leaves no trace
        for role, arrays in self.state.items():
            self.state[role] = [out[f"{role}{i}_new"] for i in range(len(arrays))]
        return new


class _Evaluation:
    """The model in inference form over the whole validation set, fed the current weights."""

    def __init__(self, graph: Graph, sample: tuple, count: int, step: _TrainingStep):
        eg, _ = _pinned(graph, sample, count)
        self.scores = _logits(eg)
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


def plot_history(history: list[Epoch], path: str | os.PathLike, title: str = "training") -> Path:
    """Loss (left) and accuracy (right) per epoch, training and validation, as a PNG."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    epochs = [e.epoch for e in history]
    fig, (left, right) = plt.subplots(1, 2, figsize=(10, 4), constrained_layout=True)
    left.plot(epochs, [e.loss for e in history], "o-", label="training")
    if any(e.val_loss is not None for e in history):
        left.plot(epochs, [e.val_loss for e in history], "s-", label="validation")
    left.set(xlabel="epoch", ylabel="loss", title=f"{title}: loss")
    left.legend()
    if any(e.accuracy is not None for e in history):
        right.plot(epochs, [100 * e.accuracy for e in history], "o-", label="training")
        if any(e.val_accuracy is not None for e in history):
            right.plot(epochs, [100 * e.val_accuracy for e in history], "s-", label="validation")
        right.set(xlabel="epoch", ylabel="accuracy (%)", title=f"{title}: accuracy", ylim=(0, 100))
        right.legend()
    else:
        right.axis("off")
    from .fileio import atomic_write

    with atomic_write(path, "wb") as fh:
        fig.savefig(fh, format="png", dpi=110)
    plt.close(fig)
    return Path(path)
