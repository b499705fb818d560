"""A Python API in SambaFlow's spirit: compile (from ONNX or a torch module), run, measure.

    from nnbridge import sambaflow
    program = sambaflow.compile("model.onnx", preset="sn40l", mode="o1", batch_size=16, pef="model.pef")
    outputs = sambaflow.run(program, {"input": x}, section_types=["fwd"])
    perf = sambaflow.measure_performance(program, batch_size=64)

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


def compile(model: Any, example_inputs: Sequence[Any] | None = None, *, mode: str = "o1",
            preset: str = DEFAULT_PRESET, batch_size: int = 1, micro_batch: int = 1, opt_level: int = 1,
            pef: str | os.PathLike | None = None, **machine_overrides: Any) -> RduExecutable:
    """Compile an ONNX model (path, ModelProto, Graph) or a torch module; optionally write the PEF."""
    import nnbridge

    if is_torch_module(model):
        model = from_torch(model, example_inputs)
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
    """Run the forward sections; inputs by name or in the model's input order (numpy or torch)."""
    unknown = [s for s in section_types if s not in SECTION_TYPES]
    if unknown:
        raise InputError(f"section types {unknown} are not simulated; the RDU backend compiles "
                         "inference programs (section_types=['fwd'])")
    if not isinstance(inputs, Mapping):
        inputs = list(inputs)
        if len(inputs) != len(program.input_names):
            raise InputError(f"{len(inputs)} inputs given; the model takes {program.input_names}")
        inputs = dict(zip(program.input_names, inputs))
    return program.run({name: _as_numpy(value) for name, value in inputs.items()})


def measure_performance(program: RduExecutable | Any, batch_size: int | None = None,
                        micro_batch: int | None = None, **compile_options: Any) -> dict[str, Any]:
    """Throughput (samples/s), latency and utilisation from the performance model."""
    if not isinstance(program, RduExecutable):
        program = compile(program, **compile_options)
    return program.measure_performance(batch_size, micro_batch).to_dict()


def _as_numpy(value: Any) -> Any:
    if hasattr(value, "detach") and hasattr(value, "numpy"):
        return value.detach().cpu().numpy()
    return value
