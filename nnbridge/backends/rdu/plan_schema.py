"""The schema of a ``.pef``'s plan.json: its records are the dataclasses that wrote them.

A stored plan is input like any other. Each record is decoded against its dataclass's type hints
(int, float, bool, str, lists, string-keyed dicts, fixed tuples and nested dataclasses), so a
field of the wrong type, a missing or an unknown field is one ``FormatError`` naming the path to
it (``sections[2].kernels[0].ops``) instead of a ``TypeError`` deep inside the timing model.
"""

from __future__ import annotations

import dataclasses
import math
import types
import typing
from typing import Any, TypeVar

from ...base.errors import FormatError

T = TypeVar("T")


def decode(cls: type[T], data: Any, where: str, path: str) -> T:
    """An instance of dataclass ``cls`` from JSON ``data``, every field type-checked."""
    if not isinstance(data, dict):
        raise FormatError(f"{where}: plan.json {path} should be an object, not {_kind(data)}")
    hints = typing.get_type_hints(cls)
    fields = {f.name: f for f in dataclasses.fields(cls) if f.init}
    unknown = sorted(set(data) - set(fields))
    if unknown:
        raise FormatError(f"{where}: plan.json {path} has unknown field(s) {unknown}")
    values = {}
    for name, f in fields.items():
        if name not in data:
            if f.default is dataclasses.MISSING and f.default_factory is dataclasses.MISSING:
                raise FormatError(f"{where}: plan.json {path} lacks the field '{name}'")
            continue
        values[name] = _value(hints[name], data[name], where, f"{path}.{name}")
    return cls(**values)


def _value(hint: Any, data: Any, where: str, path: str) -> Any:
    origin, args = typing.get_origin(hint), typing.get_args(hint)
    if dataclasses.is_dataclass(hint):
        return decode(hint, data, where, path)
    if origin in (typing.Union, types.UnionType):
        return _union(args, data, where, path)
    if hint is type(None) and data is None:
        return None
    if origin in (list, tuple, dict):
        found = _container(origin, args, data, where, path)
        if found is not _WRONG:
            return found
    elif hint is Any or _scalar_fits(hint, data):
        return float(data) if hint is float else data
    raise FormatError(f"{where}: plan.json {path} should be {_name(hint)}, not {_kind(data)}")


_WRONG = object()  # data that does not fit a container hint


def _union(options: tuple, data: Any, where: str, path: str) -> Any:
    """The first of a union's types that ``data`` decodes as."""
    for option in options:
        try:
            return _value(option, data, where, path)
        except FormatError:
            continue
    raise FormatError(f"{where}: plan.json {path} has the wrong type ({_kind(data)})")


def _container(origin: type, args: tuple, data: Any, where: str, path: str) -> Any:
    """A list, fixed or variadic tuple, or string-keyed dict, each item decoded; ``_WRONG`` when
    ``data`` is not that container (or a fixed tuple's length differs)."""
    if origin is list and isinstance(data, list):
        return [_value(args[0], item, where, f"{path}[{i}]") for i, item in enumerate(data)]
    if origin is tuple and isinstance(data, list):
        items = args if not (len(args) == 2 and args[1] is Ellipsis) else (args[0],) * len(data)
        if len(items) == len(data):
            return tuple(_value(h, item, where, f"{path}[{i}]") for i, (h, item) in enumerate(zip(items, data)))
    if origin is dict and isinstance(data, dict):
        return {key: _value(args[1], item, where, f"{path}.{key}") for key, item in data.items()}
    return _WRONG


def _scalar_fits(hint: Any, data: Any) -> bool:
    """JSON ``data`` is a value of scalar type ``hint`` (a bool is no number; floats are finite)."""
    number = isinstance(data, (int, float)) and not isinstance(data, bool)
    return ((hint is bool and isinstance(data, bool)) or (hint is int and number and isinstance(data, int))
            or (hint is float and number and math.isfinite(data)) or (hint is str and isinstance(data, str)))


def _kind(data: Any) -> str:
    return {dict: "an object", list: "a list", str: "a string", bool: "a boolean", type(None): "null"}.get(
        type(data), f"the number {data!r}" if isinstance(data, (int, float)) else type(data).__name__)


def _name(hint: Any) -> str:
    return getattr(hint, "__name__", None) or str(hint).replace("typing.", "")
