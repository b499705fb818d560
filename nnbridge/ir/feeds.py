"""The one rule for inputs a user gives a model: matched against the graph's declared inputs by
name, then dtype, then shape, each refusal one line listing what the model takes. Every command,
``check``, ``Executable.run`` (so the Python API) and the SMAUG writer's stored inputs use it."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

import numpy as np

from ..base.errors import UsageError
from .dtypes import DType
from .graph import Graph, Value
from .types import TypeKind


def match_inputs(graph: Graph, given: Mapping[str, Any], *, complete: bool = False) -> dict[str, Any]:
    """The one rule for inputs a user gives, from the command line or from Python: each must be one
    of the model's inputs by name, then have its dtype, then its rank and fixed dims, and a named
    symbolic dim one size across them (unnamed dims are distinct unknowns); ``complete`` (a run's
    feeds) also wants every input. Else one ``UsageError`` line (exit 2 in the CLI; an ``InputError``
    to Python callers) naming it and listing what the model takes. The feeds, tensors as arrays,
    in the model's order."""
    declared = {v.name: v for v in graph.inputs}
    for name in given:
        if name not in declared:
            raise UsageError(f"input '{name}': the model has no input named so; {model_inputs(graph)}")
    missing = [name for name in declared if name not in given]
    if complete and missing:
        raise UsageError(f"missing input{'s' if len(missing) > 1 else ''} {', '.join(missing)}; {model_inputs(graph)}")
    bound: dict[str, tuple[int, str]] = {}
    feeds: dict[str, Any] = {}
    for name, v in declared.items():
        if name not in given:
            continue
        value = given[name]
        if v.type.elem is not None or value is None or isinstance(value, (list, tuple)):
            feeds[name] = value  # sequences and optionals: checked when the model runs
            continue
        feeds[name] = _checked_tensor(graph, v, np.asarray(value), bound)
    return feeds


def _checked_tensor(graph: Graph, v: Value, array: np.ndarray, bound: dict[str, tuple[int, str]]) -> np.ndarray:
    """``array`` as input ``v``: its dtype, rank and fixed dims, and each named symbolic dim the size
    an earlier input gave it (``bound``: dim → (size, input))."""
    name, t = v.name, v.type
    if t.dtype is not None and t.dtype is not DType.STRING and array.dtype != t.dtype.numpy:
        raise UsageError(f"input '{name}' has dtype {array.dtype}, not {t.dtype.short}; {model_inputs(graph)}")
    if t.shape is not None and (array.ndim != len(t.shape) or any(
            isinstance(want, int) and want != got for want, got in zip(t.shape, array.shape))):
        raise UsageError(f"input '{name}' has shape {dims_text(array.shape)}, not {dims_text(t.shape)}; "
                         f"{model_inputs(graph)}")
    for want, got in zip(t.shape or (), array.shape):
        if isinstance(want, str):
            size, other = bound.setdefault(want, (got, name))
            if size != got:
                raise UsageError(f"input '{name}': symbolic dim '{want}' is {got} here but {size} in input "
                                 f"'{other}'; {model_inputs(graph)}")
    return array


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
