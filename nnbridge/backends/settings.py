"""What a backend's ``compile`` reads: each setting declared once (name, type, default, help).

``Backend.options`` checks keyword options against these declarations, and the CLI derives
``--set``'s help and checks from the same ones, so the two cannot drift: an unknown name is
refused naming the backend and what it takes, a value of the wrong type is refused too.
"""

from __future__ import annotations

import enum
import math
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from ..errors import OptionError

_TRUE, _FALSE = ("1", "true", "yes", "on"), ("0", "false", "no", "off")


@dataclass(frozen=True)
class Setting:
    """One option of a backend's ``compile``. ``kind`` is bool, int, float, str or an Enum
    (``object``: a Python-only parameter taken as it is, such as a callback); ``optional``: None
    (``none`` on the command line) is a value too; ``python``: Python objects accepted as they
    are besides ``kind`` (a Machine for the RDU's preset); ``cli``: ``--set`` may name it."""

    name: str
    kind: type
    default: Any
    help: str
    choices: tuple[str, ...] = ()
    optional: bool = False
    python: tuple[type, ...] = ()
    cli: bool = True

    def describe(self) -> str:
        """``name (type, default D): help`` for help texts."""
        default = "none" if self.default is None else getattr(self.default, "value", self.default)
        return f"{self.name} ({self.type_name()}, default {default}): {self.help}"

    def type_name(self) -> str:
        if self.choices:
            return "|".join(self.choices)
        if isinstance(self.kind, type) and issubclass(self.kind, enum.Enum):
            return "|".join(str(m.value) for m in self.kind)
        name = {bool: "true|false", int: "integer", float: "number", str: "text"}.get(self.kind, self.kind.__name__)
        return f"{name} or none" if self.optional else name

    def parse(self, value: Any) -> Any:
        """``value`` as this setting's type (strings from the command line are converted);
        raises ValueError with ``expected()``."""
        if self.kind is object or (self.python and isinstance(value, self.python)):
            return value
        text = value.strip() if isinstance(value, str) else None
        if value is None or (text is not None and text.lower() in ("none", "unbounded") and self.kind is not str):
            if self.optional:
                return None
            raise ValueError(self.expected())
        kind = self.kind
        if kind is bool:
            if isinstance(value, bool):
                return value
            if text is not None and text.lower() in _TRUE + _FALSE:
                return text.lower() in _TRUE
        elif kind is int:
            number = _number(value, text)
            if number is not None and math.isfinite(number) and float(number).is_integer():
                return int(number)
        elif kind is float:
            number = _number(value, text)
            if number is not None:
                return float(number)
        elif isinstance(kind, type) and issubclass(kind, enum.Enum):
            if isinstance(value, kind):
                return value
            for member in kind:
                if text is not None and text.lower() == str(member.value).lower():
                    return member
        elif isinstance(value, str):
            if not self.choices:
                return text
            for choice in self.choices:
                if text.lower() == choice.lower():
                    return choice
        raise ValueError(self.expected())

    def expected(self) -> str:
        """What a value must be, for messages: 'an integer', 'one of o0, o1', …"""
        if self.choices or (isinstance(self.kind, type) and issubclass(self.kind, enum.Enum)):
            return "one of " + self.type_name().replace("|", ", ")
        text = {bool: "true or false", int: "an integer", float: "a number"}.get(self.kind, "text")
        return f"{text} or none" if self.optional else text


def _number(value: Any, text: str | None) -> float | int | None:
    if isinstance(value, (int, float)) and not isinstance(value, bool):
        return value
    if text is None:
        return None
    for cast in (int, float):
        try:
            return cast(text)
        except ValueError:
            continue
    return None


def checked_options(backend: str, settings: Mapping[str, Setting], given: Mapping[str, Any],
                    source: str | None = None) -> dict[str, Any]:
    """``given`` with each value parsed to its setting's type; one ``OptionError`` line for a name
    the backend does not read (listing those it does) or a value of the wrong type. ``source``:
    where the names come from when not Python keywords (``--set``, a TOML file), which may name
    settings only (Python-only parameters are not among them)."""
    takes = {name: s for name, s in settings.items() if s.cli or source is None}
    out = {}
    for name, value in given.items():
        shown = f"{name}={value!r}" if source is None else f"{source} {name}={value}"
        if name not in takes:
            what = "option" if source is None else "setting"
            raise OptionError(f"{shown}: the {backend} backend has no {what} '{name}'; it takes "
                              f"{', '.join(takes) or 'none'}")
        try:
            out[name] = takes[name].parse(value)
        except ValueError as exc:
            raise OptionError(f"{shown}: the {backend} backend's {name} must be {exc} ({takes[name].help})") from None
    return out
