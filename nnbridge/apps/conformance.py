"""ONNX node-test conformance: every case of ``collect_testcases(None)`` on the
reference backend, classified as passed / unsupported / mismatched / crashed,
with the same counts for onnxruntime and ``onnx.reference`` (oracles, as in ``check``).
The test suite asserts on it; ``python -m bench.conformance`` prints and records it.
"""

from __future__ import annotations

import collections
import sys
import warnings
from dataclasses import dataclass
from pathlib import Path

import numpy as np

STATUSES = ("passed", "unsupported", "mismatched", "crashed")


@dataclass
class Outcome:
    case: str
    op: str
    status: str
    detail: str = ""


def tested_op(case) -> str:
    """The op a case is about: its single node's op, else the op named by the test."""
    ops = [n.op_type for n in case.model.graph.node]
    if len(set(ops)) == 1:
        return ops[0]
    name = case.name.removeprefix("test_").lower()
    matches = [op for op in set(ops) if name.startswith(op.lower())]
    return max(matches, key=len) if matches else ops[-1] if ops else "?"


def _close(actual, expected, rtol: float, atol: float) -> bool:
    if isinstance(expected, list):
        return isinstance(actual, list) and len(actual) == len(expected) and all(
            _close(a, e, rtol, atol) for a, e in zip(actual, expected))
    if expected is None:
        return actual is None
    a, e = np.asarray(actual), np.asarray(expected)
    if a.shape != e.shape:
        return False
    if e.dtype.kind in "OUS":
        return a.dtype.kind in "OUS" and bool(np.array_equal(a.astype(str), e.astype(str)))
    if a.dtype != e.dtype:
        return False
    if e.dtype.kind in "biu":  # booleans and integers: exactly
        return bool(np.array_equal(a, e))
    if e.dtype.name == "bfloat16":  # two bfloat16 ulps, as onnx's own backend test runner allows
        rtol = max(rtol, 2**-6)
    af, ef = a.astype(np.float64), e.astype(np.float64)
    return bool(np.allclose(af, ef, rtol=rtol, atol=atol, equal_nan=True))


def run_nnbridge(case):
    import nnbridge
    from nnbridge.base.errors import UnsupportedOpError

    outcomes = []
    for inputs, expected in case.data_sets or [()]:
        try:
            graph = nnbridge.load(case.model)
            exe = nnbridge.compile(graph, backend="reference")
            feeds = dict(zip(exe.input_names, inputs))
            result = exe.run(feeds)
            actual = [result[n] for n in exe.output_names]
        except UnsupportedOpError as exc:
            return "unsupported", str(exc)[:200]
        except Exception as exc:  # noqa: BLE001 - classifying every failure is the point
            return "crashed", f"{type(exc).__name__}: {str(exc)[:200]}"
        outcomes.append((actual, expected))
    return _judge(case, outcomes)


#: onnxruntime messages that mean "cannot run this" rather than a failure: no kernel, an opset
#: newer than it supports, or an element type its Python binding cannot take from numpy
_ORT_UNSUPPORTED = ("NOT_IMPLEMENTED", "Could not find an implementation", "not a registered",
                    "is under development", "can't be converted to MLDataType")


def run_onnxruntime(case):
    from nnbridge.check import ort_session

    outcomes = []
    for inputs, expected in case.data_sets or [()]:
        try:
            sess = ort_session(case.model)
            names = [i.name for i in sess.get_inputs()]
            actual = sess.run(None, dict(zip(names, map(_as_feed, inputs))))
        except Exception as exc:  # noqa: BLE001
            text = str(exc)
            if any(marker in text for marker in _ORT_UNSUPPORTED):
                return "unsupported", text[-200:]
            return "crashed", f"{type(exc).__name__}: {text[:200]}"
        outcomes.append((actual, expected))
    return _judge(case, outcomes)


def run_onnx_reference(case):
    from onnx.reference import ReferenceEvaluator

    outcomes = []
    for inputs, expected in case.data_sets or [()]:
        try:
            ev = ReferenceEvaluator(case.model)
            actual = ev.run(None, dict(zip(ev.input_names, map(_as_feed, inputs))))
        except NotImplementedError as exc:
            return "unsupported", str(exc)[:200]
        except Exception as exc:  # noqa: BLE001
            return "crashed", f"{type(exc).__name__}: {str(exc)[:200]}"
        outcomes.append((actual, expected))
    return _judge(case, outcomes)


#: ops whose outputs are random draws: ONNX fixes the distribution, not the generator
RANDOM_OPS = {"Bernoulli", "RandomNormal", "RandomNormalLike", "RandomUniform", "RandomUniformLike", "Multinomial"}


def _judge(case, outcomes) -> tuple[str, str]:
    rtol = getattr(case, "rtol", 1e-3)
    atol = getattr(case, "atol", 1e-7)
    random = any(n.op_type in RANDOM_OPS for n in case.model.graph.node)
    for actual, expected in outcomes:
        if len(actual) != len(expected):
            return "mismatched", f"{len(actual)} outputs, expected {len(expected)}"
        for i, (a, e) in enumerate(zip(actual, expected)):
            if not (_like_a_draw(a, e) if random else _close(a, e, rtol, atol)):
                return "mismatched", f"output {i} differs"
    return "passed", ""


def _like_a_draw(actual, expected) -> bool:
    """A random output agrees when it could be a draw like the expected one: same shape and type,
    and 0/1 values where the expected ones are 0/1 (Bernoulli)."""
    a, e = np.asarray(actual), np.asarray(expected)
    if a.shape != e.shape or a.dtype != e.dtype:
        return False
    binary = np.isin(e, (0, 1)).all()
    return bool(not binary or np.isin(a, (0, 1)).all())


RUNTIMES = {"nnbridge": run_nnbridge, "onnxruntime": run_onnxruntime, "onnx.reference": run_onnx_reference}


def _as_array(value):
    """Test data may be stored as TensorProtos (float8, int4, ...): decode them like onnx's runner."""
    import onnx

    return onnx.numpy_helper.to_array(value) if isinstance(value, onnx.TensorProto) else value


def _as_feed(value):
    """Numpy scalars (some cases store inputs that way) become 0-d arrays; sequences stay lists."""
    return value if isinstance(value, list) or value is None else np.asarray(value)


def normalized(case):
    """The case with every input and expected output as a numpy array (or list / None)."""
    if case.data_sets:
        case.data_sets = [([_as_array(v) for v in inputs], [_as_array(v) for v in outputs])
                          for inputs, outputs in case.data_sets]
    return case


def collect(op_filter: str | None = None, name_filter: str | None = None):
    from onnx.backend.test.case.node import collect_testcases

    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        cases = collect_testcases(None)
    out = []
    for case in cases:
        op = tested_op(case)
        if op_filter and op_filter.lower() != op.lower():
            continue
        if name_filter and name_filter not in case.name:
            continue
        out.append((normalized(case), op))
    return out


def run_all(runtimes, op_filter=None, name_filter=None, progress=True) -> dict[str, list[Outcome]]:
    cases = collect(op_filter, name_filter)
    results: dict[str, list[Outcome]] = {r: [] for r in runtimes}
    iterator = cases
    if progress and sys.stderr.isatty():
        from rich.progress import track

        iterator = track(cases, description="conformance", transient=True)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        np.seterr(all="ignore")
        for case, op in iterator:
            for r in runtimes:
                status, detail = RUNTIMES[r](case)
                results[r].append(Outcome(case.name, op, status, detail))
    return results


def summary_table(results: dict[str, list[Outcome]]) -> str:
    lines = ["| runtime | cases | passed | unsupported | mismatched | crashed |", "|---|---|---|---|---|---|"]
    for r, outs in results.items():
        c = collections.Counter(o.status for o in outs)
        lines.append(f"| {r} | {len(outs)} | " + " | ".join(str(c[s]) for s in STATUSES) + " |")
    return "\n".join(lines)


def per_op_table(results: dict[str, list[Outcome]]) -> str:
    """One row per tested op: passed count of each runtime, and why nnbridge did not pass the rest."""
    runtimes = list(results)
    head = "| op | cases | " + " | ".join(f"{r} passed" for r in runtimes) + " | nnbridge not passed |"
    lines = [head, "|---|---|" + "---|" * len(runtimes) + "---|"]
    by_op: dict[str, dict[str, collections.Counter]] = collections.defaultdict(
        lambda: {r: collections.Counter() for r in runtimes})
    for r, outs in results.items():
        for o in outs:
            by_op[o.op][r][o.status] += 1
    for op in sorted(by_op, key=str.lower):
        counts = by_op[op]
        total = sum(next(iter(counts.values())).values())
        ours = counts.get("nnbridge", collections.Counter())
        rest = ", ".join(f"{ours[s]} {s}" for s in STATUSES[1:] if ours[s]) or "—"
        lines.append(f"| {op} | {total} | " + " | ".join(str(counts[r]["passed"]) for r in runtimes)
                     + f" | {rest} |")
    return "\n".join(lines)


def write_report(results: dict[str, list[Outcome]], path: Path) -> None:
    """docs/conformance.md: the totals (quoted in the README) and the per-op table, written atomically."""
    import onnx
    import onnxruntime

    from nnbridge.base.fileio import atomic_write

    text = (
        "# ONNX node-test conformance\n\n"
        f"Generated by `make conformance` (`python -m bench.conformance`) with onnx {onnx.__version__} "
        f"and onnxruntime {onnxruntime.__version__}: every case of "
        "`onnx.backend.test.case.node.collect_testcases(None)` on the nnbridge reference backend, "
        "onnxruntime and `onnx.reference`, classified as passed, unsupported (a clean "
        "`UnsupportedOpError` / not implemented), mismatched or crashed.\n\n"
        "## Totals\n\n" + summary_table(results) + "\n\n## Per op\n\n" + per_op_table(results) + "\n"
    )
    with atomic_write(path, "w") as fh:
        fh.write(text)
    path.chmod(0o644)  # a docs page, readable like every other file in the repository
