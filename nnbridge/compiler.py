"""Compile a model for a backend: the backend's pass pipeline (or the caller's), then its build."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

import numpy as np

from .backends import Executable, get_backend
from .ir import Graph
from .ir.graph import paused_gc
from .model_io import as_graph
from .passes import Step, run_passes


def compile(model: Any, backend: str = "reference", *, passes: Sequence[Step] | None = None,
            opt_level: int = 1, verify: bool = True, **config: Any) -> Executable:
    """Compile a model for a backend: run its pass pipeline (or ``passes``), then build."""
    b = get_backend(backend)
    graph = as_graph(model)
    if isinstance(model, Graph):
        graph = graph.copy()  # never mutate the caller's graph
    names = list(passes) if passes is not None else b.pipeline(opt_level)
    if names:
        run_passes(graph, names, verify=verify)
    with paused_gc():  # a big graph's plan is built from hundreds of thousands of cycle-tracked objects
        return b.compile(graph, **config)


def run(model: Any, inputs: Mapping[str, Any], backend: str = "reference", **config: Any) -> dict[str, np.ndarray]:
    """Compile and run once; outputs by name."""
    return compile(model, backend=backend, **config).run(inputs)
