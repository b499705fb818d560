"""What training accepts, checked before any work: its settings, the data against the model (samples,
labels, token ids), and the finiteness of each step's tensors. Also whose semantics it follows
where ONNX's and torch's differ."""

from __future__ import annotations

import math
import os
from typing import Any

import numpy as np

from ..base.errors import InputError, NNBridgeWarning
from ..converters.pytorch import FRAMEWORK_KEY, LOST_LAYERS_KEY
from ..ir import Graph

LOSSES = ("cross-entropy", "mse")


OPTIMIZERS = ("sgd", "adam", "adamw")


#: whose definitions training follows where ONNX's and torch's differ (docs/training.md): "torch"
#: (BatchNorm's running variance unbiased, Adam's ε added to √v̂, AdamW's decay before the step),
#: "onnx" (the biased variance of ONNX's BatchNormalization, ε added to √v and the decay after the
#: step as ONNX's Adam op has them), or "auto": torch's for a model that came from torch, else ONNX's
SEMANTICS = ("auto", "torch", "onnx")


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


def check_training_algorithm(graph: Graph) -> None:
    """An LBANN experiment that trains with another algorithm (K-FAC, LTFB) is refused: training it
    with first-order descent would not be what the file says."""
    from ..converters.lbann.experiment import foreign_algorithm

    if (why := foreign_algorithm(graph)) is not None:
        raise InputError(why)


def warn_lost_layers(graph: Graph) -> None:
    lost = graph.metadata.get(LOST_LAYERS_KEY)
    if lost:
        import warnings

        warnings.warn(f"graph '{graph.name}' was exported from torch for inference, which leaves out or folds its "
                      f"{lost}; export it with from_torch(..., for_training=True) to train those layers",
                      NNBridgeWarning, stacklevel=3)


def check_settings(loss, optimizer, lr, momentum, weight_decay, epochs, batch_size, val_split, nesterov=False,
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


def check_data(graph: Graph, x: np.ndarray, y: np.ndarray, loss: str) -> tuple[np.ndarray, np.ndarray]:
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


class NonFiniteStep(Exception):
    """A step met a non-finite tensor (the message names it); nothing was updated."""


class CheckedOnce:
    """An executable's run whose feeds are checked (``match_inputs``) on the first call only: a
    training loop feeds the same names, dtypes and shapes every step (its own weights, full batches
    of data checked once, masks it draws), and the check cost as much as a small model's kernels."""

    def __init__(self, exe: Any):
        self.exe, self.names, self.checked = exe, [v.name for v in exe.graph.outputs], False

    def __call__(self, feeds: dict[str, Any]) -> dict[str, Any]:
        if not self.checked:
            out = self.exe.run(feeds)
            self.checked = True
            return out
        return dict(zip(self.names, self.exe.plan.execute(feeds)))


def all_finite(array: np.ndarray) -> bool:
    """Whether every element is finite: a NaN or an infinity makes the sum non-finite, so one
    summing pass (no mask array) settles the usual case; a non-finite sum is checked element by
    element, since finite values may overflow it."""
    array = np.asarray(array)
    if array.dtype.kind != "f":
        return True
    with np.errstate(over="ignore", invalid="ignore"):  # an overflowing or NaN sum is an answer, not a warning
        total = np.add.reduce(array, axis=None)
    return bool(np.isfinite(total)) or bool(np.isfinite(array).all())


def check_finite(arrays: dict[str, np.ndarray], what: str) -> None:
    for name, array in arrays.items():
        if not all_finite(array):
            raise NonFiniteStep(f"{what} '{name}'")
