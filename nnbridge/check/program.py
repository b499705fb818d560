"""SambaFlow's ``test`` for a compiled program: the ``.pef`` against the reference backend.

The program runs as stored (its placement, its graph) on inputs of the shape it was
compiled for — symbolic leading dims take the compiled batch size. The reference backend
runs the program's own graph, so the comparison isolates the RDU's bf16 numerics from
everything that happened before compilation (import, passes), which ``check model.onnx
--backend rdu`` covers against onnxruntime. The verdict rule is the same table row.
"""

from __future__ import annotations

import os
from collections.abc import Collection, Mapping
from typing import Any

import numpy as np

from ..inputs import describe, generate_inputs
from .result import CheckResult, declared_nonfinite, model_precision, numerics_notes
from .verdict import compare, format_name, rule_for

#: what makes any graph executable on the reference backend (its own layout, transposes cancelled)
EXECUTABLE = ["layout-nchw", "cancel-transposes"]


def check_program(path: str | os.PathLike, inputs: Mapping[str, np.ndarray] | None = None,
                  rtol: float | None = None, atol: float | None = None, *, seed: int = 0,
                  input_ranges: Mapping[str, tuple[float, float]] | None = None,
                  nonfinite: bool | Collection[str] = False, layerwise: bool = False) -> CheckResult:
    """Run the program in ``path`` and the reference backend on its graph; compare the outputs."""
    from ..backends import get_backend
    from ..backends.rdu import load_pef
    from ..compiler import compile as compile_model
    from ..errors import InputError

    if layerwise:
        raise InputError(f"{os.fspath(path)}: --layerwise needs the model, not a compiled program "
                         "(a program returns only its outputs); run it on the model with --backend rdu")
    program = load_pef(path)
    graph = program.graph
    batch = program.options.batch_size
    dims = {v.type.shape[0]: batch for v in graph.inputs if v.type.shape and isinstance(v.type.shape[0], str)}
    calls = _calls(graph, batch)
    feeds, infos, per_call = _batch_feeds(graph, calls, seed, dims, inputs, input_ranges)
    reference = compile_model(graph.copy(), backend="reference", passes=EXECUTABLE)
    actual = _joined([program.run(f) for f in per_call])
    expected = _joined([reference.run(f) for f in per_call])
    precision = model_precision(graph)
    rule = rule_for(precision, get_backend("rdu").precision, rtol, atol)
    allowed = declared_nonfinite(graph, nonfinite)
    result = CheckResult("rdu (program)", graph.name, rule, format_name(precision), oracle="reference",
                         input_info=infos, inputs=feeds, actual=actual, expected=expected,
                         notes=[f"compiled for batch {batch}: {_batch_note(graph, batch, len(per_call))}",
                                *numerics_notes(program.report)])
    for name in program.output_names:
        result.outputs.append(compare(name, actual[name], expected[name], rule, allowed(name)))
    return result


def _calls(graph: Any, batch: int) -> int:
    """How many calls make up one compiled batch: a graph whose inputs all take a fixed leading dim
    L that divides the batch runs batch / L times (SambaFlow feeds a batch-1 model sample by sample)."""
    leading = {v.type.shape[0] for v in graph.inputs if v.type.shape}
    if len(leading) == 1:
        (size,) = leading
        if isinstance(size, int) and 0 < size < batch and batch % size == 0:
            return batch // size
    return 1


def _batch_feeds(graph: Any, calls: int, seed: int, dims: Mapping[str, int],
                 inputs: Mapping[str, np.ndarray] | None, ranges: Mapping[str, tuple[float, float]] | None):
    """The whole batch's inputs, their descriptions and the per-call slices. Generated inputs draw
    call k with seed + k; given inputs hold the whole batch (or one call's worth)."""
    given = dict(inputs or {})
    if calls == 1 or any(np.asarray(a).shape[:1] != (graph.inputs[0].type.shape[0] * calls,) for a in given.values()):
        feeds, infos = generate_inputs(graph, seed, dims, given, ranges)
        return feeds, infos, [feeds]
    width = graph.inputs[0].type.shape[0]
    per_call, first = [], []
    for k in range(calls):
        part = {name: np.asarray(a)[k * width:(k + 1) * width] for name, a in given.items()}
        call_feeds, call_infos = generate_inputs(graph, seed + k, dims, part, ranges)
        per_call.append(call_feeds)
        first = first or call_infos
    feeds = {name: np.concatenate([f[name] for f in per_call]) for name in per_call[0]}
    infos = [describe(i.name, feeds[i.name], i.distribution if i.name in given else
                      f"{i.distribution}, call k of {calls} drawn with seed {seed}+k", i.seed) for i in first]
    return feeds, infos, per_call


def _joined(runs: list[dict[str, Any]]) -> dict[str, Any]:
    if len(runs) == 1:
        return runs[0]
    return {name: np.concatenate([r[name] for r in runs]) for name in runs[0]}


def _batch_note(graph: Any, batch: int, calls: int) -> str:
    leading = {v.type.shape[0] for v in graph.inputs if v.type.shape}
    if leading == {batch} or all(isinstance(d, str) for d in leading):
        return f"ran {batch} sample(s)"
    if calls > 1:
        return f"its graph takes leading dim {sorted(map(str, leading))[0]} per call; ran {calls} calls"
    return f"its graph takes leading dim(s) {sorted(map(str, leading))} per call; ran that"
