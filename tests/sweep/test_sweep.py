"""nnbridge sweep: specs validated before anything runs, Ray equal to a serial run point for point,
--resume after a kill, Parquet/CSV results, the report's plots and HTML."""

from __future__ import annotations

import base64
import csv
import dataclasses
import html.parser
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest
from browser import probe

from nnbridge.base.errors import InputError
from nnbridge.sweep import load_spec, parse_spec, run_sweep

pytest.importorskip("ray")  # installed by make test (the sweep extra); a plain install has no sweep

CASE_STUDY = """
backend = "smv"
models = ["minerva", "lenet5"]
metrics = ["latency_ms", "cycles", "dram_bytes", "utilisation_pct"]
[space]
mem_policy = ["dma", "acp"]
num_accels = [1, 2, 4, 8]
tiling_threads = [1, 8]
"""


def _spec_file(tmp_path: Path, text: str, name: str = "spec.toml") -> Path:
    path = tmp_path / name
    path.write_text(text)
    return path


def _rows_by_key(out: Path) -> dict[str, dict]:
    with (out / "results.csv").open(newline="") as fh:
        return {r["key"]: r for r in csv.DictReader(fh)}


def test_the_smaug_case_study_runs_on_ray_and_equals_a_serial_run(tmp_path):
    spec = load_spec(_spec_file(tmp_path, CASE_STUDY))
    assert len(spec.points()) == 2 * 2 * 4 * 2
    serial = run_sweep(spec, tmp_path / "serial", serial=True)
    on_ray = run_sweep(spec, tmp_path / "ray", workers=2)
    assert serial.computed == on_ray.computed == 32 and serial.failed == on_ray.failed == 0
    assert _rows_by_key(tmp_path / "serial") == _rows_by_key(tmp_path / "ray")
    import pyarrow.parquet as pq

    table = pq.read_table(tmp_path / "ray" / "results.parquet")
    assert table.num_rows == 32 and {"mem_policy", "num_accels", "latency_ms", "error"} <= set(table.column_names)


def test_a_failing_point_is_a_row_with_its_error_and_the_sweep_goes_on(tmp_path):
    # SMV's scratchpads hold 16 K fp16 elements; 1 KiB cannot hold a tile of LeNet-5's convolutions
    spec = parse_spec({"backend": "smv", "models": ["lenet5"], "space": {"spad_bytes": [1024, 32768]}})
    summary = run_sweep(spec, tmp_path / "out", serial=True)
    rows = list(_rows_by_key(tmp_path / "out").values())
    assert summary.computed == 2 and len(rows) == 2
    assert [bool(r["error"]) for r in sorted(rows, key=lambda r: int(r["spad_bytes"]))] == [True, False]
    assert summary.failed == 1 and "\n" not in rows[0]["error"]


@pytest.mark.slow
def test_resume_after_a_kill_computes_only_what_is_missing(tmp_path):
    spec_path = _spec_file(tmp_path, """
backend = "smv"
models = ["vgg_cifar", "cnn10"]
metrics = ["latency_ms"]
[space]
dma_setup_cycles = {start = 10, stop = 1200, step = 5}
num_accels = [1, 2]
""")
    total = len(load_spec(spec_path).points())
    out = tmp_path / "out"
    proc = subprocess.Popen([sys.executable, "-m", "nnbridge", "sweep", str(spec_path), "--out", str(out), "--serial"],
                            stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, stdin=subprocess.DEVNULL)
    csv_path = out / "results.csv"
    deadline = time.monotonic() + 120
    while time.monotonic() < deadline and (not csv_path.exists() or csv_path.read_text().count("\n") < 50):
        time.sleep(0.05)
    os.kill(proc.pid, signal.SIGKILL)
    proc.wait()
    recorded = csv_path.read_text().count("\n") - 1
    assert 0 < recorded < total, "the sweep should have been killed mid-way"
    with pytest.raises(InputError, match="--resume"):  # never overwrites results without being asked
        run_sweep(load_spec(spec_path), out, serial=True)
    summary = run_sweep(load_spec(spec_path), out, resume=True, workers=2)
    rows = list(csv.reader(csv_path.open(newline="")))[1:]
    keys = [r[0] for r in rows]
    assert len(keys) == len(set(keys)) == total
    assert summary.skipped >= recorded - 1 and summary.computed == total - summary.skipped  # a torn row is redone
    fresh = run_sweep(load_spec(spec_path), tmp_path / "fresh", serial=True)
    assert fresh.computed == total and _rows_by_key(out) == _rows_by_key(tmp_path / "fresh")


@pytest.mark.parametrize("body, field", [
    ('backend = "smv"\nmodels = ["lenet5"]\n[space]\nnum_pe = [8]', "num_pe"),
    ('backend = "smv"\nmodels = ["lenet5"]\n[space]\nnum_accels = []', "num_accels"),
    ('backend = "smv"\nmodels = ["lenet5"]\n[space]\nnum_accels = {start = 4, stop = 1, step = 1}', "num_accels"),
    ('backend = "smv"\nmodels = ["lenet5"]\n[space]\nnum_accels = [1, 16]', "num_accels"),
    ('backend = "smv"\nmodels = ["lenet5"]\n[space]\nspad_bytes = [0]', "spad_bytes"),
    ('backend = "smv"\nmodels = ["lenet5"]\n[space]\nmem_policy = ["dma", "cxl"]', "mem_policy"),
    ('backend = "smv"\nmodels = ["lenet6"]\n[space]\nnum_accels = [1]', "lenet6"),
    ('backend = "smv"\nmodels = ["lenet5"]\nmetrics = ["energy"]\n[space]\nnum_accels = [1]', "energy"),
    ('backend = "rdu"\nmodels = ["lenet5"]\n[space]\nmode = ["o2"]', "mode"),
    ('backend = "rdu"\nmodels = ["lenet5"]\n[space]\nn_pcu = [-4]', "n_pcu"),
    ('backend = "tpu"\nmodels = ["lenet5"]\n[space]\nn_pcu = [4]', "backend"),
])
def test_a_bad_spec_fails_before_any_point_runs_with_one_line_naming_the_field(tmp_path, cli, body, field):
    spec_path = _spec_file(tmp_path, body)
    code, text = cli("sweep", spec_path, "--out", tmp_path / "out", "--serial")
    assert code == 1 and field in text and text.strip().count("\n") == 0, text
    assert not (tmp_path / "out").exists()


class _Page(html.parser.HTMLParser):
    def __init__(self):
        super().__init__()
        self.tags: list[str] = []
        self.images: list[str] = []
        self.rows = 0

    def handle_starttag(self, tag, attrs):
        self.tags.append(tag)
        self.rows += tag == "tr"
        if tag == "img":
            self.images.append(dict(attrs)["src"])


def test_report_writes_plots_and_a_self_contained_html_page(tmp_path, cli):
    spec = load_spec(_spec_file(tmp_path, CASE_STUDY))
    run_sweep(spec, tmp_path / "out", serial=True)
    code, text = cli("sweep-report", tmp_path / "out")
    assert code == 0, text
    page = (tmp_path / "out" / "report.html").read_text()
    parser = _Page()
    parser.feed(page)
    parser.close()
    assert parser.tags.count("table") == 2 and parser.tags.count("script") == 1
    pngs = sorted((tmp_path / "out" / "plots").glob("*.png"))
    assert len(parser.images) == len(pngs) == 1 + 4 * 3  # Pareto + each metric against each swept field
    for src in parser.images:
        assert src.startswith("data:image/png;base64,")
        assert base64.b64decode(src.split(",", 1)[1])[:8] == b"\x89PNG\r\n\x1a\n"
    assert parser.rows >= 1 + 32  # header + every point (+ the Pareto table)
    code, text = cli("sweep-report", tmp_path / "out", "--cost", "num_pe")
    assert code == 1 and "num_pe" in text and text.strip().count("\n") == 0


def test_pareto_front_keeps_only_undominated_points():
    from nnbridge.sweep.report import pareto

    points = [(1, 10, "a"), (2, 8, "b"), (2, 9, "c"), (4, 8, "d"), (8, 3, "e"), (3, 12, "f")]
    assert [p[2] for p in pareto(points)] == ["a", "b", "e"]


EXAMPLES = Path(__file__).resolve().parents[2] / "examples" / "sweeps"


#: make test sweeps a corner of the example's space: its models, metrics, report and both batch sizes,
#: at its first SRAM size and PCU count in o0 (o1 compiles BERT-base at 4-6 CPU-s a point); make
#: bench sweeps all 32 points
_CORNER = {"sram_bytes": 1, "n_pcu": 1, "mode": 1}


@pytest.mark.slow
@pytest.mark.memory
@pytest.mark.parametrize("whole", [False, pytest.param(True, marks=pytest.mark.matrix)])
def test_the_rdu_example_over_bert_base_and_a_llama_decoder_runs_and_reports(tmp_path, cli, whole):
    from nnbridge.sweep.targets import prepared_graph

    spec = load_spec(EXAMPLES / "rdu_llm.toml")
    if not whole:
        spec = dataclasses.replace(spec, space={name: values[:_CORNER.get(name, len(values))]
                                                for name, values in spec.space.items()})
    try:
        summary = run_sweep(spec, tmp_path / "rdu", serial=True)
    finally:
        prepared_graph.cache_clear()  # BERT-base's weights are not kept alive in the pytest worker
    assert summary.computed == len(spec.points()) == (32 if whole else 4) and summary.failed == 0
    code, text = cli("sweep-report", tmp_path / "rdu")
    assert code == 0 and (tmp_path / "rdu" / "plots" / "pareto.png").stat().st_size > 1000
    page = (tmp_path / "rdu" / "report.html").read_text()
    assert "bert_base" in page and "llama_decoder" in page


def test_every_shipped_example_spec_is_valid():
    specs = sorted(EXAMPLES.glob("*.toml"))
    assert len(specs) >= 2
    for path in specs:
        assert load_spec(path).points()



def test_the_html_report_opens_in_headless_chromium_without_errors_and_sorts(tmp_path, chromium):
    """The page's own script runs in a real browser: clicking a header of the second table sorts
    that table by that column (a column index counted across tables sorted the wrong cells)."""
    from nnbridge.sweep.report import write_report

    spec = load_spec(_spec_file(tmp_path, CASE_STUDY))
    run_sweep(spec, tmp_path / "out", serial=True)
    write_report(tmp_path / "out")
    values = [float(v) for v in probe(chromium, tmp_path / "out" / "report.html", """
  var table = document.querySelectorAll('table.sortable')[1];
  var heads = Array.prototype.slice.call(table.tHead.rows[0].cells);
  var column = heads.findIndex(function (h) { return h.textContent === 'latency_ms'; });
  heads[column].click();
  window.probe = Array.prototype.map.call(table.tBodies[0].rows, function (r) {
    return r.cells[column].textContent; });
""", tmp_path)]
    assert len(values) == 32 and values == sorted(values)


def test_each_model_keeps_one_colour_in_every_plot_and_no_two_models_share_one(tmp_path):
    """matplotlib's cycle gave a model's cloud and its Pareto front two colours, the cloud the
    colour another model's markers had in the other plots."""
    import matplotlib.pyplot as plt
    from matplotlib.colors import to_rgba

    from nnbridge.sweep.report import figures, model_colours

    spec = load_spec(_spec_file(tmp_path, """
backend = "smv"
models = ["minerva", "lenet5", "mlp"]
metrics = ["latency_ms", "cycles"]
[space]
num_accels = [1, 2]
mem_policy = ["dma", "acp"]
"""))
    run_sweep(spec, tmp_path / "out", serial=True)
    _, _, _, _, plots = figures(tmp_path / "out")
    assert len(plots) == 1 + 2 * 2
    seen: dict[str, set] = {}
    for fig in plots.values():
        for line in fig.axes[0].get_lines():
            seen.setdefault(line.get_gid(), set()).add(to_rgba(line.get_color(), 1.0))
        plt.close(fig)
    assert len(seen) == 3 and all(len(colours) == 1 for colours in seen.values()), seen
    assert len({c for colours in seen.values() for c in colours}) == 3
    for n in (3, 12, 20, 40):  # distinct at any count
        names = [f"m{i}" for i in range(n)]
        assert len(set(model_colours(names).values())) == n
