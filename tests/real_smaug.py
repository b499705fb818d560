"""The real SMAUG runtime (``../shared/tools/smaug/smaug``) as a test oracle.

SMAUG's own C++ runtime runs a ``_topo.pbtxt`` + ``_params.pb`` pair on its Reference
or SMV backend and writes the last operator's output to ``output.pb`` (a
``smaug.TensorProto``) in its working directory. :func:`run_smaug` runs it in a
subprocess in a fresh directory with a timeout and decodes that file;
:func:`stored_feeds` reads the network input the params file stores (the runtime
always uses it), laid out as an ONNX model expects it, so onnxruntime on the source
model can be fed the very same values. The decoding here is written against the
format spec, independently of nnbridge's reader.
"""

from __future__ import annotations

import os
import signal
import subprocess
import tempfile
from collections.abc import Iterable
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from pathlib import Path

import numpy as np
import onnx
from google.protobuf import text_format

from nnbridge.protos.smaug import smaug_graph_pb2 as gpb
from nnbridge.protos.smaug import smaug_tensor_pb2 as tpb

REPO = Path(__file__).resolve().parent.parent
SMAUG_BIN = Path(os.environ.get("NNBRIDGE_SMAUG", REPO.parent / "shared" / "tools" / "smaug" / "smaug"))

#: SMAUG DataType → numpy dtype, and the TensorData field holding its values (spec §4.1).
DTYPES = {1: (np.int32, "int_data"), 2: (np.int64, "int64_data"), 3: (np.float16, "half_data"),
          4: (np.float32, "float_data"), 5: (np.float64, "double_data"), 6: (np.bool_, "bool_data")}
NHWC, NC = 2, 4

#: Tolerances against onnxruntime, relative to the largest |expected| value: fp32 (Reference) and
#: fp16 storage (SMV: every operator rounds to 11 significant bits; a dozen roundings ~0.5 %).
TOLERANCE = {"Reference": 1e-5, "SMV": 2e-2}


@dataclass
class RealRun:
    """One run of the binary: ``status`` is ok, abort, segfault, timeout or failed."""

    status: str
    output: np.ndarray | None = None  # logical values (alignment padding removed)
    storage: np.ndarray | None = None  # the stored values, padding included
    name: str = ""
    layout: int = 0
    message: str = ""

    @property
    def ok(self) -> bool:
        return self.status == "ok"


def binary() -> Path:
    if not os.access(SMAUG_BIN, os.X_OK):
        raise FileNotFoundError(f"the SMAUG runtime is not at {SMAUG_BIN} (set NNBRIDGE_SMAUG)")
    return SMAUG_BIN


def decode_values(data: tpb.TensorData, dims: list[int], alignment: int,
                  data_type: int) -> tuple[np.ndarray, np.ndarray]:
    """(logical array, stored array incl. padding) of one TensorData."""
    dtype, field = DTYPES[data_type]
    last = dims[-1] if dims else 1
    padded = -(-last // alignment) * alignment if alignment > 0 else last
    count = int(np.prod(dims[:-1], dtype=np.int64)) * padded if dims else 1
    raw = getattr(data, field)
    flat = np.asarray(raw, dtype="<i4").view(np.float16) if data_type == 3 else np.asarray(raw, dtype=dtype)
    flat = flat[:count]
    if flat.size != count:
        raise ValueError(f"tensor '{data.name}' holds {flat.size} values, expected {count}")
    storage = flat.reshape([*dims[:-1], padded]) if dims else flat.reshape(())
    return np.ascontiguousarray(storage[..., :last]) if dims else storage, storage


def run_smaug(topo: str | Path, params: str | Path | None = None, *, timeout: float = 300) -> RealRun:
    """Run the binary on a model pair in its own directory; decode ``output.pb``."""
    topo = Path(topo).resolve()
    params = Path(params).resolve() if params else topo.with_name(topo.name.replace("_topo.pbtxt", "_params.pb"))
    with tempfile.TemporaryDirectory(prefix="smaug-run-") as work:
        try:
            proc = subprocess.run([str(binary()), str(topo), str(params), "-p", "proto"], cwd=work,
                                  capture_output=True, timeout=timeout)
        except subprocess.TimeoutExpired:
            return RealRun("timeout", message=f"no result after {timeout} s")
        tail = (proc.stderr or proc.stdout).decode(errors="replace").strip().splitlines()[-3:]
        if proc.returncode != 0:
            code = -proc.returncode
            status = {signal.SIGABRT: "abort", signal.SIGSEGV: "segfault"}.get(code, "failed")
            return RealRun(status, message=f"exit {proc.returncode}: {' | '.join(tail)}")
        out = Path(work) / "output.pb"
        if not out.is_file():
            return RealRun("failed", message="no output.pb written: " + " | ".join(tail))
        tensor = tpb.TensorProto()
        tensor.ParseFromString(out.read_bytes())
    dims = list(tensor.shape.dims)
    logical, storage = decode_values(tensor.data, dims, tensor.shape.alignment, tensor.data_type)
    return RealRun("ok", logical, storage, tensor.name, tensor.shape.layout)


def run_many(topos: Iterable[str | Path], workers: int = 4, timeout: float = 300) -> list[RealRun]:
    """Several runs at once (each is a separate process)."""
    with ThreadPoolExecutor(workers) as pool:
        return list(pool.map(lambda t: run_smaug(t, timeout=timeout), topos))


def read_graph(topo: str | Path) -> gpb.GraphProto:
    return text_format.Parse(Path(topo).read_text(), gpb.GraphProto())


def stored_inputs(topo: str | Path) -> dict[str, tuple[np.ndarray, int]]:
    """Every Data node's stored values with its layout: {node name: (array, layout enum)}."""
    topo = Path(topo)
    graph = read_graph(topo)
    entries = tpb.TensorDataArray()
    entries.ParseFromString(topo.with_name(topo.name.replace("_topo.pbtxt", "_params.pb")).read_bytes())
    by_name = {e.name: e for e in entries.data_array}
    out = {}
    for node in graph.nodes:
        if node.op == 7 and node.input_tensors and node.input_tensors[0].name in by_name:
            t = node.input_tensors[0]
            array, _ = decode_values(by_name[t.name], list(t.shape.dims), t.shape.alignment, t.data_type)
            out[node.name] = (array, t.shape.layout)
    return out


def stored_feeds(topo: str | Path, model: onnx.ModelProto) -> dict[str, np.ndarray]:
    """The network inputs stored in the params file, as the ONNX model's inputs (NCHW, float32)."""
    stored = stored_inputs(topo)
    inits = {i.name for i in model.graph.initializer}
    feeds = {}
    for value in model.graph.input:
        if value.name in inits:
            continue
        if value.name not in stored:
            raise KeyError(f"{topo}: no Data node stores the input '{value.name}'")
        array, layout = stored[value.name]
        if array.ndim == 4 and layout == NHWC:
            array = array.transpose(0, 3, 1, 2)
        elem = value.type.tensor_type.elem_type
        feeds[value.name] = array.astype(onnx.helper.tensor_dtype_to_np_dtype(elem))
    return feeds


def as_onnx_layout(run: RealRun, expected: np.ndarray) -> np.ndarray:
    """The real output in the ONNX output's layout (SMV writes 4-D results NHWC)."""
    got = run.output
    if got.ndim == 4 and run.layout == NHWC and expected.ndim == 4:
        got = got.transpose(0, 3, 1, 2)
    return got.reshape(expected.shape) if got.size == expected.size else got


def relative_error(got: np.ndarray, expected: np.ndarray) -> float:
    """max |got − expected| / max |expected| (NaN anywhere counts as infinitely wrong)."""
    got = np.asarray(got, np.float64)
    expected = np.asarray(expected, np.float64)
    if got.shape != expected.shape or np.isnan(got).any():
        return float("inf")
    scale = max(float(np.abs(expected).max(initial=0.0)), 1e-30)
    return float(np.abs(got - expected).max(initial=0.0)) / scale


def same_fp16_bits(a: np.ndarray, b: np.ndarray) -> bool:
    """Bit-identical fp16 values (any NaN equals any NaN: SMAUG does not define NaN payloads)."""
    a, b = np.asarray(a), np.asarray(b)
    if a.shape != b.shape:
        return False
    if a.dtype == np.bool_ or b.dtype == np.bool_:
        return bool(np.array_equal(a, b))
    a16, b16 = a.astype(np.float16), b.astype(np.float16)
    nan = np.isnan(a16) & np.isnan(b16)
    return bool(np.all(nan | (a16.view(np.uint16) == b16.view(np.uint16))))


def matching_output(outputs: dict[str, np.ndarray], run: RealRun) -> np.ndarray:
    """Among a loaded SMAUG file's outputs, the one the runtime printed: the IR names a SMAUG tensor
    ``<node>/output0`` or, when it keeps another layout of it, ``<node>/output0/<layout>``."""
    found = [v for k, v in outputs.items() if k == run.name or k.startswith(run.name + "/")]
    if not found:
        raise KeyError(f"no output named after '{run.name}' among {sorted(outputs)}")
    value = np.asarray(found[0])
    if value.shape != run.output.shape and value.ndim == 4:
        value = value.transpose(0, 2, 3, 1)  # the IR's NCHW view of an NHWC tensor
    return value
