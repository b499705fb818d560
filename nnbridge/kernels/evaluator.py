"""Runs an IR graph with the registered kernels (the evaluator of the kernel layer).

Compilation turns the graph into a flat program once: every value gets a slot number, and each
step is a tuple of (kernel, context, input slots, output slots, slots to free); dead intermediates
are dropped to keep peak memory low. A run is a list copy and the program written out as one
straight-line Python function (``_straight_line``: each step a call with its slots as constant
indices, no loop, no argument list built; a third of a small graph's dispatch). A run's values
live in its own list, so runs of one plan may proceed from several threads at once.
"""

from __future__ import annotations

import functools
import time
import types
from collections.abc import Callable, Mapping
from contextvars import ContextVar
from dataclasses import dataclass
from typing import Any

import numpy as np

from ..base.errors import KernelError, NNBridgeError, Unsupported, UnsupportedOpError
from ..ir import DType, Graph, Node, op_traits
from .parallel import BlasInThisThread
from .registry import KernelSpec, get_kernel

#: a front end watching long runs sets this: called with (steps done, steps) as a top-level plan
#: executes (subgraph bodies do not report)
STEP_PROGRESS: ContextVar[Callable[[int, int], None] | None] = ContextVar("step_progress", default=None)
#: plans shorter than this run without reporting
REPORTED_STEPS = 64

_UNSET = object()  # a slot no step has written in this run
_ABSENT = 0  # the slot of an absent optional input: always None


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
    captured: tuple[str, ...] = ()  # names of enclosing-graph values its subgraphs read
    prepared: Callable[..., Any] | None = None  # the kernel's own callable for this node (KernelSpec.prepared)


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


class _Scoped:
    """The callable of a step whose subgraphs read the run's values: its program entry passes the
    captured values after the node's inputs, and this binds them to the context by name."""

    __slots__ = ("fn", "inputs", "names")

    def __init__(self, fn: Callable[..., Any], inputs: int, names: tuple[str, ...]):
        self.fn, self.inputs, self.names = fn, inputs, names

    def __call__(self, ctx: KernelContext, *args: Any) -> Any:
        env = dict(zip(self.names, args[self.inputs:]))
        return self.fn(ctx.bound(env), *args[:self.inputs])


class _Keep:
    """The callable of a constant step before its first run: computes and keeps the result."""

    __slots__ = ("fn", "step")

    def __init__(self, fn: Callable[..., Any], step: Step):
        self.fn, self.step = fn, step

    def __call__(self, ctx: KernelContext, *args: Any) -> Any:
        result = self.fn(ctx, *args)
        self.step.kept = result if type(result) is tuple else (result,)
        return result


class _Kept:
    """A constant step in watched runs once kept: its results without computing them."""

    __slots__ = ("result",)

    def __init__(self, result: tuple):
        self.result = result

    def __call__(self, ctx: KernelContext) -> tuple:
        return self.result


#: ops whose kernel returns a new array nothing else holds, so an activation may overwrite it (the
#: arithmetic ones: a residual sum then Relu, DenseNet's per-channel scale then Relu)
_FRESH_OUTPUT = frozenset({"Conv", "Add", "Sub", "Mul"})


class _Epilogue:
    """A convolution and the activation that alone reads its output, as one program entry: the
    activation overwrites the convolution's fresh float32 result (one call and one buffer fewer;
    mobile networks follow most convolutions with one), or, when the convolution was prepared
    with one (``joint``), runs inside its compiled loops. Other dtypes and layouts call the
    activation's kernel as its own step would."""

    __slots__ = ("producer", "activation", "ctx", "overwrite", "joint")

    def __init__(self, producer: Callable[..., Any], activation: Callable[..., Any], ctx: KernelContext,
                 overwrite: Callable[[np.ndarray], Any], joint: Callable[..., Any] | None = None):
        self.producer, self.activation, self.ctx, self.overwrite = producer, activation, ctx, overwrite
        self.joint = joint

    def __call__(self, ctx: KernelContext, *args: Any) -> Any:
        if self.joint is not None:
            y = self.joint(ctx, *args)
            if y is not None:
                return y
        y = self.producer(ctx, *args)
        if type(y) is np.ndarray and y.dtype == np.float32 and y.flags.c_contiguous and y.flags.writeable:
            self.overwrite(y)
            return y
        return self.activation(self.ctx, y)


def _join_pairs(program: list[tuple], join: Callable[[tuple, tuple], tuple | None]) -> list[tuple]:
    """``program`` with each entry and the one right after it replaced by ``join(entry, next)``
    where that gives an entry (the pair's inputs, the second's outputs, both releases but the value
    the first passes the second), in one walk."""
    joined: list[tuple] = []
    i = 0
    while i < len(program):
        entry = program[i]
        pair = join(entry, program[i + 1]) if i + 1 < len(program) else None
        joined.append(entry if pair is None else pair)
        i += 1 if pair is None else 2
    return joined


def _passes_one_value(entry: tuple, nxt: tuple) -> bool:
    """``entry`` has one output, which ``nxt`` reads and is the last to read, and neither is a
    constant step."""
    return (len(entry[3]) == 1 and entry[3][0] in nxt[2] and entry[3][0] in nxt[4]
            and not isinstance(entry[0], (_Keep, _Kept)) and not isinstance(nxt[0], (_Keep, _Kept)))


def _fuse_epilogues(program: list[tuple]) -> list[tuple]:
    """``program`` with each Conv (or Add, Sub, Mul) entry and the activation entry right after it
    merged into one ``_Epilogue`` when the activation is the only reader of its single output (the value
    is freed right after it) and neither is a constant step; a prepared convolution that can
    apply the activation itself (``with_epilogue``) does."""
    from .ops.activation import curve_of, in_place

    def join(entry: tuple, nxt: tuple) -> tuple | None:
        if entry[1].node.op not in _FRESH_OUTPUT or nxt[2] != entry[3] or not _passes_one_value(entry, nxt):
            return None
        overwrite = in_place(nxt[1].node)
        if overwrite is None:
            return None
        fn, ctx, ins, _, release = entry
        curve = curve_of(nxt[1].node)
        with_epilogue = getattr(fn, "with_epilogue", None)
        joint = with_epilogue(*curve) if with_epilogue is not None and curve is not None else None
        return (_Epilogue(fn, nxt[0], nxt[1], overwrite, joint), ctx, ins, nxt[3],
                tuple(r for r in (*release, *nxt[4]) if r != entry[3][0]))

    return _join_pairs(program, join)


class _Gate:
    """A squeeze-excite's gate as one program entry: a prepared 1×1 convolution of the block's
    squeezed map with its activation as epilogue (``_Epilogue``), and the ``Mul`` that alone reads
    its result and scales the block's map by it, computed by the convolution's ``gated`` callable
    in one pass; when that declines (returns None), the two entries' callables in turn. Its
    arguments: the convolution's inputs, then the map."""

    __slots__ = ("gated", "conv", "mul", "mul_ctx", "map_first")

    def __init__(self, gated: Callable[..., Any], conv: _Epilogue, mul: Callable[..., Any], mul_ctx: KernelContext,
                 map_first: bool):
        self.gated, self.conv, self.mul, self.mul_ctx, self.map_first = gated, conv, mul, mul_ctx, map_first

    def __call__(self, ctx: KernelContext, *args: Any) -> Any:
        y = self.gated(ctx, *args)
        if y is not None:
            return y
        s = self.conv(ctx, *args[:-1])
        return self.mul(self.mul_ctx, args[-1], s) if self.map_first else self.mul(self.mul_ctx, s, args[-1])


def _fuse_gates(program: list[tuple]) -> list[tuple]:
    """``program`` with each ``_Epilogue`` entry whose convolution offers a gate (``gated``) merged
    with the ``Mul`` entry right after it that alone reads its result, into one ``_Gate``."""
    from .ops.activation import curve_of

    def join(entry: tuple, nxt: tuple) -> tuple | None:
        fn = entry[0]
        if (type(fn) is not _Epilogue or nxt[1].node.op != "Mul" or len(nxt[2]) != 2 or nxt[2][0] == nxt[2][1]
                or not _passes_one_value(entry, nxt) or not hasattr(fn.producer, "gated")):
            return None
        curve = curve_of(fn.ctx.node)
        gated = fn.producer.gated(*curve) if curve is not None else None
        if gated is None:
            return None
        s = entry[3][0]
        map_first = nxt[2][1] == s
        x = nxt[2][0] if map_first else nxt[2][1]
        return (_Gate(gated, fn, nxt[0], nxt[1], map_first), entry[1], (*entry[2], x), nxt[3],
                tuple(r for r in (*entry[4], *nxt[4]) if r != s))

    return _join_pairs(program, join)


class _Biased:
    """A float32 MatMul or Conv and the Add right after it that alone reads its result, as one
    program entry: the sum written into the result's own buffer (one array and one dispatch fewer;
    each Linear of a small transformer is a MatMul and its bias, each residual block ends in a
    convolution and its residual sum), then the Add's own activation when it had one joined
    (``_Epilogue``: ResNet's sum then Relu) overwriting it. Its arguments: the producer's inputs,
    then the other addend. When the result is not a fresh float32 array of the shape planned for,
    the Add entry's callable (its activation included) computes the sum as before."""

    __slots__ = ("matmul", "add", "add_ctx", "bias_first", "shape", "overwrite", "joint")

    def __init__(self, matmul: Callable[..., Any], add: Callable[..., Any], add_ctx: KernelContext,
                 bias_first: bool, shape: tuple[int, ...]):
        self.matmul, self.add, self.add_ctx, self.bias_first, self.shape = matmul, add, add_ctx, bias_first, shape
        self.overwrite = add.overwrite if type(add) is _Epilogue else None
        with_residual = getattr(matmul, "with_residual", None)  # a prepared small convolution: the sum compiled
        self.joint = None if with_residual is None else with_residual()

    def __call__(self, ctx: KernelContext, *args: Any) -> Any:
        if self.joint is not None:
            y = self.joint(ctx, *args)
            if y is not None:
                if self.overwrite is not None:
                    self.overwrite(y)
                return y
        y = self.matmul(ctx, *args[:-1])
        bias = args[-1]
        if (type(y) is np.ndarray and y.shape == self.shape and y.dtype == bias.dtype == np.float32
                and y.flags.c_contiguous and y.flags.writeable):
            np.add(y, bias, out=y)  # IEEE addition commutes: bit for bit the Add kernel's sum
            if self.overwrite is not None:
                self.overwrite(y)
            return y
        return self.add(self.add_ctx, bias, y) if self.bias_first else self.add(self.add_ctx, y, bias)


def _fuse_biases(program: list[tuple]) -> list[tuple]:
    """``program`` with each MatMul or Conv entry (an activation joined or not) and the Add entry
    right after it merged into one ``_Biased`` when the Add alone reads the result and adds a
    float32 weight or value that does not widen the result's static shape (the addend is passed
    at run time; its dtype is checked again then)."""
    def join(entry: tuple, nxt: tuple) -> tuple | None:
        add = nxt[1].node
        if (entry[1].node.op not in ("MatMul", "Conv") or add.op != "Add" or add.domain or len(nxt[2]) != 2
                or nxt[2][0] == nxt[2][1] or not _passes_one_value(entry, nxt)):
            return None
        product = entry[3][0]
        bias_first = nxt[2][1] == product
        other, result = (add.inputs[0], add.inputs[1]) if bias_first else (add.inputs[1], add.inputs[0])
        out = add.outputs[0].type
        float32 = other.const.dtype == np.float32 if other.const is not None else other.type.dtype == DType.FLOAT32
        if not float32 or not out.is_static or tuple(out.shape) != tuple(result.type.shape or ()):
            return None
        return (_Biased(entry[0], nxt[0], nxt[1], bias_first, tuple(out.shape)), entry[1],
                (*entry[2], nxt[2][0] if bias_first else nxt[2][1]), nxt[3],
                tuple(r for r in (*entry[4], *nxt[4]) if r != product))

    return _join_pairs(program, join)


def _fused(program: list[tuple]) -> list[tuple]:
    """The program runs execute: Conv epilogues, squeeze-excite gates, MatMul biases and residual sums joined."""
    return _fuse_biases(_fuse_gates(_fuse_epilogues(program)))


def _last_uses(nodes: list[Node]) -> dict[str, int]:
    """Each value's last reader (by position in ``nodes``; subgraph captures count)."""
    last_use: dict[str, int] = {}
    for i, node in enumerate(nodes):
        for v in list(node.inputs) + node.captured():
            if v is not None:
                last_use[v.name] = i
    return last_use


def _constant(node: Node, static: set[str]) -> bool:
    """A foldable node without subgraphs whose inputs are all the same on every run."""
    return (not node.subgraphs() and op_traits(node.op, node.domain).foldable
            and all(v is None or v.name in static for v in node.inputs))


def _step(i: int, node: Node, last_use: dict[str, int], keep: set[str], local: set[str], static: set[str],
          weights: Mapping[str, Any]) -> Step:
    """Node ``i``'s step: its kernel with bound attributes (or the callable it prepares for the node,
    given the plan's ``weights`` among its inputs), the values it frees, and whether it is constant
    (then its outputs join ``static``)."""
    spec = get_kernel(node.op, node.domain)
    if spec is None:
        raise UnsupportedOpError("reference backend", [Unsupported(node.op, node.name, "no reference kernel")])
    release = [name for name in {v.name for v in node.inputs if v is not None}
               if last_use.get(name) == i and name not in keep and name in local]
    release += [o.name for o in node.outputs if o.name not in last_use and o.name not in keep]
    constant = _constant(node, static)
    if constant:  # e.g. a weight made by ConstantOfShape above the fold limit
        static.update(o.name for o in node.outputs)
    captured = tuple(dict.fromkeys(v.name for v in node.captured())) if node.subgraphs() else ()
    kwargs = spec.bind(node)
    prepared = None if captured or node.subgraphs() else spec.prepared(
        node, tuple(None if v is None else weights.get(v.name) for v in node.inputs))
    return Step(spec, KernelContext(node), [v.name if v is not None else None for v in node.inputs],
                [o.name for o in node.outputs], release, kwargs, constant,
                scoped=bool(node.subgraphs()), captured=captured, prepared=prepared)


def _store(values: list[Any], outs: tuple[int, ...], result: tuple) -> None:
    """A step's results returned as a tuple, into their slots (fewer results leave slots unset)."""
    for o, value in zip(outs, result):
        values[o] = value


def _straight_line(program: list[tuple]) -> tuple[Callable[[list[Any]], None], dict[int, tuple]]:
    """``program`` as one function of a run's values list, with the entry each of its lines runs
    (a failure's line names its node). Each step: its callable on its input slots, one result
    into its first output slot (a tuple's into its slots, as the loop stored them), its dead
    slots cleared."""
    names: dict[str, Any] = {"_tuple": tuple, "_store": _store}
    lines, entry_of = ["def run(values):"], {}
    for k, entry in enumerate(program):
        fn, ctx, ins, outs, release = entry
        names[f"f{k}"], names[f"c{k}"] = fn, ctx
        first = len(lines) + 1
        lines.append(f"    r = f{k}(c{k}{''.join(f', values[{i}]' for i in ins)})")
        lines.append(f"    if type(r) is _tuple: _store(values, {outs!r}, r)")
        if outs:
            lines.append(f"    else: values[{outs[0]}] = r")
        if release:
            lines.append(f"    {' = '.join(f'values[{i}]' for i in release)} = None")
        entry_of.update((line, entry) for line in range(first, len(lines) + 1))
    lines.append("    return None")
    code = compile("\n".join(lines), "<nnbridge plan>", "exec")
    function = next(c for c in code.co_consts if isinstance(c, types.CodeType))
    return types.FunctionType(function, names), entry_of


def _failed_entry(exc: BaseException, run: Callable, entry_of: dict[int, tuple]) -> tuple | None:
    """The program entry whose line of ``run`` raised ``exc``."""
    tb = exc.__traceback__
    while tb is not None:
        if tb.tb_frame.f_code is run.__code__:
            return entry_of.get(tb.tb_lineno)
        tb = tb.tb_next
    return None


class Plan:
    """A graph compiled into a program of steps over numbered slots. Runs share it and keep
    their own values (``execute`` is reentrant: one plan may run from several threads at once)."""

    def __init__(self, graph: Graph, align_weights: bool = False):
        """``align_weights`` copies misaligned weights once for repeated runs (the reference backend);
        a single run over a large model (a converter's calibration) keeps them in place."""
        self.graph = graph
        self.weights = aligned_weights(graph.initializers) if align_weights else graph.initializers
        nodes = graph.nodes
        keep = {v.name for v in graph.outputs}
        last_use = _last_uses(nodes)
        local = {v.name for v in graph.inputs} | {o.name for n in nodes for o in n.outputs}
        static = set(graph.initializers)  # values that are the same on every run
        self.steps: list[Step] = [_step(i, node, last_use, keep, local, static, self.weights)
                                  for i, node in enumerate(nodes)]
        self._link(local)

    def _link(self, local: set[str]) -> None:
        """Number every value and build the program the runs loop over."""
        slots: dict[str, int] = {}

        def slot(name: str | None) -> int:
            if name is None:
                return _ABSENT
            if name not in slots:
                slots[name] = len(slots) + 1
            return slots[name]

        for name in self.weights:
            slot(name)
        self._feeds = [(v.name, slot(v.name)) for v in self.graph.inputs]
        program = []
        for step in self.steps:
            ins = tuple(slot(n) for n in step.inputs)
            fn = step.prepared or step.spec.fn
            if step.kwargs and step.prepared is None:  # attributes bound once; none: called without **
                fn = functools.partial(fn, **step.kwargs)
            if step.scoped:
                fn = _Scoped(fn, len(ins), step.captured)
                ins += tuple(slot(n) for n in step.captured)
            if step.constant:
                fn = _Keep(fn, step)
            program.append((fn, step.ctx, ins, tuple(slot(n) for n in step.outputs),
                            tuple(slot(n) for n in step.release)))
        self._outputs = [slot(v.name) for v in self.graph.outputs]
        # values read here but made neither here nor by the caller's feeds: an enclosing graph's
        made = set(self.weights) | {v.name for v in self.graph.inputs} | local
        self._outer = [(name, index) for name, index in slots.items() if name not in made]
        template: list[Any] = [_UNSET] * (len(slots) + 1)
        template[_ABSENT] = None
        for name, value in self.weights.items():
            template[slots[name]] = value
        self._template = template
        self._steps_program = self._watched = program
        self._program = _fused(program)
        self._run = _straight_line(self._program)
        self._constants = [i for i, step in enumerate(self.steps) if step.constant]
        self.slots = slots

    def _keep_constants(self) -> None:
        """After a run computed them: constant steps' results join the template and those steps
        leave the fast program (list swaps, so a concurrent run keeps the lists it started with);
        watched runs still see them, from the kept results."""
        if any(self.steps[i].kept is None for i in self._constants):
            return
        template, watched = list(self._template), list(self._watched)
        for i in self._constants:
            _, ctx, ins, outs, release = self._watched[i]
            for o, value in zip(outs, self.steps[i].kept):
                template[o] = value
            watched[i] = (_Kept(self.steps[i].kept), ctx, (), outs, release)
        keep = set(self._constants)
        self._template, self._watched = template, watched
        self._steps_program = [entry for i, entry in enumerate(self._steps_program) if i not in keep]
        self._program = _fused(self._steps_program)
        self._run = _straight_line(self._program)
        self._constants = []

    def execute(self, feeds: Mapping[str, Any], outer: Mapping[str, Any] | None = None,
                observe: Callable[[Node, tuple], None] | None = None,
                timings: list[tuple[Node, float]] | None = None) -> list[Any]:
        """The graph's outputs; ``observe(node, outputs)`` sees every node's results as they are made
        (to measure intermediates without keeping them alive); ``timings`` gets (node, seconds)
        for each kernel this run computes (subgraph bodies included in their node's time)."""
        values = self._template.copy()
        for name, index in self._feeds:
            if name in feeds:
                values[index] = feeds[name]
        for name, index in self._outer:
            source = feeds if name in feeds else outer
            if source is None or name not in source:
                raise KernelError(f"graph '{self.graph.name}': value '{name}' is read but never given or computed")
            values[index] = source[name]
        report = STEP_PROGRESS.get() if outer is None and len(self._program) >= REPORTED_STEPS else None
        with BlasInThisThread():
            if observe is None and timings is None and report is None:
                run, entry_of = self._run  # one read: a concurrent _keep_constants swaps the pair
                try:
                    run(values)
                except NNBridgeError:
                    raise
                except Exception as exc:
                    raise _failure(_failed_entry(exc, run, entry_of), exc) from exc
            else:
                self._run_watched(self._watched, values, observe, timings, report)
        if self._constants:
            self._keep_constants()
        result = [values[i] for i in self._outputs]
        for v, value in zip(self.graph.outputs, result):
            if value is _UNSET:
                raise KernelError(f"graph '{self.graph.name}': output '{v.name}' was never computed")
        return result

    def _run_watched(self, program: list[tuple], values: list[Any], observe, timings, report) -> None:
        """The same loop with a caller watching: per-node results, times or progress."""
        entry = None
        try:
            for done, entry in enumerate(program):
                if report is not None and done % 16 == 0:
                    report(done, len(program))
                fn, ctx, ins, outs, release = entry
                start = time.perf_counter() if timings is not None else 0.0
                result = fn(ctx, *[values[i] for i in ins])
                if timings is not None and type(fn) is not _Kept:
                    timings.append((ctx.node, time.perf_counter() - start))
                if type(result) is not tuple:
                    result = (result,)
                if observe is not None:
                    observe(ctx.node, result)
                for o, value in zip(outs, result):
                    values[o] = value
                for i in release:
                    values[i] = None
            if report is not None:
                report(len(program), len(program))
        except NNBridgeError:
            raise
        except Exception as exc:
            raise _failure(entry, exc) from exc


def _failure(entry: tuple | None, exc: Exception) -> Exception:
    if entry is None:
        return exc
    node = entry[1].node
    return KernelError(f"node '{node.name}' ({node.op}) failed: {type(exc).__name__}: {exc}")


def compiled_plan(graph: Graph) -> Plan:
    """Plans of subgraphs are built once and reused across iterations, kept on the graph itself so
    that they go with it: a plan refers to its graph (and through ``parent`` to the whole model), so
    in a ``WeakKeyDictionary`` the key never died and every model a process ran stayed in memory."""
    plan = graph.memo.get(Plan)
    if plan is None:
        plan = graph.memo[Plan] = Plan(graph)
    return plan
