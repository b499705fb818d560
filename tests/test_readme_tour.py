"""Every command of the README's tour runs as written after `make demo` and exits 0: the demo
is run in a fresh directory laid out like the repository (../shared beside it, the test fixtures
in it), then each line
of the tour's code block, in order."""

from __future__ import annotations

import os
import re
import shlex
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
SHARED = ROOT.parent / "shared"


def tour_commands() -> list[str]:
    text = (ROOT / "README.md").read_text()
    block = re.search(r"## A short tour\n+```sh\n(.*?)```", text, re.S).group(1)
    lines = [line.split("  #")[0].strip() for line in block.splitlines()]
    return [line for line in lines if line and not line.startswith(". ")]


def test_the_tour_block_is_found_and_uses_the_demo_outputs():
    commands = tour_commands()
    assert len(commands) >= 10 and all(c.startswith("nnbridge ") for c in commands)
    assert any("out/demo/lenet5.onnx" in c for c in commands)


@pytest.mark.slow
def test_every_tour_command_runs_after_make_demo(tmp_path):
    repo = tmp_path / "repo"
    repo.mkdir()
    (tmp_path / "shared").symlink_to(SHARED)
    (repo / "tests").mkdir()
    (repo / "tests" / "fixtures").symlink_to(ROOT / "tests" / "fixtures")  # the repository's own fixtures
    env = {**os.environ, "PYTHONPATH": str(ROOT), "MPLBACKEND": "Agg"}
    demo = subprocess.run([sys.executable, "-m", "nnbridge.apps.demo"], cwd=repo, env=env, capture_output=True,
                          text=True, stdin=subprocess.DEVNULL, timeout=600)
    assert demo.returncode == 0, demo.stdout[-2000:] + demo.stderr[-2000:]
    for line in tour_commands():
        for command in line.split("&&"):
            argv = shlex.split(command)
            assert argv[0] == "nnbridge"
            done = subprocess.run([sys.executable, "-m", "nnbridge", *argv[1:]], cwd=repo, env=env,
                                  capture_output=True, text=True, stdin=subprocess.DEVNULL, timeout=600)
            assert done.returncode == 0, f"{command}\n{done.stdout[-1500:]}\n{done.stderr[-1500:]}"
    assert (repo / "out" / "lenet5.pef").is_file() and (repo / "out" / "resnet.png").stat().st_size > 1000
