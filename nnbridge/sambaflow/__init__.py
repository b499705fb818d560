"""A Python API in SambaFlow's spirit: compile (from ONNX or a torch module), run, measure.

    from nnbridge import sambaflow
    program = sambaflow.compile("model.onnx", preset="sn40l", mode="o1", batch_size=16, pef="model.pef")
    outputs = sambaflow.run(program, {"input": x}, section_types=["fwd"])
    perf = sambaflow.measure_performance(program, batch_size=64)

    # training: an optimizer at compile time (a name, or a torch.optim optimizer for its settings)
    program = sambaflow.compile(module, [x], optimizer=torch.optim.SGD(module.parameters(), lr=0.05), batch_size=32)
    for x, y in batches:
        outputs = sambaflow.run(program, [x, y])      # one step: fwd, bwd and opt ("bckwd" also names bwd)

    # SambaFlow's own form: forward(x, y) returns (loss, scores) and is traced with inputs (X, Y)
    program = sambaflow.compile(model, (X, Y), optimizer)

torch is optional: a ``torch.nn.Module`` with example inputs is exported to ONNX with
``torch.onnx.export`` (imported only when a module is given). This module sits above
the layers (like ``nnbridge.smaug`` and ``nnbridge.lbann``): it uses a converter and a backend.
"""

from __future__ import annotations

import os
from collections.abc import Mapping, Sequence
from typing import Any

import numpy as np

from ..backends.rdu.backend import RduExecutable, load_pef
from ..backends.rdu.presets import DEFAULT_PRESET
from ..base.errors import InputError, NonFiniteError
from ..converters.pytorch import from_torch, is_torch_module
from ..training import check_labels, dropout_masks

SECTION_TYPES = ("fwd",)
TRAINING_SECTION_TYPES = ("fwd", "bwd", "opt")
SECTION_SPELLINGS = {"bckwd": "bwd"}  # SambaFlow's examples spell the backward section both ways


def compile(model: Any, example_inputs: Sequence[Any] | None = None, optimizer: Any = None, *, mode: str = "o1",
            preset: str = DEFAULT_PRESET, batch_size: int | None = None, micro_batch: int | None = None,
            opt_level: int = 1, loss: str | None = None, inference: bool | None = None,
            pef: str | os.PathLike | None = None,
            **machine_overrides: Any) -> RduExecutable:
    """Compile an ONNX model (path, ModelProto, Graph) or a torch module; optionally write the PEF.
    With an ``optimizer`` ("sgd", "adam", "adamw", a dict of those settings, or a torch.optim
    optimizer) the program is a training step (fwd, bwd and opt sections); ``inference=True``
    compiles the forward pass only. A module whose ``forward(x, y)`` returns ``(loss, scores)``
    (SambaFlow's form) is traced with ``example_inputs=(X, Y)``: its scores, with its loss
    recognised as cross-entropy or mse. ``batch_size`` defaults to the example inputs' first dim."""
    import nnbridge

    training = optimizer is not None and not inference
    if batch_size is None:
        first = next(iter(example_inputs or ()), None)
        batch_size = int(first.shape[0]) if getattr(first, "shape", None) else 1
    if is_torch_module(model):
        model, own_loss, traced = _scores_of(model, example_inputs)
        loss = loss or own_loss
        model = from_torch(model, traced) if not training else nnbridge.from_torch(model, traced, for_training=True)
    loss = loss or "cross-entropy"
    if training:
        from ..training import compile_training

        program = compile_training(model, batch_size=batch_size, loss=loss, opt_level=opt_level, mode=mode,
                                   preset=preset, micro_batch=micro_batch, **_optimizer_settings(optimizer),
                                   **machine_overrides)
    else:
        program = nnbridge.compile(model, backend="rdu", opt_level=opt_level, mode=mode, preset=preset,
                                   batch_size=batch_size, micro_batch=micro_batch, **machine_overrides)
    if pef is not None:
        program.save(pef)
    return program


def load(path: str | os.PathLike) -> RduExecutable:
    """A compiled program from its PEF artifact (integrity-checked)."""
    return load_pef(path)


def run(program: RduExecutable, inputs: Mapping[str, Any] | Sequence[Any],
        section_types: Sequence[str] | None = None) -> dict[str, np.ndarray]:
    """Run the program; inputs by name or in the program's input order (numpy or torch). A training
    program takes the batch, its labels and the steps taken ``T`` (counted for you when left out)
    and by default takes one training step (``["fwd", "bwd", "opt"]``: the weights change);
    ``["fwd"]`` only computes the loss and scores."""
    kinds = _section_kinds(program, section_types)
    if not isinstance(inputs, Mapping):
        inputs = _by_name(program, list(inputs))
    feeds = {name: _as_numpy(value) for name, value in inputs.items()}
    if not program.training:
        return program.run(feeds)
    return _training_run(program, feeds, kinds)


def _section_kinds(program: RduExecutable, section_types: Sequence[str] | None) -> tuple[str, ...]:
    """The section types asked for (SambaFlow's spellings normalised), refused unless the program
    runs them: the forward pass, or (a training program) the whole step."""
    if section_types is None:
        section_types = TRAINING_SECTION_TYPES if program.training else SECTION_TYPES
    kinds = tuple(dict.fromkeys(SECTION_SPELLINGS.get(k, k) for k in section_types))
    allowed = (SECTION_TYPES, TRAINING_SECTION_TYPES) if program.training else (SECTION_TYPES,)
    if kinds not in allowed:
        raise InputError(f"section types {list(section_types)}: this {'training' if program.training else 'inference'}"
                         f" program runs {' or '.join(str(list(a)) for a in allowed)}")
    return kinds


def _by_name(program: RduExecutable, inputs: list[Any]) -> dict[str, Any]:
    """Inputs given in the program's input order, by name (a training program's step count and
    Dropout masks may be left out)."""
    names = program.input_names
    if program.training:
        optional = {"T", *dropout_masks(program.graph, None)}
        required = [n for n in names if n not in optional]
        names = required if len(inputs) == len(required) else names
    if len(inputs) != len(names):
        raise InputError(f"{len(inputs)} inputs given; the program takes {program.input_names}")
    return dict(zip(names, inputs))


def _training_run(program: RduExecutable, feeds: dict[str, np.ndarray],
                  kinds: tuple[str, ...]) -> dict[str, np.ndarray]:
    """A training program's run: one step (the weights change, ``steps`` counts it) or the forward
    pass alone (Dropout off); the step count and Dropout masks are filled in where left out."""
    feeds.setdefault("T", np.int64(program.steps))
    masks = dropout_masks(program.graph, np.random.default_rng(program.steps)
                          if kinds == TRAINING_SECTION_TYPES else None)  # forward only: Dropout off
    feeds.update({name: mask for name, mask in masks.items() if name not in feeds})
    if "labels" in feeds:
        check_labels(np.asarray(feeds["labels"]), program.graph.outputs[1].type.shape[-1], program.output_names[1])
    if kinds != TRAINING_SECTION_TYPES:
        return program.run(feeds)
    try:
        outputs = program.train_step(feeds)
    except NonFiniteError as exc:
        raise NonFiniteError(f"step {program.steps + 1}: {exc} is not finite; the step was not applied "
                             f"(lower the learning rate or check the batch)") from None
    program.steps += 1
    return outputs


def measure_performance(program: RduExecutable | Any, batch_size: int | None = None,
                        micro_batch: int | None = None, **compile_options: Any) -> dict[str, Any]:
    """Throughput (samples/s), latency and utilisation from the performance model."""
    if not isinstance(program, RduExecutable):
        program = compile(program, **compile_options)
    return program.measure_performance(batch_size, micro_batch).to_dict()


def _scores_of(module: Any, example_inputs: Sequence[Any] | None) -> tuple[Any, str | None, Sequence[Any] | None]:
    """SambaFlow's form — ``forward(x, y)`` returning ``(loss, scores)`` — as a module of ``x``
    giving the scores, the loss it computes ("cross-entropy" or "mse", recognised by value) and the
    inputs to trace it with; a module of one input given ``(X, Y)`` traced with X (Y: its labels);
    any other module as it is."""
    import inspect

    inputs = list(example_inputs or ())
    if len(inputs) != 2:
        return module, None, example_inputs
    try:
        takes = [p for p in inspect.signature(module.forward).parameters.values()
                 if p.kind in (p.POSITIONAL_ONLY, p.POSITIONAL_OR_KEYWORD) and p.default is p.empty]
    except (TypeError, ValueError):
        takes = inputs
    if len(takes) == 1:
        return module, None, inputs[:1]
    import torch

    with torch.no_grad():
        try:
            result = module(*inputs)
        except Exception as exc:
            raise InputError(f"{type(module).__name__}(x, y) failed on the example inputs: {exc}") from None
    if not (isinstance(result, (tuple, list)) and len(result) == 2 and result[0].dim() == 0):
        return module, None, example_inputs
    own, scores = result
    target = inputs[1]
    known = {}
    if not target.is_floating_point() and scores.dim() == 2:
        known["cross-entropy"] = torch.nn.functional.cross_entropy(scores, target)
    if target.shape == scores.shape and target.is_floating_point():
        known["mse"] = torch.nn.functional.mse_loss(scores, target)
    loss = next((name for name, value in known.items() if torch.allclose(value, own, rtol=1e-5, atol=1e-6)), None)
    if loss is None:
        raise InputError(f"{type(module).__name__} returns its own loss ({float(own):.6g}), which is neither "
                         f"cross-entropy nor mse of its scores; return the scores and compile with loss=")

    class ScoresOf(torch.nn.Module):
        def __init__(self):
            super().__init__()
            self.model = module

        def forward(self, x):
            return self.model(x, target)[1]

    return ScoresOf(), loss, inputs[:1]


def _optimizer_settings(optimizer: Any) -> dict[str, Any]:
    """``optimizer``: "sgd" / "adam" / "adamw", a dict with ``name`` and settings, or a torch.optim
    SGD / Adam / AdamW whose first parameter group gives the learning rate, momentum, Nesterov and
    decay; a setting nnbridge does not follow (other betas or eps, AMSGrad, dampening, maximize,
    several parameter groups) is refused."""
    if isinstance(optimizer, str):
        return {"optimizer": optimizer}
    if isinstance(optimizer, Mapping):
        settings = dict(optimizer)
        return {"optimizer": settings.pop("name", "sgd"), **settings}
    kind = type(optimizer).__name__.lower()
    groups = getattr(optimizer, "param_groups", None)
    if kind not in ("sgd", "adam", "adamw") or not groups:
        raise InputError(f"optimizer {type(optimizer).__name__}: give 'sgd', 'adam', 'adamw', a dict, or a "
                         f"torch.optim SGD/Adam/AdamW")
    group = groups[0]
    if kind == "adam" and group.get("decoupled_weight_decay"):  # torch's Adam(..., decoupled_weight_decay=True)
        kind = "adamw"
    expected = {"dampening": 0, "maximize": False, "amsgrad": False, "betas": (0.9, 0.999), "eps": 1e-8}
    different = [f"{key}={group[key]}" for key, value in expected.items() if key in group and group[key] != value]
    if len(groups) > 1:
        different.append(f"{len(groups)} parameter groups")
    if different:
        raise InputError(f"optimizer {type(optimizer).__name__}: {', '.join(different)} is not followed by nnbridge's "
                         f"training (it takes lr, momentum, nesterov, weight_decay; docs/training.md)")
    return {"optimizer": kind, "lr": float(group["lr"]), "momentum": float(group.get("momentum", 0.0)),
            "nesterov": bool(group.get("nesterov", False)), "weight_decay": float(group.get("weight_decay", 0.0))}


def _as_numpy(value: Any) -> Any:
    if hasattr(value, "detach") and hasattr(value, "numpy"):
        return value.detach().cpu().numpy()
    return value
