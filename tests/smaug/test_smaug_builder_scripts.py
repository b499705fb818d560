"""Builder scripts in SMAUG's frontend API (``import smaug as sg``) run with ``smaug`` meaning
``nnbridge.smaug`` and write SMAUG's own files byte for byte.

The scripts in ``builders/`` build the networks of SMAUG's experiment scripts (yaoyuannnn/experiments,
which has no licence, so they are written from the facts: architecture, recipe, node names, and the
API calls those scripts make — graph-free ``input_data``, ``mem_policy=sg.AllDma``, ``Tensor.dims``,
``nn.LSTM``, ``nn.BidirectionalLSTM`` …; see builders/README.md). Each build's files are compared with
the git blob ids of the files SMAUG wrote upstream (``builders/upstream.json``), with the shipped copies
in ../shared/data/smaug byte for byte, and its printed summary with SMAUG's where one was recorded.
"""

from __future__ import annotations

import contextlib
import hashlib
import io
import json
from pathlib import Path

import numpy as np
import pytest
from real_smaug import matching_output, run_smaug, same_fp16_bits
from smaug_data import SHA256

import nnbridge
from nnbridge.smaug.scripts import run_source

BUILDERS = Path(__file__).parent / "builders"
MANIFEST = json.loads((BUILDERS / "upstream.json").read_text())
GOLDENS = Path(__file__).parent / "print_summary"
SHIPPED = {Path(rel).name: rel for rel in SHA256}


def git_blob(data: bytes) -> str:
    """The id git gives a file of these bytes (so a file compares with upstream without a copy of it)."""
    return hashlib.sha1(b"blob %d\0" % len(data) + data).hexdigest()


def source_of(build: dict) -> str:
    source = (BUILDERS / build["script"]).read_text()
    for old, new in MANIFEST["variants"].get(build["variant"] or "", []):
        assert old in source, f"{build['script']}: no '{old}' to switch for the {build['variant']} variant"
        source = source.replace(old, new)
    return source


def run_build(build: dict, folder: Path, monkeypatch) -> str:
    monkeypatch.chdir(folder)
    out = io.StringIO()
    with contextlib.redirect_stdout(out):
        run_source(source_of(build), str(BUILDERS / build["script"]))
    return out.getvalue()


def build_id(build: dict) -> str:
    return next(iter(build["writes"])).removesuffix("_topo.pbtxt")


#: builds make bench runs (matrix, 3.5-4.5 CPU-s each): the SMV variants of scripts whose reference
#: build make test keeps (vgg_smv keeps an SMV build there)
MATRIX_BUILDS = {"large_elu_smv", "resnet_smv"}


@pytest.mark.parametrize("build", [pytest.param(b, marks=pytest.mark.matrix) if build_id(b) in MATRIX_BUILDS else b
                                   for b in MANIFEST["builds"]], ids=build_id)
def test_a_builder_script_writes_smaugs_own_files(build, tmp_path, monkeypatch, smaug_dir):
    """... and each pair, SMAUG's own files where it wrote them, re-saves byte for byte (load → save)."""
    printed = run_build(build, tmp_path, monkeypatch)
    assert sorted(p.name for p in tmp_path.iterdir()) == sorted(build["writes"])
    for name, blob in build["writes"].items():
        data = (tmp_path / name).read_bytes()
        if blob is not None:
            assert git_blob(data) == blob, f"{name} differs from the file SMAUG wrote"
        if name in SHIPPED:
            assert data == (smaug_dir / SHIPPED[name]).read_bytes()
    golden = GOLDENS / f"{build_id(build)}.txt"
    if golden.exists():
        assert printed == golden.read_text()
    (topo,) = [tmp_path / name for name in build["writes"] if name.endswith("_topo.pbtxt")]
    again = nnbridge.save(nnbridge.load(topo), tmp_path / "resaved" / topo.name)
    for path in again:
        assert Path(path).read_bytes() == (tmp_path / Path(path).name).read_bytes(), f"{Path(path).name} changed"


def test_the_bidirectional_lstm_runs_on_the_real_smv_runtime_as_on_nnbridge(tmp_path, monkeypatch):
    """SMAUG ships no file of this script's build: the real runtime is its oracle instead."""
    (build,) = [b for b in MANIFEST["builds"] if b["script"] == "bidi_lstm.py"]
    run_build(build, tmp_path, monkeypatch)
    topo = tmp_path / "bidi_lstm_smv_topo.pbtxt"
    real = run_smaug(topo)
    assert real.ok and real.name == "bidi_lstm:concat_3/output0"
    graph = nnbridge.load(topo)
    assert same_fp16_bits(matching_output(nnbridge.run(graph, graph.input_values, backend="smv"), real), real.output)


def test_every_builder_script_is_in_the_manifest():
    assert {p.name for p in BUILDERS.glob("*.py")} - {"check_upstream.py"} == {b["script"] for b in MANIFEST["builds"]}


def test_lstm_files_run_on_nnbridges_reference_as_on_smaugs_reference_runtime(tmp_path, monkeypatch, cli):
    """SMAUG's Reference kernels compute σ with a float exp and a double division, and tanh as
    2σ(2x) − 1, which loses the relative precision of an LSTM's small values (1.2e-2 of the
    output scale here): ``activations="reference"`` (``--smaug-activations reference`` on the command
    line) reproduces them, bit for bit on this file."""
    from nnbridge.base.errors import FormatError

    (build,) = [b for b in MANIFEST["builds"] if b["script"] == "lstm.py" and b["variant"] is None]
    run_build(build, tmp_path, monkeypatch)
    topo = tmp_path / "lstm_ref_topo.pbtxt"
    real = run_smaug(topo)
    assert real.ok
    scale = np.abs(real.output).max()
    for activations, within in (("exact", (1e-3, 1e-1)), ("reference", (0.0, 1e-5))):
        graph = nnbridge.load(topo, activations=activations)
        error = np.abs(matching_output(nnbridge.run(graph, graph.input_values), real) - real.output).max() / scale
        assert within[0] <= error <= within[1], (activations, error)
        out = tmp_path / f"cli_{activations}"
        code, text = cli("run", topo, "--smaug-activations", activations, "--out", out)
        assert code == 0, text
        (saved,) = out.glob("*.npy")
        cli_error = np.abs(np.load(saved).reshape(real.output.shape) - real.output).max() / scale
        assert within[0] <= cli_error <= within[1], (activations, cli_error)
    (smv,) = [b for b in MANIFEST["builds"] if b["script"] == "lstm.py" and b["variant"] == "smv"]
    (tmp_path / "smv").mkdir()
    run_build(smv, tmp_path / "smv", monkeypatch)
    with pytest.raises(FormatError, match="activations='reference' reproduces SMAUG's Reference backend"):
        nnbridge.load(tmp_path / "smv" / "lstm_smv_topo.pbtxt", activations="reference")
    code, text = cli("run", tmp_path / "smv" / "lstm_smv_topo.pbtxt", "--smaug-activations", "reference")
    assert code == 1 and text.count("\n") == 1 and "activations='reference' reproduces SMAUG's Reference" in text


def test_python_m_nnbridge_smaug_runs_a_script_and_reports_its_mistake_in_one_line(tmp_path):
    import subprocess
    import sys

    script = tmp_path / "bad_network.py"
    script.write_text("import numpy as np\nimport smaug as sg\n\n"
                      "with sg.Graph(name='bad', backend='SMV') as graph:\n"
                      "  x = sg.input_data(sg.Tensor(data_layout=sg.NHWC,\n"
                      "                               tensor_data=np.ones((1, 8, 8, 3), np.float16)))\n"
                      "  w = sg.Tensor(data_layout=sg.NHWC, tensor_data=np.ones((4, 3, 3, 5), np.float16))\n"
                      "  sg.nn.convolution(x, w, stride=[1, 1], padding='same')\n"
                      "graph.write_graph()\n")
    run = subprocess.run([sys.executable, "-m", "nnbridge.smaug", str(script)], cwd=tmp_path, capture_output=True,
                         text=True, timeout=120)
    assert run.returncode == 2 and run.stdout == ""
    assert run.stderr == "error: conv: the filter has 5 channels but its input Tensor(data/output0, [1, 8, 8, 3], " \
                         "NHWC) has 3\n"
    assert sorted(p.name for p in tmp_path.iterdir()) == ["bad_network.py"]
