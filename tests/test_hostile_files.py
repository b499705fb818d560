"""Hostile files and faults (issue #34): a kill leaves nothing behind, stale temp files are swept,
``.pef`` members and plans are checked before use, work is budgeted before it starts, and every
hostile file ends in one line naming the file and field (never an internal error)."""

from __future__ import annotations

import fcntl
import signal
import subprocess
import sys
from pathlib import Path

import onnx
import pytest

from nnbridge.zoo import build

# The child runs the CLI with os.replace (the rename that ends every atomic write) made to announce
# itself and wait: the signal lands while the temp files exist at full size, with no timing guess.
_PAUSED_CLI = ("import os, sys, time\n"
               "def paused(*args, **kwargs):\n"
               "    print('writing', flush=True)\n"
               "    while True:\n"
               "        time.sleep(60)\n"
               "os.replace = paused\n"
               "from nnbridge.cli import main\n"
               "sys.exit(main(sys.argv[1:]))\n")


def _listing(root: Path) -> dict[str, int]:
    return {str(p.relative_to(root)): p.stat().st_size for p in sorted(root.rglob("*")) if p.is_file()} | \
        {str(p.relative_to(root)) + "/": 0 for p in root.rglob("*") if p.is_dir()}


@pytest.mark.parametrize("signum", [signal.SIGTERM, signal.SIGHUP])
@pytest.mark.parametrize("target", ["m_topo.pbtxt", "m.prototext", "m.onnx"])
def test_a_signal_mid_write_leaves_the_directory_as_it_was(tmp_path, signum, target):
    model = tmp_path / "model.onnx"
    onnx.save(build("mlp"), model)
    out = tmp_path / "out"
    out.mkdir()
    (out / "keep.txt").write_text("already here")
    before = _listing(tmp_path)
    child = subprocess.Popen([sys.executable, "-c", _PAUSED_CLI, "convert", str(model), str(out / target)],
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
    with open(live) as held:
        fcntl.flock(held, fcntl.LOCK_EX)
        assert cli("convert", model, tmp_path / "m.onnx")[0] == 0
        assert cli("convert", model, tmp_path / "m_topo.pbtxt")[0] == 0
    assert not any(p.exists() for p in stale)
    assert all(p.exists() for p in others) and live.exists() and link.is_symlink()
