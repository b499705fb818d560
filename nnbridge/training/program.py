"""A whole training step as one program for the RDU, as SambaFlow compiles it (sections typed fwd,
bwd and opt), and the loop that trains with a compiled program."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import numpy as np

from ..api.compiler import compile as compile_graph
from ..base.errors import InputError, NonFiniteError
from ..ir import DType, Graph, TensorType
from .checks import (
    NonFiniteStep,
    check_labels,
    check_settings,
    check_training_algorithm,
    resolve_semantics,
    warn_lost_layers,
)
from .data import split_indices
from .graph import training_graph
from .loop import Epoch, correct_count, run_epochs
from .optimizer import optimizer_node, optimizer_roles


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

    from ..api.model_io import as_graph
    from ..passes.autodiff import MASKS_KEY, PHASES_KEY, UPDATES_KEY

    check_settings(loss, optimizer, lr, momentum, weight_decay, 1, batch_size, 0.0, nesterov, semantics)
    graph = as_graph(model)
    semantics = resolve_semantics(model, graph, semantics)
    warn_lost_layers(graph)
    check_training_algorithm(graph)
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
    for role in optimizer_roles(optimizer)[2:]:
        tensors[role] = [g.add_input(f"{w.name}.{role}", w.type) for w in weights]
    before = {id(n) for n in g.nodes}
    node = optimizer_node(g, rate, step, tensors, optimizer, momentum, weight_decay, lr, nesterov, semantics)
    g.outputs[:] = [built.loss, built.scores, *node.outputs, *built.updates.values()]
    phases = {o.name: ("bwd" if id(n) in before else "opt") for n in g.nodes if id(n) not in built.forward
              for o in n.outputs}
    g.metadata[PHASES_KEY] = json.dumps(phases)
    kept = [t for role in ["X", *optimizer_roles(optimizer)[2:]] for t in tensors[role]]
    updates = {out.name: tensor.name for out, tensor in zip(node.outputs, kept)}
    updates.update({value.name: state for state, value in built.updates.items()})
    g.metadata[UPDATES_KEY] = json.dumps(updates)
    g.metadata[MASKS_KEY] = json.dumps({name: ratio for name, (_, ratio) in built.masks.items()})
    for name, array in {**built.params, **built.states, **built.fixed}.items():  # weights live on chip
        g.inputs.remove(g.get(name))
        g.initializers[name] = array
    for role in optimizer_roles(optimizer)[2:]:
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
    from ..backends import get_backend

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
    check_settings(loss, "sgd", 1.0, 0.0, 0.0, epochs, batch, val_split)
    train_idx, val_idx = split_indices(len(x), val_split, seed, batch, "the program's batch")
    feed, loss_name, scores_name = graph.inputs[0].name, graph.outputs[0].name, graph.outputs[1].name
    if loss == "cross-entropy":
        check_labels(np.asarray(y), graph.outputs[1].type.shape[-1], scores_name)

    def one_step(xb, yb, t, rng):
        try:
            out = exe.train_step({feed: xb, target: yb, "T": np.int64(t), **dropout_masks(graph, rng)})
        except NonFiniteError as exc:
            raise NonFiniteStep(str(exc)) from None
        return float(out[loss_name]), out[scores_name]

    def validate():
        losses, hits, count = [], 0, len(val_idx) // batch * batch
        for k in range(0, count, batch):
            chosen = val_idx[k:k + batch]
            out = exe.run({feed: x[chosen], target: y[chosen], "T": np.int64(0), **dropout_masks(graph, None)})
            losses.append(float(out[loss_name]))
            hits += correct_count(out[scores_name], y[chosen], loss)
        return float(np.mean(losses)), hits / count if loss == "cross-entropy" else None

    return run_epochs(x, y, train_idx, batch, epochs, loss, seed, one_step, progress, skip_nonfinite,
                   validate=validate if len(val_idx) >= batch else None)


def dropout_masks(program: Graph, rng: np.random.Generator | None) -> dict[str, np.ndarray]:
    """The Dropout masks a training program takes: kept at probability 1 − ratio (drawn from
    ``rng``), or with no ``rng`` filled with 1 − ratio, which makes each Dropout an identity (the
    program scales what it keeps by 1 / (1 − ratio)) — a forward-only run in eval form."""
    import json

    from ..passes.autodiff import MASKS_KEY

    masks = {}
    for name, ratio in json.loads(program.metadata.get(MASKS_KEY, "{}")).items():
        value = program.get(name)
        shape, dtype = tuple(value.type.shape), value.type.dtype.numpy
        masks[name] = np.full(shape, 1 - ratio, dtype) if rng is None else (rng.random(shape) >= ratio).astype(dtype)
    return masks
