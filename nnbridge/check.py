"""Cross-check a backend against onnxruntime, the numerical oracle.

onnxruntime runs with all graph optimisations disabled (specs/passes.md §10), so
the oracle is the model as written. The backend runs on the same inputs; each
output is compared with the backend's own tolerance unless the user gives one.
"""

from __future__ import annotations

import re
from collections.abc import Mapping, Sequence
from dataclasses import asdict, dataclass, field
from typing import Any

import numpy as np
from onnx import ModelProto

from .errors import NNBridgeError
from .inputs import random_inputs
from .ir import Graph


@dataclass
class OutputCheck:
    name: str
    shape: list[int]
    dtype: str
    max_abs_err: float
    max_rel_err: float
    rtol: float
    atol: float
    ok: bool
    note: str = ""


@dataclass
class CheckResult:
    backend: str
    model: str
    outputs: list[OutputCheck] = field(default_factory=list)
    inputs: dict[str, np.ndarray] = field(default_factory=dict, repr=False)
    actual: dict[str, np.ndarray] = field(default_factory=dict, repr=False)
    expected: dict[str, np.ndarray] = field(default_factory=dict, repr=False)

    @property
    def ok(self) -> bool:
        return bool(self.outputs) and all(o.ok for o in self.outputs)

    def to_dict(self) -> dict[str, Any]:
        return {"backend": self.backend, "model": self.model, "ok": self.ok,
                "outputs": [asdict(o) for o in self.outputs]}


def oracle_model(model: Any, graph: Graph) -> ModelProto:
    """The ModelProto onnxruntime should run: the user's own file where there is one."""
    import onnx

    if isinstance(model, ModelProto):
        return model
    if isinstance(model, str) or hasattr(model, "__fspath__"):
        path = str(model)
        if path.lower().endswith(".onnx"):
            return onnx.load(path)
    from .converters.onnx import graph_to_model

    return graph_to_model(graph)


def ort_session(model: ModelProto, level: str = "ORT_DISABLE_ALL", optimized_path: str | None = None):
    """An onnxruntime session; models newer than its IR version are relabelled to its newest."""
    import onnxruntime as ort

    options = ort.SessionOptions()
    options.graph_optimization_level = getattr(ort.GraphOptimizationLevel, level)
    options.log_severity_level = 4  # errors reach the caller as exceptions; keep stderr quiet
    if optimized_path:
        options.optimized_model_filepath = optimized_path
    data = model.SerializeToString()
    try:
        return ort.InferenceSession(data, options, providers=["CPUExecutionProvider"])
    except Exception as exc:
        found = re.search(r"max supported IR version: (\d+)", str(exc))
        if not found:
            raise
        relabelled = ModelProto()
        relabelled.CopyFrom(model)
        relabelled.ir_version = int(found.group(1))
        return ort.InferenceSession(relabelled.SerializeToString(), options, providers=["CPUExecutionProvider"])


def run_onnxruntime(model: ModelProto, feeds: Mapping[str, np.ndarray]) -> dict[str, np.ndarray]:
    try:
        session = ort_session(model)
        names = [o.name for o in session.get_outputs()]
        wanted = {i.name for i in session.get_inputs()}
        values = session.run(names, {k: v for k, v in feeds.items() if k in wanted})
    except Exception as exc:
        raise NNBridgeError(f"onnxruntime (the oracle) cannot run this model: {str(exc).strip()[:300]}") from None
    return dict(zip(names, values))


def compare(name: str, actual: Any, expected: Any, rtol: float, atol: float) -> OutputCheck:
    a = np.asarray(actual)
    e = np.asarray(expected)
    shape = list(e.shape)
    if a.shape != e.shape:
        return OutputCheck(name, shape, str(e.dtype), float("inf"), float("inf"), rtol, atol, False,
                           f"shape {list(a.shape)} != expected {shape}")
    if e.dtype.kind in "OUS" or a.dtype.kind in "OUS":
        ok = bool(np.array_equal(a.astype(str), e.astype(str)))
        return OutputCheck(name, shape, str(e.dtype), 0.0 if ok else 1.0, 0.0 if ok else 1.0, 0, 0, ok)
    af = a.astype(np.float64)
    ef = e.astype(np.float64)
    if a.size == 0:
        return OutputCheck(name, shape, str(e.dtype), 0.0, 0.0, rtol, atol, True)
    both_nan = np.isnan(af) & np.isnan(ef)
    same_inf = np.isinf(ef) & (af == ef)
    with np.errstate(invalid="ignore", over="ignore"):
        diff = np.where(both_nan | same_inf, 0.0, np.abs(af - ef))
        rel = diff / np.maximum(np.abs(ef), np.finfo(np.float64).tiny)
    finite_diff = np.nan_to_num(diff, nan=np.inf)
    ok = bool(np.all(finite_diff <= atol + rtol * np.abs(np.nan_to_num(ef, nan=0.0, posinf=0, neginf=0))))
    note = "" if a.dtype == e.dtype else f"dtype {a.dtype} != expected {e.dtype}"
    return OutputCheck(name, shape, str(e.dtype), float(np.max(finite_diff)), float(np.max(rel)),
                       rtol, atol, ok and not note, note)


def check(model: Any, backend: str = "reference", inputs: Mapping[str, np.ndarray] | None = None,
          rtol: float | None = None, atol: float | None = None, *, seed: int = 0,
          dims: Mapping[str, int] | None = None, passes: Sequence[str] | None = None,
          **config: Any) -> CheckResult:
    """Run ``model`` on ``backend`` and on onnxruntime with the same inputs and compare."""
    from . import compile as compile_model
    from .backends import get_backend
    from .model_io import as_graph

    graph = as_graph(model)
    feeds = random_inputs(graph, seed=seed, dims=dims, given=inputs)
    try:
        expected = run_onnxruntime(oracle_model(model, graph), feeds)
    except NNBridgeError:
        # onnxruntime dropped kernels of very old opsets: give it the model as imported
        # (upgraded to the IR opset) instead, which computes the same function.
        from .converters.onnx import graph_to_model

        expected = run_onnxruntime(graph_to_model(graph), feeds)
    exe = compile_model(graph.copy(), backend=backend, passes=passes, **config)
    actual = exe.run(feeds)
    b = get_backend(backend)
    d_rtol, d_atol = b.tolerance
    result = CheckResult(backend, graph.name, inputs=feeds, actual=actual, expected=expected)
    for name in exe.output_names:
        if name not in expected:
            continue
        result.outputs.append(compare(name, actual[name], expected[name],
                                      d_rtol if rtol is None else rtol, d_atol if atol is None else atol))
    return result
