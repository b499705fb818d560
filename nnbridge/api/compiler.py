"""Compile a model for a backend: the backend's pass pipeline (or the caller's), then its build."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

import numpy as np

from ..backends import Executable, get_backend
from ..base.errors import InputError
from ..ir import Graph
from ..ir.graph import paused_gc
from ..passes import Step, run_passes
from ..passes.pin_shapes import describe_dynamic, dynamic_inputs, pin_shapes, pinning_hint
from .model_io import as_graph


def compile(model: Any, backend: str = "reference", *, passes: Sequence[Step] | None = None,
            opt_level: int = 1, verify: bool = True, input_shapes: Mapping[str, Sequence[int]] | None = None,
            **config: Any) -> Executable:
    """Compile a model for a backend: run its pass pipeline (or ``passes``), then build.

    Simulators need static shapes: dynamic inputs are pinned to ``input_shapes`` (``run`` passes
    its inputs' shapes), else refused in one line that says how to pin them."""
    b = get_backend(backend)
    config = b.options(config)  # an option the backend does not read is refused before any work
    graph = as_graph(model)
    if isinstance(model, Graph):
        graph = graph.copy()  # never mutate the caller's graph
    if b.static_shapes and dynamic_inputs(graph):
        if input_shapes:
            names = {v.name for v in graph.inputs}
            pin_shapes(graph, {k: v for k, v in input_shapes.items() if k in names})
        dynamic = dynamic_inputs(graph)
        if dynamic:
            raise InputError(f"'{graph.name}' has dynamic inputs {describe_dynamic(dynamic)}: the {backend} simulator "
                             f"prices static shapes only; pin them with {pinning_hint(dynamic)}")
    names = list(passes) if passes is not None else b.pipeline(opt_level)
    if names:
        run_passes(graph, names, verify=verify)
    with paused_gc():  # a big graph's plan is built from hundreds of thousands of cycle-tracked objects
        return b.compile(graph, **config)


def run(model: Any, inputs: Mapping[str, Any], backend: str = "reference", **config: Any) -> dict[str, np.ndarray]:
    """Compile and run once; outputs by name."""
    shapes = {name: np.shape(value) for name, value in inputs.items()}
    return compile(model, backend=backend, input_shapes=shapes, **config).run(inputs)
