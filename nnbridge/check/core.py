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
from collections.abc import Collection, Mapping, Sequence
from typing import Any

import numpy as np
from onnx import ModelProto

from ..errors import NNBridgeError
from ..inputs import InputInfo, generate_inputs
from ..ir import Graph
from .exact import judged_against_float64
from .layerwise import layerwise as run_layerwise
from .oracle import oracle_model, run_onnxruntime
from .program import check_program
from .result import CheckResult, declared_nonfinite, model_precision, node_notes, numerics_notes
from .verdict import compare, format_name, rule_for


def check(model: Any, backend: str = "reference", inputs: Mapping[str, np.ndarray] | None = None,
          rtol: float | None = None, atol: float | None = None, *, seed: int = 0,
          dims: Mapping[str, int] | None = None, passes: Sequence[str] | None = None,
          input_ranges: Mapping[str, tuple[float, float]] | None = None, stored_inputs: bool = True,
          nonfinite: bool | Collection[str] = False, layerwise: bool = False,
          load_options: Mapping[str, Any] | None = None, **config: Any) -> CheckResult:
    """Run ``model`` on ``backend`` and on onnxruntime with the same inputs and compare.

    ``nonfinite``: outputs declared to carry NaN/inf (True: all) besides those the model's
    metadata declares. A SMAUG model's inputs default to the values its params file stores
    (``stored_inputs``). ``rtol``/``atol`` replace the table's rule. A ``.pef`` is checked
    against the reference backend (``program.check_program``).
    """
    from ..backends import get_backend
    from ..compiler import compile as compile_model
    from ..model_io import as_graph

    if _is_program(model):
        return check_program(model, inputs, rtol, atol, seed=seed, input_ranges=input_ranges,
                             nonfinite=nonfinite, layerwise=layerwise)
    graph = as_graph(model, **(load_options or {}))
    feeds, infos = _feeds(model, graph, inputs, seed, dims, input_ranges, stored_inputs)
    proto, expected = _oracle(model, graph, feeds)
    chosen = get_backend(backend)
    shapes = {name: np.shape(value) for name, value in feeds.items()}
    exe = compile_model(graph.copy(), backend=backend, passes=passes, input_shapes=shapes, **config)
    actual = exe.run(feeds)
    precision = model_precision(graph)
    rule = rule_for(precision, chosen.precision, rtol, atol)
    allowed = declared_nonfinite(graph, nonfinite)
    result = CheckResult(backend, graph.name, rule, format_name(precision), input_info=infos,
                         inputs=feeds, actual=actual, expected=expected, notes=numerics_notes(exe.report))
    for name in exe.output_names:
        if name in expected:
            result.outputs.append(compare(name, actual[name], expected[name], rule, allowed(name)))
    result.outputs = judged_against_float64(result.outputs, actual, expected, rule, proto, feeds, allowed)

    def run_exposed(exposed: Graph) -> dict[str, Any]:
        return compile_model(exposed, backend=backend, passes=passes, input_shapes=shapes, **config).run(feeds)

    if layerwise or not result.ok or any(o.nonfinite_actual for o in result.outputs):
        # where NaN/inf come from is named whenever an output holds some, even ones the model declares
        # NaN/inf a model declares for an output are legitimate in the nodes that make them
        declared = any(allowed(name) for name in exe.output_names)
        try:
            found = run_layerwise(proto, graph, feeds, run_exposed, rule, lambda name: declared or allowed(name),
                                  notes=node_notes(exe.report), origin_only=not layerwise)
        except NNBridgeError as exc:
            if layerwise:
                raise
            found = None  # the verdict stands; the search's failure is reported with it
            result.notes.append(f"no search for NaN/inf inside the model: {exc}")
        result.origin = found.origin if found else None
        result.layerwise = found if layerwise else None
    return result


def _is_program(model: Any) -> bool:
    return isinstance(model, (str, os.PathLike)) and os.fspath(model).lower().endswith(".pef")


def _feeds(model: Any, graph: Graph, given: Mapping[str, np.ndarray] | None, seed: int,
           dims: Mapping[str, int] | None, ranges: Mapping[str, tuple[float, float]] | None,
           stored: bool) -> tuple[dict[str, np.ndarray], list[InputInfo]]:
    """Given inputs, then the values the model file stores (a SMAUG params file), then generated ones."""
    given = dict(given or {})
    sources = dict.fromkeys(given, "given")
    where = "the model file"
    if isinstance(model, (str, os.PathLike)) and os.fspath(model).endswith("_topo.pbtxt"):
        from ..converters.smaug import model_paths

        where = model_paths(model)[1].name
    for name, value in graph.input_values.items() if stored else ():
        if name not in given and name not in (ranges or {}):
            given[name] = value
            sources[name] = f"stored in {where}"
    return generate_inputs(graph, seed, dims, given, ranges, sources)


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
