"""Pass registry and pass manager.

A pass is a function ``(graph) -> bool`` (did it change the graph?) registered by
name with ``@register_pass``. Pass *implementations* live in ``nnbridge.passes``;
this module only composes them, so the IR depends on no pass.
"""

from __future__ import annotations

import importlib
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field

from ..errors import NNBridgeError
from .graph import Graph, paused_gc

PassFn = Callable[[Graph], bool]


@dataclass(frozen=True)
class PassInfo:
    name: str
    fn: PassFn
    doc: str = ""


_PASSES: dict[str, PassInfo] = {}


def register_pass(name: str) -> Callable[[PassFn], PassFn]:
    def wrap(fn: PassFn) -> PassFn:
        doc = (fn.__doc__ or "").strip().split("\n")[0]
        _PASSES[name] = PassInfo(name, fn, doc)
        return fn

    return wrap


def _load_builtin_passes() -> None:
    importlib.import_module("nnbridge.passes")


def available_passes() -> dict[str, PassInfo]:
    _load_builtin_passes()
    return dict(_PASSES)


def get_pass(name: str) -> PassInfo:
    passes = available_passes()
    if name not in passes:
        raise NNBridgeError(
            f"unknown pass '{name}'; available: {', '.join(sorted(passes)) or '(none)'}"
        )
    return passes[name]


@dataclass
class PassManager:
    """Runs a named list of passes; optionally verifies and prints after each."""

    names: Sequence[str]
    verify: bool = True
    print_after: bool = False
    printer: Callable[[str], None] = print
    after_each: Callable[[str, Graph], None] | None = None
    changed: list[str] = field(default_factory=list)

    def run(self, graph: Graph) -> Graph:
        infos = [get_pass(n) for n in self.names]  # fail on a typo before any work
        with paused_gc():
            for info in infos:
                self._run_one(info, graph)
        return graph

    def _run_one(self, info: PassInfo, graph: Graph) -> None:
        changed = info.fn(graph)
        if changed:
            self.changed.append(info.name)
        if self.verify and changed:  # a pass that changed nothing left a verified graph as it was
            try:
                graph.verify()
            except NNBridgeError as exc:
                raise NNBridgeError(f"IR invalid after pass '{info.name}': {exc}") from exc
        if self.print_after:
            self.printer(f"// after {info.name}\n{graph}")
        if self.after_each is not None:
            self.after_each(info.name, graph)


def run_passes(graph: Graph, names: Sequence[str], **options) -> Graph:
    return PassManager(list(names), **options).run(graph)
