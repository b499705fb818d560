"""SambaFlow's ``test`` for a compiled program: the ``.pef`` against the reference backend.
For a training program that is one step: loss, scores, new weights and states.

The program runs as stored (its placement, its graph) on inputs of the shape it was
compiled for — symbolic leading dims take the compiled batch size. The reference backend
runs the program's own graph, so the comparison isolates the RDU's bf16 numerics from
everything that happened before compilation (import, passes), which ``check model.onnx
--backend rdu`` covers against onnxruntime. The verdict rule is the same table row.
"""

from __future__ import annotations

import os
from collections.abc import Collection, Mapping
from dataclasses import replace
from typing import Any

import numpy as np

from ..api.inputs import batch_inputs, joined
from .result import CheckResult, declared_nonfinite, model_precision, numerics_notes
from .verdict import checked_tolerances, compare, format_name, rule_for, with_tolerances

#: what makes any graph executable on the reference backend (its own layout, transposes cancelled)
EXECUTABLE = ["layout-nchw", "cancel-transposes"]


def check_program(path: str | os.PathLike, inputs: Mapping[str, np.ndarray] | None = None,
                  rtol: float | None = None, atol: float | None = None, *, seed: int | None = None,
                  input_ranges: Mapping[str, tuple[float, float]] | None = None,
                  nonfinite: bool | Collection[str] = False, layerwise: bool = False,
                  tolerances: Mapping[str, tuple[float, float]] | None = None, metric: str = "max") -> CheckResult:
    """Run the program in ``path`` and the reference backend on its graph; compare the outputs."""
    from ..api.compiler import compile as compile_model
    from ..backends import get_backend
    from ..backends.rdu import load_pef
    from ..base.errors import InputError

    if layerwise:
        raise InputError(f"{os.fspath(path)}: --layerwise needs the model, not a compiled program "
                         "(a program returns only its outputs); run it on the model with --backend rdu")
    program = load_pef(path)
    graph = program.graph
    batch = program.options.batch_size
    steps, labels = _training_feeds(program)
    feeds, infos, per_call = batch_inputs(graph, batch, seed, None, {**steps, **(inputs or {})},
                                          {**labels, **(input_ranges or {})})
    reference = compile_model(graph.copy(), backend="reference", passes=EXECUTABLE)
    actual = joined([program.run(f) for f in per_call])
    expected = joined([reference.run(f) for f in per_call])
    precision = model_precision(graph)
    rule = replace(rule_for(precision, get_backend("rdu").precision, rtol, atol), metric=metric)
    rule_of = with_tolerances(rule, checked_tolerances(tolerances, program.output_names), metric)
    allowed = declared_nonfinite(graph, nonfinite)
    result = CheckResult(backend="rdu (program)", model=graph.name, rule=rule, precision=format_name(precision),
                         oracle="reference",
                         input_info=infos, inputs=feeds, actual=actual, expected=expected,
                         notes=[f"compiled for batch {batch}: {_batch_note(graph, batch, len(per_call))}",
                                *numerics_notes(program.report)])
    result.output_rules = {name: rule_of(name) for name in tolerances or {}}
    states = _optimizer_states(program)
    if states:
        result.notes.append(f"{len(states)} optimizer state(s) (momentum, Adam moments) are this step's bf16 "
                            f"gradients, left out of the verdict: a gradient that is zero in exact arithmetic "
                            f"(a bias before batch norm) is rounding noise; the new weights are judged")
    for name in program.output_names:
        if name not in states:
            result.outputs.append(compare(name, actual[name], expected[name], rule_of(name), allowed(name)))
    return result


def _optimizer_states(program: Any) -> set[str]:
    """Outputs of a training program's optimizer op that are its new states, not new weights: the
    op takes R, T, then n weights, n gradients and its states, and returns n new weights first."""
    from ..ir import TRAINING_DOMAIN

    found: set[str] = set()
    for node in program.graph.nodes:
        if node.domain == TRAINING_DOMAIN:
            weights = len(node.inputs) - 2 - len(node.outputs)
            found.update(o.name for o in node.outputs[weights:])
    return found


def _training_feeds(program: Any) -> tuple[dict[str, np.ndarray], dict[str, tuple[float, float]]]:
    """For a training program (one step): the first step, and the range class labels are drawn
    from (with the other inputs, by the seed); the batch itself is drawn as for any program."""
    if not program.training:
        return {}, {}
    graph = program.graph
    labels = graph.get("labels")
    return {"T": np.int64(0)}, {} if labels is None else {"labels": (0, graph.outputs[1].type.shape[-1])}


def _batch_note(graph: Any, batch: int, calls: int) -> str:
    leading = {v.type.shape[0] for v in graph.inputs if v.type.shape}
    if leading == {batch} or all(isinstance(d, str) for d in leading):
        return f"ran {batch} sample(s)"
    if calls > 1:
        return f"its graph takes leading dim {sorted(map(str, leading))[0]} per call; ran {calls} calls"
    return f"its graph takes leading dim(s) {sorted(map(str, leading))} per call; ran that"
