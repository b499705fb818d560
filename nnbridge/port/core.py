"""``port``: one pass over a model for every target, sharing what the targets have in common.

The model is read and pinned once, its inputs are drawn once (seeded, as ``check`` draws them), and
onnxruntime's run of the source is the reference of every row. Each file target converts the
pinned graph exactly as its suggested ``convert`` command does (same reader, pins and writer
options) into a scratch directory, then the written file is read back and judged; the RDU's
program is compiled once for batch 1 and serves its numerics, its size and the search for a
compute-bound batch. Nothing is written outside the scratch directory unless ``keep``.
"""

from __future__ import annotations

import contextlib
import os
import shlex
import shutil
import tempfile
import time
from collections.abc import Callable, Mapping, Sequence
from pathlib import Path
from typing import Any

import numpy as np

from ..base.errors import InputError, NNBridgeError, UnsupportedOpError
from ..ir import Graph, Value
from .report import Conversion, Numerics, PortReport, TargetReport
from .targets import TARGETS, Target

#: the reader's options port takes besides pins, and the flag that says each on every command
LOAD_FLAGS = {"synthetic_scale": "--smaug-synthetic-scale", "activations": "--smaug-activations",
              "lbann_training_layers": "--lbann-training-layers", "lbann_trust_paths": "--lbann-trust-paths"}
#: asks for the values of dynamic dims: the inputs left dynamic → (dims, input_shapes) to pin
Ask = Callable[[list[Value]], tuple[dict[str, int], dict[str, tuple[int, ...]]]]


def port(model: str | os.PathLike, targets: Sequence[str] | None = None, *, dims: Mapping[str, int] | None = None,
         input_shapes: Mapping[str, Sequence[int]] | None = None, seed: int = 0, out_dir: str = "out",
         keep: bool = False, ask: Ask | None = None, progress: Callable[[str], None] | None = None,
         load_options: Mapping[str, Any] | None = None) -> PortReport:
    """Where ``model`` can go among ``targets`` (default: smaug-ref, smaug-smv, lbann, rdu), how well
    and at what cost. ``dims``/``input_shapes`` pin dynamic dims for every target; when some stay
    dynamic, ``ask`` is asked for them (the CLI asks on a terminal), else they are refused in one
    line. ``out_dir``: where the suggested commands write; ``keep``: write the files port validated
    there too (the commands would write the same bytes). ``load_options``: the reader's other
    options (``LOAD_FLAGS``), given to every target and said in every command."""
    from ..api.model_io import as_graph
    from ..check.feeds import check_feeds
    from ..check.oracle import oracle_model

    start = time.perf_counter()
    names = list(TARGETS) if targets is None else list(targets)
    unknown = [n for n in names if n not in TARGETS]
    if unknown:
        from ..base.errors import UsageError

        raise UsageError(f"unknown target(s) {', '.join(unknown)}; choose from {', '.join(TARGETS)}")
    if not isinstance(model, (str, os.PathLike)) or not Path(model).is_file():
        raise InputError(f"port: '{model}' is not a model file (the suggested commands name it)")
    say = progress or (lambda text: None)
    extra = dict(load_options or {})
    unread = sorted(set(extra) - set(LOAD_FLAGS))
    if unread:
        from ..base.errors import OptionError

        raise OptionError(f"{', '.join(unread)}: not read by port (its reader options: {', '.join(LOAD_FLAGS)}; "
                          "pins: dims, input_shapes)")
    pins = _pins(dims, input_shapes)
    say("reading the model")
    graph = as_graph(model, **pins, **extra)
    graph, pins = _pinned(model, graph, pins, ask, extra)
    feeds, infos = check_feeds(model, graph, None, seed, None, None, True)
    source = oracle_model(model, graph)
    report = PortReport(model=os.fspath(model), dims=dict(pins.get("dims", {})),
                        input_shapes={k: list(v) for k, v in pins.get("input_shapes", {}).items()},
                        inputs=[i.to_dict() for i in infos])
    stem = Path(model).name
    for suffix in (".onnx", "_topo.pbtxt", ".prototext"):
        stem = stem.removesuffix(suffix)
    run = _Run(model, graph, {**pins, **extra}, feeds, source, out_dir, stem, say)
    with _workspace(out_dir if keep else None) as (scratch, written):
        run.scratch, run.files = scratch, written
        rows = {name: run.convert(TARGETS[name]) for name in names}
        for name, row in rows.items():
            if not row.conversion.ok:
                row.conversion.hints += [f"{other.title} takes it ({other.target} row)" for other in rows.values()
                                         if other.conversion.ok and other.target != name]
            run.judge(TARGETS[name], row)
            run.price(TARGETS[name], row)
            row.commands = run.commands(TARGETS[name], row)
    report.targets = list(rows.values())
    report.seconds = time.perf_counter() - start
    return report


def _pins(dims: Mapping[str, int] | None, shapes: Mapping[str, Sequence[int]] | None) -> dict[str, Any]:
    pins: dict[str, Any] = {}
    if dims:
        pins["dims"] = dict(dims)
    if shapes:
        pins["input_shapes"] = {k: tuple(v) for k, v in shapes.items()}
    return pins


def _pinned(model: Any, graph: Graph, pins: dict[str, Any], ask: Ask | None,
            extra: Mapping[str, Any]) -> tuple[Graph, dict[str, Any]]:
    """The graph with every input static: as read, or with what ``ask`` gives; refused in one line else."""
    from ..api.model_io import as_graph
    from ..passes.pin_shapes import describe_dynamic, dynamic_inputs, pinning_hint

    dynamic = dynamic_inputs(graph)
    if dynamic and ask is not None:
        more_dims, more_shapes = ask(dynamic)
        pins = _pins({**pins.get("dims", {}), **more_dims}, {**pins.get("input_shapes", {}), **more_shapes})
        graph = as_graph(model, **pins, **extra)
        dynamic = dynamic_inputs(graph)
    if dynamic:
        raise InputError(f"{os.fspath(model)} has dynamic inputs {describe_dynamic(dynamic)}: pin them once for "
                         f"every target with {pinning_hint(dynamic, pins.get('dims'))} (on a terminal, port asks)")
    return graph, pins


class _Run:
    """What one port run shares between its targets."""

    def __init__(self, model: Any, graph: Graph, pins: dict[str, Any], feeds: dict[str, np.ndarray], source: Any,
                 out_dir: str, stem: str, say: Callable[[str], None]):
        self.model, self.graph, self.pins, self.feeds, self.source = model, graph, pins, feeds, source
        self.out_dir, self.stem, self.say = out_dir, stem, say
        self.scratch = Path(".")
        self.files: list[Path] = []          # every file written, as soon as it is (removed if the run fails)
        self.written: dict[str, Path] = {}   # target → the file it wrote (in scratch)
        self.programs: dict[str, Any] = {}   # "rdu" → the batch-1 program

    # -- converts? ------------------------------------------------------------------------------
    def convert(self, target: Target) -> TargetReport:
        self.say(f"{target.name}: converting")
        row = TargetReport(target=target.name, title=target.title, conversion=Conversion(status="no"),
                           numerics=Numerics(verdict="not run"))
        path = self.scratch / Path(target.destination(self.out_dir, self.stem)).name
        if target.fmt is None:
            return self._compile(target, row, path)
        from ..api.model_io import warn_if_synthetic
        from ..converters import format_for, save_model
        from ..converters.notes import conversion_notes

        fmt = format_for(path)
        try:
            rewrites = dict(fmt.prepare(self.graph, target.options)[1]) if fmt.prepare else {}
            warn_if_synthetic(self.graph, path)  # as nnbridge.save (convert) warns
            save_model(self.graph.copy(), path, **target.options)
        except NNBridgeError as exc:
            row.conversion = _refused(exc)
            return row
        written = [f for f in fmt.written(path) if f.is_file()]
        self.files += written
        files = {str(f.relative_to(self.scratch)): f.stat().st_size for f in written}
        notes = conversion_notes(self.graph, fmt.name, dict(target.options)) + fmt.notes(path)
        row.conversion = Conversion(status="with rewrites" if rewrites else "yes", rewrites=rewrites, files=files,
                                    notes=notes)
        self.written[target.name] = path
        return row

    def _compile(self, target: Target, row: TargetReport, path: Path) -> TargetReport:
        from ..api.compiler import compile as compile_model

        try:
            exe = compile_model(self.graph.copy(), backend=target.backend)
        except NNBridgeError as exc:
            row.conversion = _refused(exc)
            return row
        exe.save(path)
        self.files.append(path)
        self.programs[target.name] = exe
        self.written[target.name] = path
        row.conversion = Conversion(status="yes", files={path.name: path.stat().st_size},
                                    notes=[f"compiled for batch 1: {exe.estimate.totals['sections']} section(s) on "
                                           f"{exe.machine.name}"])
        return row

    # -- numerics -------------------------------------------------------------------------------
    def judge(self, target: Target, row: TargetReport) -> None:
        from ..api.model_io import as_graph
        from ..check import check

        if not row.conversion.ok:
            row.numerics = Numerics(verdict="not run", detail="nothing to run: the target refuses the model")
            return
        self.say(f"{target.name}: running on {target.backend}")
        try:
            if target.fmt is None:  # the program is the source compiled: judged as check judges any model
                result = check(self.model, target.backend, inputs=self.feeds, load_options=self.pins,
                               executable=self.programs[target.name])
            else:
                from .numerics import source_as

                converted = as_graph(self.written[target.name])
                wrapped = source_as(self.source, self.graph, converted, self.feeds)
                result = check(converted, target.backend, inputs=wrapped.feeds, oracle=wrapped.oracle)
        except NNBridgeError as exc:
            row.numerics = Numerics(verdict="not run", backend=target.backend, detail=f"{exc}")
            return
        row.numerics = _numerics(result)
        if result.ok and not any(o.nonfinite_actual for o in result.outputs):
            return
        if target.backend == "reference":
            row.numerics.first_node = ("the file computes in fp32 as its source does, so the difference is the "
                                       "conversion's, not rounding: a bug in nnbridge to report")
            return
        self.say(f"{target.name}: looking for the first node that overflows or diverges")
        row.numerics.first_node = self._first_node(target, result)

    def _first_node(self, target: Target, result: Any) -> str:
        """Where the source model on the target's backend first overflows (NaN/inf) or leaves the rule."""
        from ..check import check

        where = f"the source model on {target.backend}"
        nonfinite = any(o.nonfinite_actual for o in result.outputs)
        try:
            if target.fmt is not None or not (nonfinite and result.origin is not None):
                result = check(self.model, target.backend, inputs=self.feeds, load_options=self.pins,
                               layerwise=not nonfinite, executable=self.programs.get(target.name))
        except NNBridgeError as exc:
            return f"not searched: {where} cannot run ({exc})"
        if result.origin is not None:
            return f"{result.origin.describe()} ({where})"
        found = result.layerwise
        first = found.first_divergent if found else None
        if first is None:
            return f"{where} agrees with onnxruntime: the file's conversion makes the difference"
        culprit = found.culprit
        own = f"; the first whose own error leaves it: '{culprit.name}' ({culprit.op})" if culprit else ""
        return f"first node out of tolerance: '{first.name}' ({first.op}){own} ({where})"

    # -- cost -----------------------------------------------------------------------------------
    def price(self, target: Target, row: TargetReport) -> None:
        from ..api.model_io import as_graph
        from .cost import rdu_cost, smv_cost

        if target.name == "smaug-smv":
            self.say("smaug-smv: simulating (timing only)")
            file = self.written.get(target.name)
            try:
                if file is not None:
                    row.smv, exe = smv_cost(as_graph(file), "the SMV file")
                else:
                    row.smv, exe = smv_cost(self.graph.copy(), "the source model: no SMV file is written")
            except NNBridgeError as exc:
                row.no_cost = f"not priced: the SMV simulator refuses the model ({exc})"
                return
            row.sources["smv"] = exe
        elif target.fmt is None:
            if target.name not in self.programs:
                row.no_cost = "not priced: the RDU compiler refuses the model"
                return
            self.say("rdu: looking for a compute-bound batch")
            row.rdu, exe, est = rdu_cost(self.graph, self.programs[target.name], self.say)
            row.sources["rdu"] = (exe, est)
        else:
            row.no_cost = target.unpriced

    # -- next -----------------------------------------------------------------------------------
    def commands(self, target: Target, row: TargetReport) -> list[str]:
        model = shlex.quote(os.fspath(self.model))
        pins = [*(f"--dim {k}={v}" for k, v in self.pins.get("dims", {}).items()),
                *(f"--input-shape {k}={'x'.join(map(str, v))}" for k, v in self.pins.get("input_shapes", {}).items()),
                *(LOAD_FLAGS[k] if v is True else f"{LOAD_FLAGS[k]} {v}" for k, v in self.pins.items()
                  if k in LOAD_FLAGS)]
        dst = shlex.quote(target.destination(self.out_dir, self.stem))
        flags = " ".join([*target.flags, *pins])
        tail = f" {flags}" if flags else ""
        if target.fmt is None:
            if not row.conversion.ok:
                return [f"nnbridge compile {model} --backend rdu -o {dst}{tail}"]
            out = [f"nnbridge compile {model} --backend rdu -o {dst}{tail}"]
            if row.rdu is not None and row.rdu.busy.batch > 1:
                busy = row.rdu.busy
                out.append(f"nnbridge measure-performance {model} --batch-size {busy.batch}{tail}"
                           if busy.program.startswith("compiled") else
                           f"nnbridge measure-performance {dst} --batch-size {busy.batch}")
            return out
        if not row.conversion.ok:
            return [f"nnbridge convert {model} {dst}{tail} --dry-run"]
        out = [f"nnbridge convert {model} {dst}{tail}"]
        if target.name == "smaug-smv":
            out.append(f"nnbridge simulate {dst} --perf-only")
        return out


def _numerics(result: Any) -> Numerics:
    worst = max(result.outputs, key=lambda o: (not o.ok, o.err_vs_scale), default=None)
    if worst is None:
        return Numerics(verdict="not run", backend=result.backend, detail="the model has no output to compare")
    bad = [o for o in result.outputs if not o.ok]
    note = f" ({worst.note})" if worst.note else ""
    detail = (f"max |err|/scale {worst.err_vs_scale:.3g} over {len(result.outputs)} output(s)" if not bad else
              f"{len(bad)} of {len(result.outputs)} output(s) differ: '{worst.name}' max |err|/scale "
              f"{worst.err_vs_scale:.3g}, {worst.outside} element(s) outside{note}")
    return Numerics(verdict="agree" if result.ok else "DIFFER", backend=result.backend,
                    rule=f"rule {result.rule.describe()}", detail=detail)


def _refused(exc: NNBridgeError) -> Conversion:
    """A refusal as convert (compile) prints it: the headline, and one line per reason."""
    if isinstance(exc, UnsupportedOpError):
        return Conversion(status="no", headline=exc.headline(), reasons=_root_first(exc.lines()))
    return Conversion(status="no", headline=str(exc))


def _root_first(lines: list[str]) -> list[str]:
    """convert's lines with those that only follow from another refusal (a value nothing the target
    expresses computes) after the ones that cause them."""
    follows = [line for line in lines if "is not computed by anything" in line]
    return [line for line in lines if line not in follows] + follows


@contextlib.contextmanager
def _workspace(keep_in: str | None):
    """Where the targets write: a scratch directory removed afterwards, or ``keep_in``, the directory
    the commands write to (files name absolute paths, LBANN's weights, so they are written in place),
    whose files are removed again if the run fails."""
    if keep_in is None:
        with tempfile.TemporaryDirectory(prefix="nnbridge-port-") as scratch:
            yield Path(scratch), []
        return
    folder = Path(keep_in)
    folder.mkdir(parents=True, exist_ok=True)
    written: list[Path] = []
    try:
        yield folder, written
    except BaseException:
        for path in written:
            path.unlink(missing_ok=True)
        for folder_of in {p.parent for p in written if p.parent != folder}:
            shutil.rmtree(folder_of, ignore_errors=True)
        raise
