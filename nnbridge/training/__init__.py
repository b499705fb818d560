"""Training on the reference backend: the model's training graph (forward, loss, gradients from
``passes/autodiff``) and an optimizer graph of ONNX's training ops (``Momentum`` for SGD, ``Adam``
for Adam/AdamW, run by the shared kernels) are compiled once and stepped over seeded, shuffled
mini-batches; the same seed gives the same weights. Training programs for the RDU are the same
step as one graph (``program``).

    result = nnbridge.train("cnn.onnx", x, y, loss="cross-entropy", optimizer="sgd", lr=0.05, epochs=10)
    result.save("trained.onnx")          # or .prototext / _topo.pbtxt: the trained weights go along

Modules: ``checks`` (settings, data, finiteness), ``data``, ``graph`` (the training graph),
``optimizer``, ``loop`` (``train``), ``program`` (RDU training programs), ``plot``.
"""

from .checks import LOSSES, OPTIMIZERS, SEMANTICS, check_labels, resolve_semantics
from .data import digits, load_data
from .graph import TrainingGraph, training_graph
from .loop import Epoch, TrainingStep, TrainResult, train
from .optimizer import ADAM_BETAS, ADAM_EPSILON, Optimizer
from .plot import plot_history
from .program import compile_training, dropout_masks, train_compiled, training_program

__all__ = [
    "LOSSES", "OPTIMIZERS", "SEMANTICS", "ADAM_BETAS", "ADAM_EPSILON", "Epoch", "TrainResult", "TrainingGraph",
    "TrainingStep", "Optimizer", "check_labels", "compile_training", "digits", "dropout_masks", "load_data",
    "plot_history", "resolve_semantics", "train", "train_compiled", "training_graph", "training_program",
]
