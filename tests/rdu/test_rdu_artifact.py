"""The PEF artifact: round trip, documented members, corruption and tampering refused."""

from __future__ import annotations

import hashlib
import io
import json
import zipfile

import numpy as np
import pytest

import nnbridge
from nnbridge.api.inputs import random_inputs
from nnbridge.backends.rdu import load_pef
from nnbridge.base.errors import FormatError, SecurityError
from nnbridge.zoo import build


@pytest.fixture(scope="module")
def compiled(tmp_path_factory):
    exe = nnbridge.compile(build("lenet5"), backend="rdu", mode="o1", batch_size=8)
    path = tmp_path_factory.mktemp("pef") / "lenet5.pef"
    exe.save(path)
    return exe, path


def rewrite(src, dst, change) -> None:
    """Copy the zip ``src`` to ``dst`` passing every member through ``change(name, data)``."""
    with zipfile.ZipFile(src) as zin, zipfile.ZipFile(dst, "w") as zout:
        for name in zin.namelist():
            data = change(name, zin.read(name))
            if data is not None:
                zout.writestr(name, data)


def test_round_trip_gives_identical_outputs_and_plan(compiled):
    exe, path = compiled
    loaded = load_pef(path)
    feeds = random_inputs(exe.graph, seed=3)
    expected = exe.run(feeds)
    actual = loaded.run(feeds)
    assert expected.keys() == actual.keys()
    for name in expected:
        np.testing.assert_array_equal(actual[name], expected[name])
    assert loaded.plan()["sections"] == exe.plan()["sections"]
    assert loaded.estimate.totals == exe.estimate.totals
    assert loaded.options == exe.options and loaded.machine == exe.machine


def test_artifact_members_are_documented_and_pickle_free(compiled):
    _, path = compiled
    with zipfile.ZipFile(path) as zf:
        names = set(zf.namelist())
        manifest = json.loads(zf.read("manifest.json"))
        plan = json.loads(zf.read("plan.json"))
    assert {"manifest.json", "program.json", "plan.json"} <= names
    assert manifest["format"] == "nnbridge-pef" and set(manifest["members"]) == names - {"manifest.json"}
    assert any(n.startswith("weights/") and n.endswith(".npy") for n in names)
    kernel = plan["sections"][0]["kernels"][0]
    assert {"ops", "pcus", "pmus", "pcu_range", "pmu_range"} <= set(kernel)
    assert plan["schedule"][0]["section"] == 0 and plan["options"]["batch_size"] == 8


def test_tampered_weight_is_rejected(compiled, tmp_path):
    _, path = compiled
    bad = tmp_path / "tampered.pef"

    def flip_weight(name, data):
        if name.startswith("weights/") and len(data) > 200:
            data = data[:-4] + bytes(4)  # zero the last float of one tensor
        return data

    rewrite(path, bad, flip_weight)
    with pytest.raises(FormatError, match="SHA-256 of 'weights/.*does not match"):
        load_pef(bad)


def test_member_added_or_removed_is_rejected(compiled, tmp_path):
    _, path = compiled
    extra = tmp_path / "extra.pef"
    rewrite(path, extra, lambda n, d: d)
    with zipfile.ZipFile(extra, "a") as zf:
        zf.writestr("weights/evil.npy", b"x")
    with pytest.raises(FormatError, match="not in the manifest"):
        load_pef(extra)
    missing = tmp_path / "missing.pef"
    rewrite(path, missing, lambda n, d: None if n == "plan.json" else d)
    with pytest.raises(FormatError, match="missing members"):
        load_pef(missing)


def test_truncated_or_garbage_files_are_rejected(compiled, tmp_path):
    _, path = compiled
    data = path.read_bytes()
    truncated = tmp_path / "truncated.pef"
    truncated.write_bytes(data[: len(data) // 2])
    with pytest.raises(FormatError):
        load_pef(truncated)
    garbage = tmp_path / "garbage.pef"
    garbage.write_bytes(b"PEF?" * 100)
    with pytest.raises(FormatError, match="not a valid artifact"):
        load_pef(garbage)
    with pytest.raises(FormatError, match="no such file"):
        load_pef(tmp_path / "absent.pef")


def test_pickled_array_with_a_matching_hash_is_still_refused(compiled, tmp_path):
    _, path = compiled
    buf = io.BytesIO()
    np.save(buf, np.array([{"a": 1}], dtype=object), allow_pickle=True)
    evil = buf.getvalue()
    bad = tmp_path / "pickled.pef"
    with zipfile.ZipFile(path) as zf:
        manifest = json.loads(zf.read("manifest.json"))
    target = next(n for n in manifest["members"] if n.startswith("weights/"))
    manifest["members"][target] = {"sha256": hashlib.sha256(evil).hexdigest(), "size": len(evil)}

    def swap(name, data):
        if name == target:
            return evil
        return json.dumps(manifest) if name == "manifest.json" else data

    rewrite(path, bad, swap)
    with pytest.raises(SecurityError, match="pickled"):
        load_pef(bad)


def test_a_failed_save_leaves_no_file(tmp_path, monkeypatch):
    exe = nnbridge.compile(build("mlp"), backend="rdu")
    target = tmp_path / "m.pef"
    from nnbridge.backends.rdu import artifact

    def boom(*args, **kwargs):
        raise OSError("disk full")

    monkeypatch.setattr(artifact.zipfile.ZipFile, "writestr", boom)
    with pytest.raises(OSError):
        exe.save(target)
    assert list(tmp_path.iterdir()) == []


def test_subgraphs_round_trip(tmp_path):
    from onnx import TensorProto, helper, numpy_helper

    from nnbridge.ir import IR_OPSET

    out = lambda name: helper.make_tensor_value_info(name, TensorProto.FLOAT, [2, 3])  # noqa: E731
    then_g = helper.make_graph([helper.make_node("Relu", ["x"], ["t"])], "then", [], [out("t")])
    else_g = helper.make_graph([helper.make_node("Neg", ["x"], ["e"])], "else", [], [out("e")])
    nodes = [helper.make_node("ReduceSum", ["x"], ["s"], keepdims=0),
             helper.make_node("Greater", ["s", "zero"], ["c"]),
             helper.make_node("If", ["c"], ["y"], then_branch=then_g, else_branch=else_g)]
    graph = helper.make_graph(nodes, "branchy", [out("x")], [out("y")],
                              [numpy_helper.from_array(np.array(0, np.float32), "zero")])
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", IR_OPSET)])
    exe = nnbridge.compile(model, backend="rdu")
    exe.save(tmp_path / "if.pef")
    loaded = load_pef(tmp_path / "if.pef")
    for seed in range(4):  # both branches are taken
        x = np.random.default_rng(seed).standard_normal((2, 3)).astype(np.float32)
        np.testing.assert_array_equal(loaded.run({"x": x})["y"], exe.run({"x": x})["y"])
