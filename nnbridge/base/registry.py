"""One registry type for every table nnbridge fills at import time (kernels, passes, formats,
per-format op translators, zoo models...).

A second definition for a key is refused with an error naming both definitions, so two modules
can never silently shadow each other; lookups may trigger a one-time ``load`` (importing the
modules whose decorators fill the table).
"""

from __future__ import annotations

import sys
from collections.abc import Callable, Hashable, Iterator, Mapping
from typing import Any, Generic, TypeVar

from .errors import DuplicateRegistrationError

K = TypeVar("K", bound=Hashable)
V = TypeVar("V")
F = TypeVar("F", bound=Callable[..., Any])


def _origin_of(value: Any, depth: int) -> str:
    module, name = getattr(value, "__module__", None), getattr(value, "__qualname__", None)
    if module and name:
        return f"{module}.{name}"
    frame = sys._getframe(depth + 1)
    return f"{frame.f_code.co_filename}:{frame.f_lineno}"


class Registry(Mapping[K, V], Generic[K, V]):
    """A read-only mapping outside ``register``; iteration order is registration order."""

    def __init__(self, name: str, load: Callable[[], None] | None = None):
        self.name = name
        self._entries: dict[K, V] = {}
        self._origins: dict[K, str] = {}
        self._load = load

    def register(self, key: K, value: V, *, origin: str | None = None) -> V:
        """Add ``key → value``; a key already present raises ``DuplicateRegistrationError``."""
        where = origin or _origin_of(value, 1)
        if key in self._entries:
            raise DuplicateRegistrationError(
                f"{self.name}: {key!r} is defined twice, by {self._origins[key]} and by {where}; "
                f"remove or rename one of them")
        self._entries[key] = value
        self._origins[key] = where
        return value

    def decorator(self, *keys: K, value: Callable[[K, Any], V] | None = None) -> Callable[[F], F]:
        """The decorator every table's ``@kernel``/``@importer``-style front end is made of: it files
        the function it decorates under each key (as ``value(key, fn)`` when the table holds records)
        and returns the function unchanged."""

        def wrap(fn: F) -> F:
            origin = f"{fn.__module__}.{fn.__qualname__}"
            for key in keys:
                self.register(key, fn if value is None else value(key, fn), origin=origin)
            return fn

        return wrap

    def unregister(self, key: K) -> V:
        """Take an entry out again (a plugin being unloaded, a test's toy op)."""
        self._origins.pop(key)
        return self._entries.pop(key)

    def origin(self, key: K) -> str:
        self._ensure_loaded()
        return self._origins[key]

    def _ensure_loaded(self) -> None:
        if self._load is not None:
            load, self._load = self._load, None
            load()

    def __getitem__(self, key: K) -> V:
        self._ensure_loaded()
        return self._entries[key]

    def get(self, key: K, default: Any = None) -> Any:
        self._ensure_loaded()
        return self._entries.get(key, default)

    def __contains__(self, key: object) -> bool:
        self._ensure_loaded()
        return key in self._entries

    def __iter__(self) -> Iterator[K]:
        self._ensure_loaded()
        return iter(self._entries)

    def __len__(self) -> int:
        self._ensure_loaded()
        return len(self._entries)

    def __repr__(self) -> str:
        return f"Registry({self.name!r}, {len(self._entries)} entries)"
