"""Bad input: one clear line, non-zero exit, no traceback, no partial output file."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import numpy as np
import onnx
import pytest
from onnx import TensorProto, helper

import nnbridge
from nnbridge.base.errors import FormatError, InputError, SecurityError, ShapeError, UnsupportedOpError
from nnbridge.zoo import build


def _model(nodes, inputs, outputs, inits=()) -> onnx.ModelProto:
    graph = helper.make_graph(nodes, "bad", inputs, outputs, list(inits))
    return helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)], ir_version=9)



@pytest.fixture
def good_model(tmp_path: Path) -> Path:
    path = tmp_path / "mlp.onnx"
    onnx.save(build("mlp"), path)
    return path


def test_truncated_file(tmp_path, good_model, cli):
    bad = tmp_path / "truncated.onnx"
    bad.write_bytes(good_model.read_bytes()[: good_model.stat().st_size // 2])
    code, text = cli("run", str(bad))
    assert code == 1 and "truncated.onnx" in text and "Traceback" not in text
    with pytest.raises(FormatError, match="truncated or corrupt"):
        nnbridge.load(bad)


def test_corrupt_file_and_no_partial_output(tmp_path, cli):
    bad = tmp_path / "noise.onnx"
    bad.write_bytes(np.random.default_rng(0).bytes(5000))
    out = tmp_path / "out" / "converted.onnx"
    code, text = cli("convert", str(bad), str(out))
    assert code == 1 and "noise.onnx" in text
    assert not out.exists()
    assert not list(tmp_path.glob("out/*"))  # no temporary leftovers either


def test_unknown_ops_are_all_listed(tmp_path, cli):
    x = helper.make_tensor_value_info("x", TensorProto.FLOAT, [2])
    y = helper.make_tensor_value_info("y", TensorProto.FLOAT, [2])
    model = _model([helper.make_node("FrobnicateA", ["x"], ["t"], name="first", domain="custom"),
                    helper.make_node("Relu", ["t"], ["u"]),
                    helper.make_node("FrobnicateB", ["u"], ["y"], name="second", domain="custom")],
                   [x], [y])
    model.opset_import.append(helper.make_opsetid("custom", 1))
    with pytest.raises(UnsupportedOpError) as info:
        nnbridge.compile(model)
    assert {i.node for i in info.value.items} == {"first", "second"}
    path = tmp_path / "unknown.onnx"
    onnx.save(model, path)
    code, text = cli("run", str(path))
    assert code == 1 and "FrobnicateA" in text and "FrobnicateB" in text and "Traceback" not in text


def test_wrong_and_missing_inputs(tmp_path, good_model, cli):
    with pytest.raises(InputError, match="missing input"):
        nnbridge.run(good_model, {})
    with pytest.raises(InputError, match="shape"):
        nnbridge.run(good_model, {"input": np.zeros((1, 65), np.float32)})
    with pytest.raises(InputError, match="dtype"):
        nnbridge.run(good_model, {"input": np.zeros((1, 64), np.float64)})
    wrong = tmp_path / "wrong.npy"
    np.save(wrong, np.zeros((2, 3), np.float32))
    code, text = cli("run", str(good_model), "--input", f"input={wrong}")
    assert code == 2 and "input 'input'" in text
    pickled = tmp_path / "objects.npy"
    np.save(pickled, np.array([{"a": 1}], dtype=object), allow_pickle=True)
    with pytest.raises(SecurityError):
        from nnbridge.cli.common import load_inputs

        load_inputs([f"input={pickled}"])


def test_huge_declared_tensor(tmp_path, cli):
    huge = onnx.TensorProto(name="w", data_type=TensorProto.FLOAT, dims=[1_000_000, 1_000_000])
    x = helper.make_tensor_value_info("x", TensorProto.FLOAT, [1_000_000])
    y = helper.make_tensor_value_info("y", TensorProto.FLOAT, [1_000_000])
    model = _model([helper.make_node("MatMul", ["x", "w"], ["y"])], [x], [y], [huge])
    with pytest.raises(ShapeError, match="1e\\+12 elements"):
        nnbridge.load(model)
    path = tmp_path / "huge.onnx"
    onnx.save(model, path)
    code, text = cli("check", str(path))
    assert code == 1 and "'w'" in text and "Traceback" not in text
    # a declared input that large is refused before any random data is generated
    big_in = helper.make_tensor_value_info("x", TensorProto.FLOAT, [1_000_000, 1_000_000])
    relu = _model([helper.make_node("Relu", ["x"], ["y"])], [big_in], [y])
    with pytest.raises(ShapeError):
        nnbridge.check(relu)


def test_external_data_cannot_escape_model_dir(tmp_path):
    tensor = _external("w", "../../etc/passwd")
    x = helper.make_tensor_value_info("x", TensorProto.FLOAT, [4])
    y = helper.make_tensor_value_info("y", TensorProto.FLOAT, [4])
    model = _model([helper.make_node("Add", ["x", "w"], ["y"])], [x], [y], [tensor])
    path = tmp_path / "model" / "escape.onnx"
    path.parent.mkdir()
    path.write_bytes(model.SerializeToString())
    with pytest.raises(SecurityError, match="escapes the model directory"):
        nnbridge.load(path)


def test_cli_subprocess_has_no_traceback(tmp_path):
    bad = tmp_path / "empty.onnx"
    bad.write_bytes(b"")
    proc = subprocess.run([sys.executable, "-m", "nnbridge", "summary", str(bad)],
                          capture_output=True, text=True, stdin=subprocess.DEVNULL)
    assert proc.returncode == 1
    assert "Traceback" not in proc.stderr and "empty.onnx" in proc.stderr
    assert len(proc.stderr.strip().splitlines()) <= 2


# The command's own peak RSS: VmHWM of its address space (ru_maxrss would include the forking
# pytest process's, which Linux carries across exec); and its own CPU time, which a loaded
# machine does not stretch as it stretches wall-clock time.
_MEASURED_CLI = ("import os, re, sys\n"
                 "from nnbridge.cli import main\n"
                 "code = main(sys.argv[1:])\n"
                 "hwm = re.search(r'VmHWM:\\s+(\\d+)', open('/proc/self/status').read()).group(1)\n"
                 "print('peak-rss-kb', hwm, file=sys.stderr)\n"
                 "print('cpu-seconds', os.times().user + os.times().system, file=sys.stderr)\n"
                 "sys.exit(code)\n")


def _measured(stderr: str) -> tuple[list[str], float, float]:
    """The command's own lines, its peak RSS in MB and its CPU seconds (from ``_MEASURED_CLI``)."""
    lines = [line for line in stderr.splitlines() if not line.startswith(("peak-rss-kb", "cpu-seconds"))]
    peak_kb, cpu = stderr.split("peak-rss-kb")[1].split()[0], stderr.split("cpu-seconds")[1].split()[0]
    return lines, int(peak_kb) / 1024, float(cpu)


@pytest.mark.parametrize("side", [100_000, 16_384])  # 40 GB, and 1 GB (over the 512 MB default fold limit)
@pytest.mark.parametrize("target", ["out.onnx", "out_topo.pbtxt", "out.prototext"])
def test_a_small_file_whose_constant_expands_to_gigabytes_is_never_materialised(tmp_path, side, target):
    model = _model([helper.make_node("Expand", ["one", "shape"], ["big"]),
                    helper.make_node("ReduceSum", ["big"], ["total"], keepdims=0),
                    helper.make_node("Add", ["x", "total"], ["y"])],
                   [helper.make_tensor_value_info("x", TensorProto.FLOAT, [1])],
                   [helper.make_tensor_value_info("y", TensorProto.FLOAT, None)],
                   [helper.make_tensor("one", TensorProto.FLOAT, [1], [1.0]),
                    helper.make_tensor("shape", TensorProto.INT64, [2], [side, side])])
    src = tmp_path / "bomb.onnx"
    onnx.save(model, src)
    assert src.stat().st_size < 200
    proc = subprocess.run([sys.executable, "-c", _MEASURED_CLI, "convert", str(src), str(tmp_path / target)],
                          capture_output=True, text=True, stdin=subprocess.DEVNULL, timeout=120)
    errors, peak_mb, _ = _measured(proc.stderr)
    assert peak_mb < 200, peak_mb
    written = sum(p.stat().st_size for p in tmp_path.iterdir() if p != src)
    assert written < 1_000_000
    if proc.returncode == 0:  # converted: the Expand is still an op, not a folded constant
        assert target == "out.onnx" and "Expand" in [n.op_type for n in onnx.load(tmp_path / target).graph.node]
    else:  # refused: an error naming the cause (one line per unsupported node), nothing written
        assert proc.returncode == 1 and "Traceback" not in proc.stderr and written == 0
        assert errors[0].startswith("error:") and len(errors) <= 1 + len(model.graph.node)


def _external(name: str, location: str, dims=(4,), data_type=TensorProto.FLOAT) -> onnx.TensorProto:
    tensor = onnx.TensorProto(name=name, data_type=data_type, dims=list(dims))
    tensor.data_location = TensorProto.EXTERNAL
    for key, value in {"location": location, "offset": "0", "length": str(4 * int(np.prod(dims)))}.items():
        tensor.external_data.add(key=key, value=value)
    return tensor


def _escaping_model(place: str, location: str) -> onnx.ModelProto:
    """A small model with one external-data reference in ``place``."""
    x = helper.make_tensor_value_info("x", TensorProto.FLOAT, [4])
    y = helper.make_tensor_value_info("y", TensorProto.FLOAT, [4])
    inits, sparse, functions = [], [], []
    if place == "initializer":
        nodes = [helper.make_node("Add", ["x", "w"], ["y"])]
        inits = [_external("w", location)]
    elif place == "constant value":
        nodes = [helper.make_node("Constant", [], ["w"], value=_external("w", location)),
                 helper.make_node("Add", ["x", "w"], ["y"])]
    elif place == "tensor-list attribute":  # a TENSORS attribute: never vetted before
        node = helper.make_node("Add", ["x", "x"], ["y"])
        node.attribute.append(helper.make_attribute("extra", [_external("t", location)]))
        nodes = [node]
    elif place == "subgraph":
        branch = helper.make_graph([helper.make_node("Identity", ["w"], ["b"])], "branch", [],
                                   [helper.make_tensor_value_info("b", TensorProto.FLOAT, [4])],
                                   [_external("w", location)])
        cond = helper.make_tensor("c", TensorProto.BOOL, [], [True])
        nodes = [helper.make_node("If", ["c"], ["w2"], then_branch=branch, else_branch=branch),
                 helper.make_node("Add", ["x", "w2"], ["y"])]
        inits = [cond]
    elif place == "sparse initializer":
        indices = helper.make_tensor("w_idx", TensorProto.INT64, [1], [0])
        sparse = [helper.make_sparse_tensor(_external("w", location, (1,)), indices, [4])]
        nodes = [helper.make_node("Add", ["x", "w"], ["y"])]
    elif place == "local function":
        body = helper.make_node("Constant", [], ["k"], value=_external("k", location))
        functions = [helper.make_function("local", "AddK", ["a"], ["b"],
                                          [body, helper.make_node("Add", ["a", "k"], ["b"])],
                                          [helper.make_opsetid("", 17)])]
        nodes = [helper.make_node("AddK", ["x"], ["y"], domain="local")]
    graph = helper.make_graph(nodes, "escape", [x], [y], inits, sparse_initializer=sparse)
    return helper.make_model(graph, functions=functions, ir_version=9,
                             opset_imports=[helper.make_opsetid("", 17), helper.make_opsetid("local", 1)])


PLACES = ["initializer", "constant value", "tensor-list attribute", "subgraph", "sparse initializer",
          "local function"]


@pytest.mark.parametrize("place", PLACES)
def test_external_data_from_any_place_is_refused_if_it_leaves_the_model_dir(tmp_path, place):
    secret = tmp_path / "secret.bin"
    secret.write_bytes(np.arange(4, dtype=np.float32).tobytes())
    path = tmp_path / "model" / "escape.onnx"
    path.parent.mkdir()
    path.write_bytes(_escaping_model(place, "../secret.bin").SerializeToString())
    with pytest.raises(SecurityError, match="escapes the model directory"):
        nnbridge.load(path)


@pytest.mark.parametrize("place", PLACES)
def test_external_data_is_never_read_from_the_working_directory(tmp_path, monkeypatch, place):
    """A reference to 'data.bin' means the model's directory, not wherever the user stands."""
    (tmp_path / "data.bin").write_bytes(np.full(4, 7, np.float32).tobytes())
    monkeypatch.chdir(tmp_path)
    path = tmp_path / "model" / "m.onnx"
    path.parent.mkdir()
    path.write_bytes(_escaping_model(place, "data.bin").SerializeToString())
    with pytest.raises(FormatError, match="is missing"):
        nnbridge.load(path)
    with pytest.raises(FormatError, match="uses external data"):
        nnbridge.load(_escaping_model(place, "data.bin"))  # a ModelProto has no directory at all


def test_square_brackets_in_names_and_messages_print_verbatim(tmp_path, cli):
    """Rich markup is never applied to text from models or users: '[/x]' used to crash the CLI and
    '[ops: ...]' or '[bold]' to vanish."""
    x = helper.make_tensor_value_info("[bold]in", TensorProto.FLOAT, [1, 4])
    y = helper.make_tensor_value_info("[/x]out", TensorProto.FLOAT, [1, 4])
    model = _model([helper.make_node("Relu", ["[bold]in"], ["[/x]out"], name="[red]relu")], [x], [y])
    path = tmp_path / "brackets.onnx"
    onnx.save(model, path)
    code, text = cli("check", path, "--layerwise")
    assert code == 0 and "[/x]out" in text and "[red]relu" in text, text
    code, text = cli("summary", tmp_path / "[ops: Conv] missing.onnx")
    assert code == 1 and "[ops: Conv] missing.onnx" in text and "Traceback" not in text


@pytest.mark.parametrize("argv", [
    ["simulate", "{model}", "--backend", "smv", "--set", "clock_ghz=0"],
    ["simulate", "{model}", "--backend", "smv", "--set", "maccs_per_pe=0"],
    ["measure-performance", "{model}", "--set", "clock_ghz=0"],
    ["measure-performance", "{model}", "--set", "reconfig_us=nan"],
], ids=["smv clock 0", "smv maccs 0", "rdu clock 0", "rdu reconfig nan"])
def test_impossible_hardware_settings_are_one_line_errors(tmp_path, cli, argv):
    path = tmp_path / "lenet5.onnx"
    onnx.save(build("lenet5"), path)
    code, text = cli(*[a.format(model=path) for a in argv])
    assert code == 1 and text.startswith("error:") and text.strip().count("\n") == 0, text


def _hostile_onnx(tmp_path: Path, case: str) -> Path:
    x4 = helper.make_tensor_value_info("x", TensorProto.FLOAT, [1, 1, 8, 8])
    y = helper.make_tensor_value_info("y", TensorProto.FLOAT, None)
    w = helper.make_tensor("w", TensorProto.FLOAT, [1, 1, 3, 3], np.ones(9, np.float32))
    if case == "10^12 declared elements":
        model = _model([helper.make_node("Relu", ["x"], ["y"])],
                       [helper.make_tensor_value_info("x", TensorProto.FLOAT, [1_000_000, 1_000_000])], [y])
    elif case == "conv pads 10^9":
        model = _model([helper.make_node("Conv", ["x", "w"], ["y"], pads=[10**9] * 4)], [x4], [y], [w])
    elif case == "conv kernel -1":
        model = _model([helper.make_node("Conv", ["x", "w"], ["y"], kernel_shape=[-1, -1])], [x4], [y], [w])
    elif case == "pool stride 0":
        model = _model([helper.make_node("MaxPool", ["x"], ["y"], kernel_shape=[3, 3], strides=[0, 0])], [x4], [y])
    else:  # "opset 99"
        model = _model([helper.make_node("Relu", ["x"], ["y"])], [x4], [y])
        model.opset_import[0].version = 99
    path = tmp_path / "hostile.onnx"
    path.write_bytes(model.SerializeToString())
    return path


@pytest.mark.parametrize("case", ["10^12 declared elements", "conv pads 10^9", "conv kernel -1", "pool stride 0",
                                  "opset 99", "LBANN mini_batch_size 2^62"])
@pytest.mark.parametrize("command", ["run", "convert"])
def test_named_hostile_inputs_end_in_one_line_fast_and_small(tmp_path, case, command):
    """The issue's examples: each is refused in one line, within 5 s of CPU and 500 MB, writing nothing."""
    if case.startswith("LBANN"):
        graph = nnbridge.load(build("lenet5"))
        nnbridge.save(graph, tmp_path / "l5.prototext")
        text = (tmp_path / "l5.prototext").read_text()
        src = tmp_path / "hostile.prototext"
        src.write_text(text.replace("mini_batch_size: 1\n", f"mini_batch_size: {2**62}\n"))
        assert src.read_text() != text
        dst = tmp_path / "out.onnx"
    else:
        src, dst = _hostile_onnx(tmp_path, case), tmp_path / "out.prototext"
    argv = ["run", str(src)] if command == "run" else ["convert", str(src), str(dst)]
    proc = subprocess.run([sys.executable, "-c", _MEASURED_CLI, *argv], capture_output=True, text=True,
                          stdin=subprocess.DEVNULL, timeout=600)
    errors, peak_mb, cpu_seconds = _measured(proc.stderr)
    assert proc.returncode == 1 and len(errors) == 1 and errors[0].startswith("error:"), proc.stderr
    assert cpu_seconds < 5 and peak_mb < 500, (cpu_seconds, peak_mb)
    assert not dst.exists()


def test_folding_has_a_total_budget_not_only_a_per_constant_one(monkeypatch):
    """Ten constants each under the fold limit must not add up to ten limits' worth of memory."""
    from nnbridge.passes import run_passes

    monkeypatch.setenv("NNBRIDGE_FOLD_LIMIT_MB", "1")
    nodes, inits = [], [helper.make_tensor("shape", TensorProto.INT64, [2], [512, 400])]  # 0.8 MB each
    for i in range(10):
        inits.append(helper.make_tensor(f"one{i}", TensorProto.FLOAT, [1], [float(i)]))
        nodes.append(helper.make_node("Expand", [f"one{i}", "shape"], [f"big{i}"]))
        nodes.append(helper.make_node("ReduceSum", [f"big{i}"], [f"s{i}"], keepdims=0))
    nodes.append(helper.make_node("Sum", [f"s{i}" for i in range(10)], ["y"]))
    model = _model(nodes, [], [helper.make_tensor_value_info("y", TensorProto.FLOAT, None)], inits)
    graph = nnbridge.load(model)
    run_passes(graph, ["fold"])
    folded = sum(a.nbytes for a in graph.initializers.values())
    assert folded <= 4 * 1024**2 and sum(n.op == "Expand" for n in graph.nodes) == 5


def test_a_smaug_params_file_that_could_not_be_read_back_is_refused_before_writing(tmp_path, monkeypatch):
    """SMAUG reads all params as one protobuf message (2 GiB at most). The limit is lowered to one
    byte under a real file's size, so the test needs megabytes, not gigabytes."""
    from nnbridge.converters.smaug import params

    graph = nnbridge.load(build("lenet5"))
    nnbridge.save(graph, tmp_path / "ok" / "l5_topo.pbtxt", smaug_backend="SMV")
    size = (tmp_path / "ok" / "l5_params.pb").stat().st_size
    monkeypatch.setattr(params, "MESSAGE_LIMIT", size - 1)
    with pytest.raises(FormatError, match="exceed protobuf's 2 GiB limit"):
        nnbridge.save(graph, tmp_path / "big" / "l5_topo.pbtxt", smaug_backend="SMV")
    assert not (tmp_path / "big").exists() or list((tmp_path / "big").iterdir()) == []


def test_a_name_that_is_not_utf8_is_refused_in_one_line(tmp_path, cli):
    model = _model([helper.make_node("Relu", ["x"], ["y"], name="RELUNAME")],
                   [helper.make_tensor_value_info("x", TensorProto.FLOAT, [2])],
                   [helper.make_tensor_value_info("y", TensorProto.FLOAT, None)])
    path = tmp_path / "names.onnx"
    path.write_bytes(model.SerializeToString().replace(b"RELUNAME", b"RELU\xff\xfeME"))
    for argv in (["summary", path], ["convert", path, tmp_path / "out_topo.pbtxt"]):
        code, text = cli(*argv)
        assert code == 1 and "not valid UTF-8" in text and text.count("\n") == 1, text
    assert not (tmp_path / "out_topo.pbtxt").exists()


def test_the_memory_budget_bounds_declared_tensors_and_is_set_with_max_memory(tmp_path, cli):
    """A [1, 3, 2048, 2048] input (48 MiB of float32) fits the default budget, not a 64 MiB one
    (a tensor may take a quarter of it)."""
    from nnbridge.base.fileio import memory_budget

    x = helper.make_tensor_value_info("x", TensorProto.FLOAT, [1, 3, 2048, 2048])
    y = helper.make_tensor_value_info("y", TensorProto.FLOAT, [1, 3, 2048, 2048])
    path = tmp_path / "big.onnx"
    onnx.save(_model([helper.make_node("Relu", ["x"], ["y"])], [x], [y]), path)
    assert memory_budget() >= 2**30
    assert cli("run", path)[0] == 0
    code, text = cli("--max-memory", "64M", "run", path)
    assert code == 1 and len(text.strip().splitlines()) == 1
    assert "1.26e+07 elements, over the limit of 4.19e+06" in text and "--max-memory" in text
    assert cli("run", path)[0] == 0  # the limit lasts one command
    code, text = cli("--max-memory", "lots", "run", path)
    assert code == 1 and "write a size like 512M" in text


def test_nothing_is_written_beyond_max_output_bytes(tmp_path, cli):
    path = tmp_path / "lenet.onnx"
    onnx.save(build("lenet5"), path)
    for target in ("out.onnx", "out_topo.pbtxt", "out.prototext"):
        code, text = cli("--max-output-bytes", "100K", "convert", path, tmp_path / "dst" / target)
        assert code == 1 and "over the --max-output-bytes limit (0.1 MiB); nothing was written" in text
    assert not (tmp_path / "dst").exists()
    assert cli("--max-output-bytes", "10M", "convert", path, tmp_path / "dst" / "out.onnx")[0] == 0


#: the child runs, checks, converts and runs the copy of a model, then prints its own peak RSS
_OVER_2_GB = """
import gc, json, re, sys
import numpy as np
import nnbridge
path, copy, last = sys.argv[1:]
x = {"x": np.array([0.5, 0.5], np.float32), "i": np.array([0, int(last)], np.int64)}
ran = nnbridge.run(path, x)["y"].tolist()
gc.collect()
result = nnbridge.check(path, inputs=x)
checked = [result.ok, result.outputs[0].max_abs_err]
del result
gc.collect()
nnbridge.convert(path, copy)
gc.collect()
again = nnbridge.run(copy, x)["y"].tolist()
hwm = int(re.search(r"VmHWM:\\s+(\\d+)", open("/proc/self/status").read()).group(1))
print(json.dumps({"ran": ran, "checked": checked, "again": again, "peak_mb": hwm / 1024}))
"""


@pytest.mark.slow
def test_a_model_over_2_gb_runs_checks_and_converts(tmp_path):
    """Protobuf cannot hold 2 GiB: the weight is external data (a sparse file, so the test writes
    only a few bytes); nnbridge runs it, onnxruntime checks it, and ONNX output keeps it external.
    The model gathers the weight's first and last elements by an index input (nothing folds), so
    a child process that maps the data file rather than copying it, and converts it file to file
    rather than through the map, stays far below the weight's size (2.2 GB when convert wrote it
    out through the map)."""
    count = 560_000_000  # 2.24 GB of float32
    data = tmp_path / "big.onnx.data"
    with open(data, "wb") as fh:
        fh.truncate(count * 4)
        for index, value in ((0, 1.0), (count - 1, 2.0)):
            fh.seek(index * 4)
            fh.write(np.float32(value).tobytes())
    w = _external("w", "big.onnx.data", dims=(count,))
    model = _model([helper.make_node("Gather", ["w", "i"], ["g"], axis=0),
                    helper.make_node("Add", ["x", "g"], ["y"])],
                   [helper.make_tensor_value_info("x", TensorProto.FLOAT, [2]),
                    helper.make_tensor_value_info("i", TensorProto.INT64, [2])],
                   [helper.make_tensor_value_info("y", TensorProto.FLOAT, [2])], [w])
    path = tmp_path / "big.onnx"
    onnx.save(model, path)
    copy = tmp_path / "out" / "copy.onnx"
    try:
        proc = subprocess.run([sys.executable, "-c", _OVER_2_GB, str(path), str(copy), str(count - 1)],
                              capture_output=True, text=True, stdin=subprocess.DEVNULL, timeout=600)
        assert proc.returncode == 0, proc.stderr[-2000:]
        found = json.loads(proc.stdout.splitlines()[-1])
        assert found["ran"] == [1.5, 2.5] and found["again"] == [1.5, 2.5]
        assert found["checked"] == [True, 0]
        assert (tmp_path / "out" / "copy.onnx.data").stat().st_size >= count * 4
        assert copy.stat().st_size < 1 << 20  # the weight stayed external
        assert found["peak_mb"] < 600, found["peak_mb"]
    finally:
        for written in tmp_path.rglob("*.data"):
            written.unlink()
