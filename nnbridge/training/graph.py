"""One training step as a graph: the model pinned to a batch size with its weights as inputs, its
training form (BatchNorm's batch statistics, Dropout's masks), a loss and every weight's gradient
(``passes/autodiff``)."""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from ..base.errors import InputError
from ..ir import DType, Graph, TensorType, Value


def redeclared(graph: Graph, sample: tuple, batch: int, infer: bool = True) -> Graph:
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
    from ..passes import run_passes
    from ..passes.manager import Fixpoint

    # shape arithmetic on static shapes → constants, and an If on such a condition → its branch (torch
    # exports squeeze(1) of a dynamic dim as one: the If's captured values would hide a path from autodiff)
    run_passes(graph, [Fixpoint("infer-shapes", "fold", "fold-branches")])


def pinned(graph: Graph, sample: tuple, batch: int) -> tuple[Graph, dict[str, np.ndarray]]:
    """A copy for one batch size whose float tensors are inputs (fed each step, so nothing derived
    from a weight is precomputed), shape arithmetic folded and every shape inferred again; returns
    it and the tensors' values."""
    graph = redeclared(graph, sample, batch, infer=False)
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


def logits(graph: Graph) -> Value:
    """The scores a classifier's loss starts from: the input of a final Softmax (a stable loss)."""
    out = graph.outputs[0]
    node = out.producer
    return node.inputs[0] if node is not None and node.op == "Softmax" and not node.domain else out


@dataclass(kw_only=True)
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
    from ..passes.autodiff import gradients, training_form

    tg, weights = pinned(graph, sample, batch)
    form = training_form(tg, unbiased_running_var=semantics == "torch")
    scores = logits(tg)
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
    return TrainingGraph(graph=tg, params=params, states=states, fixed=fixed, masks=masks, loss=value, scores=scores,
                         grads=grads, updates=dict(form.updates),
                         target="labels" if loss == "cross-entropy" else "targets", forward=forward)
