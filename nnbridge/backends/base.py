"""The backend interface: ``Backend.compile(graph) -> Executable``; ``run(feeds)``.

``Executable.run`` validates feeds against the graph's declared inputs (names,
dtypes, static dims, symbolic dims bound consistently) before any backend code
sees them, so every backend reports bad input the same way.
"""

from __future__ import annotations

import abc
import enum
import math
import os
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import Any

import numpy as np

from ..base.errors import InputError, OptionError
from ..base.registry import Registry
from ..ir import DType, Graph, Node
from ..ir.feeds import match_inputs
from ..passes import Step
from ..reporting.report import Report

#: pass groups the backends' pipelines share (specs/passes.md §9, §12): clean-up after rewrites
#: (shapes are re-inferred after the rewrites that change them), constant folding, scale folding
CLEAN = ["eliminate", "infer-shapes"]
FOLD = ["fold", "eliminate", "infer-shapes"]
SCALE = ["fold-scale-axis", "fold", "eliminate"]


class Executable(abc.ABC):
    """A compiled model. ``run`` returns outputs by name; ``report`` describes the last run.

    ``run`` is reentrant, as onnxruntime's ``InferenceSession.run``: one executable may run from
    several threads at once, each run keeping its values and its report to itself (``_run`` keeps
    no per-run state on the executable or on what its runs share)."""

    def __init__(self, graph: Graph, backend: str):
        self.graph = graph
        self.backend = backend
        self._report: Report | Callable[[], Report] | None = None

    @property
    def report(self) -> Report | None:
        """The last run's report. A backend may hand ``run`` a function that makes it, called when
        the report is first read: an unprofiled reference run's per-node rows cost 10 µs of a
        mobile network's 0.5 ms to copy, for a report most runs never read."""
        made = self._report
        if callable(made):
            made = self._report = made()
        return made

    @report.setter
    def report(self, value: Report | Callable[[], Report] | None) -> None:
        self._report = value

    def __repr__(self) -> str:
        return (f"<{self.backend} executable of '{self.graph.name}': {len(self.graph.nodes)} nodes, "
                f"inputs {self.input_names}, outputs {self.output_names}>")

    @property
    def input_names(self) -> list[str]:
        return [v.name for v in self.graph.inputs]

    @property
    def output_names(self) -> list[str]:
        return [v.name for v in self.graph.outputs]

    def run(self, inputs: Mapping[str, Any]) -> dict[str, np.ndarray]:
        feeds = match_inputs(self.graph, inputs, complete=True)
        outputs, self.report = self._run(feeds)
        return outputs

    @abc.abstractmethod
    def _run(self, feeds: dict[str, Any]) -> tuple[dict[str, np.ndarray], Report | Callable[[], Report]]:
        """Compute all graph outputs from validated feeds; the run's report, or a function making it."""

    def save(self, path: str | os.PathLike) -> None:
        raise NotImplementedError(f"the {self.backend} backend has no compiled artifact format")


# -- what a backend's compile reads: each setting declared once ------------------------------------------
# ``Backend.options`` checks keyword options against these declarations, and the CLI derives
# ``--set``'s help and checks from the same ones, so the two cannot drift.

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
        parsed = self._typed(value, text)
        if parsed is _NO_VALUE:
            raise ValueError(self.expected())
        return parsed

    def _typed(self, value: Any, text: str | None) -> Any:
        """``value`` as ``kind`` (or one of ``choices``), else ``_NO_VALUE``."""
        kind = self.kind
        if kind is bool:
            if isinstance(value, bool):
                return value
            if text is not None and text.lower() in _TRUE + _FALSE:
                return text.lower() in _TRUE
        elif kind in (int, float):
            number = _number(value, text)
            if number is not None and kind is float:
                return float(number)
            if number is not None and math.isfinite(number) and float(number).is_integer():
                return int(number)
        elif isinstance(kind, type) and issubclass(kind, enum.Enum):
            return value if isinstance(value, kind) else _match(text, [(str(m.value), m) for m in kind])
        elif isinstance(value, str):
            return _match(text, [(c, c) for c in self.choices]) if self.choices else text
        return _NO_VALUE

    def expected(self) -> str:
        """What a value must be, for messages: 'an integer', 'one of o0, o1', …"""
        if self.choices or (isinstance(self.kind, type) and issubclass(self.kind, enum.Enum)):
            return "one of " + self.type_name().replace("|", ", ")
        text = {bool: "true or false", int: "an integer", float: "a number"}.get(self.kind, "text")
        return f"{text} or none" if self.optional else text


_NO_VALUE = object()  # a value that is not of a setting's type


def settings_table(settings: Mapping[str, Setting]) -> str:
    """The markdown table of a backend's settings (docs/smv.md and docs/rdu.md hold it, checked
    against this by tests/test_docs.py, so the docs name every setting the code takes)."""
    rows = ["| setting | `--set` | type | default | meaning |", "|---|---|---|---|---|"]
    for s in settings.values():
        default = "none" if s.default is None else getattr(s.default, "value", s.default)
        kind = s.type_name() if s.kind is not object else "Python object"
        cells = [f"`{s.name}`", "yes" if s.cli else "Python only", kind, str(default), s.help]
        rows.append("| " + " | ".join(c.replace("|", "\\|") for c in cells) + " |")
    return "\n".join(rows) + "\n"


def _match(text: str | None, named: list[tuple[str, Any]]) -> Any:
    """The value whose name equals ``text`` ignoring case, else ``_NO_VALUE``."""
    for name, value in named:
        if text is not None and text.lower() == name.lower():
            return value
    return _NO_VALUE


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


class Backend(abc.ABC):
    name: str = ""
    description: str = ""
    #: the float format the backend stores tensors in (None: the model's own types); `check`
    #: picks its verdict rule from this and the model's precision (docs/check.md)
    precision: DType | None = None
    #: whether it compiles statically shaped graphs only (every ``ChipSimulator``)
    static_shapes: bool = False

    def unsupported_reason(self, node: Node) -> str | None:
        """None if the backend can run ``node``, else why not."""
        return None

    #: opt level → the passes this backend runs before compiling (levels: 0 simplify only,
    #: 1 + fusion, 2 + constant folding, 3 + scale folding and layout alteration, each backend
    #: adapting them to what it executes); an unknown level gets the highest one
    pipelines: Mapping[int, list[Step]] = {}

    def pipeline(self, opt_level: int = 1) -> list[Step]:
        """The passes this backend runs before compiling at ``opt_level``."""
        if not self.pipelines:
            return []
        return list(self.pipelines.get(opt_level, self.pipelines[max(self.pipelines)]))

    #: every option ``compile`` reads, by name (``settings.Setting``: type, default, help); the CLI's
    #: ``--set`` help and checks come from here too, and anything else is refused
    settings: Mapping[str, Setting] = {}

    def options(self, given: Mapping[str, Any], source: str | None = None) -> dict[str, Any]:
        """``given`` checked against ``settings``, values parsed to their types (``source``: where
        they come from when not Python keywords, e.g. ``--set``)."""
        return checked_options(self.name, self.settings, given, source)

    @abc.abstractmethod
    def compile(self, graph: Graph, **config: Any) -> Executable: ...

    def supported_ops(self) -> set[str]:
        return set()


class ChipSimulator(Backend):
    """A backend that models a chip: it stores tensors in its own float format (``precision``)
    and prices them by their sizes, so it compiles statically shaped graphs only."""

    precision: DType
    static_shapes = True


#: backend name → the module that exposes it as ``BACKEND`` (imported on first use)
BACKEND_MODULES: Registry[str, str] = Registry("backends")
for _name in ("reference", "smv", "rdu"):
    BACKEND_MODULES.register(_name, f"nnbridge.backends.{_name}", origin=__name__)


def available_backends() -> list[str]:
    import importlib.util

    return [n for n, mod in BACKEND_MODULES.items() if importlib.util.find_spec(mod) is not None]


def get_backend(name: str) -> Backend:
    """The backend object by name (each backend package exposes ``BACKEND``)."""
    import importlib

    if name not in BACKEND_MODULES:
        raise InputError(f"unknown backend '{name}'; choose from {', '.join(available_backends())}")
    try:
        module = importlib.import_module(BACKEND_MODULES[name])
    except ModuleNotFoundError as exc:
        if exc.name == BACKEND_MODULES[name]:
            raise InputError(f"backend '{name}' is not available in this version of nnbridge") from None
        raise
    return module.BACKEND
