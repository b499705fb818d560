"""``check MODEL --against OTHER``: two files (any format, or compiled ``.pef``), each on its own
backend, on the same inputs; the other file's outputs are the reference.

Inputs are matched by name, else by position when both take the same number; outputs the same
way. The rule is the looser of the two sides: the table row of the coarsest of both models'
precisions and both backends' storage formats. There is no float64 re-judging and no
``--layerwise`` here: both sides are nnbridge runs, neither is an oracle.
"""

from __future__ import annotations

import os
from collections.abc import Callable, Collection, Mapping, Sequence
from dataclasses import dataclass, replace
from typing import Any

import numpy as np

from ..base.errors import InputError, NNBridgeError
from ..ir import DType, Graph
from .feeds import check_feeds
from .result import CheckResult, declared_nonfinite, model_precision, numerics_notes
from .verdict import checked_tolerances, coarsest, compare, format_name, rule_for, with_tolerances


@dataclass
class Side:
    """One file ready to run: its graph, the format its backend stores, and how to run it."""

    label: str
    graph: Graph
    storage: DType | None
    run: Callable[[Mapping[str, Any]], dict[str, Any]]
    outputs: list[str]
    notes: list[str]


def check_against(model: Any, against: Any, backend: str, against_backend: str,
                  inputs: Mapping[str, np.ndarray] | None, rtol: float | None, atol: float | None, *,
                  seed: int | None, dims: Mapping[str, int] | None,
                  input_ranges: Mapping[str, tuple[float, float]] | None,
                  stored_inputs: bool, nonfinite: bool | Collection[str], layerwise: bool,
                  load_options: Mapping[str, Any] | None, tolerances: Mapping[str, tuple[float, float]] | None,
                  metric: str, passes: Sequence[str] | None = None, **config: Any) -> CheckResult:
    """``model`` on ``backend`` judged against ``against`` on ``against_backend``, on the same inputs."""
    from ..backends import get_backend

    if layerwise:
        raise InputError("--layerwise compares a model with onnxruntime node by node; it cannot be combined "
                         "with --against (run check on each file)")
    first, program = _load(model, backend, load_options)
    feeds, infos = check_feeds(model, first, inputs, seed, dims, input_ranges, stored_inputs)
    shapes = {name: np.shape(value) for name, value in feeds.items()}
    mine = _side(model, first, program, backend, shapes, passes, config)
    try:
        get_backend(against_backend)
    except NNBridgeError as exc:
        raise type(exc)(f"--against-backend: {exc}") from None
    other_graph, other_program = _load(against, against_backend, load_options)
    other = _side(against, other_graph, other_program, against_backend, None, None, {})
    names = _matched("inputs", [v.name for v in first.inputs], [v.name for v in other_graph.inputs], mine, other)
    actual = mine.run(feeds)
    produced = other.run({names[k]: v for k, v in feeds.items() if k in names})
    outs = _matched("outputs", mine.outputs, other.outputs, mine, other)
    expected = {name: produced[outs[name]] for name in mine.outputs}
    precision = coarsest(model_precision(first), model_precision(other_graph), mine.storage)
    rule = replace(rule_for(precision, other.storage, rtol, atol), metric=metric)
    rule_of = with_tolerances(rule, checked_tolerances(tolerances, mine.outputs), metric)
    allowed = declared_nonfinite(first, nonfinite)
    notes = [*mine.notes, *other.notes]
    for what, pairs in (("inputs", names), ("outputs", outs)):
        renamed = {k: v for k, v in pairs.items() if k != v}
        if renamed:
            notes.append(f"{what} matched by position: "
                         + ", ".join(f"'{k}' ↔ '{v}'" for k, v in renamed.items()))
    result = CheckResult(backend=mine.label, model=first.name, rule=rule,
                         precision=format_name(coarsest(model_precision(first),
                                                                            model_precision(other_graph))),
                         oracle=other.label, input_info=infos, inputs=feeds, actual=actual,
                         expected=expected, notes=notes)
    result.output_rules = {name: rule_of(name) for name in tolerances or {}}
    result.outputs = [compare(name, actual[name], expected[name], rule_of(name), allowed(name))
                      for name in mine.outputs]
    return result


def _load(model: Any, backend: str, load_options: Mapping[str, Any] | None) -> tuple[Graph, Any]:
    """The graph of a model file, or of a compiled program and the program."""
    if _is_program(model):
        from ..backends.rdu import load_pef

        if backend not in ("reference", "rdu"):
            raise InputError(f"{os.fspath(model)} is a compiled RDU program; it runs on rdu, not on {backend}")
        program = load_pef(model)
        return program.graph, program
    from ..api.model_io import as_graph

    return as_graph(model, **(load_options or {})), None


def _side(model: Any, graph: Graph, program: Any, backend: str, shapes: Mapping[str, tuple[int, ...]] | None,
          passes: Sequence[str] | None, config: Mapping[str, Any]) -> Side:
    from ..backends import get_backend

    name = os.fspath(model) if isinstance(model, (str, os.PathLike)) else graph.name
    if program is not None:
        return Side(f"{os.path.basename(name)} (rdu program)", graph, get_backend("rdu").precision, program.run,
                    list(program.output_names), numerics_notes(program.report))
    from ..api.compiler import compile as compile_model

    exe = compile_model(graph.copy(), backend=backend, passes=passes, input_shapes=shapes, **config)
    return Side(f"{os.path.basename(name)} on {backend}", graph, get_backend(backend).precision, exe.run,
                list(exe.output_names), numerics_notes(exe.report))


def _matched(what: str, mine: list[str], theirs: list[str], a: Side, b: Side) -> dict[str, str]:
    """My name → theirs: by name when both have the same names, else by position when as many."""
    if sorted(mine) == sorted(theirs):
        return {n: n for n in mine}
    if len(mine) == len(theirs):
        return dict(zip(mine, theirs))
    raise InputError(f"--against: cannot match {what}: {a.label} has {mine}, {b.label} has {theirs} "
                     "(neither the same names nor the same count)")


def _is_program(model: Any) -> bool:
    return isinstance(model, (str, os.PathLike)) and os.fspath(model).lower().endswith(".pef")
