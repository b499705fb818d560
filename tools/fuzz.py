"""A fuzzer for nnbridge's readers: mutated ONNX, SMAUG (topology + params), LBANN (prototext)
and compiled ``.pef`` files through the entry points users call, each input under limits.

Seeds are real files: models of the zoo written by nnbridge in each format, and SMAUG's own
files from ../shared/data when present. Mutations are byte-level (truncation, flips, inserted
and repeated chunks) and structure-aware (ONNX fields set to extremes; numbers, lines and names
of text formats; a ``.pef``'s JSON members re-zipped with a manifest that matches). Case
families of issue #34 are mutations too: Loop trip counts and other int64 scalars set to extremes
(a Loop seed), LBANN files stripped of their weights (default initialisers, then sized by the
number mutations), ``.pef`` archives given a large member nothing refers to or a malformed
manifest. Every input is generated from (format, seed, index), so a failure is reproduced from
its index alone.

Each input is loaded, then put through one more entry point in turn (summary, run on the
reference backend, convert to every other format, SMV and RDU estimates, a convert interrupted
by SIGTERM); an input that converts is also saved to a destination no file can go to (a directory,
a path through a file, a name too long or holding NUL), which must be one OutputError. Outcomes:
``ok`` or ``clean`` (an nnbridge error) are good; ``traceback`` (any other exception), ``hang``
(over the CPU-time limit), ``memory`` (MemoryError or the worker killed under the address-space cap),
``oversized`` (an output over the size limit) and ``partial`` (a failed convert left a file, or
any step left a temp file) are failures. Inputs run in a worker process with the limits set; a
killed worker is restarted after the input that killed it. The work folder is removed at the end.

    python -m tools.fuzz --format onnx --count 2000            # what make test runs, per format
    python -m tools.fuzz --seconds 600                          # make fuzz: 10 minutes per format
    python -m tools.fuzz --format smaug --only 1234 --verbose   # reproduce one input
"""

from __future__ import annotations

import argparse
import collections
import hashlib
import io
import json
import re
import resource
import shutil
import signal
import subprocess
import sys
import tempfile
import threading
import time
import traceback
import zipfile
from pathlib import Path

import numpy as np

FORMATS = ("onnx", "smaug", "lbann", "pef")
GOOD = ("ok", "clean")
BAD = ("traceback", "hang", "memory", "oversized", "partial")
TIME_LIMIT_S = 10
MEMORY_LIMIT = 4 * 1024**3
OUTPUT_LIMIT = 64 * 1024**2
EXTREMES = [-1, 0, 1, 2, 7, 65535, 2**31 - 1, 2**31, 2**62, 10**9, -(2**63), 10**12]
SHARED = Path(__file__).resolve().parents[2] / "shared" / "data" / "smaug"
_BYTES = ("bytes-truncated", "bytes-flipped", "bytes-inserted", "bytes-repeated")
_TEXT = ("text-number", "text-line-dropped", "text-line-repeated", "text-name-swapped")
#: the mutation families each format's inputs are made of (a run records which ones each input got)
FAMILIES = {
    "onnx": _BYTES + ("onnx-int-attribute", "onnx-declared-dim", "onnx-opset", "onnx-dangling-input",
                      "onnx-node-removed", "onnx-op-replaced", "onnx-int64-scalar", "onnx-initializer-type",
                      "onnx-initializer-dims"),
    "smaug": _BYTES + _TEXT,
    "lbann": _BYTES + _TEXT + ("lbann-without-weights",),
    "pef": _BYTES + _TEXT + ("pef-unreferenced-member", "pef-malformed-manifest"),
}


# -- seeds -----------------------------------------------------------------------------------
def seeds(fmt: str, work: Path) -> list[dict[str, bytes]]:
    """Real files of one format, as {relative name: bytes}; the first name is the one to open."""
    import nnbridge
    from nnbridge import zoo

    found = []
    for name in ("mlp", "lstm_small", "transformer_tiny", "resnet_tiny"):
        folder = work / "seeds" / fmt / name
        folder.mkdir(parents=True, exist_ok=True)
        model = zoo.build(name)
        try:
            if fmt == "onnx":
                found.append({f"{name}.onnx": model.SerializeToString()})
                if name == "mlp":
                    found.append({"loop.onnx": _loop_model().SerializeToString()})
            elif fmt == "smaug":
                backend = "SMV" if name == "resnet_tiny" else "Reference"
                nnbridge.save(nnbridge.load(model), folder / f"{name}_topo.pbtxt", smaug_backend=backend)
                found.append(_files(folder, f"{name}_topo.pbtxt"))
            elif fmt == "lbann":
                nnbridge.save(nnbridge.load(model), folder / f"{name}.prototext")
                found.append(_files(folder, f"{name}.prototext"))
            else:
                nnbridge.compile(model, "rdu").save(folder / f"{name}.pef")
                found.append(_files(folder, f"{name}.pef"))
        except nnbridge.NNBridgeError:
            continue  # a model the format cannot express is simply not a seed
    if fmt == "smaug":
        for topo in ("minerva/minerva_ref_topo.pbtxt", "cifar10-cnn/cnn_smv_topo.pbtxt"):
            if (SHARED / topo).is_file():
                found.append(_files((SHARED / topo).parent, Path(topo).name))
    return found


def _loop_model():
    """A Loop of 3 trips whose body adds to a carried tensor: mutations make its trip count huge."""
    from onnx import TensorProto, helper

    one = helper.make_tensor("one", TensorProto.FLOAT, [4], [1.0] * 4)
    body = helper.make_graph(
        [helper.make_node("Add", ["x_in", "one"], ["x_out"]), helper.make_node("Identity", ["c_in"], ["c_out"])],
        "body", [helper.make_tensor_value_info("i", TensorProto.INT64, []),
                 helper.make_tensor_value_info("c_in", TensorProto.BOOL, []),
                 helper.make_tensor_value_info("x_in", TensorProto.FLOAT, [4])],
        [helper.make_tensor_value_info("c_out", TensorProto.BOOL, []),
         helper.make_tensor_value_info("x_out", TensorProto.FLOAT, [4])], [one])
    graph = helper.make_graph([helper.make_node("Loop", ["M", "c", "x"], ["y"], body=body)], "loop",
                              [helper.make_tensor_value_info("x", TensorProto.FLOAT, [4])],
                              [helper.make_tensor_value_info("y", TensorProto.FLOAT, [4])],
                              [helper.make_tensor("M", TensorProto.INT64, [], [3]),
                               helper.make_tensor("c", TensorProto.BOOL, [], [True])])
    return helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)], ir_version=9)


def _files(folder: Path, first: str) -> dict[str, bytes]:
    files = {first: (folder / first).read_bytes()}
    for path in sorted(folder.rglob("*")):
        name = str(path.relative_to(folder))
        if path.is_file() and name not in files and (not first.endswith("_topo.pbtxt")
                                                    or name == first.replace("_topo.pbtxt", "_params.pb")):
            files[name] = path.read_bytes()
    return files


# -- mutations -------------------------------------------------------------------------------
def mutate(fmt: str, files: dict[str, bytes], rng: np.random.Generator,
           log: list[str] | None = None) -> dict[str, bytes]:
    """One mutated copy of a seed: one or two mutations of one of its files (their families,
    the names of ``FAMILIES``, appended to ``log``)."""
    log = [] if log is None else log
    files = dict(files)
    name = list(files)[int(rng.integers(len(files)))] if rng.random() < 0.3 else next(iter(files))
    for _ in range(1 + int(rng.random() < 0.3)):
        data = files[name]
        if fmt == "onnx" and name.endswith(".onnx") and rng.random() < 0.6:
            files[name] = _mutate_onnx(data, rng, log)
        elif fmt == "pef" and name.endswith(".pef") and rng.random() < 0.7:
            files[name] = _mutate_pef(data, rng, log)
        elif fmt == "lbann" and name.endswith(".prototext") and rng.random() < 0.2:
            files[name] = _without_weights(data)
            log.append("lbann-without-weights")
        elif _is_text(name) and rng.random() < 0.7:
            files[name] = _mutate_text(data, rng, log)
        else:
            files[name] = _mutate_bytes(data, rng, log)
    return files


def _is_text(name: str) -> bool:
    return name.endswith((".pbtxt", ".prototext", ".json"))


def _mutate_bytes(data: bytes, rng: np.random.Generator, log: list[str]) -> bytes:
    if not data:
        log.append("bytes-random")
        return bytes(rng.integers(0, 256, 8, dtype=np.uint8))
    buf = bytearray(data)
    kind = int(rng.integers(4))
    at = int(rng.integers(len(buf)))
    log.append(("bytes-truncated", "bytes-flipped", "bytes-inserted", "bytes-repeated")[kind])
    if kind == 0:
        return bytes(buf[:at])
    if kind == 1:
        for _ in range(int(rng.integers(1, 9))):
            buf[int(rng.integers(len(buf)))] ^= 1 << int(rng.integers(8))
        return bytes(buf)
    if kind == 2:
        return bytes(buf[:at]) + bytes(rng.integers(0, 256, int(rng.integers(1, 16)), dtype=np.uint8)) + bytes(buf[at:])
    end = min(len(buf), at + int(rng.integers(1, 64)))
    return bytes(buf[:end]) + bytes(buf[at:end]) * int(rng.integers(1, 4)) + bytes(buf[end:])


_WEIGHTS = re.compile(rb"^  weights \{\n.*?^  \}\n|^ +weights: \"[^\"\n]*\"\n", re.M | re.S)


def _without_weights(data: bytes) -> bytes:
    """An LBANN model without its weights objects: every layer falls back to LBANN's default
    initialisers, which nnbridge generates (a second mutation then sizes the layers)."""
    return _WEIGHTS.sub(b"", data)


_NUMBER = re.compile(rb"(?<![\w.])-?\d+(\.\d+)?(e-?\d+)?")
_NAME = re.compile(rb'"[^"\n]{1,60}"')


def _mutate_text(data: bytes, rng: np.random.Generator, log: list[str]) -> bytes:
    lines = data.split(b"\n")
    kind = int(rng.integers(4))
    if kind == 0:  # a number to an extreme
        numbers = list(_NUMBER.finditer(data))
        if numbers:
            m = numbers[int(rng.integers(len(numbers)))]
            value = EXTREMES[int(rng.integers(len(EXTREMES)))] if rng.random() < 0.8 else float("nan")
            log.append("text-number")
            return data[:m.start()] + str(value).encode() + data[m.end():]
    if kind == 1 and len(lines) > 1:  # a line dropped
        del lines[int(rng.integers(len(lines)))]
        log.append("text-line-dropped")
        return b"\n".join(lines)
    if kind == 2 and lines:  # a line repeated
        at = int(rng.integers(len(lines)))
        log.append("text-line-repeated")
        return b"\n".join(lines[:at + 1] + [lines[at]] * int(rng.integers(1, 4)) + lines[at + 1:])
    names = list(_NAME.finditer(data))  # a quoted name replaced by another one of the file
    if len(names) > 1:
        m, other = (names[int(i)] for i in rng.integers(len(names), size=2))
        log.append("text-name-swapped")
        return data[:m.start()] + other.group(0) + data[m.end():]
    return _mutate_bytes(data, rng, log)


def _mutate_onnx(data: bytes, rng: np.random.Generator, log: list[str]) -> bytes:
    import onnx

    model = onnx.ModelProto()
    try:
        model.ParseFromString(data)
    except Exception:  # noqa: BLE001 - an earlier mutation broke the wire format: mutate bytes
        return _mutate_bytes(data, rng, log)
    graph = model.graph
    extreme = EXTREMES[int(rng.integers(len(EXTREMES)))]
    kind = int(rng.integers(8))
    nodes = list(graph.node)
    if kind == 0 and nodes:  # an int attribute
        attrs = [a for n in nodes for a in n.attribute if a.type in (onnx.AttributeProto.INT, onnx.AttributeProto.INTS)]
        if attrs:
            a = attrs[int(rng.integers(len(attrs)))]
            if a.type == onnx.AttributeProto.INT:
                a.i = max(min(extreme, 2**63 - 1), -(2**63))
                log.append("onnx-int-attribute")
            elif a.ints:
                a.ints[int(rng.integers(len(a.ints)))] = max(min(extreme, 2**63 - 1), -(2**63))
                log.append("onnx-int-attribute")
    elif kind == 1:  # a declared dim
        values = [d for vi in (*graph.input, *graph.output) for d in vi.type.tensor_type.shape.dim]
        if values:
            values[int(rng.integers(len(values)))].dim_value = max(min(extreme, 2**63 - 1), -(2**63))
            log.append("onnx-declared-dim")
    elif kind == 2 and model.opset_import:  # the opset
        model.opset_import[0].version = int(rng.choice([1, 6, 9, 13, 21, 28, 29, 99, 0, -1]))
        log.append("onnx-opset")
    elif kind == 3 and nodes:  # a dangling input
        node = nodes[int(rng.integers(len(nodes)))]
        if node.input:
            node.input[int(rng.integers(len(node.input)))] = "nowhere"
            log.append("onnx-dangling-input")
    elif kind == 4 and nodes:  # a node removed
        graph.node.remove(nodes[int(rng.integers(len(nodes)))])
        log.append("onnx-node-removed")
    elif kind == 6:  # an int64 scalar (a Loop's trip count, an axis, a count) to an extreme
        scalars = [t for t in graph.initializer if t.data_type == onnx.TensorProto.INT64 and not t.dims]
        if scalars:
            t = scalars[int(rng.integers(len(scalars)))]
            t.CopyFrom(onnx.helper.make_tensor(t.name, onnx.TensorProto.INT64, [], [max(min(extreme, 2**63 - 1),
                                                                                          -(2**63))]))
            log.append("onnx-int64-scalar")
    elif kind == 5 and nodes:  # another op
        ops = ["Conv", "MatMul", "Reshape", "Gather", "Loop", "If", "Softmax", "Concat", "Expand", "Tile", "Resize"]
        nodes[int(rng.integers(len(nodes)))].op_type = ops[int(rng.integers(len(ops)))]
        log.append("onnx-op-replaced")
    elif graph.initializer:  # an initializer's type or dims
        t = graph.initializer[int(rng.integers(len(graph.initializer)))]
        if rng.random() < 0.5:
            t.data_type = int(rng.integers(0, 27))
            log.append("onnx-initializer-type")
        elif t.dims:
            t.dims[int(rng.integers(len(t.dims)))] = max(min(extreme, 2**63 - 1), -(2**63))
            log.append("onnx-initializer-dims")
    return model.SerializeToString()


def _mutate_pef(data: bytes, rng: np.random.Generator, log: list[str]) -> bytes:
    """A JSON member mutated as text and the archive re-zipped with matching hashes, so the
    mutation reaches the reader instead of stopping at the manifest check."""
    try:
        with zipfile.ZipFile(io.BytesIO(data)) as zf:
            members = {n: zf.read(n) for n in zf.namelist()}
    except Exception:  # noqa: BLE001 - an earlier mutation broke the archive: mutate bytes
        return _mutate_bytes(data, rng, log)
    names = [n for n in members if n != "manifest.json"]
    try:  # an earlier mutation may have left no manifest, or one that is not a JSON object
        manifest = json.loads(members["manifest.json"])
        listed = manifest.get("members")
    except (KeyError, ValueError, AttributeError):
        manifest = None
    if not names or manifest is None:
        return _mutate_bytes(data, rng, log)
    kind = rng.random()
    if kind < 0.1:  # a large member nothing refers to, listed with its true hash
        log.append("pef-unreferenced-member")
        members[f"weights/unused{int(rng.integers(100))}.npy"] = bytes(int(rng.choice([1, 16])) << 20)
    elif kind < 0.15:  # a manifest whose members are not a table
        log.append("pef-malformed-manifest")
        table = list(listed) if isinstance(listed, (dict, list)) else []
        manifest["members"] = [table, None, "members", 7][int(rng.integers(4))]
        return _zipped({**members, "manifest.json": json.dumps(manifest).encode()})
    else:
        target = [n for n in names if n.endswith(".json")] if rng.random() < 0.8 else names
        name = target[int(rng.integers(len(target)))]
        members[name] = _mutate_text(members[name], rng, log) if name.endswith(".json") else \
            _mutate_bytes(members[name], rng, log)
    manifest["members"] = {n: {"sha256": hashlib.sha256(d).hexdigest(), "size": len(d)}
                           for n, d in members.items() if n != "manifest.json"}
    members["manifest.json"] = json.dumps(manifest).encode()
    return _zipped(members)


def _zipped(members: dict[str, bytes]) -> bytes:
    out = io.BytesIO()
    with zipfile.ZipFile(out, "w", zipfile.ZIP_DEFLATED) as zf:
        for n, d in members.items():
            zf.writestr(n, d)
    return out.getvalue()


STEPS = ("summary", "run", "convert", "simulate", "interrupt")  # an input's step: its index modulo 5


def seed_of(index: int, pool: list[dict[str, bytes]]) -> dict[str, bytes]:
    """The seed input ``index`` mutates: each seed in turn for as many inputs as there are steps, so
    every seed goes through every step (``index % len(pool)`` paired seed k with step k alone when
    a format had five seeds)."""
    return pool[index // len(STEPS) % len(pool)]


def generate(fmt: str, seed: int, index: int, pool: list[dict[str, bytes]],
             log: list[str] | None = None) -> dict[str, bytes]:
    rng = np.random.default_rng([seed, index, FORMATS.index(fmt)])
    return mutate(fmt, seed_of(index, pool), rng, log)


# -- running one input -----------------------------------------------------------------------
def _written(files: dict[str, bytes], work: Path) -> Path:
    """A fresh folder under ``work`` holding ``files`` (names may hold subfolders)."""
    folder = Path(tempfile.mkdtemp(dir=work))
    for name, data in files.items():
        (folder / name).parent.mkdir(parents=True, exist_ok=True)
        (folder / name).write_bytes(data)
    return folder


def run_input(fmt: str, files: dict[str, bytes], index: int, work: Path) -> tuple[str, str]:
    """(outcome, detail) of one input through load and one more entry point."""
    from nnbridge.base.errors import NNBridgeError

    folder = _written(files, work)
    path = folder / next(iter(files))
    step = STEPS[index % len(STEPS)]
    out = folder / "out"
    try:
        _with_alarm(lambda: _interrupted(fmt, path, out, index) if step == "interrupt" else
                    _exercise(fmt, path, step, out), TIME_LIMIT_S)
        if step == "convert":  # a file that converts is also written where no file can go
            _with_alarm(lambda: _mistaken_destination(fmt, path, folder / "mistaken", index), TIME_LIMIT_S)
        outcome, detail = "ok", step
    except NNBridgeError as exc:
        outcome, detail = "clean", f"{step}: {type(exc).__name__}"
    except _Timeout:
        outcome, detail = "hang", step
    except MemoryError:
        outcome, detail = "memory", step
    except Exception as exc:  # noqa: BLE001 - the point of a fuzzer
        frame = traceback.extract_tb(exc.__traceback__)[-1]
        outcome = "traceback"
        detail = f"{step}: {type(exc).__name__} at {Path(frame.filename).name}:{frame.lineno}: {str(exc)[:120]}"
    written = sum(p.stat().st_size for p in out.rglob("*") if p.is_file()) if out.exists() else 0
    if written > OUTPUT_LIMIT:
        outcome, detail = "oversized", f"{step}: {written} bytes written"
    elif outcome == "clean" and step == "convert" and written:
        outcome, detail = "partial", f"{step}: a failed convert left {written} bytes"
    elif any(folder.rglob(".*.tmp")):
        outcome, detail = "partial", f"{step}: left temp file {next(folder.rglob('.*.tmp')).name}"
    shutil.rmtree(folder, ignore_errors=True)
    return outcome, detail


def _exercise(fmt: str, path: Path, step: str, out: Path) -> None:
    import nnbridge
    from nnbridge.api.inputs import random_inputs

    if fmt == "pef":
        from nnbridge.backends.rdu import load_pef

        program = load_pef(path)
        if step == "run":
            program.run(random_inputs(program.graph))
        return
    graph = nnbridge.load(str(path))
    if step == "summary":
        str(graph)
    elif step == "run":
        nnbridge.run(graph, random_inputs(graph))
    elif step == "convert":
        out.mkdir()
        for target in ("m.onnx", "m_topo.pbtxt", "m.prototext"):
            if not (fmt == "onnx" and target.endswith(".onnx")):
                try:
                    nnbridge.save(graph, out / target)
                except nnbridge.NNBridgeError:
                    continue
    else:
        nnbridge.compile(graph, "smv", perf_only=True)
        nnbridge.compile(graph, "rdu")


def _interrupted(fmt: str, path: Path, out: Path, index: int) -> None:
    """The convert step with SIGTERM sent to this process after a delay the index chooses, as
    ``timeout`` or a CI cancellation would: nnbridge unwinds and no temp file may remain (where
    in the work the signal lands varies from run to run)."""
    from nnbridge.base.fileio import Terminated, unwind_on_signals

    timer = threading.Timer(0.01 * (index % 10), signal.pthread_kill, (threading.main_thread().ident, signal.SIGTERM))
    with unwind_on_signals():
        try:
            try:
                timer.start()
                _exercise(fmt, path, "convert", out)
            finally:
                timer.cancel()
                timer.join()
        except Terminated:
            pass


def _mistaken_destination(fmt: str, path: Path, out: Path, index: int) -> None:
    """A save to a destination no file can be written to, as users mistype them: an existing
    directory, a path through a file, a name too long, a NUL in the name. Each must be refused with
    an OutputError that writes nothing and leaves the file in the way unharmed."""
    import nnbridge
    from nnbridge.base.errors import OutputError

    if fmt == "pef":
        return
    out.mkdir()
    (out / "afile").write_bytes(b"keep")
    target = ("m.prototext", "m.onnx", "m_topo.pbtxt")[index % 3]
    dest = [out, out / "afile" / target, out / ("x" * 250 + target), out / f"a\0{target}"][(index // 3) % 4]
    graph = nnbridge.load(str(path))
    try:
        nnbridge.save(graph, dest)
    except OutputError:
        pass
    else:
        raise AssertionError(f"saving to the mistaken destination {str(dest)[:60]!r} was not refused")
    if (out / "afile").read_bytes() != b"keep" or sorted(p.name for p in out.iterdir()) != ["afile"]:
        raise AssertionError(f"a refused destination changed {out}")
    shutil.rmtree(out)


class _Timeout(BaseException):
    """Raised by the alarm (a BaseException, so no ``except Exception`` in nnbridge swallows it)."""


#: a wall-clock backstop, in multiples of the CPU-time limit (for work that waits instead of computing)
WALL_CLOCK_FACTOR = 12


def _with_alarm(fn, seconds: int) -> None:
    """``fn`` stopped after ``seconds`` of this process's CPU time — which a loaded machine does not
    stretch, as it stretches wall-clock time — or ``WALL_CLOCK_FACTOR`` times as long by the clock."""
    def fire(signum, frame):
        raise _Timeout

    previous = {sig: signal.signal(sig, fire) for sig in (signal.SIGPROF, signal.SIGALRM)}
    signal.setitimer(signal.ITIMER_PROF, seconds)
    signal.alarm(seconds * WALL_CLOCK_FACTOR)
    try:
        fn()
    finally:
        signal.setitimer(signal.ITIMER_PROF, 0)
        signal.alarm(0)
        for sig, handler in previous.items():
            signal.signal(sig, handler)


# -- the worker and the driver ---------------------------------------------------------------
def worker(fmt: str, seed: int, indices: list[int], work: Path, results: Path) -> None:
    """Run inputs in this process under the address-space cap; one JSON line per input."""
    resource.setrlimit(resource.RLIMIT_AS, (MEMORY_LIMIT, MEMORY_LIMIT))
    import warnings

    warnings.simplefilter("ignore")
    np.seterr(all="ignore")
    pool = seeds(fmt, work)
    _warm(fmt, pool, work)
    with open(results, "a") as fh:
        for index in indices:
            families: list[str] = []
            files = generate(fmt, seed, index, pool, families)
            start = time.perf_counter()
            outcome, detail = run_input(fmt, files, index, work)
            fh.write(json.dumps({"index": index, "outcome": outcome, "detail": detail,
                                 "seed": next(iter(seed_of(index, pool))), "families": families,
                                 "seconds": round(time.perf_counter() - start, 3)}) + "\n")
            fh.flush()


def _warm(fmt: str, pool: list[dict[str, bytes]], work: Path) -> None:
    """Run every seed through every step once, unlimited, before the first input: numba compiles a
    kernel the first time a process on a cold cache calls it with new argument types (a fresh
    checkout's first convolution costs ~12 CPU-s; converting ResNet-tiny, whose weights are then
    read-only arrays, compiled read-only variants of the product and convolution loops for 15 CPU-s
    and failed CI as a hang), and a one-time compile is not a hang of the input that came first."""
    for files in pool:
        for step in STEPS:
            if step == "interrupt":
                continue
            folder = _written(files, work)
            try:
                _exercise(fmt, folder / next(iter(files)), step, folder / "out")
            except Exception:  # noqa: BLE001, S110 - a seed that fails here fails again, judged, as an input
                pass
            shutil.rmtree(folder, ignore_errors=True)


def fuzz(fmt: str, seed: int = 0, count: int | None = None, seconds: float | None = None,
         only: list[int] | None = None, progress: bool = False) -> list[dict]:
    """Run inputs of one format in worker processes (restarted after a kill); their outcomes. The
    work folder (seeds, inputs, results) is removed however the run ends."""
    work = Path(tempfile.mkdtemp(prefix=f"nnbridge-fuzz-{fmt}-"))
    try:
        return _fuzz_in(work, fmt, seed, count, seconds, only, progress)
    finally:
        shutil.rmtree(work, ignore_errors=True)


def _fuzz_in(work: Path, fmt: str, seed: int, count: int | None, seconds: float | None, only: list[int] | None,
             progress: bool) -> list[dict]:
    results = work / "results.jsonl"
    done: dict[int, dict] = {}
    deadline = time.monotonic() + seconds if seconds else None
    next_index = 0
    todo = list(only) if only is not None else None
    while True:
        if todo is not None:
            batch = [i for i in todo if i not in done]
        else:
            limit = count if count is not None else 10**9
            batch = list(range(next_index, min(limit, next_index + 200)))
        if not batch or (deadline and time.monotonic() > deadline):
            break
        proc = subprocess.run([sys.executable, "-m", "tools.fuzz", "--worker", "--format", fmt, "--seed", str(seed),
                               "--indices", ",".join(map(str, batch)), "--work", str(work)],
                              cwd=Path(__file__).resolve().parents[1], stdin=subprocess.DEVNULL,
                              capture_output=True, text=True)
        if results.exists():
            for line in results.read_text().splitlines():
                row = json.loads(line)
                done[row["index"]] = row
        missing = [i for i in batch if i not in done]
        if missing:  # the worker died at the first missing input: killed for memory (or worse)
            done[missing[0]] = {"index": missing[0], "outcome": "memory",
                                "detail": f"worker died (exit {proc.returncode}): {proc.stderr.strip()[-200:]}"}
        next_index = max(done) + 1 if todo is None else next_index
        if progress:
            print(f"\r{fmt}: {len(done)} inputs", end="", file=sys.stderr, flush=True)
    if progress:
        print(file=sys.stderr)
    return [done[i] for i in sorted(done)]


def table(rows_by_format: dict[str, list[dict]], seconds: dict[str, float]) -> str:
    head = "| format | inputs | " + " | ".join(GOOD + BAD) + " | inputs/s |"
    lines = [head, "|" + "---|" * (len(GOOD) + len(BAD) + 3)]
    for fmt, rows in rows_by_format.items():
        counts = collections.Counter(r["outcome"] for r in rows)
        rate = len(rows) / seconds[fmt] if seconds[fmt] else 0.0
        lines.append(f"| {fmt} | {len(rows)} | " + " | ".join(str(counts[k]) for k in GOOD + BAD) + f" | {rate:.1f} |")
    return "\n".join(lines)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--format", choices=FORMATS, action="append", help="formats to fuzz (default all)")
    parser.add_argument("--seed", type=int, default=0, help="the run's seed (default 0)")
    parser.add_argument("--count", type=int, help="inputs per format")
    parser.add_argument("--seconds", type=float, help="time per format (default: 600 without --count)")
    parser.add_argument("--only", help="comma-separated input indices to run (reproduce a failure)")
    parser.add_argument("--verbose", action="store_true", help="list every failing input")
    parser.add_argument("--worker", action="store_true", help=argparse.SUPPRESS)
    parser.add_argument("--indices", help=argparse.SUPPRESS)
    parser.add_argument("--work", help=argparse.SUPPRESS)
    args = parser.parse_args(argv)
    if args.worker:
        worker(args.format[0], args.seed, [int(i) for i in args.indices.split(",")], Path(args.work),
               Path(args.work) / "results.jsonl")
        return 0
    seconds = args.seconds if args.seconds is not None or args.count is not None else 600.0
    only = [int(i) for i in args.only.split(",")] if args.only else None
    rows_by_format, elapsed = {}, {}
    for fmt in args.format or FORMATS:
        start = time.monotonic()
        rows_by_format[fmt] = fuzz(fmt, args.seed, args.count, seconds, only, progress=sys.stderr.isatty())
        elapsed[fmt] = time.monotonic() - start
    print(table(rows_by_format, elapsed))
    bad = [(fmt, r) for fmt, rows in rows_by_format.items() for r in rows if r["outcome"] in BAD]
    for fmt, r in bad if args.verbose else bad[:20]:
        print(f"{fmt} #{r['index']} {r['outcome']}: {r['detail']}")
    return 1 if bad else 0


if __name__ == "__main__":
    sys.exit(main())
