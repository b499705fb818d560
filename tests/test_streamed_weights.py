"""Weights move tensor by tensor (issue 17): the ONNX writer appends each large initializer's bytes
after the rest of the model, the ONNX reader maps a large file and reads its big initializers as
arrays over the map, LBANN's .npy and SMAUG's params are written entry by entry. Judged by onnx,
onnxruntime and numpy reading the files, and by the peak memory of a fresh process."""

from __future__ import annotations

import subprocess
import sys

import ml_dtypes
import numpy as np
import onnx
import onnxruntime as ort
import pytest
from onnx import TensorProto, helper, numpy_helper

import nnbridge
from nnbridge.base.errors import FormatError
from nnbridge.converters.onnx import reader
from nnbridge.zoo import OnnxBuilder

MIB = 1 << 20


def _model(weights: dict[str, np.ndarray]) -> onnx.ModelProto:
    """y = x + Σ each weight reduced to a scalar (so every weight is used, whatever its type)."""
    nodes, total = [], "x"
    for i, name in enumerate(weights):
        nodes += [helper.make_node("Cast", [name], [f"{name}_f"], to=TensorProto.FLOAT),
                  helper.make_node("ReduceSum", [f"{name}_f"], [f"{name}_s"], keepdims=0),
                  helper.make_node("Add", [total, f"{name}_s"], [f"sum{i}"])]
        total = f"sum{i}"
    nodes.append(helper.make_node("Identity", [total], ["y"]))
    graph = helper.make_graph(nodes, "weights", [helper.make_tensor_value_info("x", TensorProto.FLOAT, [])],
                              [helper.make_tensor_value_info("y", TensorProto.FLOAT, [])],
                              [numpy_helper.from_array(a, n) for n, a in weights.items()])
    return helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)], ir_version=8)


def _weights() -> dict[str, np.ndarray]:
    rng = np.random.default_rng(0)
    return {"w32": rng.standard_normal((512, 1024)).astype(np.float32),  # 2 MiB
            "w16": rng.standard_normal((1024, 1024)).astype(np.float16),  # 2 MiB
            "wbf": rng.standard_normal((1024, 1024)).astype(ml_dtypes.bfloat16),
            "wi64": rng.integers(-5, 5, (300_000,)).astype(np.int64),
            "wbool": rng.random(2 * MIB) < 0.5,
            "small": np.arange(6, dtype=np.float32).reshape(2, 3)}


def test_large_initializers_written_after_the_model_read_back_as_one_model(tmp_path):
    weights = _weights()
    source = tmp_path / "source.onnx"
    onnx.save(_model(weights), str(source))
    out = tmp_path / "out.onnx"
    nnbridge.convert(str(source), out)
    written = onnx.load(str(out))
    onnx.checker.check_model(written, full_check=True)
    stored = {t.name: numpy_helper.to_array(t) for t in written.graph.initializer}
    for name, array in weights.items():
        assert stored[name].dtype == array.dtype and np.array_equal(stored[name], array), name
    x = {"x": np.array(0.5, np.float32)}
    assert ort.InferenceSession(str(out)).run(None, x)[0] == pytest.approx(
        ort.InferenceSession(str(source)).run(None, x)[0], rel=1e-6)


def test_a_large_file_is_read_as_arrays_over_a_map_of_it(tmp_path, monkeypatch):
    monkeypatch.setattr(reader, "STREAM_FILE_BYTES", 0)
    weights = _weights()
    int4 = numpy_helper.from_array(np.zeros(0, np.float32), "w4")  # packed: the ordinary decoder reads it
    int4.CopyFrom(helper.make_tensor("w4", TensorProto.INT4, [2 * MIB + 1], np.ones(2 * MIB + 1, np.int8)))
    model = _model(weights)
    model.graph.initializer.append(int4)
    path = tmp_path / "big.onnx"
    onnx.save(model, str(path))
    graph = nnbridge.load(path)
    for name, array in weights.items():
        got = graph.initializers[name]
        assert got.dtype == array.dtype and np.array_equal(got, array), name
    mapped = graph.initializers["w32"]
    assert not mapped.flags.writeable and not mapped.flags.owndata  # a view of the map, read-only like onnx's
    w4 = graph.initializers["w4"]
    assert w4.shape == (2 * MIB + 1,) and int(w4.astype(np.int64).sum()) == 2 * MIB + 1
    want = 0.5 + sum(float(a.astype(np.float64).sum()) for a in weights.values())
    assert float(nnbridge.compile(graph).run({"x": np.array(0.5, np.float32)})["y"]) == pytest.approx(want, rel=1e-4)


def test_a_corrupt_large_initializer_is_one_line_naming_the_file(tmp_path, monkeypatch):
    monkeypatch.setattr(reader, "STREAM_FILE_BYTES", 0)
    model = _model({"w": np.ones((1024, 512), np.float32)})
    tensor = model.graph.initializer[0]
    tensor.raw_data = tensor.raw_data[:-4]  # one element short of its dims
    path = tmp_path / "short.onnx"
    path.write_bytes(model.SerializeToString())
    with pytest.raises(FormatError, match=r"short\.onnx") as caught:
        nnbridge.load(path)
    assert "\n" not in str(caught.value)


#: the child converts, then prints its own peak resident memory (VmHWM)
CHILD = """
import re, sys
import nnbridge
nnbridge.convert(sys.argv[1], sys.argv[2], **dict(a.split("=") for a in sys.argv[3:]))
print(re.search(r"VmHWM:\\s+(\\d+)", open("/proc/self/status").read()).group(1))
"""


def _peak_bytes(*args: str) -> int:
    done = subprocess.run([sys.executable, "-c", CHILD, *args], check=True, capture_output=True, text=True)
    return int(done.stdout.split()[-1]) * 1024


@pytest.mark.slow
def test_conversions_of_a_large_model_peak_under_twice_its_size(tmp_path):
    """A 256 MiB model through ONNX → ONNX, → LBANN (.npy), LBANN → ONNX and → SMAUG: each fresh
    process peaks under twice the model (``make bench`` measures VGG-19 the same way)."""
    rng = np.random.default_rng(0)
    b = OnnxBuilder("mlp", seed=0)
    x = b.input("x", [1, 4096])
    for i in range(4):
        x = b.op("Relu", [b.op("Gemm", [x, b.const(f"w{i}", rng.standard_normal((4096, 4096), np.float32)),
                                         b.const(f"b{i}", np.zeros(4096, np.float32))], f"fc{i}", transB=1)])
    b.output(x)
    source = tmp_path / "mlp.onnx"
    onnx.save(b.model(), str(source))
    size = source.stat().st_size
    assert size > 256 * MIB
    lbann = tmp_path / "lbann" / "mlp.prototext"
    steps = [(str(source), str(tmp_path / "copy.onnx")), (str(source), str(lbann)),
             (str(lbann), str(tmp_path / "back.onnx")),
             (str(source), str(tmp_path / "smaug" / "mlp_topo.pbtxt"), "smaug_backend=Reference")]
    for step in steps:
        peak = _peak_bytes(*step)
        assert peak <= 2 * size, (step, peak / size)
    feed = {"x": rng.standard_normal((1, 4096), np.float32)}
    want = ort.InferenceSession(str(source)).run(None, feed)[0]
    for written in ("copy.onnx", "back.onnx"):
        session = ort.InferenceSession(str(tmp_path / written))
        got = session.run(None, {session.get_inputs()[0].name: feed["x"]})[0]
        assert np.allclose(got, want, rtol=1e-5, atol=1e-5 * float(np.abs(want).max())), written


def test_external_data_is_mapped_where_it_lies(tmp_path):
    """nnbridge's reader and check's onnxruntime model leave external weights in their file (onnxruntime maps them):
    whole-model, layerwise (bf16 weights re-read per node) and float64 runs all still see them."""
    from nnbridge.check.exact import run_float64
    from nnbridge.check.oracle import oracle_model

    rng = np.random.default_rng(0)
    b = OnnxBuilder("mlp", seed=0)
    x = b.input("x", [2, 64])
    for i in range(2):
        x = b.op("Relu", [b.op("Gemm", [x, b.const(f"w{i}", rng.standard_normal((64, 64), np.float32)),
                                         b.const(f"b{i}", rng.standard_normal(64, np.float32))], f"fc{i}")])
    b.output(x)
    path = tmp_path / "mlp.onnx"
    onnx.save(b.model(), str(path), save_as_external_data=True, location="mlp.data", size_threshold=0)
    graph = nnbridge.load(path)
    mapped = graph.initializers["w0"]
    assert not mapped.flags.writeable and not mapped.flags.owndata  # nnbridge's reader maps the data file too
    proto = oracle_model(path, graph)
    assert not any(t.raw_data for t in proto.graph.initializer)
    feed = {"x": rng.standard_normal((2, 64), np.float32)}
    want = ort.InferenceSession(str(path)).run(None, feed)[0]
    exact, runtime = run_float64(proto, feed)
    assert runtime == "onnxruntime" and np.allclose(next(iter(exact.values())), want, rtol=1e-5, atol=1e-5)
    result = nnbridge.check(path, backend="rdu", inputs=feed, layerwise=True)
    assert result.ok and result.layerwise is not None and len(result.layerwise.nodes) == 4
