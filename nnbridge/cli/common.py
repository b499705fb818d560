"""Argument helpers shared by several commands (inputs, dims, passes, backends)."""

from __future__ import annotations

import argparse
import contextlib
import textwrap
from pathlib import Path
from typing import Any

import numpy as np
from rich.text import Text

from ..base.errors import InputError, OptionError, UsageError
from ..base.fileio import read_npy


class Formatter(argparse.RawDescriptionHelpFormatter):
    """Keeps the hand-written examples in epilogs as written; an option whose help describes the
    backends (``--set``: the settings they declare; ``--opt-level``: what each level of their
    pipelines adds) reads them when help is printed, so it cannot drift from them."""

    def _get_help_string(self, action: argparse.Action) -> str | None:
        describe = getattr(action, "describe", None)
        backends = getattr(action, "backends", None)
        if describe is None or not backends:
            return action.help
        from ..backends import get_backend

        listed = "; ".join(f"{name}: {describe(get_backend(name))}" for name in backends)
        return f"{action.help} ({listed})".replace("%", "%%")

    def _split_lines(self, text: str, width: int) -> list[str]:
        """Lines break between words only: a pass or setting name (``fuse-chains``) stays whole."""
        return textwrap.wrap(self._whitespace_matcher.sub(" ", text).strip(), width, break_on_hyphens=False)


def _settings(backend) -> str:
    return ", ".join(k for k, s in backend.settings.items() if s.cli)


def _levels(backend) -> str:
    """What each opt level of the backend's pipelines adds to the level below (and leaves out)."""
    from ..passes import pass_names

    parts, below = [], None
    for level, steps in sorted(backend.pipelines.items()):
        names = pass_names(steps)
        if below is None:
            parts.append(f"{level} {' '.join(dict.fromkeys(names))}")
        else:
            added = [n for n in dict.fromkeys(names) if n not in below]
            dropped = [n for n in dict.fromkeys(below) if n not in names]
            change = " ".join([*(f"+{n}" for n in added), *(f"-{n}" for n in dropped)]) or "same"
            parts.append(f"{level} {change}")
        below = names
    return ", ".join(parts)


def add_parser(sub, name: str, help: str, examples: str, description: str | None = None) -> argparse.ArgumentParser:
    return sub.add_parser(name, help=help, description=description or help,
                          epilog="examples:\n" + examples, formatter_class=Formatter)


def parse_assignments(items: list[str] | None, what: str) -> dict[str, str]:
    """``NAME=VALUE`` flags as a dict; a name given twice (two files for one input, two values for
    one setting) is refused, since one of them would be dropped without a word."""
    out: dict[str, str] = {}
    for item in items or []:
        if "=" not in item:
            raise UsageError(f"{what} '{item}' must look like NAME=VALUE")
        key, value = (part.strip() for part in item.split("=", 1))
        if key in out:
            raise UsageError(f"{what} {key} is given twice ({key}={out[key]} and {key}={value}); give it once")
        out[key] = value
    return out


def load_inputs(items: list[str] | None) -> dict[str, np.ndarray]:
    """``--input NAME=FILE.npy`` → arrays (never unpickling anything)."""
    arrays = {}
    for name, path in parse_assignments(items, "--input").items():
        p = Path(path)
        if not p.is_file():
            raise InputError(f"--input {name}: no such file '{path}'")
        try:
            arrays[name] = read_npy(p, f"--input {name}: '{path}'")
        except OSError as exc:
            raise InputError(f"--input {name}: cannot read '{path}' ({exc})") from None
    return arrays


def parse_dims(items: list[str] | None) -> dict[str, int]:
    dims = {}
    for name, value in parse_assignments(items, "--dim").items():
        try:
            dims[name] = int(value)
        except ValueError:
            raise InputError(f"--dim {name}={value}: the value must be an integer") from None
    return dims


def parse_passes(text: str | None) -> list[str] | None:
    if text is None:
        return None
    return [p.strip() for p in text.split(",") if p.strip()]


def add_model_args(p: argparse.ArgumentParser) -> None:
    p.add_argument("model", help="model file: .onnx, SMAUG <name>_topo.pbtxt, LBANN .prototext (other names: "
                                 "the format is read from the content, or given with --format)")
    p.add_argument("--format", choices=["onnx", "smaug", "lbann"], help="the model's format, whatever its name")
    add_shape_args(p)


def add_shape_args(p: argparse.ArgumentParser) -> None:
    p.add_argument("--input-shape", action="append", metavar="NAME=D1xD2…",
                   help="an input's shape, pinning its dynamic dims: the whole shape for ONNX/SMAUG "
                        "(x=1x3x224x224), per sample without the batch for LBANN (image=1x28x28); repeatable")
    p.add_argument("--dim", action="append", metavar="NAME=VALUE",
                   help="value of a symbolic input dimension, e.g. --dim batch=1; repeatable")
    p.add_argument("--smaug-synthetic-scale", type=float, metavar="S",
                   help="SMAUG sources without a params file: the scale of the weights made up in their place "
                        "(default 0.005, SMAUG's random-data recipe; smaller keeps fp16 files from overflowing)")
    p.add_argument("--smaug-activations", choices=["exact", "reference"],
                   help="SMAUG Reference sources: 'reference' computes sigmoid and tanh as SMAUG's Reference "
                        "backend does (tanh = 2*sigmoid(2x) - 1, which loses small values' precision), so a run "
                        "reproduces its outputs; 'exact' (default) keeps ONNX's Sigmoid and Tanh")
    p.add_argument("--lbann-training-layers", action="store_true",
                   help="LBANN sources: import the loss and metric layers (and the labels feeding them) as "
                        "graph outputs, to evaluate them; by default they are kept aside for LBANN writes")
    p.add_argument("--lbann-trust-paths", action="store_true",
                   help="LBANN sources you trust: weights .npy files may lie anywhere (by default only inside "
                        "the model's directory)")
    p.add_argument("--lbann-slice-points", action="append", metavar="CATEGORY=P0,P1,…",
                   help="LBANN sources whose layers take slice points from the data reader "
                        "(get_slice_points_from_reader: JAG models): the points the reader gives for CATEGORY "
                        "(independent or dependent); repeatable")


def add_pass_args(p: argparse.ArgumentParser, backends: tuple[str, ...] = ("reference", "smv", "rdu")) -> None:
    p.add_argument("--passes", help="comma-separated pass list instead of the backend's pipeline")
    action = p.add_argument("--opt-level", type=int, choices=[0, 1, 2, 3],
                            help="picks the backend's pass pipeline (default 1); each level's passes")
    action.backends, action.describe = backends, _levels
    p.add_argument("--disable-pass", action="append", metavar="NAME", default=[],
                   help="leave this pass out of the pipeline; repeatable")


def add_backend_args(p: argparse.ArgumentParser, default: str = "reference") -> None:
    p.add_argument("--backend", "-b", default=default, help=f"reference, smv or rdu (default: {default})")
    backends = ("reference", "smv", "rdu") if default == "reference" else (default,)
    add_pass_args(p, backends)
    add_set_arg(p, backends, "backend_options")


def add_set_arg(p: argparse.ArgumentParser, backends: tuple[str, ...], dest: str) -> None:
    """``--set KEY=VALUE``: the help lists what each of ``backends`` declares (``Formatter``)."""
    action = p.add_argument("--set", action="append", metavar="KEY=VALUE", dest=dest,
                            help="a backend setting; repeatable. A KEY the backend does not read, or a "
                                 "VALUE of the wrong type, is refused")
    action.backends, action.describe = backends, _settings


def opt_level(args: argparse.Namespace) -> int:
    """--opt-level, 1 when not given."""
    return 1 if getattr(args, "opt_level", None) is None else args.opt_level


def chosen_passes(args: argparse.Namespace, backend: str | None) -> list[str] | None:
    """The pass list of a command: --passes, else the pipeline at --opt-level of the backend (of
    the reference backend when --opt-level or --disable-pass is given without one; None when
    nothing is chosen); minus every --disable-pass."""
    from ..backends import get_backend

    passes = parse_passes(args.passes)
    if passes is not None and args.opt_level is not None:
        raise OptionError("--opt-level picks a backend's pipeline and --passes replaces it: give one of them")
    if passes is None and (backend or args.opt_level is not None):
        passes = get_backend(backend or "reference").pipeline(opt_level(args))
    if args.disable_pass:
        from ..passes import get_pass

        for name in args.disable_pass:
            get_pass(name)  # a typo fails loudly instead of silently disabling nothing
        if passes is None:
            passes = get_backend(backend or "reference").pipeline(opt_level(args))
        passes = [p for p in passes if p not in set(args.disable_pass)]
    return passes


def refuse_unread(args: argparse.Namespace, why: str, flags: dict[str, str]) -> None:
    """One line naming every flag of ``flags`` (dest → flag) that was given but is not read ``why``."""
    given = []
    for dest, flag in flags.items():
        value = getattr(args, dest, None)
        if value in (None, False, []):
            continue
        values = value if isinstance(value, list) else [] if value is True else [value]
        given.append(" ".join([flag, *(str(v) for v in values)]))
    if given:
        raise OptionError(f"{', '.join(given)}: not read {why}")


def backend_options(args: argparse.Namespace, backend: str) -> dict:
    """The --set KEY=VALUE settings of ``backend``, checked against what it declares and parsed to
    their types (``Backend.options``)."""
    from ..backends import get_backend

    items = parse_assignments(getattr(args, "backend_options", None), "--set")
    return get_backend(backend).options(items, "--set")


def add_threads_arg(p: argparse.ArgumentParser) -> None:
    p.add_argument("--threads", type=int, metavar="N",
                   help="CPU threads for numpy's BLAS and for onnxruntime, the same on both sides of "
                        "every comparison (default: each library's own, all cores)")


def add_input_args(p: argparse.ArgumentParser) -> None:
    p.add_argument("--input", "-i", action="append", metavar="NAME=FILE.npy",
                   help="an input tensor from a .npy file; repeatable")
    p.add_argument("--seed", type=int, help="seed for generated inputs (default 0); refused when every input is given")


#: the loader options of LBANN sources, by flag (what a compiled program does not read)
LBANN_SOURCE_FLAGS = {"lbann_training_layers": "--lbann-training-layers", "lbann_trust_paths": "--lbann-trust-paths",
                      "lbann_slice_points": "--lbann-slice-points"}


def parse_slice_points(items: list[str] | None) -> dict[str, tuple[int, ...]]:
    """--lbann-slice-points CATEGORY=P0,P1,… (repeatable) → {category: points}."""
    points = {}
    for category, text in parse_assignments(items, "--lbann-slice-points").items():
        try:
            values = tuple(int(v) for v in text.split(","))
        except ValueError:
            raise OptionError(f"--lbann-slice-points {category}={text}: write increasing integers like "
                             f"0,49167,49172") from None
        if category not in ("independent", "dependent") or list(values) != sorted(values) or values[0] < 0:
            raise OptionError(f"--lbann-slice-points {category}={text}: give independent= or dependent= and "
                             f"increasing points from 0 on")
        points[category] = values
    return points


def load_options(args: argparse.Namespace) -> dict:
    """--input-shape, --dim, an LBANN source's --batch-size, --smaug-synthetic-scale, --smaug-activations and
    the --lbann-* switches as loader options."""
    options: dict = {option: True for option in ("lbann_training_layers", "lbann_trust_paths")
                     if getattr(args, option, False)}
    if getattr(args, "lbann_slice_points", None):
        options["lbann_slice_points"] = parse_slice_points(args.lbann_slice_points)
    dims = parse_dims(getattr(args, "dim", None))
    if dims:
        options["dims"] = dims
    if getattr(args, "smaug_activations", None) is not None:  # a SMAUG file's σ/tanh (its reader refuses others)
        options["activations"] = args.smaug_activations
    scale = getattr(args, "smaug_synthetic_scale", None)
    if scale is not None:  # a SMAUG file's made-up weights (its reader refuses it for others)
        if not 0 < scale < float("inf"):
            raise OptionError(f"--smaug-synthetic-scale {scale}: a scale is a positive number")
        options["synthetic_scale"] = scale
    if getattr(args, "source_batch_size", None) is not None:  # an LBANN file's batch (its reader refuses others)
        if args.source_batch_size < 1:
            raise OptionError(f"--batch-size {args.source_batch_size}: a batch holds at least one sample")
        options["batch_size"] = args.source_batch_size
    shapes = parse_assignments(getattr(args, "input_shape", None), "--input-shape")
    if not shapes:
        return options
    parsed = {}
    for name, text in shapes.items():
        try:
            parsed[name] = tuple(int(d) for d in text.lower().split("x"))
        except ValueError:
            raise InputError(f"--input-shape {name}={text}: write dimensions like 1x28x28") from None
    return {**options, "input_shapes": parsed}


def load_model_from_args(args: argparse.Namespace):
    from ..api.model_io import as_graph

    fmt = getattr(args, "format", None)
    return as_graph(args.model, **load_options(args), **({"fmt": fmt} if fmt else {}))


def styled(*parts: str | tuple[str, str]) -> Text:
    """A line with styled pieces: plain strings print verbatim, ("text", "style") pieces styled."""
    return Text.assemble(*parts)


def working(console, text: str):
    """On a terminal: what is being done, with a bar and the time left for the pass pipeline and
    for each long graph run (the kernel evaluator's steps); quiet when piped."""
    if not console.is_terminal:
        return contextlib.nullcontext()
    return _progress(console, text)


@contextlib.contextmanager
def _progress(console, text: str):
    from rich.progress import (
        BarColumn,
        MofNCompleteColumn,
        Progress,
        SpinnerColumn,
        TextColumn,
        TimeElapsedColumn,
        TimeRemainingColumn,
    )

    from ..kernels.evaluator import STEP_PROGRESS
    from ..passes.manager import PASS_PROGRESS

    columns = (SpinnerColumn(), TextColumn("{task.description}"), BarColumn(), MofNCompleteColumn(),
               TimeElapsedColumn(), TextColumn("left"), TimeRemainingColumn())
    with Progress(*columns, console=console, transient=True) as bar:
        tasks: dict[str, Any] = {}

        def update(kind: str, done: int, total: int) -> None:
            if kind not in tasks:
                tasks[kind] = bar.add_task(f"{text}: {kind}", total=total)
            bar.update(tasks[kind], completed=done, total=total)

        tokens = (PASS_PROGRESS.set(lambda d, t: update("passes", d, t)),
                  STEP_PROGRESS.set(lambda d, t: update("nodes", d, t)))
        try:
            yield
        finally:
            PASS_PROGRESS.reset(tokens[0])
            STEP_PROGRESS.reset(tokens[1])


def value_json(v: Any) -> dict:
    """A graph value's name and type as JSON."""
    t = v.type
    return {"name": v.name, "dtype": t.dtype.short if t.dtype else None,
            "shape": list(t.shape) if t.shape is not None else None, "layout": t.layout.value}


def add_report_args(p: argparse.ArgumentParser, unit: str, plot: str, traced: str) -> None:
    """The files a performance report is also written as (a plot, an HTML page, a Chrome trace) and
    the earlier report it is compared with, per ``unit`` (simulate: layer; measure-performance:
    stage)."""
    p.add_argument("--plot", metavar="FILE.png", help=f"write {plot}")
    p.add_argument("--html", metavar="FILE.html", help="write one HTML page: totals, plot, roll-ups, the graph "
                   f"coloured by time and every {unit} in a sortable table")
    p.add_argument("--trace", metavar="FILE.json", help=f"write a Chrome trace of {traced} (open it in Perfetto or "
                   "chrome://tracing)")
    p.add_argument("--baseline", metavar="FILE.json", help="compare with an earlier run's --json report of the "
                   f"same model: per-{unit} and total deltas in the table, the JSON and the HTML")


def add_json_arg(p: argparse.ArgumentParser, what: str) -> None:
    p.add_argument("--json", metavar="FILE", help=f"write {what} as JSON to FILE ('-': standard output, alone)")


def write_json(data: Any, target: str) -> None:
    """``data`` as JSON to a file (atomically) or, for '-', to standard output. NumPy values become
    lists and numbers; non-finite floats the strings "nan", "inf", "-inf" (JSON has neither)."""
    import json
    import math

    from ..base.fileio import atomic_write

    def plain(value: Any) -> Any:
        if isinstance(value, dict):
            return {str(k): plain(v) for k, v in value.items()}
        if isinstance(value, (list, tuple)):
            return [plain(v) for v in value]
        if hasattr(value, "tolist"):
            return plain(value.tolist())
        if isinstance(value, float) and not math.isfinite(value):
            return "nan" if math.isnan(value) else ("inf" if value > 0 else "-inf")
        if value is None or isinstance(value, (bool, int, float, str)):
            return value
        return str(value)

    text = json.dumps(plain(data), indent=1) + "\n"
    if target == "-":
        from . import console

        console.file.write(text)
    else:
        with atomic_write(target, "w") as fh:
            fh.write(text)


def share(value: float, total: float) -> str:
    return f"{100 * value / total:.1f} %" if total else "—"


def rollup_table(title: str, key: str, groups: list[tuple[str, int, float]], total: float, count: str = "layers",
                 unit: str = "µs", limit: int = 15) -> Any:
    """A roll-up (group, rows, sum) as a table with each group's share of ``total``."""
    from rich.table import Table

    table = Table(title=title)
    for col, justify in ((key, "left"), (count, "right"), (unit, "right"), ("share", "right")):
        table.add_column(col, justify=justify)
    for name, n, value in groups[:limit]:
        table.add_row(name, str(n), f"{value:,.1f}", share(value, total))
    if len(groups) > limit:
        rest = groups[limit:]
        table.add_row(f"… {len(rest)} more", str(sum(n for _, n, _ in rest)), f"{sum(v for _, _, v in rest):,.1f}",
                      share(sum(v for _, _, v in rest), total))
    return table


def print_baseline(console, against, measure: str, columns: list[str], top: int) -> None:
    """The per-row deltas against a baseline report, what only one side has, and the totals."""
    console.print(against.table(measure, columns, top))
    for line in against.one_sided_lines():
        console.print(styled(("baseline:", "yellow"), " " + line))
    console.print(against.totals_table())


def print_written(console, files: tuple[tuple[str | None, str], ...]) -> None:
    """'<what> written to <path>' for each (path, what) a command wrote."""
    for path, what in files:
        if path:
            console.print(f"{what} written to {path}")
