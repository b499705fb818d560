"""Does a ``port`` report hold? Shared by ``tests/test_port.py`` (the real-architecture fixtures,
one light model, LeNet-5's SMV file) and ``bench/bench_port.py`` (every light model).

``problems`` runs what the table tells a user to run and checks it against the table:

* every cell is filled;
* a target that converts: each suggested command that writes a file runs (exit 0) and writes
  the bytes port validated (a ``.pef``: the same members), and that file — run here on the target's
  backend, apart from port's own code — agrees with onnxruntime on the source exactly when the
  table says it does, under the rule the table names; ``measure-performance`` prints the
  throughput the table gives;
* a target that refuses: ``convert`` (``compile``) without ``--dry-run`` exits 1 with the table's
  headline and, one line per reason, the table's reasons.
"""

from __future__ import annotations

import contextlib
import io
import re
import shlex
import zipfile
from pathlib import Path

import numpy as np

import nnbridge
from nnbridge.api.inputs import generate_inputs
from nnbridge.check.exact import judged_against_float64
from nnbridge.check.oracle import oracle_model, run_onnxruntime
from nnbridge.check.verdict import RULES, compare
from nnbridge.cli import main
from nnbridge.ir import Layout

#: what writes a file among the suggested commands, and the flag or position naming it
WRITERS = {"convert": 3, "compile": "-o"}


def problems(report, out_dir: Path) -> list[str]:
    """What in ``report`` (made with ``keep=True, out_dir=out_dir``) does not hold; empty when all does."""
    found = []
    pins = {k: v for k, v in (("dims", report.dims), ("input_shapes", report.input_shapes)) if v}
    source = nnbridge.load(report.model, **pins)
    feeds = generate_inputs(source, seed=0)[0]
    proto = oracle_model(report.model, source)
    expected = run_onnxruntime(proto, feeds)
    expected = {v.name: expected[v.name] for v in source.outputs}
    for row in report.targets:
        where = f"{Path(report.model).name} {row.target}"
        empty = [i for i, cell in enumerate(row.cells()) if not cell.strip()]
        if empty:
            found.append(f"{where}: empty cell(s) {empty}")
        if row.conversion.ok:
            found += [f"{where}: {p}" for p in _holds(row, out_dir, feeds, expected, proto)]
        else:
            found += [f"{where}: {p}" for p in _refused_as_convert_says(row)]
    return found


def _holds(row, out_dir: Path, feeds: dict, expected: dict, proto) -> list[str]:
    out = []
    kept = {name: _content(out_dir / name) for name in row.conversion.files}
    written = None
    for command in row.commands:
        argv = shlex.split(command)
        code, text, _ = _run(argv)
        if code != 0:
            out.append(f"'{command}' exited {code}: {text[-300:]}")
            continue
        if argv[1] in WRITERS:
            at = WRITERS[argv[1]]
            written = Path(argv[at] if isinstance(at, int) else argv[argv.index(at) + 1])
        if argv[1] == "measure-performance" and row.rdu is not None:
            said = f"{row.rdu.busy.samples_per_s:,.1f} samples/s"
            if f"throughput: {said}" not in text:
                out.append(f"'{command}' does not print the table's {said}")
    changed = [name for name, content in kept.items() if _content(out_dir / name) != content]
    if changed:
        out.append(f"the commands wrote other bytes than port validated: {changed[:3]}")
    if written is None:
        return [*out, "no suggested command writes a file"]
    rule = re.search(r"rule (\w+):", row.numerics.rule)
    if rule is None:
        return [*out, f"the numerics cell names no rule: {row.numerics.cell()!r}"]
    got = _run_file(row.target, written, feeds)
    checks, actual, pool = [], {}, iter(got)
    for name, want in expected.items():  # the file's outputs in order, skipping SMV's padding slices
        value = next((g for g in pool if np.size(g) == np.size(want)), None)
        if value is None:
            return [*out, f"{written.name} gives no output of {np.size(want)} elements"]
        actual[name] = np.reshape(value, np.shape(want))
        checks.append(compare(name, actual[name], want, RULES[rule.group(1)], same_dtype=False))
    # as check judges (docs/check.md): an output failing the row is judged again against float64
    checks = judged_against_float64(checks, actual, expected, RULES[rule.group(1)], proto, feeds, lambda n: False)
    agree = all(c.ok for c in checks)
    if agree != row.numerics.ok:
        out.append(f"{written.name} {'agrees' if agree else 'differs'} here, the table says {row.numerics.verdict} "
                   f"({[c.err_vs_scale for c in checks]})")
    return out


def _run_file(target: str, path: Path, feeds: dict) -> list:
    """The file's outputs on its target's backend, fed the source's inputs (by position; an NHWC
    input of a SMAUG SMV file gets them transposed)."""
    if target == "rdu":
        from nnbridge.backends.rdu import load_pef

        program = load_pef(path)
        return list(program.run(dict(zip([v.name for v in program.graph.inputs], feeds.values()))).values())
    graph = nnbridge.load(path)
    given = {}
    for value, array in zip(graph.inputs, feeds.values()):
        if value.type.layout is Layout.NHWC and array.ndim == 4:
            array = array.transpose(0, 2, 3, 1)
        given[value.name] = np.asarray(array, value.type.dtype.numpy).reshape(value.type.shape)
    backend = {"smaug-smv": "smv"}.get(target, "reference")
    outputs = nnbridge.compile(graph, backend=backend).run(given)
    return [_as_nchw(graph, name, value) for name, value in outputs.items()]


def _as_nchw(graph, name: str, value):
    out = next(v for v in graph.outputs if v.name == name)
    return value.transpose(0, 3, 1, 2) if out.type.layout is Layout.NHWC and np.ndim(value) == 4 else value


def _refused_as_convert_says(row) -> list[str]:
    command = row.commands[0].replace(" --dry-run", "")
    code, text, err = _run(shlex.split(command))
    lines = [line.strip() for line in err.splitlines() if line.strip()]
    if code != 1 or not lines:
        return [f"'{command}' exited {code}, not 1"]
    headline = lines[0].removeprefix("error: ").removesuffix(":")
    out = []
    if headline != row.conversion.headline:
        out.append(f"headline: convert says {headline!r}, the table {row.conversion.headline!r}")
    if sorted(lines[1:]) != sorted(row.conversion.reasons):
        out.append(f"reasons: convert says {lines[1:]}, the table {row.conversion.reasons}")
    return out


def _run(argv: list[str]) -> tuple[int, str, str]:
    """The CLI in this process: (exit code, standard output, standard error)."""
    assert argv[0] == "nnbridge"
    out, err = io.StringIO(), io.StringIO()
    with contextlib.redirect_stdout(out), contextlib.redirect_stderr(err):
        code = main(argv[1:])
    return code, out.getvalue() + err.getvalue(), err.getvalue()


def _content(path: Path):
    """A file's bytes; a zip's (a .pef) members, whose timestamps vary run to run."""
    if not path.is_file():
        return None
    if zipfile.is_zipfile(path):
        with zipfile.ZipFile(path) as archive:
            return {name: archive.read(name) for name in archive.namelist()}
    return path.read_bytes()


def cpu_seconds() -> float:
    """CPU time of this process and its threads (what a 2-core machine pays), for the reports."""
    import resource

    usage = resource.getrusage(resource.RUSAGE_SELF)
    return usage.ru_utime + usage.ru_stime

