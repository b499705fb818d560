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
from nnbridge.converters.onnx.writer import save_onnx
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
@pytest.mark.memory
def test_conversions_of_a_large_model_peak_under_twice_its_size(tmp_path):
    """A 256 MiB model through ONNX → ONNX, → LBANN (.npy), LBANN → ONNX and → SMAUG: each fresh
    process peaks under twice the model (``make bench`` measures VGG-19 the same way), ONNX → ONNX
    under half of it."""
    rng = np.random.default_rng(0)
    nodes, x = [], "x"
    for i in range(4):
        nodes += [helper.make_node("Gemm", [x, f"w{i}", f"b{i}"], [f"fc{i}"], transB=1),
                  helper.make_node("Relu", [f"fc{i}"], [f"relu{i}"])]
        x = f"relu{i}"
    model = helper.make_model(helper.make_graph(
        nodes, "mlp", [helper.make_tensor_value_info("x", TensorProto.FLOAT, [1, 4096])],
        [helper.make_tensor_value_info(x, TensorProto.FLOAT, [1, 4096])]),
        opset_imports=[helper.make_opsetid("", 17)], ir_version=8)
    for i in range(4):  # each weight made and dropped in turn: the worker holds the model once, and its bytes
        model.graph.initializer.append(numpy_helper.from_array(rng.standard_normal((4096, 4096), np.float32), f"w{i}"))
        model.graph.initializer.append(numpy_helper.from_array(np.zeros(4096, np.float32), f"b{i}"))
    source = tmp_path / "mlp.onnx"
    source.write_bytes(model.SerializeToString())
    del model
    size = source.stat().st_size
    assert size > 256 * MIB
    lbann = tmp_path / "lbann" / "mlp.prototext"
    steps = [(str(source), str(tmp_path / "copy.onnx")), (str(source), str(lbann)),
             (str(lbann), str(tmp_path / "back.onnx")),
             (str(source), str(tmp_path / "smaug" / "mlp_topo.pbtxt"), "smaug_backend=Reference")]
    for step in steps:
        peak = _peak_bytes(*step)
        assert peak <= 2 * size, (step, peak / size)
        if step == steps[0]:  # ONNX → ONNX copies the mapped weights file to file (314 MB when read through the map)
            assert peak < size // 2, peak / size
    feed = {"x": rng.standard_normal((1, 4096), np.float32)}
    want = ort.InferenceSession(str(source)).run(None, feed)[0]
    for written in ("copy.onnx", "back.onnx"):  # one session (a copy of the weights) at a time
        session = ort.InferenceSession(str(tmp_path / written))
        got = session.run(None, {session.get_inputs()[0].name: feed["x"]})[0]
        del session
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


def _sparse_file(path, size: int, data: dict[int, bytes]):
    """A file of ``size`` bytes, holes except ``data`` (offset → bytes); the file system may fill them."""
    with open(path, "wb") as fh:
        fh.truncate(size)
        for offset, chunk in data.items():
            fh.seek(offset)
            fh.write(chunk)
    return path


def test_a_mapped_array_is_written_file_to_file_keeping_holes(tmp_path):
    """``write_array`` copies an untouched view of a mapped file from the file (its pages never
    become resident through the map) and leaves the source's holes holes; any other array, or a
    view of a file changed since it was mapped, is written from memory, with the same bytes."""
    from nnbridge.base.mapped import file_region, map_file, write_array

    size = 8 * MIB
    source = _sparse_file(tmp_path / "w.data", size, {4096: b"head", size - 8: b"tail-end"})
    mapped = map_file(source)
    whole = np.frombuffer(mapped, np.uint8, size - 4096, 4096).reshape(-1, 4096)
    assert file_region(whole) == (mapped, 4096) and file_region(whole[1:]) == (mapped, 8192)
    assert file_region(whole[:, :8]) is None and file_region(whole + 0) is None
    out = tmp_path / "out.data"
    with open(out, "wb") as fh:
        fh.write(b"prefix")
        write_array(fh, whole)
        write_array(fh, whole[:2, :8])  # not contiguous: from memory
        fh.write(b"!")
    written = out.read_bytes()
    assert written == b"prefix" + mapped[4096:] + mapped[4096:4104] + mapped[8192:8200] + b"!"
    if source.stat().st_blocks * 512 < size // 2:  # the file system keeps holes: so does the copy
        assert out.stat().st_blocks * 512 < size // 2, out.stat().st_blocks
    _sparse_file(tmp_path / "new.data", size, {4096: b"HEAD"}).replace(source)  # the map, not the file, is the array
    with open(tmp_path / "again.data", "wb") as fh:
        write_array(fh, whole[:1])
    assert (tmp_path / "again.data").read_bytes()[:4] == b"head"


def test_converting_external_data_never_reads_it_through_the_map(tmp_path, monkeypatch):
    """ONNX → ONNX of a model whose weight is a mapped external file, inline (under 2 GB) and
    external (over the threshold): both outputs hold the weight's bytes, copied from the file."""
    from nnbridge.base import mapped as mapped_module

    copied = []
    real = mapped_module._copy_region
    monkeypatch.setattr(mapped_module, "_copy_region", lambda *a: copied.append(a[2]) or real(*a))
    count = 2 * MIB
    ends = {0: np.float32(1.5).tobytes(), 4 * count - 4: np.float32(2.5).tobytes()}
    _sparse_file(tmp_path / "w.data", 4 * count, ends)
    w = onnx.TensorProto(name="w", data_type=TensorProto.FLOAT, dims=[count], data_location=TensorProto.EXTERNAL)
    for key, value in {"location": "w.data", "offset": "0", "length": str(4 * count)}.items():
        w.external_data.add(key=key, value=value)
    model = helper.make_model(helper.make_graph(
        [helper.make_node("Gather", ["w", "i"], ["y"], axis=0)], "g",
        [helper.make_tensor_value_info("i", TensorProto.INT64, [2])],
        [helper.make_tensor_value_info("y", TensorProto.FLOAT, [2])], [w]),
        opset_imports=[helper.make_opsetid("", 17)], ir_version=9)
    onnx.save(model, str(tmp_path / "g.onnx"))
    graph = nnbridge.load(tmp_path / "g.onnx")
    nnbridge.save(graph, tmp_path / "inline.onnx")
    save_onnx(graph, tmp_path / "external.onnx", external_threshold=MIB)
    assert copied == [4 * count, 4 * count]
    assert (tmp_path / "external.onnx.data").stat().st_size == 4 * count
    feed = {"i": np.array([0, count - 1], np.int64)}
    for name in ("inline.onnx", "external.onnx"):
        assert ort.InferenceSession(str(tmp_path / name)).run(None, feed)[0].tolist() == [1.5, 2.5], name
