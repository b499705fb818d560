"""Pinning a model's dynamic input dimensions, then folding the shape arithmetic they unlock.

Real models declare ``batch``, ``height`` or ``-1``. A symbolic dim (a name) is pinned with
``dims={"batch": 1}``; an unnamed or ``-1`` dim (``None`` in the IR) only by the input's whole
shape, ``shapes={"x": (1, 3, 224, 224)}``. Once every input is static, ``infer-shapes`` makes
every value static and ``fold`` turns ``Shape → Gather → Concat → Reshape`` chains into
constants, so exporters and simulators see the graph a static export would have given.

Pinned shapes never enter a subgraph: an ``If`` whose condition folds to a constant is replaced
by the branch it takes (``fold-branches``; the untaken one may be impossible under the pinned
shapes, and onnxruntime checks both when it loads a file), and every other body (a data-dependent
``If``, ``Loop`` and ``Scan`` bodies, whose shapes may vary per iteration) keeps the types it was
loaded with.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence

from ..base.errors import InputError, UsageError
from ..ir import Graph, TypeKind, Value
from .manager import run_passes

#: what runs once the inputs are pinned, while it makes progress: a folded Shape chain lets
#: inference make more values static, whose Shape chains fold in the next round
AFTER_PINNING = ["infer-shapes", "fold", "fold-branches", "eliminate", "infer-shapes"]
MAX_ROUNDS = 8


def pin_shapes(graph: Graph, shapes: Mapping[str, Sequence[int]] | None = None,
               dims: Mapping[str, int] | None = None) -> bool:
    """Pin ``graph``'s inputs in place (whole shapes per input, values per symbol); True if any changed."""
    shapes, dims = dict(shapes or {}), dict(dims or {})
    _check_names(graph, shapes, dims)
    changed = False
    for v in graph.inputs:
        shape = _pinned(v, shapes.get(v.name), dims)
        if shape is not None and shape != v.type.shape:
            v.type = v.type.with_shape(shape)
            changed = True
    if changed:
        _propagate(graph)
    return changed


def _check_names(graph: Graph, shapes: dict[str, Sequence[int]], dims: dict[str, int]) -> None:
    """Every shape names an input, every dim a symbol of the inputs, with a positive integer."""
    inputs = {v.name: v for v in graph.inputs}
    unknown = sorted(set(shapes) - set(inputs))
    if unknown:
        raise UsageError(f"--input-shape names {', '.join(map(repr, unknown))}, not an input of '{graph.name}' "
                         f"(its inputs: {', '.join(inputs) or 'none'})")
    symbols = {d for v in graph.inputs for d in (v.type.shape or ()) if isinstance(d, str)}
    unknown = sorted(set(dims) - symbols)
    if unknown:
        raise UsageError(f"--dim names {', '.join(map(repr, unknown))}, not a symbolic dim of '{graph.name}''s "
                         f"inputs (its symbols: {', '.join(sorted(symbols)) or 'none'})")
    for name, value in dims.items():
        if not isinstance(value, int) or value < 1:
            raise InputError(f"--dim {name}={value}: a dimension is a positive integer")


def _propagate(graph: Graph) -> None:
    """Run ``AFTER_PINNING`` while it makes progress (at most ``MAX_ROUNDS`` times)."""
    for _ in range(MAX_ROUNDS):
        before = _progress(graph)
        run_passes(graph, AFTER_PINNING)
        if _progress(graph) == before:
            break


def _progress(graph: Graph) -> tuple[int, int]:
    """Dynamic values and nodes left: a round that changes neither has nothing left to unlock
    (an inlined branch adds nodes whose shape arithmetic folds in the next round)."""
    dynamic = sum(1 for v in graph.values.values() if v.type.kind is TypeKind.TENSOR and not v.type.is_static)
    return dynamic, len(graph)


def _pinned(value: Value, given: Sequence[int] | None, dims: Mapping[str, int]) -> tuple | None:
    declared = value.type.shape
    if given is None:
        return None if declared is None else tuple(dims.get(d, d) if isinstance(d, str) else d for d in declared)
    given = tuple(int(d) for d in given)
    text = "x".join(map(str, given))
    if any(d < 1 for d in given):
        raise InputError(f"--input-shape {value.name}={text}: every dimension must be a positive integer")
    if declared is not None:
        if len(declared) != len(given):
            raise InputError(f"--input-shape {value.name}={text} has {len(given)} dims; the input is "
                             f"{_show(declared)} ({len(declared)} dims)")
        for axis, (d, g) in enumerate(zip(declared, given)):
            if isinstance(d, int) and d != g:
                raise InputError(f"--input-shape {value.name}={text}: dim {axis} of {_show(declared)} is fixed at {d}")
            if isinstance(d, str) and d in dims and dims[d] != g:
                raise InputError(f"--input-shape {value.name}={text} gives {d}={g}, --dim {d}={dims[d]}")
    return given


def dynamic_inputs(graph: Graph, per_sample: bool = False) -> list[Value]:
    """Tensor inputs whose shape is unknown or not fully static (``per_sample``: but for a batch
    dim that has a name, the file's own mini-batch size; an unnamed or -1 batch must be pinned)."""
    def static(shape) -> bool:
        if shape is None or (per_sample and shape and shape[0] is None):
            return False
        return all(isinstance(d, int) for d in shape[1 if per_sample else 0:])

    return [v for v in graph.inputs if v.type.kind is TypeKind.TENSOR and not static(v.type.shape)]


def pinning_hint(values: list[Value], dims: Mapping[str, int] | None = None) -> str:
    """The flags that pin ``values``: ``--dim`` per symbol not in ``dims`` (a leading symbol is a
    batch, so 1 works), ``--input-shape`` for an input with an unnamed or -1 dim."""
    flags: dict[str, None] = {}
    for v in values:
        shape = v.type.shape
        if shape is None or any(d is None for d in shape):
            example = "x".join(str(d) if isinstance(d, int) else "N" for d in shape or ("N",))
            flags[f"--input-shape {v.name}={example}"] = None
        else:
            flags.update({f"--dim {d}={1 if i == 0 else 'N'}": None for i, d in enumerate(shape)
                          if isinstance(d, str) and d not in (dims or {})})
    return " ".join(flags)


def describe_dynamic(values: list[Value]) -> str:
    """``'x' [batch, 3, ?, ?]`` for each value, for one-line errors."""
    return ", ".join(f"'{v.name}' {_show(v.type.shape)}" for v in values)


def _show(shape) -> str:
    if shape is None:
        return "[unknown rank]"
    return "[" + ", ".join("?" if d is None else str(d) for d in shape) + "]"
