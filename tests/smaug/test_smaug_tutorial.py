"""SMAUG's Python-API tutorial (the seed this project grew from, ../shared/seeds/000_*.txt) runs
unmodified with ``smaug`` meaning ``nnbridge.smaug``: its code blocks are taken from the seed at
test time, its ``print_summary()`` output matches the tutorial's text line for line, and the files
``write_graph()`` writes run on the real SMAUG runtime as nnbridge runs them."""

from __future__ import annotations

import contextlib
import io
import re
import textwrap

import numpy as np
import pytest
from real_smaug import run_smaug
from shared_paths import SHARED_DATA
from test_smaug_builder import TUTORIAL_SUMMARY

import nnbridge
from nnbridge.smaug.scripts import run_source


def tutorial() -> str:
    seeds = sorted((SHARED_DATA.parent / "seeds").glob("000_*.txt"))
    if not seeds:
        pytest.fail(f"the SMAUG tutorial seed is not in {SHARED_DATA.parent / 'seeds'}")
    return seeds[0].read_text()


def indented_block(text: str, start: int) -> str:
    """The reStructuredText block indented under the line that ends at ``start``."""
    lines = []
    for line in text[start:].split("\n")[1:]:
        if line.strip() and not line.startswith(" "):
            break
        lines.append(line)
    return textwrap.dedent("\n".join(lines)).strip("\n") + "\n"


def code_blocks(text: str) -> list[str]:
    return [indented_block(text, m.end()) for m in re.finditer(r"^\.\. code-block:: python$", text, re.M)]


def printed_summary(text: str) -> str:
    """The literal block (``::``) after "This prints model-level information"."""
    m = re.search(r"^This prints model-level information.*::$", text, re.M)
    return indented_block(text, m.end())


def test_the_tutorial_runs_unmodified_and_prints_smaugs_summary(tmp_path, monkeypatch):
    text = tutorial()
    blocks = code_blocks(text)
    assert len(blocks) == 4 and blocks[0].startswith("import smaug as sg\nwith sg.Graph(")
    with pytest.raises(SyntaxError):  # the first block only shows the context: a `with` whose body is a comment
        compile(blocks[0], "tutorial block 1", "exec")
    monkeypatch.chdir(tmp_path)
    out = io.StringIO()
    with contextlib.redirect_stdout(out):
        run_source("".join(blocks[1:]), "tutorial")
    # line for line as the tutorial shows it (its rendering drops the indentation and trailing spaces
    # of SMAUG's lines) and byte for byte as SMAUG's print_summary prints it
    assert [line.strip() for line in out.getvalue().splitlines()] == \
           [line.strip() for line in printed_summary(text).splitlines()]
    assert out.getvalue() == TUTORIAL_SUMMARY
    # "This gives us two files named my_model_topo.pbtxt and my_model_params.pb"
    assert sorted(p.name for p in tmp_path.iterdir()) == ["my_model_params.pb", "my_model_topo.pbtxt"]


def test_the_tutorials_model_runs_on_the_real_smaug_runtime_as_on_nnbridge(tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    with contextlib.redirect_stdout(io.StringIO()):
        run_source("".join(code_blocks(tutorial())[1:]), "tutorial")
    real = run_smaug(tmp_path / "my_model_topo.pbtxt")
    assert real.ok, real.message
    graph = nnbridge.load(tmp_path / "my_model_topo.pbtxt")
    (ours,) = nnbridge.run(graph, graph.input_values, backend="smv").values()
    assert np.array_equal(ours.reshape(real.output.shape).view(np.uint16), real.output.view(np.uint16))
