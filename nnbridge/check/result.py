"""What a check produces (``CheckResult``) and the facts about a model and a backend's report that
both checks use: a model against onnxruntime (``core``) and a compiled program (``program``)."""

from __future__ import annotations

from collections.abc import Callable, Collection
from dataclasses import dataclass, field
from typing import Any

import numpy as np

from ..api.inputs import InputInfo
from ..ir import DType, Graph
from .layerwise import LayerwiseResult, NonfiniteOrigin
from .verdict import OutputCheck, Rule, coarsest, jsonable

#: graph metadata key declaring outputs that may hold NaN/inf: "*" or comma-separated names
NONFINITE_KEY = "nnbridge.nonfinite_outputs"


@dataclass(kw_only=True)
class CheckResult:
    backend: str
    model: str
    rule: Rule
    precision: str                  # the model's own (coarsest) float format
    oracle: str = "onnxruntime"
    outputs: list[OutputCheck] = field(default_factory=list)
    input_info: list[InputInfo] = field(default_factory=list)
    layerwise: LayerwiseResult | None = None
    origin: NonfiniteOrigin | None = None  # where unexpected NaN/inf first appeared
    notes: list[str] = field(default_factory=list)  # the backend's notes on numerics
    output_rules: dict[str, Rule] = field(default_factory=dict)  # outputs judged by their own rule (``--tol``)
    inputs: dict[str, np.ndarray] = field(default_factory=dict, repr=False)
    actual: dict[str, np.ndarray] = field(default_factory=dict, repr=False)
    expected: dict[str, np.ndarray] = field(default_factory=dict, repr=False)

    @property
    def ok(self) -> bool:
        return bool(self.outputs) and all(o.ok for o in self.outputs)

    def to_dict(self) -> dict[str, Any]:
        return {"backend": self.backend, "model": self.model, "oracle": self.oracle, "ok": self.ok,
                "precision": self.precision, "rule": self.rule.to_dict(),
                "output_rules": {name: rule.to_dict() for name, rule in self.output_rules.items()},
                "inputs": [{k: jsonable(v) for k, v in i.to_dict().items()} for i in self.input_info],
                "outputs": [o.to_dict() for o in self.outputs],
                "nonfinite_origin": self.origin.to_dict() if self.origin else None,
                "layerwise": self.layerwise.to_dict() if self.layerwise else None,
                "notes": self.notes}


def model_precision(graph: Graph) -> DType:
    """The coarsest float format among the graph's declared tensors (fp32 if none)."""
    dtypes = {v.type.dtype for v in (*graph.inputs, *graph.outputs)}
    dtypes |= {DType.from_numpy(a.dtype) for a in graph.initializers.values() if a.dtype.kind == "f"
               or a.dtype.name == "bfloat16"}
    for node in graph.walk():
        dtypes |= {v.type.dtype for v in node.outputs if v is not None}
    return coarsest(*dtypes)


def declared_nonfinite(graph: Graph, extra: bool | Collection[str] = False) -> Callable[[str], bool]:
    """Which outputs may hold NaN/inf: the model's ``nnbridge.nonfinite_outputs`` metadata plus ``extra``."""
    text = graph.metadata.get(NONFINITE_KEY, "")
    names = {n.strip() for n in text.split(",") if n.strip()}
    if extra is True or "*" in names:
        return lambda name: True
    if extra:
        names |= set(extra)
    return lambda name: name in names


def numerics_notes(report: Any) -> list[str]:
    """What a backend's report says about how it computes nodes differently from ONNX."""
    return [f"{node}: {text}" for node, text in node_notes(report).items()]


#: report-row keys in which a backend explains a node's numerics
NOTE_KEYS = ("deviation", "numerics")


def node_notes(report: Any) -> dict[str, str]:
    """Node name → the backend's note on how it computes that node differently (if any)."""
    found = {}
    for row in getattr(report, "rows", None) or []:
        text = "; ".join(str(row[k]) for k in NOTE_KEYS if row.get(k))
        if text and row.get("name"):
            found[str(row["name"])] = text
    return found
