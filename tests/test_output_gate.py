"""Every writer goes through one output gate (issue #34 items 1 and 4): the size is bounded before
the first byte, and a destination that cannot be written is one line naming it and the cause —
never "internal error" — with nothing left behind."""

from __future__ import annotations

import resource
import subprocess
import sys
from pathlib import Path

import numpy as np
import onnx
import pytest
from onnx import TensorProto, helper

import nnbridge
from nnbridge.base.errors import OutputError


def _relu(path: Path) -> Path:
    graph = helper.make_graph([helper.make_node("Relu", ["x"], ["y"])], "small",
                              [helper.make_tensor_value_info("x", TensorProto.FLOAT, [1, 4])],
                              [helper.make_tensor_value_info("y", TensorProto.FLOAT, [1, 4])])
    onnx.save(helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)]), path)
    return path


def _listing(root: Path) -> list[str]:
    return sorted(str(p.relative_to(root)) for p in root.rglob("*"))


def _small_files_only() -> None:
    """In the child: no file over 64 MiB (a regression fails on SIGXFSZ instead of filling the disk)."""
    resource.setrlimit(resource.RLIMIT_FSIZE, (64 << 20, 64 << 20))


def test_run_out_of_a_small_model_whose_output_is_gigabytes_is_refused_before_writing(tmp_path):
    graph = helper.make_graph([helper.make_node("Expand", ["x", "shape"], ["y"])], "bomb",
                              [helper.make_tensor_value_info("x", TensorProto.FLOAT, [1])],
                              [helper.make_tensor_value_info("y", TensorProto.FLOAT, None)],
                              [helper.make_tensor("shape", TensorProto.INT64, [2], [100_000, 100_000])])
    src = tmp_path / "bomb.onnx"
    onnx.save(helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)]), src)
    assert src.stat().st_size < 200
    proc = subprocess.run([sys.executable, "-m", "nnbridge", "run", str(src), "--out", str(tmp_path / "o")],
                          capture_output=True, text=True, stdin=subprocess.DEVNULL, preexec_fn=_small_files_only,
                          timeout=600)
    assert proc.returncode == 1 and proc.stderr.count("\n") == 1, proc.stderr
    assert "output 'y'" in proc.stderr and "1e+10 elements" in proc.stderr and "--max-memory" in proc.stderr
    assert _listing(tmp_path) == ["bomb.onnx"]


def test_run_out_consults_max_output_bytes(tmp_path, cli):
    src = _relu(tmp_path / "m.onnx")
    code, text = cli("--max-output-bytes", "10", "run", src, "--out", tmp_path / "o")
    assert code == 1 and "over the --max-output-bytes limit" in text and "nothing was written" in text
    assert _listing(tmp_path) == ["m.onnx"]


@pytest.mark.parametrize("target", ["x.onnx", "x_topo.pbtxt", "x.prototext"])
def test_an_existing_directory_as_the_destination_is_one_line(tmp_path, cli, target):
    src = _relu(tmp_path / "m.onnx")
    (tmp_path / target).mkdir()
    before = _listing(tmp_path)
    code, text = cli("convert", src, tmp_path / target, *(["--lbann-weights", "npy"] if "proto" in target else []))
    assert code == 1 and text.strip().count("\n") == 0, text
    assert f"'{tmp_path / target}' is a directory; name a file to write" in text
    assert _listing(tmp_path) == before  # no <stem>_weights/ left behind either


def test_run_out_naming_a_file_is_one_line(tmp_path, cli):
    src = _relu(tmp_path / "m.onnx")
    (tmp_path / "afile").write_text("keep me")
    code, text = cli("run", src, "--out", tmp_path / "afile")
    assert code == 1 and "--out" in text and "is a file" in text
    assert (tmp_path / "afile").read_text() == "keep me"


def test_names_the_file_system_refuses_are_one_line(tmp_path, cli):
    src = _relu(tmp_path / "m.onnx")
    (tmp_path / "afile").write_text("keep me")
    code, text = cli("convert", src, tmp_path / ("x" * 250 + ".onnx"))
    assert code == 1 and "the name is 255 bytes" in text and "internal error" not in text
    code, text = cli("convert", src, tmp_path / "afile" / "x.onnx")
    assert code == 1 and "'afile' is a file, not a directory" in text.replace(str(tmp_path) + "/", "")
    with pytest.raises(OutputError, match="cannot hold a NUL character"):
        nnbridge.convert(src, str(tmp_path / "a\0b.onnx"))
    assert _listing(tmp_path) == ["afile", "m.onnx"]


def test_a_write_failing_on_the_file_system_is_one_line_and_leaves_no_directory(tmp_path, monkeypatch):
    """ENOSPC (or EACCES, EROFS …) while writing: the cause and the path, no temp file, and the
    weights directory the LBANN writer made for the write is removed again."""
    import errno
    import os

    from nnbridge.converters.lbann import writer

    w = np.ones((4, 64), np.float32)
    model = helper.make_graph([helper.make_node("MatMul", ["x", "w"], ["y"])], "mm",
                              [helper.make_tensor_value_info("x", TensorProto.FLOAT, [1, 4])],
                              [helper.make_tensor_value_info("y", TensorProto.FLOAT, [1, 64])],
                              [helper.make_tensor("w", TensorProto.FLOAT, w.shape, w.ravel())])
    graph = nnbridge.load(helper.make_model(model, opset_imports=[helper.make_opsetid("", 17)]))
    _relu(tmp_path / "m.onnx")
    failing = writer.write_npy

    def full_disk(fh, array):
        failing(fh, array)
        raise OSError(errno.ENOSPC, os.strerror(errno.ENOSPC))

    monkeypatch.setattr(writer, "write_npy", full_disk)
    with pytest.raises(OutputError, match=r"cannot write output '.*out\.prototext': no space left on the device"):
        nnbridge.save(graph, tmp_path / "out" / "out.prototext", lbann_weights="npy")
    assert _listing(tmp_path) == ["m.onnx"]
