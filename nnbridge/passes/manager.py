"""Pass registry and pass manager.

A pass is a function ``(graph) -> bool`` (did it change the graph?) registered by name with
``@register_pass``, which may declare the passes it ``requires`` (as TVM's ``CreateFunctionPass``
does): the manager runs a prerequisite first unless it already ran and nothing changed the graph
since. A pass may also declare what it ``ensures``: postconditions (as onnx-ir's passes check
theirs) that the manager checks after it when verifying. A pipeline is a list of pass names and
``Fixpoint`` groups, which the manager repeats until no pass in the group changes the graph. Which
pipeline runs is the backend's business.

A pass that crashes (any exception that is not an ``NNBridgeError``, i.e. a bug rather than a
verdict on the model) is reported as a ``PassError`` naming the pass and the passes that ran
before it, so the report says where to look.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from contextvars import ContextVar
from dataclasses import dataclass, field

from ..base.errors import NNBridgeError
from ..base.registry import Registry
from ..ir import Graph
from ..ir.graph import paused_gc

#: a front end watching long work sets this: called with (pipeline steps done, steps)
PASS_PROGRESS: ContextVar[Callable[[int, int], None] | None] = ContextVar("pass_progress", default=None)

PassFn = Callable[[Graph], bool]
#: a postcondition: ``None`` when it holds, else what is wrong (one line)
Postcondition = Callable[[Graph], str | None]


class PassError(Exception):
    """A pass crashed or broke a promise: a bug in nnbridge, not in the model. Names the pass and
    the passes before it (the CLI prints it as an internal error)."""

    def __init__(self, name: str, before: Sequence[str], what: str):
        self.pass_name = name
        self.before = tuple(before)
        ran = f"after {', '.join(self.before[-6:])}" if self.before else "as the first pass"
        super().__init__(f"pass '{name}' ({ran}) {what}")


@dataclass(frozen=True)
class PassInfo:
    name: str
    fn: PassFn
    doc: str = ""
    requires: tuple[str, ...] = ()
    ensures: tuple[Postcondition, ...] = ()


@dataclass(frozen=True)
class Fixpoint:
    """Passes repeated as a group until none of them changes the graph (at most ``limit`` rounds)."""

    names: tuple[str, ...]
    limit: int = 8

    def __init__(self, *names: str, limit: int = 8):
        object.__setattr__(self, "names", names)
        object.__setattr__(self, "limit", limit)


Step = str | Fixpoint

PASSES: Registry[str, PassInfo] = Registry("passes")


def register_pass(name: str, requires: Sequence[str] = (),
                  ensures: Sequence[Postcondition] = ()) -> Callable[[PassFn], PassFn]:
    return PASSES.decorator(name, value=lambda _, fn: PassInfo(
        name, fn, (fn.__doc__ or "").strip().split("\n")[0], tuple(requires), tuple(ensures)))


def available_passes() -> dict[str, PassInfo]:
    return dict(PASSES)


def get_pass(name: str) -> PassInfo:
    if name not in PASSES:
        raise NNBridgeError(f"unknown pass '{name}'; available: {', '.join(sorted(PASSES)) or '(none)'}")
    return PASSES[name]


def pass_names(steps: Sequence[Step]) -> list[str]:
    """Every pass name a pipeline mentions, in order (a fixpoint group's names once)."""
    return [n for s in steps for n in ((s,) if isinstance(s, str) else s.names)]


@dataclass
class PassManager:
    """Runs a pipeline; optionally verifies and prints after each pass."""

    names: Sequence[Step]
    verify: bool = True
    print_after: bool = False
    printer: Callable[[str], None] = print
    after_each: Callable[[str, Graph], None] | None = None
    changed: list[str] = field(default_factory=list)

    def run(self, graph: Graph) -> Graph:
        for name in pass_names(self.names):  # fail on a typo before any work
            for required in get_pass(name).requires:
                get_pass(required)
        self._fresh: set[str] = set()  # passes that ran with no change to the graph since
        self._ran: list[str] = []  # every pass run so far, for a crash report
        report = PASS_PROGRESS.get()
        with paused_gc():
            for done, step in enumerate(self.names):
                if report is not None:
                    report(done, len(self.names))
                if isinstance(step, str):
                    self._run_one(get_pass(step), graph)
                    continue
                for _ in range(step.limit):
                    if not any([self._run_one(get_pass(n), graph) for n in step.names]):
                        break
            if report is not None:
                report(len(self.names), len(self.names))
        return graph

    def _run_one(self, info: PassInfo, graph: Graph) -> bool:
        for required in info.requires:
            if required not in self._fresh:
                self._run_one(get_pass(required), graph)
        try:
            changed = info.fn(graph)
        except NNBridgeError:
            raise  # a verdict on the model, already one line naming the node
        except Exception as exc:
            raise PassError(info.name, self._ran, f"crashed: {type(exc).__name__}: {exc}") from exc
        self._ran.append(info.name)
        if changed:
            self._fresh.clear()
            self.changed.append(info.name)
        self._fresh.add(info.name)
        if self.verify and changed:  # a pass that changed nothing left a verified graph as it was
            try:
                graph.verify()
            except NNBridgeError as exc:
                raise PassError(info.name, self._ran[:-1], f"left an invalid IR: {exc}") from exc
        if self.verify:
            for ensures in info.ensures:
                broken = ensures(graph)
                if broken is not None:
                    raise PassError(info.name, self._ran[:-1], f"broke its promise: {broken}")
        if self.print_after:
            self.printer(f"// after {info.name}\n{graph}")
        if self.after_each is not None:
            self.after_each(info.name, graph)
        return changed


def run_passes(graph: Graph, names: Sequence[Step], **options) -> Graph:
    return PassManager(list(names), **options).run(graph)
