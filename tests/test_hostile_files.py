"""Hostile files and faults (issue #34): a kill leaves nothing behind, stale temp files are swept,
``.pef`` members and plans are checked before use, work is budgeted before it starts, and every
hostile file ends in one line naming the file and field (never an internal error)."""

from __future__ import annotations

import fcntl
import hashlib
import json
import os
import shutil
import signal
import subprocess
import sys
import zipfile
from pathlib import Path

import numpy as np
import onnx
import pytest
from onnx import TensorProto, helper

import nnbridge
from nnbridge.zoo import build

# The child runs the CLI with fileio.replace_all (the renames that end every write, made with
# signals held) made to announce itself and wait: the signal lands while the temp files exist at
# full size and before any rename, with no timing guess.
_PAUSED_CLI = ("import sys, time\n"
               "import nnbridge.base.fileio as fileio\n"
               "def paused(*args, **kwargs):\n"
               "    print('writing', flush=True)\n"
               "    while True:\n"
               "        time.sleep(60)\n"
               "fileio.replace_all = paused\n"
               "from nnbridge.cli import main\n"
               "sys.exit(main(sys.argv[1:]))\n")

# The child sends itself the signal (argv[1]) right after the first rename of the write: a signal
# between two renames, where a partial set of files would be left.
_SIGNALLED_AT_FIRST_RENAME = ("import os, sys\n"
                              "signum, real = int(sys.argv.pop(1)), os.replace\n"
                              "def replace(src, dst):\n"
                              "    real(src, dst)\n"
                              "    os.replace = real\n"
                              "    os.kill(os.getpid(), signum)\n"
                              "os.replace = replace\n"
                              "from nnbridge.cli import main\n"
                              "sys.exit(main(sys.argv[1:]))\n")


# The child sends itself SIGTERM as a writer starts to remove its temp directory (after a write,
# or after a failure): before the fix the signal cut the cleanup short and the directory stayed.
_SIGNALLED_IN_CLEANUP = ("import os, shutil, signal, sys\n"
                         "real = shutil.rmtree\n"
                         "def rmtree(path, *args, **kwargs):\n"
                         "    if str(path).endswith('.tmp'):\n"
                         "        os.kill(os.getpid(), signal.SIGTERM)\n"
                         "    real(path, *args, **kwargs)\n"
                         "shutil.rmtree = rmtree\n"
                         "from nnbridge.cli import main\n"
                         "sys.exit(main(sys.argv[1:]))\n")


def _listing(root: Path) -> dict[str, int]:
    return {str(p.relative_to(root)): p.stat().st_size for p in sorted(root.rglob("*")) if p.is_file()} | \
        {str(p.relative_to(root)) + "/": 0 for p in root.rglob("*") if p.is_dir()}


@pytest.mark.parametrize("signum", [signal.SIGTERM, signal.SIGHUP])
@pytest.mark.parametrize("target", ["m_topo.pbtxt", "m.prototext", "m.onnx", "m.pef"])
def test_a_signal_mid_write_leaves_the_directory_as_it_was(tmp_path, signum, target):
    model = tmp_path / "model.onnx"
    onnx.save(build("mlp"), model)
    out = tmp_path / "out"
    out.mkdir()
    (out / "keep.txt").write_text("already here")
    before = _listing(tmp_path)
    argv = ["compile", model, "--backend", "rdu", "-o", out / target] if target.endswith(".pef") else \
        ["convert", model, out / target]
    child = subprocess.Popen([sys.executable, "-c", _PAUSED_CLI, *map(str, argv)],
                             stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, stdin=subprocess.DEVNULL)
    try:
        assert child.stdout.readline().strip() == "writing"
        assert any(p.name.startswith(".m") for p in out.iterdir())  # the write is under way
        child.send_signal(signum)
        _, err = child.communicate(timeout=120)
    finally:
        child.kill()
    assert child.returncode == 128 + signum
    assert signal.Signals(signum).name in err and "Traceback" not in err
    assert _listing(tmp_path) == before


def _two_in_two_out() -> onnx.ModelProto:
    a, b, y, z = (helper.make_tensor_value_info(n, TensorProto.FLOAT, [2, 3]) for n in "abyz")
    return _model([helper.make_node("Add", ["a", "b"], ["y"]), helper.make_node("Mul", ["a", "b"], ["z"])],
                  [a, b], [y, z])


def _several_files(tmp_path: Path, target: str) -> tuple[Path, list]:
    """A folder holding keep.txt (and an old y.npy), and the CLI command that writes several
    files into it or into a new folder inside it."""
    model = tmp_path / "model.onnx"
    onnx.save(_two_in_two_out(), model)
    out = tmp_path / "out"
    out.mkdir()
    (out / "keep.txt").write_text("already here")
    np.save(out / "y.npy", np.zeros(1, np.float32))
    return out, {"run --out new": ["run", model, "--out", out / "outs"],
                 "run --out existing": ["run", model, "--out", out],
                 "check --save-inputs": ["check", model, "--save-inputs", out / "ins"],
                 "convert smaug": ["convert", model, out / "m_topo.pbtxt"],
                 "convert lbann": ["convert", _mlp(tmp_path), out / "m.prototext", "--lbann-weights", "npy"]}[target]


def _mlp(tmp_path: Path) -> Path:
    onnx.save(build("mlp"), tmp_path / "mlp.onnx")
    return tmp_path / "mlp.onnx"


def _child(script: str, *argv) -> subprocess.Popen:
    return subprocess.Popen([sys.executable, "-c", script, *map(str, argv)], stdout=subprocess.PIPE,
                            stderr=subprocess.PIPE, text=True, stdin=subprocess.DEVNULL)


@pytest.mark.parametrize("target", ["run --out new", "run --out existing", "check --save-inputs"])
def test_a_signal_mid_write_of_several_files_leaves_the_directory_as_it_was(tmp_path, target):
    """``run --out`` left an empty outs/, or outs/y.npy without z.npy, when killed (#34)."""
    out, argv = _several_files(tmp_path, target)
    before = _listing(tmp_path)
    child = _child(_PAUSED_CLI, *argv)
    try:
        assert child.stdout.readline().strip() == "writing"
        child.send_signal(signal.SIGTERM)
        _, err = child.communicate(timeout=120)
    finally:
        child.kill()
    assert child.returncode == 128 + signal.SIGTERM and "SIGTERM" in err and "Traceback" not in err, err
    assert _listing(tmp_path) == before


@pytest.mark.parametrize("target", ["run --out new", "run --out existing", "check --save-inputs", "convert smaug",
                                    "convert lbann"])
def test_a_signal_between_two_renames_lands_after_the_last(tmp_path, cli, target):
    """The renames that put several files in place are one step: a kill after the first still
    leaves every file of the write (a SMAUG topology never without its params, y.npy never without
    z.npy), then ends the command."""
    out, argv = _several_files(tmp_path, target)
    whole = tmp_path / "whole"  # what an undisturbed run writes
    shutil.copytree(out, whole)
    assert cli(*(str(a).replace(str(out), str(whole)) for a in argv))[0] == 0
    expected = _listing(whole)
    assert len(set(expected) - set(_listing(out))) >= 2 or target == "run --out existing"
    child = _child(_SIGNALLED_AT_FIRST_RENAME, int(signal.SIGTERM), *argv)
    _, err = child.communicate(timeout=300)
    assert child.returncode == 128 + signal.SIGTERM and "Traceback" not in err, err
    assert set(_listing(out)) == set(expected)  # every file (a prototext names its own folder: sizes differ)
    if target.startswith("run"):
        written = out / "outs" if target.endswith("new") else out
        assert np.array_equal(np.load(written / "y.npy"), np.load(whole / ("outs" if target.endswith("new") else "")
                                                                    / "y.npy"))


def test_a_signal_during_the_cleanup_of_a_write_lands_after_it(tmp_path):
    """Found by the fuzzer's interrupt step (a .m.onnx.*.tmp left behind): the cleanup runs with
    signals held, so a signal that lands in it takes effect once it is done."""
    child = _child(_SIGNALLED_IN_CLEANUP, "convert", _mlp(tmp_path), tmp_path / "m.onnx")
    _, err = child.communicate(timeout=300)
    assert child.returncode == 128 + signal.SIGTERM and "Traceback" not in err, err
    assert not list(tmp_path.glob(".*.tmp")) and (tmp_path / "m.onnx").is_file()


def test_stale_temp_files_of_a_destination_are_swept_but_live_ones_and_others_kept(tmp_path, cli):
    model = tmp_path / "model.onnx"
    onnx.save(build("mlp"), model)
    stale = [tmp_path / ".m.onnx.abcd1234.tmp", tmp_path / ".m_params.pb.x_y_z_12.tmp"]
    stale[0].write_bytes(b"left by a killed run")
    (tmp_path / ".m_topo.pbtxt.k9k9k9k9.tmp").mkdir()  # a killed ONNX writer's scratch directory shape
    stale.append(tmp_path / ".m_topo.pbtxt.k9k9k9k9.tmp")
    stale[1].write_bytes(b"x")
    others = [tmp_path / ".other.onnx.abcd1234.tmp", tmp_path / ".m.onnx.notmine.tmp", tmp_path / "m.onnx.tmp"]
    for p in others:
        p.write_bytes(b"not ours")
    live = tmp_path / ".m.onnx.live0000.tmp"
    live.write_bytes(b"a running writer's")
    link = tmp_path / ".m.onnx.link0000.tmp"
    link.symlink_to(others[0])
    young = tmp_path / ".m.onnx.young000.tmp"  # just made by a writer that has not locked it yet
    for p in (*stale, *others, live):
        os.utime(p, (0, 0))
    young.write_bytes(b"")
    with open(live) as held:
        fcntl.flock(held, fcntl.LOCK_EX)
        assert cli("convert", model, tmp_path / "m.onnx")[0] == 0
        assert cli("convert", model, tmp_path / "m_topo.pbtxt")[0] == 0
    assert not any(p.exists() for p in stale)
    assert all(p.exists() for p in others) and live.exists() and link.is_symlink() and young.exists()


# -- .pef members and plans ---------------------------------------------------------------------

def _model(nodes, inputs, outputs, inits=()) -> onnx.ModelProto:
    graph = helper.make_graph(nodes, "hostile", inputs, outputs, list(inits))
    return helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)], ir_version=9)


@pytest.fixture(scope="module")
def pef(tmp_path_factory) -> Path:
    path = tmp_path_factory.mktemp("pef") / "mlp.pef"
    nnbridge.compile(build("mlp"), backend="rdu").save(path)
    return path


def _rewritten_pef(src: Path, dst: Path, change, extra: dict[str, int] | None = None) -> Path:
    """``src`` with program.json and plan.json passed through ``change(program, plan)`` and the
    manifest updated to match (a tamperer who knows the format); ``extra`` adds members of that
    many zero bytes, listed with their true hash."""
    with zipfile.ZipFile(src) as zf:
        members = {n: zf.read(n) for n in zf.namelist()}
    program, plan = json.loads(members["program.json"]), json.loads(members["plan.json"])
    change(program, plan)
    members["program.json"], members["plan.json"] = json.dumps(program).encode(), json.dumps(plan).encode()
    manifest = json.loads(members.pop("manifest.json"))
    for name in ("program.json", "plan.json"):
        manifest["members"][name] = {"sha256": hashlib.sha256(members[name]).hexdigest(), "size": len(members[name])}
    block = bytes(1 << 20)
    for name, size in (extra or {}).items():
        digest = hashlib.sha256()
        for _ in range(size // len(block)):
            digest.update(block)
        manifest["members"][name] = {"sha256": digest.hexdigest(), "size": size}
    with zipfile.ZipFile(dst, "w", zipfile.ZIP_DEFLATED) as zf:
        zf.writestr("manifest.json", json.dumps(manifest))
        for name, data in members.items():
            zf.writestr(name, data)
        for name, size in (extra or {}).items():
            with zf.open(name, "w", force_zip64=True) as fh:
                for _ in range(size // len(block)):
                    fh.write(block)
    return dst


def test_a_pef_member_nothing_refers_to_is_never_read(pef, tmp_path, cli, monkeypatch):
    big = _rewritten_pef(pef, tmp_path / "big.pef", lambda program, plan: None, {"weights/unused.npy": 512 << 20})
    assert big.stat().st_size < 2 << 20  # 512 MiB of zeros, deflated
    opened = []
    real_open = zipfile.ZipFile.open

    def spy(self, name, *args, **kwargs):
        opened.append(name if isinstance(name, str) else name.filename)
        return real_open(self, name, *args, **kwargs)

    monkeypatch.setattr(zipfile.ZipFile, "open", spy)
    for command in ("summary", "run", "measure-performance"):
        code, text = cli(command, big)
        assert code == 0, text
    assert opened and "weights/unused.npy" not in opened


def test_a_referenced_pef_member_over_the_memory_budget_is_refused_before_it_is_read(pef, tmp_path, cli, monkeypatch):
    def swap_weight(program, plan):
        program["initializers"][next(iter(program["initializers"]))] = {"array": "huge"}

    big = _rewritten_pef(pef, tmp_path / "huge.pef", swap_weight, {"weights/huge.npy": 64 << 20})
    opened = []
    real_open = zipfile.ZipFile.open
    monkeypatch.setattr(zipfile.ZipFile, "open", lambda self, name, *a, **k: (
        opened.append(name if isinstance(name, str) else name.filename), real_open(self, name, *a, **k))[1])
    code, text = cli("--max-memory", "128M", "summary", big)  # a member may take 32 MiB
    assert code == 1 and "'weights/huge.npy'" in text and "--max-memory" in text
    assert "weights/huge.npy" not in opened


def _set_input_shape(shape):
    def change(program, plan):
        program["inputs"][0]["type"]["shape"] = shape
    return change


def _bogus_op(program, plan):
    program["nodes"][1].update(op="BogusOp", domain="evil")


def _huge_batch(program, plan):
    plan["options"]["batch_size"] = 1_000_000_000_000


TAMPERED_PLANS = {"batch_size 1e12": (_huge_batch, "batch_size"),
                  "input shape [-1, 3]": (_set_input_shape([-1, 3]), "[-1, 3]"),
                  "input shape None": (_set_input_shape(None), "None"),
                  "input shape [1.5, 2]": (_set_input_shape([1.5, 2]), "[1.5, 2]"),
                  "op BogusOp in domain evil": (_bogus_op, "evil::BogusOp")}


@pytest.mark.parametrize("case", TAMPERED_PLANS)
def test_a_pef_whose_plan_disagrees_with_its_graph_is_refused_in_one_line(pef, tmp_path, cli, case):
    change, named = TAMPERED_PLANS[case]
    bad = _rewritten_pef(pef, tmp_path / "tampered.pef", change)
    for command in ("run", "summary", "measure-performance", "measure-sections"):
        code, text = cli(command, bad)
        assert code == 1 and named in text and "tampered.pef" in text, (command, text)
        assert len(text.strip().splitlines()) == 1, text


# -- hostile files that ended in internal errors (exit 3) -----------------------------------------

def _external_model(tmp_path: Path, **overrides: str) -> list:
    (tmp_path / "w.bin").write_bytes(bytes(16))
    tensor = onnx.TensorProto(name="w", data_type=TensorProto.FLOAT, dims=[4], data_location=TensorProto.EXTERNAL)
    for key, value in {"location": "w.bin", "offset": "0", "length": "16", **overrides}.items():
        tensor.external_data.add(key=key, value=value)
    x, y = (helper.make_tensor_value_info(n, TensorProto.FLOAT, [4]) for n in "xy")
    path = tmp_path / "external.onnx"
    path.write_bytes(_model([helper.make_node("Add", ["x", "w"], ["y"])], [x], [y], [tensor]).SerializeToString())
    return ["run", path]


def _pef_manifest_members_a_list(tmp_path: Path) -> list:
    src = tmp_path / "mlp.pef"
    nnbridge.compile(build("mlp"), backend="rdu").save(src)
    with zipfile.ZipFile(src) as zf:
        members = {n: zf.read(n) for n in zf.namelist()}
    manifest = json.loads(members["manifest.json"])
    manifest["members"] = list(manifest["members"])
    members["manifest.json"] = json.dumps(manifest).encode()
    bad = tmp_path / "listed.pef"
    with zipfile.ZipFile(bad, "w") as zf:
        for name, data in members.items():
            zf.writestr(name, data)
    return ["summary", bad]


def _pef_member_name_not_utf8(tmp_path: Path) -> list:
    src = tmp_path / "mlp.pef"
    nnbridge.compile(build("mlp"), backend="rdu").save(src)
    with zipfile.ZipFile(src) as zf:
        members = {n: zf.read(n) for n in zf.namelist()}
    bad = tmp_path / "name.pef"
    with zipfile.ZipFile(bad, "w") as zf:  # a non-ASCII name is stored as UTF-8, flagged so
        for name, data in {**members, "weights/é.npy": b"x"}.items():
            zf.writestr(name, data)
    bad.write_bytes(bad.read_bytes().replace("é".encode(), b"\xff\xfe"))
    return ["summary", bad]


_LBANN = """# nnbridge-input: input {dims} float32
model {{
  layer {{ name: "input" input {{ data_field: "samples" }} }}
  {layers}
  {weights}
}}
"""


def _lbann(tmp_path: Path, dims: str = "4", layers: str = 'layer { name: "fc" parents: "input" '
           'fully_connected { num_neurons: 2 } }', weights: str = "", command: str = "summary") -> list:
    path = tmp_path / "model.prototext"
    path.write_text(_LBANN.format(dims=dims, layers=layers, weights=weights))
    return [command, path]


def _smaug(tmp_path: Path, nodes: list[str], command: str = "summary") -> list:
    """A SMAUG topology of the given node texts (no params file: Data nodes are synthesised)."""
    path = tmp_path / "model_topo.pbtxt"
    path.write_text('name: "hostile"\n' + "".join(f"nodes {{\n{n}\n}}\n" for n in nodes) + 'backend: "Reference"\n')
    return [*command.split()[:1], path, *command.split()[1:]]


def _smaug_tensor(name: str, alignment: int = 0) -> str:
    return (f'name: "{name}" data_type: Float32 shape {{ dims: 1 dims: 4 layout: NC alignment: {alignment} }} '
            "data_format: Uncompressed")


_DATA = (f'name: "x" op: Data input_tensors {{ {_smaug_tensor("x/input0")} }} '
         f'output_tensors {{ {_smaug_tensor("x/output0")} }}')


def _lstm_with_a_zero_dim(tmp_path: Path) -> list:
    hidden = 3
    x = helper.make_tensor_value_info("x", TensorProto.FLOAT, [0, 1, 4])
    y = helper.make_tensor_value_info("y", TensorProto.FLOAT, None)
    w = onnx.numpy_helper.from_array(np.ones((1, 4 * hidden, 4), np.float32), "W")
    r = onnx.numpy_helper.from_array(np.ones((1, 4 * hidden, hidden), np.float32), "R")
    path = tmp_path / "lstm.onnx"
    onnx.save(_model([helper.make_node("LSTM", ["x", "W", "R"], ["y"], hidden_size=hidden)], [x], [y], [w, r]), path)
    return ["convert", path, tmp_path / "out_topo.pbtxt"]


INTERNAL_ERROR_SITES = {
    "external data offset negative": (lambda t: _external_model(t, offset="-5"), "offset '-5'"),
    "external data length not a number": (lambda t: _external_model(t, length="abc"), "length 'abc'"),
    "external data location with NUL": (lambda t: _external_model(t, location="w\0.bin"), "NUL"),
    "pef manifest members a list": (_pef_manifest_members_a_list, "'members'"),
    "pef member name not UTF-8": (_pef_member_name_not_utf8, "UTF-8"),
    "LBANN .npy path of 300 characters": (lambda t: _lbann(t, weights='weights { name: "fc_linearity_weights" '
                                                           "initializer { numpy_initializer { file: "
                                                           f'"{"a" * 296}.npy" }} }} }}'), "fc_linearity_weights"),
    "nnbridge-input dims axb": (lambda t: _lbann(t, dims="axb"), "'axb'"),
    "LBANN Any naming a module attribute": (lambda t: _lbann(t, layers='layer { name: "op" parents: "input" '
                                            'operator_layer { ops { parameters { type_url: '
                                            '"type.googleapis.com/lbann_data.DESCRIPTOR" } } } }'), "DESCRIPTOR"),
    "SMAUG unknown op code": (lambda t: _smaug(t, [_DATA, 'name: "odd" op: 999 parents: "x" src_tensors_indices: 0'],
                                               "summary --style smaug"), "999"),
    "SMAUG parentless Reorder": (lambda t: _smaug(t, [_DATA, 'name: "r" op: Reorder '
                                                      f'output_tensors {{ {_smaug_tensor("r/output0")} }}']), "'r'"),
    "ONNX LSTM with a zero dim to SMAUG": (_lstm_with_a_zero_dim, "node 'lstm_0'): input X has the shape [0, 1, 4]"),
}


@pytest.mark.parametrize("case", INTERNAL_ERROR_SITES)
def test_a_hostile_file_is_a_one_line_error_naming_the_file_and_field(tmp_path, cli, case):
    build_case, field = INTERNAL_ERROR_SITES[case]
    argv = build_case(tmp_path)
    code, text = cli(*argv)
    assert code in (1, 2), text
    assert "internal error" not in text and "Traceback" not in text
    assert text.count("error:") == 1 and field in text, text
    assert Path(argv[1]).name in text or "node '" in text  # the file, or (converting) the node at fault
    assert not (tmp_path / "out_topo.pbtxt").exists()


# -- garbage that was accepted ------------------------------------------------------------------

def _gather_past_the_end(tmp_path: Path, backend: str) -> list:
    x = helper.make_tensor_value_info("x", TensorProto.FLOAT, ["N", 3])
    y = helper.make_tensor_value_info("y", TensorProto.INT64, None)
    index = onnx.numpy_helper.from_array(np.array([5]), "i")
    path = tmp_path / "gather.onnx"
    onnx.save(_model([helper.make_node("Shape", ["x"], ["s"]), helper.make_node("Gather", ["s", "i"], ["y"])],
                     [x], [y], [index]), path)
    return ["run", path, "--dim", "N=2", "--backend", backend]


def _onnx_without_outputs(tmp_path: Path) -> list:
    x = helper.make_tensor_value_info("x", TensorProto.FLOAT, [4])
    path = tmp_path / "no_outputs.onnx"
    onnx.save(_model([helper.make_node("Relu", ["x"], ["y"])], [x], []), path)
    return ["run", path]


GARBAGE = {
    "SMAUG graph with no nodes": (lambda t: _smaug(t, []), "no op"),
    "SMAUG graph of only Data nodes": (lambda t: _smaug(t, [_DATA, _DATA.replace('"x', '"z')]), "no op"),
    "ONNX graph with no outputs": (_onnx_without_outputs, "no outputs"),
    "LBANN groups 0": (lambda t: _lbann(t, dims="4x8x8", layers='layer { name: "conv" parents: "input" convolution { '
                                        "num_dims: 2 out_channels: 4 kernel_size: 3 kernel_size: 3 "
                                        "groups { value: 0 } } }"), "groups 0"),
    "LBANN negative pool_pads_i": (lambda t: _lbann(t, dims="4x8x8", layers='layer { name: "pool" parents: "input" '
                                                    'pooling { pool_mode: "max" num_dims: 2 pool_dims_i: 2 '
                                                    "pool_strides_i: 2 pool_pads_i: -1 } }"), "pool_pads"),
    "SMAUG alignment 3": (lambda t: _smaug(t, [_DATA.replace("alignment: 0", "alignment: 3"),
                                              'name: "relu" op: ReLU parents: "x" src_tensors_indices: 0 '
                                              f'output_tensors {{ {_smaug_tensor("relu/output0", 3)} }}']),
                          "alignment 3"),
    "Gather index past the end (reference)": (lambda t: _gather_past_the_end(t, "reference"), "index 5"),
    "Gather index past the end (smv)": (lambda t: _gather_past_the_end(t, "smv"), "index 5"),
}


@pytest.mark.parametrize("case", GARBAGE)
def test_garbage_is_refused_with_a_reason(tmp_path, cli, case):
    build_case, reason = GARBAGE[case]
    code, text = cli(*build_case(tmp_path))
    assert code == 1 and reason in text and "internal error" not in text, text


def test_a_lone_data_node_is_still_a_smaug_graph(tmp_path, cli):
    """SMAUG prints a graph of one Data node (its input): that is no garbage."""
    code, text = cli(*_smaug(tmp_path, [_DATA], command="run"))
    assert code == 0, text


# -- work budgets ---------------------------------------------------------------------------------

def _endless_loop(tmp_path: Path) -> Path:
    """A Loop whose trip count is 1e12 and whose body adds to a carried tensor."""
    one = helper.make_tensor("one", TensorProto.FLOAT, [4], [1.0] * 4)
    body = helper.make_graph(
        [helper.make_node("Add", ["x_in", "one"], ["x_out"]), helper.make_node("Identity", ["cond_in"], ["cond_out"])],
        "body", [helper.make_tensor_value_info("i", TensorProto.INT64, []),
                 helper.make_tensor_value_info("cond_in", TensorProto.BOOL, []),
                 helper.make_tensor_value_info("x_in", TensorProto.FLOAT, [4])],
        [helper.make_tensor_value_info("cond_out", TensorProto.BOOL, []),
         helper.make_tensor_value_info("x_out", TensorProto.FLOAT, [4])], [one])
    trips = helper.make_tensor("M", TensorProto.INT64, [], [10**12])
    cond = helper.make_tensor("c", TensorProto.BOOL, [], [True])
    x, y = (helper.make_tensor_value_info(n, TensorProto.FLOAT, [4]) for n in "xy")
    path = tmp_path / "loop.onnx"
    onnx.save(_model([helper.make_node("Loop", ["M", "c", "x"], ["y"], body=body)], [x], [y], [trips, cond]), path)
    return path


# The child's own CPU time and address space are bounded (a hang or a blow-up on old code ends as
# SIGXCPU or a MemoryError in the child, not as a stuck suite or a starved machine).
_BOUNDED_CLI = ("import resource, sys\n"
                "resource.setrlimit(resource.RLIMIT_CPU, (60, 60))\n"
                "resource.setrlimit(resource.RLIMIT_AS, (int(sys.argv.pop(1)),) * 2)\n"
                "from nnbridge.cli import main\n"
                "sys.exit(main(sys.argv[1:]))\n")


def _bounded(*argv, memory: int = 8 << 30) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-c", _BOUNDED_CLI, str(memory), *map(str, argv)], capture_output=True,
                          text=True, stdin=subprocess.DEVNULL)


def test_a_loop_of_1e12_trips_is_stopped_at_the_iteration_limit_which_is_named(tmp_path, cli, monkeypatch):
    proc = _bounded("run", _endless_loop(tmp_path))
    assert proc.returncode == 1 and "NNBRIDGE_MAX_ITERATIONS" in proc.stderr and "100,000" in proc.stderr, proc.stderr
    monkeypatch.setenv("NNBRIDGE_MAX_ITERATIONS", "50")
    code, text = cli("run", _endless_loop(tmp_path))
    assert code == 1 and "after 50 iterations" in text and "1,000,000,000,000" in text


def _collecting_loop(tmp_path: Path, trips: int | None) -> Path:
    """A ~1 KB Loop whose every trip adds 1 MiB to a scan output; with ``trips`` None it runs while
    i < 1e12 (its condition, computed in the body, could end it at any trip)."""
    shape = helper.make_tensor("shape", TensorProto.INT64, [1], [1 << 18])
    big = helper.make_tensor("big", TensorProto.INT64, [], [10**12])
    nodes = [helper.make_node("ConstantOfShape", ["shape"], ["ones"], value=helper.make_tensor(
        "v", TensorProto.FLOAT, [1], [1.0])), helper.make_node("Cast", ["i"], ["f"], to=TensorProto.FLOAT),
             helper.make_node("Add", ["ones", "f"], ["scan_out"])]  # a real 1 MiB array each trip
    if trips is None:
        nodes.append(helper.make_node("Less", ["i", "big"], ["cond_out"]))
    else:
        nodes.append(helper.make_node("Identity", ["cond_in"], ["cond_out"]))
    body = helper.make_graph(
        nodes, "body", [helper.make_tensor_value_info("i", TensorProto.INT64, []),
                        helper.make_tensor_value_info("cond_in", TensorProto.BOOL, [])],
        [helper.make_tensor_value_info("cond_out", TensorProto.BOOL, []),
         helper.make_tensor_value_info("scan_out", TensorProto.FLOAT, [1 << 18])], [shape, big])
    inits = [helper.make_tensor("c", TensorProto.BOOL, [], [True])]
    if trips is not None:
        inits.append(helper.make_tensor("M", TensorProto.INT64, [], [trips]))
    x = helper.make_tensor_value_info("x", TensorProto.FLOAT, [1])
    y = helper.make_tensor_value_info("y", TensorProto.FLOAT, None)
    loop = helper.make_node("Loop", ["M" if trips is not None else "", "c"], ["ys"], body=body, name="collect")
    path = tmp_path / f"collect_{trips}.onnx"
    onnx.save(_model([loop, helper.make_node("Identity", ["x"], ["y"])], [x],
                     [y, helper.make_tensor_value_info("ys", TensorProto.FLOAT, None)], inits), path)
    assert path.stat().st_size < 1500
    return path


def test_a_loop_collecting_1e12_trips_of_1_mib_is_refused_after_its_first_trip(tmp_path):
    """The trips a Loop will run times what one trip collects, against the memory budget: before
    the fix it collected 1 MiB a trip up to the 100,000-trip stop (100 GB), here a child under a CPU
    limit ends in one line after one trip."""
    proc = _bounded("run", _collecting_loop(tmp_path, 10**12), memory=4 << 30)
    assert proc.returncode == 1 and "Traceback" not in proc.stderr, proc.stderr
    line = proc.stderr.strip()
    assert line.count("\n") == 0 and "Loop 'collect'" in line and "--max-memory" in line, line
    assert "would collect 100,000 trips (of its 1,000,000,000,000, where the iteration limit stops it) × 1.0 MiB" \
        in line


def test_a_loop_whose_condition_could_end_it_is_stopped_when_its_scan_outputs_cross_the_budget(tmp_path, cli):
    code, text = cli("--max-memory", "64M", "run", _collecting_loop(tmp_path, None))  # 16 MiB for a tensor
    assert code == 1 and "Loop 'collect': its scan outputs reached 17.0 MiB after 17 trips" in text, text
    assert "--max-memory" in text
    code, text = cli("--max-memory", "64M", "run", _collecting_loop(tmp_path, 10))
    assert code == 0 and "ys: float32[10, 262144]" in text, text


def test_a_scan_whose_outputs_would_cross_the_budget_is_refused_after_its_first_step(tmp_path, cli):
    shape = helper.make_tensor("shape", TensorProto.INT64, [1], [1 << 18])
    body = helper.make_graph(
        [helper.make_node("ConstantOfShape", ["shape"], ["ones"]), helper.make_node("Add", ["ones", "x_t"], ["y_t"])],
        "body", [helper.make_tensor_value_info("x_t", TensorProto.FLOAT, [1])],
        [helper.make_tensor_value_info("y_t", TensorProto.FLOAT, [1 << 18])], [shape])
    x = helper.make_tensor_value_info("x", TensorProto.FLOAT, [40, 1])
    ys = helper.make_tensor_value_info("ys", TensorProto.FLOAT, None)
    path = tmp_path / "scan.onnx"
    onnx.save(_model([helper.make_node("Scan", ["x"], ["ys"], body=body, num_scan_inputs=1, name="steps")], [x], [ys]),
              path)
    code, text = cli("--max-memory", "64M", "run", path)
    assert code == 1 and "Scan 'steps': its scan outputs would collect 40 trips × 1.0 MiB = 40.0 MiB" in text, text
    code, text = cli("--max-memory", "256M", "run", path)
    assert code == 0 and "ys: float32[40, 262144]" in text, text


def test_a_small_lbann_file_whose_default_initialisers_make_gigabytes_is_refused_before_allocating(tmp_path):
    path = tmp_path / "wide.prototext"
    path.write_text(_LBANN.format(dims="784", weights="", layers='layer { name: "fc" parents: "input" '
                                  "fully_connected { num_neurons: 300000 } }"))
    assert path.stat().st_size < 2700
    proc = _bounded("convert", path, tmp_path / "wide.onnx")
    assert proc.returncode == 1 and "NNBRIDGE_FOLD_LIMIT_MB" in proc.stderr and "fc_linearity_weights" in proc.stderr
    assert sorted(p.name for p in tmp_path.iterdir()) == ["wide.prototext"]


def test_a_small_lstm_file_declaring_65535_steps_is_refused_before_smaug_unrolls_it(tmp_path, cli):
    """A 7 KB file whose sequence is 65,535 steps took 156 s of CPU to unroll into SMAUG nodes."""
    src = Path(__file__).parent / "fuzz_fixtures" / "onnx-602" / "lstm_small.onnx"
    code, text = cli("convert", src, tmp_path / "m_topo.pbtxt")
    assert code == 1 and "a sequence of 65535 steps would unroll into about 786,420 SMAUG nodes" in text
    assert "NNBRIDGE_MAX_UNROLLED_STEPS" in text and list(tmp_path.iterdir()) == []
