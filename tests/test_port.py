"""``nnbridge port`` (#39): one table per model, each cell checked against what it claims.

``bench/port_matrix.problems`` runs what the table tells a user to run: every command that
writes a file must write the bytes port validated, that file must agree with onnxruntime on the
source exactly when the table says so (run apart from port's code), and a refused target's
reasons must be those ``convert`` prints. Here on the 15 real-architecture fixtures, on a light
model (SqueezeNet), on LeNet-5 (whose SMAUG SMV file converts: NHWC input, padded outputs) and
on a model whose bf16 numbers diverge; ``make bench`` (``bench_port``) runs every light model.
"""

from __future__ import annotations

import html
import json
import os
import pty
import re
import subprocess
import sys
from pathlib import Path

import numpy as np
import onnx
import pytest
from architecture_fixtures import CONVERTS, FIXTURES, MANIFEST, NAMES
from onnx import TensorProto, helper, numpy_helper

import nnbridge
from bench.port_matrix import problems
from nnbridge.port import TARGETS, PortReport
from nnbridge.zoo import build
from nnbridge.zoo.corpus import light_case

ROOT = Path(__file__).resolve().parents[1]


def pins_of(name: str) -> dict | None:
    """The manifest's example shapes for a fixture that declares dynamic dims (named, -1 or unnamed)."""
    declared = MANIFEST[name]["inputs"]
    dynamic = any(not isinstance(d, int) or d < 1 for dims in declared.values() for d in dims)
    return MANIFEST[name]["example_shapes"] if dynamic else None


def ported(model, tmp_path: Path, **options) -> tuple[PortReport, Path]:
    out = tmp_path / "out"
    return nnbridge.port(str(model), out_dir=str(out), keep=True, **options), out


@pytest.mark.parametrize("name", NAMES)
def test_every_fixture_gets_a_full_table_whose_commands_do_what_it_says(name, tmp_path):
    report, out = ported(FIXTURES / f"{name}.onnx", tmp_path, input_shapes=pins_of(name))
    assert [t.target for t in report.targets] == list(TARGETS)
    assert problems(report, out) == []
    # what the architecture tests hold each target to (tests/architecture_fixtures.py CONVERTS)
    for target, converts in (("smaug-ref", "smaug-Reference"), ("smaug-smv", "smaug-SMV"), ("lbann", "lbann")):
        row = report.target(target)
        assert row.conversion.ok == (name in CONVERTS[converts]) and row.numerics.ok == row.conversion.ok
    assert report.target("rdu").numerics.ok


def test_a_light_model_converts_where_it_can_and_its_files_agree(tmp_path):
    """SqueezeNet: SMAUG Reference and LBANN files agree in fp32; SMV is refused because SMAUG's
    stored input drives a Conv past fp16's range, with the flag that helps; the RDU agrees in bf16."""
    report, out = ported(light_case("squeezenet").model_path, tmp_path)
    assert problems(report, out) == []
    smv = report.target("smaug-smv")
    assert "beyond fp16's largest finite" in smv.conversion.reasons[0]
    assert "--smaug-backend Reference" in smv.conversion.reasons[0]
    assert any("SMAUG (Reference) takes it" in h for h in smv.conversion.hints)
    assert smv.smv is not None and "source model" in smv.smv.priced  # priced all the same, labelled so
    assert [t.numerics.verdict for t in report.targets] == ["agree", "not run", "agree", "agree"]


def test_an_smv_file_is_judged_in_fp16_through_its_nhwc_input_and_padded_outputs(tmp_path):
    onnx.save(build("lenet5"), tmp_path / "lenet5.onnx")
    report, out = ported(tmp_path / "lenet5.onnx", tmp_path, targets=["smaug-smv", "rdu"])
    assert problems(report, out) == []
    smv = report.target("smaug-smv")
    assert smv.conversion.status == "yes" and smv.numerics.ok and "rule fp16" in smv.numerics.rule
    assert smv.smv.priced == "the SMV file" and smv.smv.latency_ms > 0
    assert abs(smv.smv.compute_pct + smv.smv.transfer_pct + smv.smv.cpu_pct - 100) < 1e-6
    assert any(c.startswith("nnbridge simulate") for c in smv.commands)
    rdu = report.target("rdu")
    assert rdu.rdu.batch1.batch == 1 and rdu.rdu.sections >= 1 and rdu.rdu.weights_by_tier


def cancelling(path: Path) -> Path:
    """y = x·W1 − x·W2 with W2 within 0.1 % of W1: bf16 products lose the difference."""
    rng = np.random.default_rng(0)
    w1 = rng.normal(size=(64, 32)).astype(np.float32)
    w2 = (w1 + 1e-3 * rng.normal(size=w1.shape)).astype(np.float32)
    nodes = [helper.make_node("MatMul", ["x", "W1"], ["a"], name="mm1"),
             helper.make_node("MatMul", ["x", "W2"], ["b"], name="mm2"), helper.make_node("Sub", ["a", "b"], ["y"],
                                                                                         name="sub")]
    graph = helper.make_graph(nodes, "cancel", [helper.make_tensor_value_info("x", TensorProto.FLOAT, [1, 64])],
                              [helper.make_tensor_value_info("y", TensorProto.FLOAT, [1, 32])],
                              [numpy_helper.from_array(w1, "W1"), numpy_helper.from_array(w2, "W2")])
    onnx.save(helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)]), path)
    return path


def test_a_model_that_diverges_in_bf16_names_its_first_node_and_the_rule(tmp_path):
    report, out = ported(cancelling(tmp_path / "cancel.onnx"), tmp_path, targets=["lbann", "rdu"])
    assert problems(report, out) == []
    rdu = report.target("rdu")
    assert rdu.numerics.verdict == "DIFFER" and "rule bf16" in rdu.numerics.rule
    assert "'sub' (Sub)" in rdu.numerics.first_node and "source model on rdu" in rdu.numerics.first_node
    assert report.target("lbann").numerics.ok  # the same file in fp32 agrees


def test_pins_are_given_once_and_every_target_uses_them(tmp_path):
    report, out = ported(FIXTURES / "bert-dynamic.onnx", tmp_path, dims={"batch": 1, "sequence": 16})
    assert report.dims == {"batch": 1, "sequence": 16}
    assert report.inputs[0]["shape"] == [1, 16]
    for row in report.targets:  # every command but a measurement of the compiled .pef, which holds its shapes
        assert all("--dim batch=1 --dim sequence=16" in c for c in row.commands
                   if not (" measure-performance " in c and ".pef" in c))


def test_dynamic_dims_without_pins_or_a_terminal_are_refused_in_one_line(cli, tmp_path):
    code, text = cli("port", FIXTURES / "bert-dynamic.onnx", "--out-dir", tmp_path / "out")
    assert code == 1 and text.count("\n") == 1 and "--dim batch=1 --dim sequence=N" in text, text
    assert not (tmp_path / "out").exists()


def test_on_a_terminal_port_asks_for_each_dynamic_dim_once_and_pins_every_target(tmp_path):
    """stdin a terminal (a pseudo-terminal here): port asks for 'batch' and 'sequence', then every
    command carries the answers."""
    pid, fd = pty.fork()
    if pid == 0:  # the child: nnbridge on the terminal
        os.chdir(tmp_path)
        os.environ["PYTHONPATH"] = str(ROOT)
        os.execv(sys.executable, [sys.executable, "-m", "nnbridge", "port", str(FIXTURES / "bert-dynamic.onnx"),
                                  "--targets", "lbann,rdu", "--json", str(tmp_path / "r.json")])
    seen, answers, answered = b"", iter([b"1\n", b"16\n"]), 0
    while True:
        try:
            chunk = os.read(fd, 4096)
        except OSError:  # the child closed the terminal
            break
        if not chunk:
            break
        seen += chunk
        if seen.count(b"value of dim") > answered and seen.rstrip().endswith(b"):"):  # a prompt waits
            os.write(fd, next(answers))
            answered += 1
    _, status = os.waitpid(pid, 0)
    text = seen.decode(errors="replace")
    assert os.waitstatus_to_exitcode(status) == 0, text[-2000:]
    assert text.count("value of dim 'batch'") == 1 and text.count("value of dim 'sequence'") == 1
    report = json.loads((tmp_path / "r.json").read_text())
    assert report["dims"] == {"batch": 1, "sequence": 16}
    assert all("--dim batch=1 --dim sequence=16" in c for t in report["targets"] for c in t["commands"][:1])


def test_targets_and_the_json_report(cli, tmp_path):
    code, text = cli("port", FIXTURES / "regnet.onnx", "--targets", "rdu,lbann", "--json", "-")
    assert code == 0
    data = json.loads(text)
    assert [t["target"] for t in data["targets"]] == ["lbann", "rdu"]  # the table's order
    for t in data["targets"]:
        assert t["conversion"]["status"] in ("yes", "with rewrites", "no") and t["numerics"]["verdict"]
        assert t["cost"] and t["commands"]
    code, text = cli("port", FIXTURES / "regnet.onnx", "--targets", "rdu,tpu")
    assert code == 2 and "tpu" in text and text.count("\n") == 1


def test_the_printed_table_lists_the_commands_in_full_under_it(cli, tmp_path):
    code, text = cli("port", FIXTURES / "mobilenetv3.onnx", "--out-dir", tmp_path / "o")
    assert code == 0, text
    for word in ("SMAUG (Reference)", "SMAUG (SMV)", "LBANN", "RDU", "with rewrites", "agree", "HardSwish ×4"):
        assert word in text
    commands = re.findall(r"^\s+\[\d+\] (nnbridge .*)$", text, re.M)
    assert len(commands) >= 4 and all(str(tmp_path / "o") in c for c in commands if " convert " in c)
    assert not (tmp_path / "o").exists()  # nothing kept without --keep


def test_the_html_page_renders_in_headless_chromium_and_links_each_targets_report(cli, tmp_path, chromium):
    """The same rows as the table, coloured verdicts, and links to the SMV simulation's and the RDU
    program's own pages (written beside it); a screenshot is not blank."""
    from PIL import Image

    page = tmp_path / "port.html"
    code, text = cli("port", FIXTURES / "mobilenetv3.onnx", "--html", page, "--json", tmp_path / "r.json")
    assert code == 0, text
    probe = """<script>
window.addEventListener('load', function () {
  var rows = document.querySelectorAll('table.port tbody tr');
  var links = Array.prototype.map.call(document.querySelectorAll('table.port a'), function (a) {
    return a.getAttribute('href'); });
  var cells = Array.prototype.map.call(rows, function (r) { return r.cells.length; });
  var out = document.createElement('pre'); out.id = 'probe';
  out.textContent = JSON.stringify({rows: rows.length, cells: cells, links: links});
  document.body.appendChild(out);
});
</script></body>"""
    probed = tmp_path / "probed.html"
    probed.write_text(page.read_text().replace("</body>", probe))
    done = subprocess.run([chromium, "--headless", "--no-sandbox", "--disable-gpu", "--dump-dom", probed.as_uri()],
                          capture_output=True, text=True, timeout=120)
    found = re.search(r'<pre id="probe">(.*?)</pre>', done.stdout, re.S)
    assert found, "the page's script did not run:\n" + done.stdout[-2000:]
    seen = json.loads(html.unescape(found.group(1)))
    assert seen["rows"] == 4 and seen["cells"] == [6, 6, 6, 6]
    assert seen["links"] == ["port.smaug-smv.html", "port.rdu.html"]
    assert all((tmp_path / link).stat().st_size > 1000 for link in seen["links"])
    report = json.loads((tmp_path / "r.json").read_text())
    for row in report["targets"]:
        assert html.escape(row["commands"][0]) in page.read_text()
    shot = tmp_path / "shot.png"
    subprocess.run([chromium, "--headless", "--no-sandbox", "--disable-gpu", f"--screenshot={shot}",
                    "--window-size=1400,900", page.as_uri()], capture_output=True, timeout=120, check=True)
    image = Image.open(shot).convert("L")
    assert len(image.getcolors(maxcolors=1 << 16) or []) > 20  # text and colours, not a blank page


@pytest.mark.parametrize("where", ["_compile", "_numerics"])
def test_keep_leaves_nothing_behind_when_the_run_fails(tmp_path, monkeypatch, where):
    """--keep writes in place; a run that fails afterwards (while compiling for the RDU, after LBANN's
    files are written; or while judging) removes every file it wrote."""
    from nnbridge.port import core

    def broken(*args, **kwargs):
        raise RuntimeError("simulated failure")

    monkeypatch.setattr(core._Run if where == "_compile" else core, where, broken)
    with pytest.raises(RuntimeError):
        nnbridge.port(str(FIXTURES / "regnet.onnx"), ["lbann", "rdu"], out_dir=str(tmp_path / "out"), keep=True)
    assert not any(p.is_file() for p in (tmp_path / "out").rglob("*"))


def test_the_matrix_check_catches_a_table_that_lies(tmp_path):
    """problems() is not vacuous: a verdict, a reason or a kept file changed behind its back is reported."""
    report, out = ported(FIXTURES / "efficientnet.onnx", tmp_path, input_shapes=pins_of("efficientnet"))
    assert problems(report, out) == []
    lbann, smv = report.target("lbann"), report.target("smaug-smv")
    lbann.numerics.verdict = "DIFFER"
    smv.conversion.reasons = smv.conversion.reasons[1:]
    kept = out / next(iter(report.target("smaug-ref").conversion.files))
    found = problems(report, out)
    assert any("lbann" in p and "the table says DIFFER" in p for p in found)
    assert any("smaug-smv" in p and "reasons" in p for p in found)
    report.target("smaug-ref").commands = []
    kept.write_bytes(b"not what port validated")
    assert any("smaug-ref" in p for p in problems(report, out))


def test_check_takes_another_model_as_its_oracle_but_not_with_layerwise(tmp_path):
    """check(oracle=...): what port judges a converted file with; a node-by-node comparison needs the
    model's own ONNX form, so the two together are refused in one line."""
    from nnbridge.base.errors import InputError
    from nnbridge.check import check

    path = FIXTURES / "regnet.onnx"
    proto = onnx.load(str(path))
    result = check(str(path), "reference", oracle=proto)
    assert result.ok and result.origin is None and result.layerwise is None
    with pytest.raises(InputError, match="layerwise") as refused:
        check(str(path), "reference", oracle=proto, layerwise=True)
    assert "\n" not in str(refused.value)
