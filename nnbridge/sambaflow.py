"""A Python API in SambaFlow's spirit: compile (from ONNX or a torch module), run, measure.

    from nnbridge import sambaflow
    program = sambaflow.compile("model.onnx", preset="sn40l", mode="o1", batch_size=16, pef="model.pef")
    outputs = sambaflow.run(program, {"input": x}, section_types=["fwd"])
    perf = sambaflow.measure_performance(program, batch_size=64)

    # training: an optimizer at compile time (a name, or a torch.optim optimizer for its settings)
    program = sambaflow.compile(module, [x], optimizer=torch.optim.SGD(module.parameters(), lr=0.05), batch_size=32)
    for x, y in batches:
        outputs = sambaflow.run(program, [x, y], section_types=["fwd", "bwd", "opt"])   # one step

torch is optional: a ``torch.nn.Module`` with example inputs is exported to ONNX with
``torch.onnx.export`` (imported only when a module is given). This module sits above
the layers (like ``nnbridge.smaug`` and ``nnbridge.lbann``): it uses a converter and a backend.
"""

from __future__ import annotations

import os
from collections.abc import Mapping, Sequence
from typing import Any

import numpy as np

from .backends.rdu.backend import RduExecutable, load_pef
from .backends.rdu.presets import DEFAULT_PRESET
from .converters.pytorch import from_torch, is_torch_module
from .errors import InputError

SECTION_TYPES = ("fwd",)
TRAINING_SECTION_TYPES = ("fwd", "bwd", "opt")


def compile(model: Any, example_inputs: Sequence[Any] | None = None, optimizer: Any = None, *, mode: str = "o1",
            preset: str = DEFAULT_PRESET, batch_size: int = 1, micro_batch: int | None = None, opt_level: int = 1,
            loss: str = "cross-entropy", inference: bool | None = None, pef: str | os.PathLike | None = None,
            **machine_overrides: Any) -> RduExecutable:
    """Compile an ONNX model (path, ModelProto, Graph) or a torch module; optionally write the PEF.
    With an ``optimizer`` ("sgd", "adam", "adamw", a dict of those settings, or a torch.optim
    optimizer) the program is a training step (fwd, bwd and opt sections); ``inference=True``
    compiles the forward pass only."""
    import nnbridge

    training = optimizer is not None and not inference
    if is_torch_module(model):
        model = from_torch(model, example_inputs) if not training else \
            nnbridge.from_torch(model, example_inputs, for_training=True)
    if training:
        from .training import compile_training

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
        section_types: Sequence[str] = SECTION_TYPES) -> dict[str, np.ndarray]:
    """Run the program; inputs by name or in the program's input order (numpy or torch). A training
    program takes the batch, its labels and the step count ``T`` (counted for you when left out):
    ``["fwd"]`` computes the loss and scores, ``["fwd", "bwd", "opt"]`` also updates the weights."""
    kinds = tuple(dict.fromkeys(section_types))
    allowed = (SECTION_TYPES, TRAINING_SECTION_TYPES) if program.training else (SECTION_TYPES,)
    if kinds not in allowed:
        raise InputError(f"section types {list(section_types)}: this {'training' if program.training else 'inference'}"
                         f" program runs {' or '.join(str(list(a)) for a in allowed)}")
    if not isinstance(inputs, Mapping):
        inputs = list(inputs)
        names = program.input_names
        if program.training and len(inputs) == len(names) - 1:  # the step count is left to us
            names = [n for n in names if n != "T"]
        if len(inputs) != len(names):
            raise InputError(f"{len(inputs)} inputs given; the program takes {program.input_names}")
        inputs = dict(zip(names, inputs))
    feeds = {name: _as_numpy(value) for name, value in inputs.items()}
    if not program.training:
        return program.run(feeds)
    feeds.setdefault("T", np.int64(program.steps))
    if kinds == TRAINING_SECTION_TYPES:
        program.steps += 1
        return program.train_step(feeds)
    return program.run(feeds)


def measure_performance(program: RduExecutable | Any, batch_size: int | None = None,
                        micro_batch: int | None = None, **compile_options: Any) -> dict[str, Any]:
    """Throughput (samples/s), latency and utilisation from the performance model."""
    if not isinstance(program, RduExecutable):
        program = compile(program, **compile_options)
    return program.measure_performance(batch_size, micro_batch).to_dict()


def _optimizer_settings(optimizer: Any) -> dict[str, Any]:
    """``optimizer``: "sgd" / "adam" / "adamw", a dict with ``name`` and settings, or a torch.optim
    SGD / Adam / AdamW whose first parameter group gives the learning rate, momentum and decay."""
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
    return {"optimizer": kind, "lr": float(group["lr"]), "momentum": float(group.get("momentum", 0.0)),
            "weight_decay": float(group.get("weight_decay", 0.0))}


def _as_numpy(value: Any) -> Any:
    if hasattr(value, "detach") and hasattr(value, "numpy"):
        return value.detach().cpu().numpy()
    return value
