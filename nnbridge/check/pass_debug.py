"""Pass debugging: run the oracle after every pass and name the first one that changed outputs.

A tool, not a pass: ``nnbridge check --debug-passes`` uses it. onnxruntime runs
once on the original model. After each pass the current graph is run on the
reference backend (made executable by ``layout-nchw`` + ``cancel-transposes``
on a copy, so passes that target another backend's layout can be checked too)
and compared with the oracle under the verdict table's rule for the model on the
reference backend. The first pass after which outputs disagree is the culprit; a
disagreement before any pass points at import or kernels.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

import numpy as np

from ..api.inputs import random_inputs
from ..api.model_io import as_graph
from ..ir import Graph
from ..passes import get_pass
from .oracle import oracle_model, run_onnxruntime
from .program import EXECUTABLE
from .result import model_precision
from .verdict import compare, rule_for


@dataclass
class PassStep:
    name: str  # "(import)" for the graph before any pass
    changed: bool
    nodes: int
    max_abs_err: float
    ok: bool
    error: str = ""


@dataclass
class PassDebugResult:
    model: str
    steps: list[PassStep] = field(default_factory=list)

    @property
    def culprit(self) -> str | None:
        """The first step whose outputs disagree with the oracle (None if all agree)."""
        return next((s.name for s in self.steps if not s.ok), None)


def debug_passes(model: Any, passes: Sequence[str], inputs: Mapping[str, np.ndarray] | None = None,
                 rtol: float | None = None, atol: float | None = None, seed: int | None = None,
                 dims: Mapping[str, int] | None = None) -> PassDebugResult:
    """Run ``passes`` one by one on ``model``, checking outputs against onnxruntime after each."""
    infos = [get_pass(n) for n in passes]  # fail on a typo before any work
    graph = as_graph(model)
    if isinstance(model, Graph):
        graph = graph.copy()
    feeds = random_inputs(graph, seed=seed, dims=dims, given=inputs)
    rule = rule_for(model_precision(graph), None, rtol, atol)
    expected = run_onnxruntime(oracle_model(model, graph), feeds)
    result = PassDebugResult(graph.name)

    def evaluate(name: str, changed: bool) -> PassStep:
        from ..api.compiler import compile as compile_model

        try:
            actual = compile_model(graph.copy(), "reference", passes=EXECUTABLE).run(feeds)
        except Exception as exc:  # a pass that breaks execution is as guilty as one that breaks numbers
            return PassStep(name, changed, len(graph), float("inf"), False, f"{type(exc).__name__}: {exc}"[:200])
        checks = [compare(k, actual[k], v, rule) for k, v in expected.items() if k in actual]
        worst = max((c.max_abs_err for c in checks), default=0.0)
        ok = bool(checks) and all(c.ok for c in checks)
        return PassStep(name, changed, len(graph), worst, ok, "" if checks else "no output to compare")

    result.steps.append(evaluate("(import)", False))
    for info in infos:
        changed = bool(info.fn(graph))
        result.steps.append(evaluate(info.name, changed))
    return result
