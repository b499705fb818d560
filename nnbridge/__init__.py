"""nnbridge: ONNX ↔ SMAUG ↔ LBANN conversion, a numpy reference backend, and
SMV / RDU accelerator simulators, cross-checked against onnxruntime.

    import nnbridge
    graph = nnbridge.load("model.onnx")
    exe = nnbridge.compile(graph, backend="reference")
    outputs = exe.run({"input": x})
    result = nnbridge.check("model.onnx", backend="smv")
"""

from __future__ import annotations

import os
from collections.abc import Mapping, Sequence
from typing import Any

import numpy as np
from onnx import ModelProto

from .api.compiler import compile, run
from .api.threads import cpu_threads
from .base.errors import (
    FormatError,
    InputError,
    NNBridgeError,
    SecurityError,
    ShapeError,
    UnsupportedOpError,
)
from .base.version import __version__
from .check import CheckResult
from .check import check as _check
from .ir import Graph
from .port import PortReport
from .port import port as _port
from .training import train

__all__ = [
    "__version__", "load", "save", "convert", "compile", "run", "check", "port", "train", "from_torch", "cpu_threads",
    "Graph",
    "CheckResult", "PortReport",
    "NNBridgeError", "UnsupportedOpError", "FormatError", "ShapeError", "InputError", "SecurityError",
]


def load(model: Any, **options: Any) -> Graph:
    """Load a model file (format from its name) or an onnx.ModelProto into the IR; ``input_shapes``
    and ``dims`` pin dynamic input dimensions (``nnbridge.passes.pin_shapes``)."""
    from .api.model_io import as_graph

    return as_graph(model, **options)


def save(graph: Graph, path: str | os.PathLike, **options: Any) -> Any:
    """Write ``graph`` in the format that ``path``'s name asks for (.onnx, _topo.pbtxt, .prototext)."""
    from .api.model_io import warn_if_synthetic
    from .converters import save_model

    warn_if_synthetic(graph, path)
    return save_model(graph, path, **options)


def convert(src: Any, dst: str | os.PathLike, **options: Any) -> Graph:
    """Load ``src`` and save it as ``dst``; options go to the loader and the writer."""
    from .converters import format_for

    format_for(dst)  # fail on an unknown destination before any work
    pins = {"input_shapes", "dims"}  # every loader pins input shapes
    takes = format_for(src).load_options | pins if not isinstance(src, (Graph, ModelProto)) else pins
    graph = load(src, **{k: v for k, v in options.items() if k in takes})
    save(graph, dst, **{k: v for k, v in options.items() if k not in takes})
    return graph


def from_torch(module: Any, example_inputs: Sequence[Any], *, for_training: bool = False) -> Graph:
    """Trace a ``torch.nn.Module`` with example inputs (needs ``nnbridge[torch]``) into the IR;
    ``for_training`` keeps every parameter under the module's name (nothing folded into another)."""
    from .converters.pytorch import from_torch as trace

    return load(trace(module, example_inputs, for_training=for_training))


def check(model: Any, backend: str = "reference", inputs: Mapping[str, np.ndarray] | None = None,
          rtol: float | None = None, atol: float | None = None, **options: Any) -> CheckResult:
    """Run ``model`` on ``backend`` and on onnxruntime with the same inputs; judge each output by
    the verdict table of docs/check.md. Options: ``seed``, ``dims``, ``input_ranges``,
    ``nonfinite``, ``layerwise``, ``passes``, ``opt_level``, backend settings; ``against`` (another
    model or ``.pef``, run on ``against_backend``, as the reference instead of onnxruntime),
    ``save_outputs`` / ``load_outputs`` (an ``.npz`` of inputs and outputs to judge a later run
    by), ``tolerances`` (output → (rtol, atol) for that output only) and ``metric`` (``max``,
    ``mean``, ``median``, ``quantile:Q``: the error statistic held to the bound); see
    ``nnbridge.check.core.check``. A ``.pef`` path is checked against the reference backend."""
    return _check(model, backend=backend, inputs=inputs, rtol=rtol, atol=atol, **options)


def port(model: str | os.PathLike, targets: Sequence[str] | None = None, **options: Any) -> PortReport:
    """Where ``model`` can go — SMAUG (Reference, SMV), LBANN, the RDU — what must change, whether the
    numbers hold against onnxruntime and what it costs, one ``TargetReport`` per target. Options:
    ``dims``, ``input_shapes`` (pins for every target), ``seed``, ``out_dir``, ``keep``, ``ask``,
    ``progress``, ``load_options`` (see ``nnbridge.port.core.port``); the subpackage is imported
    above, so that this function, not the subpackage, is ``nnbridge.port``."""
    return _port(model, targets, **options)


def _wire() -> None:
    """SMAUG's SMV files must fit SMAUG's tiler, which the SMV backend models; converters import no
    backend, so the two are connected here (lazily: the backend loads on first use)."""
    from .converters.smaug.exporter import SmvTiler, use_smv_tiler

    def refusals(graph: Graph) -> list:
        from .backends.smv.backend import tiling_refusals

        return tiling_refusals(graph)

    def pool_group(shape: tuple[int, int, int, int], kernel: list[int], stride: list[int], kind: str) -> int:
        from .backends.smv.backend import pool_channel_group

        return pool_channel_group(shape, kernel, stride, kind)

    use_smv_tiler(SmvTiler(refusals, pool_group))


_wire()
