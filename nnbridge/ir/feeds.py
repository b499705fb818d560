"""The one rule for inputs a user gives a model: matched against the graph's declared inputs by
name, then dtype, then shape, each refusal one line listing what the model takes. Every command,
``check`` and the SMAUG writer's stored inputs use it."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

import numpy as np

from ..base.errors import UsageError
from .dtypes import DType
from .graph import Graph
from .types import TypeKind


def match_inputs(graph: Graph, given: Mapping[str, Any]) -> None:
    """The one rule for inputs a user gives: each must be one of the model's inputs by name, then
    have its dtype, then its rank and fixed dims (symbolic dims are bound when it runs); else one
    ``UsageError`` line naming it and listing what the model takes."""
    declared = {v.name: v for v in graph.inputs}
    for name, value in given.items():
        if name not in declared:
            raise UsageError(f"input '{name}': the model has no input named so; {model_inputs(graph)}")
        t = declared[name].type
        if t.elem is not None or value is None or isinstance(value, (list, tuple)):
            continue  # sequences and optionals: checked when the model runs
        array = np.asarray(value)
        if t.dtype is not None and t.dtype is not DType.STRING and array.dtype != t.dtype.numpy:
            raise UsageError(f"input '{name}' is {array.dtype}, not {t.dtype.short}; {model_inputs(graph)}")
        if t.shape is not None and (array.ndim != len(t.shape) or any(
                isinstance(want, int) and want != got for want, got in zip(t.shape, array.shape))):
            raise UsageError(f"input '{name}' has shape {dims_text(array.shape)}, not {dims_text(t.shape)}; "
                             f"{model_inputs(graph)}")


def model_inputs(graph: Graph) -> str:
    """What the model takes, for messages: 'its inputs are data [1x3x224x224 float32], …'."""
    def one(v) -> str:
        t = v.type
        if t.kind is not TypeKind.TENSOR:
            return f"{v.name} [{t.kind.value}]"
        shape = "?" if t.shape is None else dims_text(t.shape)
        return f"{v.name} [{shape} {t.dtype.short if t.dtype else '?'}]"

    if not graph.inputs:
        return "it takes no inputs"
    return "its inputs are " + ", ".join(one(v) for v in graph.inputs)


def dims_text(shape) -> str:
    """A shape as the messages print it: 1x3x?x?, or 'scalar'."""
    return "x".join("?" if d is None else str(d) for d in shape) if len(shape) else "scalar"
