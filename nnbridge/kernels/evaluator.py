"""Runs an IR graph with the registered numpy kernels (the evaluator of the kernel layer).

Compilation turns the graph into a flat list of steps once (kernel, context,
input and output names, and which values die after the step) so that a run is a
tight loop; dead intermediates are dropped to keep peak memory low.
"""

from __future__ import annotations

import time
import weakref
from collections import ChainMap
from collections.abc import Callable, Mapping, MutableMapping
from contextvars import ContextVar
from dataclasses import dataclass
from typing import Any

import numpy as np

from ..base.errors import KernelError, NNBridgeError, Unsupported, UnsupportedOpError
from ..ir import Graph, Node, op_traits
from .registry import KernelSpec, get_kernel

#: a front end watching long runs sets this: called with (steps done, steps) as a top-level plan
#: executes (subgraph bodies do not report)
STEP_PROGRESS: ContextVar[Callable[[int, int], None] | None] = ContextVar("step_progress", default=None)
#: plans shorter than this run without reporting
REPORTED_STEPS = 64


class KernelContext:
    """What a kernel may know besides its inputs and attributes (its keyword arguments): the node
    (its name for messages, its output count) and the subgraph runner.

    A plan's contexts are shared by every run of it, from any thread, so they hold nothing
    of a run: a node with subgraphs gets ``bound`` to its run's values (``env``) as it runs."""

    __slots__ = ("node", "env")

    def __init__(self, node: Node, env: Mapping[str, Any] | None = None):
        self.node = node
        self.env: Mapping[str, Any] = env if env is not None else {}

    def bound(self, env: Mapping[str, Any]) -> KernelContext:
        """This node's context for one run that sees ``env``."""
        return KernelContext(self.node, env)

    def run_graph(self, graph: Graph, feeds: Mapping[str, Any]) -> list[Any]:
        """Run a subgraph (If/Loop/Scan bodies); it sees this node's environment."""
        plan = compiled_plan(graph)
        return plan.execute(feeds, outer=self.env)


@dataclass
class Step:
    spec: KernelSpec
    ctx: KernelContext
    inputs: list[str | None]
    outputs: list[str]
    release: list[str]  # values no longer needed after this step
    kwargs: dict[str, Any]  # the node's attributes, bound once when the plan is built
    constant: bool = False  # every input is a constant: computed on the first run, then kept
    kept: Any = None
    scoped: bool = False  # runs subgraphs, which read the run's values: its context is bound per run


def unsupported_nodes(graph: Graph) -> list[Unsupported]:
    """Every node (subgraphs included) that no kernel can run."""
    bad: list[Unsupported] = []
    for node in graph.walk():
        spec = get_kernel(node.op, node.domain)
        if spec is None:
            bad.append(Unsupported(node.op, node.name, "no reference kernel", node.domain))
            continue
        try:
            reason = spec.unsupported_reason(node)
        except Exception as exc:  # a check must never crash compilation
            reason = f"cannot check ({exc})"
        if reason:
            bad.append(Unsupported(node.op, node.name, reason, node.domain))
    return bad


def aligned_weights(initializers: Mapping[str, Any]) -> dict[str, Any]:
    """The initializers with every misaligned array copied once: a weight read in place from a
    memory-mapped file starts wherever its bytes lie in the file, and numpy runs misaligned
    arrays on slow element-by-element paths (measured: BERT-base's embedding Gather 8.8 ms
    against 6.5 µs aligned). Aligned arrays are kept as they are."""
    return {name: np.array(value) if isinstance(value, np.ndarray) and not value.flags.aligned else value
            for name, value in initializers.items()}


class Plan:
    """A graph compiled into steps. Runs share it and keep their own values (``execute`` is
    reentrant: one plan may run from several threads at once)."""

    def __init__(self, graph: Graph, align_weights: bool = False):
        """``align_weights`` copies misaligned weights once for repeated runs (the reference backend);
        a single run over a large model (a converter's calibration) keeps them in place."""
        self.graph = graph
        self.weights = aligned_weights(graph.initializers) if align_weights else graph.initializers
        nodes = graph.nodes
        keep = {v.name for v in graph.outputs}
        last_use: dict[str, int] = {}
        for i, node in enumerate(nodes):
            for v in list(node.inputs) + node.captured():
                if v is not None:
                    last_use[v.name] = i
        self.steps: list[Step] = []
        local = {v.name for v in graph.inputs} | {o.name for n in nodes for o in n.outputs}
        static = set(graph.initializers)  # values that are the same on every run
        for i, node in enumerate(nodes):
            spec = get_kernel(node.op, node.domain)
            if spec is None:
                raise UnsupportedOpError("reference backend", [Unsupported(node.op, node.name, "no reference kernel")])
            release = [
                name for name in {v.name for v in node.inputs if v is not None}
                if last_use.get(name) == i and name not in keep and name in local
            ]
            release += [o.name for o in node.outputs if o.name not in last_use and o.name not in keep]
            constant = (not node.subgraphs() and op_traits(node.op, node.domain).foldable
                        and all(v is None or v.name in static for v in node.inputs))
            if constant:  # e.g. a weight made by ConstantOfShape above the fold limit
                static.update(o.name for o in node.outputs)
            self.steps.append(Step(spec, KernelContext(node),
                                   [v.name if v is not None else None for v in node.inputs],
                                   [o.name for o in node.outputs], release, spec.bind(node), constant,
                                   scoped=bool(node.subgraphs())))

    @staticmethod
    def _compute(step: Step, env: Mapping[str, Any], timings: list[tuple[Node, float]] | None) -> tuple:
        args = [env[name] if name is not None else None for name in step.inputs]
        ctx = step.ctx.bound(env) if step.scoped else step.ctx
        start = time.perf_counter() if timings is not None else 0.0
        try:
            kwargs = step.kwargs  # a call without ** when there are none: measurably cheaper per node
            result = step.spec.fn(ctx, *args, **kwargs) if kwargs else step.spec.fn(ctx, *args)
        except NNBridgeError:
            raise
        except Exception as exc:
            node = step.ctx.node
            raise KernelError(f"node '{node.name}' ({node.op}) failed: {type(exc).__name__}: {exc}") from exc
        if timings is not None:
            timings.append((step.ctx.node, time.perf_counter() - start))
        return result if isinstance(result, tuple) else (result,)  # a list is one sequence value

    def execute(self, feeds: Mapping[str, Any], outer: Mapping[str, Any] | None = None,
                observe: Callable[[Node, tuple], None] | None = None,
                timings: list[tuple[Node, float]] | None = None) -> list[Any]:
        """The graph's outputs; ``observe(node, outputs)`` sees every node's results as they are made
        (to measure intermediates without keeping them alive); ``timings`` gets (node, seconds)
        for each kernel this run computes (subgraph bodies included in their node's time)."""
        local: dict[str, Any] = dict(self.weights)
        local.update(feeds)
        env: MutableMapping[str, Any] = ChainMap(local, outer) if outer is not None else local
        report = STEP_PROGRESS.get() if outer is None and len(self.steps) >= REPORTED_STEPS else None
        for done, step in enumerate(self.steps):
            if report is not None and done % 16 == 0:
                report(done, len(self.steps))
            if step.kept is not None:
                result = step.kept
            else:
                result = self._compute(step, env, timings)
                if step.constant:
                    step.kept = result
            if observe is not None:
                observe(step.ctx.node, result)
            for name, value in zip(step.outputs, result):
                local[name] = value
            for name in step.release:
                local.pop(name, None)
        if report is not None:
            report(len(self.steps), len(self.steps))
        try:
            return [env[v.name] for v in self.graph.outputs]
        except KeyError as exc:
            raise KernelError(f"graph '{self.graph.name}': output {exc} was never computed") from None


_PLANS: weakref.WeakKeyDictionary[Graph, Plan] = weakref.WeakKeyDictionary()


def compiled_plan(graph: Graph) -> Plan:
    """Plans of subgraphs are built once and reused across iterations."""
    plan = _PLANS.get(graph)
    if plan is None:
        plan = _PLANS[graph] = Plan(graph)
    return plan
