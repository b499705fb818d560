"""Every command of the README's tour runs as written after `make demo` and exits 0: the demo
is run in a fresh directory laid out like the repository (../shared beside it, the test fixtures
in it), then each line
of the tour's code block, in order."""

from __future__ import annotations

import json
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
    commands = [shlex.split(command) for line in tour_commands() for command in line.split("&&")]
    assert all(argv[0] == "nnbridge" for argv in commands)
    tour = subprocess.run([sys.executable, "-c", _TOUR, json.dumps([argv[1:] for argv in commands])], cwd=repo,
                          env=env, capture_output=True, text=True, stdin=subprocess.DEVNULL, timeout=1200)
    codes = [json.loads(line) for line in tour.stdout.splitlines() if line.startswith("{")]
    assert tour.returncode == 0 and len(codes) == len(commands), tour.stdout[-1500:] + tour.stderr[-1500:]
    for done in codes:
        assert done["code"] == 0, f"{' '.join(done['argv'])}\n{done['text'][-3000:]}"
    assert (repo / "out" / "lenet5.pef").is_file() and (repo / "out" / "resnet.png").stat().st_size > 1000


#: the tour's commands in order in one child process, each through the command line's own ``main``
#: (a process per command spent ~0.8 CPU-s each importing nnbridge); one JSON line per command
_TOUR = """
import contextlib, io, json, sys
from nnbridge.cli import main
for argv in json.loads(sys.argv[1]):
    text = io.StringIO()
    with contextlib.redirect_stdout(text), contextlib.redirect_stderr(text):
        try:
            code = main(argv)
        except SystemExit as exc:
            code = exc.code
    print(json.dumps({"argv": argv, "code": code, "text": text.getvalue()}), flush=True)
"""
