"""``check``: run a model on a backend and on onnxruntime with the same inputs and judge each output.

The rule comes from the verdict table (``verdict.RULES``), chosen from the model's
precision and the backend's storage format. An output that fails it on finite values is
judged again against a float64 evaluation (``exact.py``): the backend differs only when it
is materially worse than onnxruntime. When a verdict is DIFFER, the run is repeated with every
intermediate exposed to name the first node whose value is NaN/inf (an fp16 overflow inside
the model whose outputs stay finite included); ``layerwise=True`` also compares every node
(``layerwise.py``).
"""

from __future__ import annotations

import os
from collections.abc import Callable, Collection, Mapping, Sequence
from dataclasses import replace
from typing import Any

import numpy as np
from onnx import ModelProto

from ..base.errors import InputError, NNBridgeError
from ..ir import Graph
from .exact import judged_against_float64
from .feeds import check_feeds
from .layerwise import layerwise as run_layerwise
from .oracle import oracle_model, run_onnxruntime
from .program import check_program
from .result import CheckResult, declared_nonfinite, model_precision, node_notes, numerics_notes
from .saved import matched, model_inputs, opened, saved_to
from .verdict import checked_tolerances, coarsest, compare, format_name, parse_metric, rule_for, with_tolerances


def check(model: Any, backend: str = "reference", inputs: Mapping[str, np.ndarray] | None = None,
          rtol: float | None = None, atol: float | None = None, *, seed: int | None = None,
          dims: Mapping[str, int] | None = None, passes: Sequence[str] | None = None,
          input_ranges: Mapping[str, tuple[float, float]] | None = None, stored_inputs: bool = True,
          nonfinite: bool | Collection[str] = False, layerwise: bool = False,
          load_options: Mapping[str, Any] | None = None, tolerances: Mapping[str, tuple[float, float]] | None = None,
          metric: str = "max", against: Any = None, against_backend: str = "reference",
          save_outputs: str | os.PathLike | None = None, load_outputs: str | os.PathLike | None = None,
          oracle: ModelProto | None = None, executable: Any = None, **config: Any) -> CheckResult:
    """Run ``model`` on ``backend`` and on onnxruntime with the same inputs and compare.

    ``nonfinite``: outputs declared to carry NaN/inf (True: all) besides those the model's
    metadata declares. A SMAUG model's inputs default to the values its params file stores
    (``stored_inputs``). ``rtol``/``atol`` replace the table's rule; ``tolerances`` (output →
    (rtol, atol)) replace it for those outputs only; ``metric`` is the statistic of the error that
    must be within the bound (``verdict.METRICS``). A ``.pef`` is checked against the reference
    backend (``program.check_program``). ``against``: another model or ``.pef`` run on
    ``against_backend`` is the reference instead of onnxruntime (``against.py``).
    ``save_outputs``: write the inputs and this run's outputs to an ``.npz``; ``load_outputs``:
    judge this run, on the inputs saved there, against the outputs saved there (``saved.py``).
    ``oracle``: the model onnxruntime runs instead of ``model``'s own ONNX form, taking and giving
    ``model``'s inputs and outputs (a converted file judged against its source, as ``port`` does);
    no search for NaN/inf inside the model is made then, since its nodes are not the oracle's.
    ``executable``: ``model`` already compiled for ``backend``, so that its compile is not repeated.
    """
    from ..api.compiler import compile as compile_model
    from ..api.model_io import as_graph
    from ..backends import get_backend

    metric = parse_metric(metric)
    if oracle is not None and layerwise:
        raise InputError("layerwise compares a model with its own ONNX form node by node; it cannot be combined "
                         "with another model as the oracle")
    unread = {"--input": inputs, "--input-range": input_ranges, "--layerwise": layerwise,
              "--against": against is not None, "--seed": seed is not None, "--dim": dims,
              "--no-stored-inputs": not stored_inputs}  # what saved inputs make meaningless
    saved = None if load_outputs is None else opened(load_outputs, unread)
    if against is not None:
        from .against import check_against

        result = check_against(model, against, backend, against_backend, inputs, rtol, atol, seed=seed, dims=dims,
                               input_ranges=input_ranges, stored_inputs=stored_inputs, nonfinite=nonfinite,
                               layerwise=layerwise, load_options=load_options, tolerances=tolerances,
                               metric=metric, passes=passes, **config)
        return saved_to(save_outputs, result)
    if _is_program(model):
        if saved is not None:
            raise InputError(f"{os.fspath(model)}: --load-outputs judges a model, not a compiled program; "
                             "run it on the model with --backend rdu")
        return saved_to(save_outputs, check_program(model, inputs, rtol, atol, seed=seed, input_ranges=input_ranges,
                                                     nonfinite=nonfinite, layerwise=layerwise,
                                                     tolerances=tolerances, metric=metric))
    graph = as_graph(model, **(load_options or {}))
    feeds, infos, proto, expected = _feeds_and_oracle(model, graph, saved, load_outputs, inputs, seed, dims,
                                                      input_ranges, stored_inputs, oracle)
    shapes = {name: np.shape(value) for name, value in feeds.items()}
    exe = executable if executable is not None else \
        compile_model(graph.copy(), backend=backend, passes=passes, input_shapes=shapes, **config)
    actual = exe.run(feeds)
    allowed = declared_nonfinite(graph, nonfinite)
    result = _compared(graph, exe, actual, expected, saved, load_outputs,
                       rule_for(coarsest(model_precision(graph), saved.format if saved is not None else None),
                                get_backend(backend).precision, rtol, atol),
                       metric, tolerances, allowed, feeds, infos, backend)
    if saved is not None:
        return saved_to(save_outputs, result)
    result.outputs = judged_against_float64(result.outputs, actual, expected, result.rule, proto, feeds, allowed)

    def run_exposed(exposed: Graph) -> dict[str, Any]:
        return compile_model(exposed, backend=backend, passes=passes, input_shapes=shapes, **config).run(feeds)

    if oracle is None and (layerwise or not result.ok or any(o.nonfinite_actual for o in result.outputs)):
        declared = any(map(allowed, exe.output_names))
        _search_inside(result, proto, graph, feeds, run_exposed, lambda name: declared or allowed(name),
                       node_notes(exe.report), layerwise)
    return saved_to(save_outputs, result)


def _feeds_and_oracle(model: Any, graph: Graph, saved: Any, load_outputs: str | os.PathLike | None,
                      inputs: Mapping[str, np.ndarray] | None, seed: int | None, dims: Mapping[str, int] | None,
                      input_ranges: Mapping[str, tuple[float, float]] | None, stored_inputs: bool,
                      oracle: ModelProto | None) -> tuple[dict[str, Any], list, ModelProto | None, Mapping[str, Any]]:
    """The feeds and how they were made, the ONNX model onnxruntime runs (None for saved outputs)
    and the expected outputs: saved ones on their saved inputs, else onnxruntime's."""
    if saved is not None:
        inputs = model_inputs(saved, graph, os.fspath(load_outputs))
    feeds, infos = check_feeds(model, graph, inputs, seed, dims, input_ranges, stored_inputs)
    if saved is not None:
        infos = [replace(i, distribution=f"saved in {saved.meta['file']}", seed=None) for i in infos]
        return feeds, infos, None, saved.outputs
    proto, expected = _oracle(model, graph, feeds) if oracle is None else (oracle, run_onnxruntime(oracle, feeds))
    return feeds, infos, proto, expected


def _compared(graph: Graph, exe: Any, actual: dict[str, Any], expected: Mapping[str, Any], saved: Any,
              load_outputs: str | os.PathLike | None, rule: Any, metric: str,
              tolerances: Mapping[str, tuple[float, float]] | None, allowed: Callable[[str], bool],
              feeds: Mapping[str, np.ndarray], infos: list, backend: str) -> CheckResult:
    """The result of comparing each output the oracle has (saved outputs or onnxruntime's) under
    ``rule`` (with ``metric``), or the per-output ``tolerances`` where given."""
    rule = replace(rule, metric=metric)
    rule_of = with_tolerances(rule, checked_tolerances(tolerances, exe.output_names), metric)
    result = CheckResult(backend=backend, model=graph.name, rule=rule, precision=format_name(model_precision(graph)),
                         input_info=infos, inputs=feeds, actual=actual, expected=expected,
                         notes=numerics_notes(exe.report))
    result.output_rules = {name: rule_of(name) for name in tolerances or {}}
    if saved is not None:
        result.oracle = saved.describe()
        matched(saved, list(exe.output_names), {k: np.shape(v) for k, v in actual.items()},
                f"--load-outputs {os.fspath(load_outputs)}")
    result.outputs.extend(compare(name, actual[name], expected[name], rule_of(name), allowed(name))
                          for name in exe.output_names if name in expected)
    return result


def _search_inside(result: CheckResult, proto: ModelProto, graph: Graph, feeds: Mapping[str, np.ndarray],
                   run_exposed: Callable[[Graph], dict[str, Any]], nonfinite_ok: Callable[[str], bool],
                   notes: Mapping[str, str], layerwise: bool) -> None:
    """Where NaN/inf come from, named whenever an output holds some (even ones the model declares),
    and with ``layerwise`` every node compared; ``nonfinite_ok`` says which values may hold NaN/inf
    (those a model declares for an output are legitimate in the nodes that make them)."""
    try:
        found = run_layerwise(proto, graph, feeds, run_exposed, result.rule, nonfinite_ok, notes=notes,
                              origin_only=not layerwise)
    except NNBridgeError as exc:
        if layerwise:
            raise
        found = None  # the verdict stands; the search's failure is reported with it
        result.notes.append(f"no search for NaN/inf inside the model: {exc}")
    result.origin = found.origin if found else None
    result.layerwise = found if layerwise else None


def _is_program(model: Any) -> bool:
    return isinstance(model, (str, os.PathLike)) and os.fspath(model).lower().endswith(".pef")


def _oracle(model: Any, graph: Graph, feeds: Mapping[str, np.ndarray]) -> tuple[ModelProto, dict[str, np.ndarray]]:
    """The model onnxruntime runs and its outputs."""
    proto = oracle_model(model, graph)
    try:
        return proto, run_onnxruntime(proto, feeds)
    except NNBridgeError:
        # onnxruntime dropped kernels of very old opsets: give it the model as imported
        # (upgraded to the IR opset) instead, which computes the same function.
        from ..converters.onnx import graph_to_model

        proto = graph_to_model(graph)
        return proto, run_onnxruntime(proto, feeds)
