"""The backend interface: ``Backend.compile(graph) -> Executable``; ``run(feeds)``.

``Executable.run`` validates feeds against the graph's declared inputs (names,
dtypes, static dims, symbolic dims bound consistently) before any backend code
sees them, so every backend reports bad input the same way.
"""

from __future__ import annotations

import abc
import os
from collections.abc import Mapping
from typing import Any

import numpy as np

from ..errors import InputError
from ..ir import DType, Graph, Node
from ..passes import Step
from ..registry import Registry
from ..report import Report
from .settings import Setting, checked_options

#: pass groups the backends' pipelines share (specs/passes.md §9, §12): clean-up after rewrites
#: (shapes are re-inferred after the rewrites that change them), constant folding, scale folding
CLEAN = ["eliminate", "infer-shapes"]
FOLD = ["fold", "eliminate", "infer-shapes"]
SCALE = ["fold-scale-axis", "fold", "eliminate"]


class Executable(abc.ABC):
    """A compiled model. ``run`` returns outputs by name; ``report`` describes the last run."""

    def __init__(self, graph: Graph, backend: str):
        self.graph = graph
        self.backend = backend
        self.report: Report | None = None

    @property
    def input_names(self) -> list[str]:
        return [v.name for v in self.graph.inputs]

    @property
    def output_names(self) -> list[str]:
        return [v.name for v in self.graph.outputs]

    def run(self, inputs: Mapping[str, Any]) -> dict[str, np.ndarray]:
        feeds = validate_feeds(self.graph, inputs)
        outputs, self.report = self._run(feeds)
        return outputs

    @abc.abstractmethod
    def _run(self, feeds: dict[str, Any]) -> tuple[dict[str, np.ndarray], Report]:
        """Compute all graph outputs from validated feeds."""

    def save(self, path: str | os.PathLike) -> None:
        raise NotImplementedError(f"the {self.backend} backend has no compiled artifact format")


class Backend(abc.ABC):
    name: str = ""
    description: str = ""
    #: the float format the backend stores tensors in (None: the model's own types); `check`
    #: picks its verdict rule from this and the model's precision (docs/check.md)
    precision: DType | None = None
    #: a simulator prices tensors by their sizes: it compiles statically shaped graphs only
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


def validate_feeds(graph: Graph, inputs: Mapping[str, Any]) -> dict[str, Any]:
    """Check names, dtypes and shapes of user inputs; symbolic dims must agree."""
    expected = {v.name: v for v in graph.inputs}
    unknown = sorted(set(inputs) - set(expected))
    if unknown:
        raise InputError(f"unknown input(s) {unknown}; the model takes {sorted(expected)}")
    missing = [n for n in expected if n not in inputs]
    if missing:
        raise InputError(f"missing input(s) {missing}; the model takes {sorted(expected)}")
    bound: dict[str, int] = {}
    feeds: dict[str, Any] = {}
    for name, value in expected.items():
        given = inputs[name]
        t = value.type
        if t.elem is not None or isinstance(given, (list, tuple)) or given is None:
            feeds[name] = given  # sequences / optionals: passed through
            continue
        array = np.asarray(given)
        if t.dtype is not None and t.dtype is not DType.STRING and array.dtype != t.dtype.numpy:
            raise InputError(f"input '{name}' has dtype {array.dtype}; the model declares {t.dtype.short}")
        if t.shape is not None:
            if array.ndim != len(t.shape):
                raise InputError(f"input '{name}' has shape {list(array.shape)}; the model declares "
                                 f"rank {len(t.shape)} {list(t.shape)}")
            for axis, (want, got) in enumerate(zip(t.shape, array.shape)):
                if isinstance(want, int) and want != got:
                    raise InputError(f"input '{name}' has shape {list(array.shape)}; the model "
                                     f"declares {list(t.shape)} (axis {axis})")
                if isinstance(want, str):
                    if bound.setdefault(want, got) != got:
                        raise InputError(f"input '{name}': symbolic dim '{want}' is {got} here but "
                                         f"{bound[want]} in another input")
        feeds[name] = array
    return feeds


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
