"""``check --save-outputs/--load-outputs``: a run judged against outputs saved by another run."""

from __future__ import annotations

import io
import json
import zipfile

import numpy as np
import onnx
import pytest
from models import large_outputs, model, tensor
from onnx import TensorProto, helper

import nnbridge
from nnbridge.base.errors import InputError, OutputError, SecurityError


@pytest.fixture
def boxes(tmp_path):
    path = tmp_path / "boxes.onnx"
    onnx.save(large_outputs(), path)
    return path


def _rewrite(src, dst, change):
    """A copy of the npz ``src`` with ``change(arrays)`` applied (members read back as plain arrays)."""
    with np.load(src) as data:
        arrays = {k: data[k] for k in data.files}
    change(arrays)
    np.savez(dst, **arrays)


def test_saved_outputs_round_trip_agree_and_record_who_made_them(boxes, tmp_path):
    saved = tmp_path / "run1.npz"
    first = nnbridge.check(boxes, backend="smv", save_outputs=saved)
    with np.load(saved) as data:
        assert sorted(data.files) == ["input/x", "meta", "output/boxes"]
        meta = json.loads(data["meta"].tobytes())
        np.testing.assert_array_equal(data["output/boxes"], first.actual["boxes"])
    assert (meta["backend"], meta["format"], meta["version"]) == ("smv", "fp16", nnbridge.__version__)
    again = nnbridge.check(boxes, backend="smv", load_outputs=saved)
    assert again.ok and again.outputs[0].max_abs_err == 0
    np.testing.assert_array_equal(again.inputs["x"], first.inputs["x"])
    assert "run1.npz (smv" in again.oracle
    # the reference backend against the SMV run: judged by the looser (fp16) row
    assert nnbridge.check(boxes, load_outputs=saved).rule.name == "fp16"


def test_a_one_ulp_change_is_detected_when_the_rule_is_exact(boxes, tmp_path):
    saved, changed = tmp_path / "run1.npz", tmp_path / "changed.npz"
    nnbridge.check(boxes, save_outputs=saved)

    def one_ulp(arrays):
        out = arrays["output/boxes"].copy()
        out.flat[3] = np.nextafter(out.flat[3], np.float32(np.inf))
        arrays["output/boxes"] = out

    _rewrite(saved, changed, one_ulp)
    assert nnbridge.check(boxes, load_outputs=changed).ok  # the fp32 row allows 64 ulps
    exact = nnbridge.check(boxes, load_outputs=changed, rtol=0, atol=0)
    assert not exact.ok and exact.outputs[0].outside == 1
    assert nnbridge.check(boxes, load_outputs=saved, rtol=0, atol=0).ok


def test_integer_outputs_are_compared_exactly(tmp_path):
    argmax = model([helper.make_node("ArgMax", ["x"], ["i"], axis=1, keepdims=0)], [tensor("x", [4, 8])],
                   [tensor("i", [4], TensorProto.INT64)])
    path, saved, changed = tmp_path / "argmax.onnx", tmp_path / "run.npz", tmp_path / "changed.npz"
    onnx.save(argmax, path)
    nnbridge.check(path, save_outputs=saved)
    _rewrite(saved, changed, lambda a: a.update({"output/i": a["output/i"] + np.array([0, 0, 1, 0])}))
    result = nnbridge.check(path, load_outputs=changed)
    assert not result.ok and result.outputs[0].rule == "exact" and result.outputs[0].outside == 1


@pytest.mark.parametrize("change, message", [
    (lambda a: a.pop("output/boxes"), r"saved outputs are \[\] .*missing \['boxes'\]"),
    (lambda a: a.update({"output/extra": np.zeros(2, np.float32)}), r"extra \['extra'\]"),
    (lambda a: a.update({"output/boxes": a["output/boxes"][:2]}), r"output 'boxes' was saved with shape \[2, 16\]"),
    (lambda a: a.update({"input/y": a.pop("input/x")}), r"saved inputs are \['y'\] but the model takes \['x'\]"),
])
def test_saved_outputs_that_do_not_match_are_refused_in_one_line(boxes, tmp_path, change, message):
    saved, changed = tmp_path / "run1.npz", tmp_path / "changed.npz"
    nnbridge.check(boxes, save_outputs=saved)
    _rewrite(saved, changed, change)
    if "output/boxes" not in np.load(changed).files:  # no outputs at all is a format error of its own
        _rewrite(changed, changed, lambda a: a.update({"output/other": np.zeros(1, np.float32)}))
        message = r"missing \['boxes'\]"
    with pytest.raises(InputError, match=message) as err:
        nnbridge.check(boxes, load_outputs=changed)
    assert "\n" not in str(err.value)


def test_a_pickled_object_array_is_refused(boxes, tmp_path):
    saved, tampered = tmp_path / "run1.npz", tmp_path / "tampered.npz"
    nnbridge.check(boxes, save_outputs=saved)
    with zipfile.ZipFile(saved) as src, zipfile.ZipFile(tampered, "w") as dst:
        for member in src.namelist():
            dst.writestr(member, src.read(member))
        buffer = io.BytesIO()
        np.save(buffer, np.array([{"a": 1}], dtype=object), allow_pickle=True)
        dst.writestr("output/evil.npy", buffer.getvalue())
    with pytest.raises(SecurityError, match="output/evil.*pickled Python objects"):
        nnbridge.check(boxes, load_outputs=tampered)


@pytest.mark.parametrize("option, given", [("--input-range", {"input_ranges": {"x": (0, 1)}}),
                                           ("--seed", {"seed": 5}), ("--input", {"inputs": {"x": np.ones((4, 64))}}),
                                           ("--dim", {"dims": {"batch": 2}})])
def test_options_that_make_other_inputs_are_refused_with_saved_ones(boxes, tmp_path, option, given):
    saved = tmp_path / "run1.npz"
    nnbridge.check(boxes, save_outputs=saved)
    with pytest.raises(InputError, match=f"run1.npz: cannot be combined with {option} "):
        nnbridge.check(boxes, load_outputs=saved, **given)


def test_sequence_outputs_are_refused_and_an_unwritable_file_is_one_line(tmp_path):
    seq = model([helper.make_node("SequenceConstruct", ["x", "x"], ["s"])], [tensor("x", [2])],
                [helper.make_tensor_sequence_value_info("s", TensorProto.FLOAT, [2])])
    onnx.save(seq, tmp_path / "seq.onnx")
    with pytest.raises(InputError, match="'s' is not a tensor .*only tensor inputs and outputs can be saved"):
        nnbridge.check(tmp_path / "seq.onnx", save_outputs=tmp_path / "seq.npz")
    assert not (tmp_path / "seq.npz").exists()
    boxes = tmp_path / "boxes.onnx"
    onnx.save(large_outputs(), boxes)
    with pytest.raises(OutputError, match=r"'.*/boxes.onnx/run.npz': '.*/boxes.onnx' is a file, not a directory"):
        nnbridge.check(boxes, save_outputs=boxes / "run.npz")  # a file where its folder should be


def test_cli_save_then_load(cli, boxes, tmp_path):
    saved = tmp_path / "run1.npz"
    code, text = cli("check", boxes, "--backend", "rdu", "--save-outputs", saved)
    assert code == 0 and f"--load-outputs {saved}" in " ".join(text.split())  # lines wrap
    code, text = cli("check", boxes, "--backend", "rdu", "--load-outputs", saved, "--json")
    data = json.loads(text)
    assert code == 0 and data["oracle"].startswith("run1.npz (rdu, nnbridge") and data["ok"]
    code, text = cli("check", boxes, "--load-outputs", tmp_path / "none.npz")
    assert code == 1 and text.strip() == f"error: --load-outputs {tmp_path / 'none.npz'}: no such file"
