"""Small helpers shared by the tensor, math and reduction kernels: dtype checks of
any input, constant inputs seen at compile time, axis normalisation.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable

import numpy as np

from ...ir import DType, Node
from ...ir.dtypes import FLOAT_TYPES, INT_TYPES

CheckFn = Callable[[Node], "str | None"]

FLOATS = FLOAT_TYPES
INTS = INT_TYPES
SIGNED_INTS = frozenset({DType.INT8, DType.INT16, DType.INT32, DType.INT64})
NUMERIC = FLOAT_TYPES | INT_TYPES


def input_dtype(node: Node, index: int) -> DType | None:
    value = node.input(index)
    return None if value is None else value.type.dtype


def dtypes_of(index: int, allowed: Iterable[DType], what: str = "") -> CheckFn:
    """A check refusing nodes whose input ``index`` has a dtype outside ``allowed``."""
    allowed = frozenset(allowed)

    def check(node: Node) -> str | None:
        dtype = input_dtype(node, index)
        if dtype is not None and dtype not in allowed:
            return f"dtype {dtype.short} of {what or f'input {index}'} is not implemented"
        return None

    return check


def const_input(node: Node, index: int) -> np.ndarray | None:
    value = node.input(index)
    return None if value is None else value.const


def axis_of(axis: int, rank: int) -> int:
    """A possibly negative axis as a non-negative index (bounds-checked)."""
    if not -rank <= axis < max(rank, 1):
        raise ValueError(f"axis {axis} is out of range for rank {rank}")
    return axis + rank if axis < 0 else axis


def axes_of(axes: Iterable[int], rank: int) -> tuple[int, ...]:
    return tuple(axis_of(int(a), rank) for a in axes)


def one_given(names: Iterable[str], values: Iterable[object]) -> tuple[str, object] | None:
    """(name, value) of the only one of ``values`` (named by ``names``, in order) that is given, else
    None: ops such as Constant take exactly one of several attributes."""
    present = [(name, v) for name, v in zip(names, values, strict=True) if v is not None]
    return present[0] if len(present) == 1 else None


def ints(values: np.ndarray | Iterable[int] | None) -> list[int]:
    """An int64 tensor input or an ints attribute as a Python list."""
    if values is None:
        return []
    flat = np.asarray(values).reshape(-1)
    # an integer tensor's own list (Python ints) in one call: a shape input is read on every call
    return flat.tolist() if flat.dtype.kind in "iu" else [int(v) for v in flat]


def static_shape(node: Node, index: int) -> tuple[int, ...] | None:
    """The static shape the IR gives input ``index`` (None: absent, unknown or symbolic); a prepared
    callable relying on it checks it again on every call."""
    value = node.input(index)
    if value is None or not value.type.is_static:
        return None
    return tuple(value.type.shape)  # type: ignore[arg-type]


def all_constant(node: Node, consts: tuple, first: int = 1) -> bool:
    """Every input from ``first`` on that the node gives is a weight of the plan."""
    return all(c is not None for v, c in zip(node.inputs[first:], consts[first:]) if v is not None)
