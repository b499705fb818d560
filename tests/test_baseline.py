"""simulate / measure-performance --baseline: this run beside an earlier run's --json report,
per layer (SMV) or stage (RDU) and in the totals, in the table, the JSON and the HTML; a file of
another kind or of another model refused in one line before anything is written."""

from __future__ import annotations

import json

import onnx
import pytest
from browser import probe

from nnbridge import zoo


@pytest.fixture(scope="module")
def lenet(tmp_path_factory):
    path = tmp_path_factory.mktemp("model") / "lenet5.onnx"
    onnx.save(zoo.build("lenet5"), path)
    return path


def _run(cli, *argv):
    code, text = cli(*argv)
    assert code == 0, text
    return text


def test_simulate_shows_per_layer_and_total_deltas_in_the_table_json_and_html(cli, tmp_path, lenet, chromium):
    base, now, page = tmp_path / "one.json", tmp_path / "four.json", tmp_path / "four.html"
    _run(cli, "simulate", lenet, "--perf-only", "--json", base)
    text = _run(cli, "simulate", lenet, "--perf-only", "--accels", "4", "--baseline", base, "--json", now,
                "--html", page, "--top", "0")
    before, after = json.loads(base.read_text()), json.loads(now.read_text())
    against = after["baseline"]
    assert against["file"] == str(base) and against["model"] == "lenet5" and against["matched_by"] == "name"
    old = {r["name"]: r for r in before["rows"]}
    assert [r["name"] for r in against["rows"]] == [r["name"] for r in after["rows"]]
    for row, new in zip(against["rows"], after["rows"]):
        assert row["status"] == "both" and not row["changed"]
        for col in ("latency_us", "compute_us", "transfer_us", "cpu_us", "accel_cycles"):
            d = row["deltas"][col]
            assert (d["baseline"], d["now"]) == (old[row["name"]][col], new[col])
            assert d["delta"] == pytest.approx(new[col] - old[row["name"]][col])
    latency = against["totals"]["latency_ms"]
    assert latency["delta"] == pytest.approx(after["totals"]["latency_ms"] - before["totals"]["latency_ms"])
    assert latency["delta"] < 0 and against["totals"]["accels"]["delta"] == 3  # four accelerators are faster
    assert not against["only_in_this_run"] and not against["only_in_the_baseline"]
    assert "against the baseline" in text and f"{100 * latency['relative']:+.1f} %" in text
    fc0 = next(r for r in against["rows"] if r["name"] == "fc0")["deltas"]["latency_us"]
    shown = probe(chromium, page, """
  var h = document.getElementById('baseline');
  var rows = {};
  var table = document.querySelectorAll('table.sortable')[1];
  var heads = Array.prototype.map.call(table.tHead.rows[0].cells, function (c) { return c.textContent; });
  Array.prototype.forEach.call(table.tBodies[0].rows, function (r) {
    rows[r.cells[0].textContent] = Array.prototype.map.call(r.cells, function (c) { return c.textContent; }); });
  window.probe = {title: h && h.textContent, heads: heads, rows: rows};
""", tmp_path)
    assert shown["title"] == f"Against the baseline {base}"
    assert shown["heads"][:6] == ["layer", "status", "baseline latency_us", "latency_us", "Δ", "Δ %"]
    assert set(shown["rows"]) == {r["name"] for r in after["rows"]}
    assert float(shown["rows"]["fc0"][4]) == pytest.approx(fc0["delta"], rel=1e-5)


def test_layers_on_one_side_only_are_listed_as_such(cli, tmp_path, lenet):
    base = tmp_path / "one.json"
    _run(cli, "simulate", lenet, "--perf-only", "--json", base)
    edited = json.loads(base.read_text())
    gone = edited["rows"].pop(1)["name"]
    edited["rows"].append({**edited["rows"][0], "name": "ghost_layer"})
    edited["rows"][0]["where"] = "accel"
    base.write_text(json.dumps(edited))
    text = _run(cli, "simulate", lenet, "--perf-only", "--baseline", base, "--json", tmp_path / "now.json")
    against = json.loads((tmp_path / "now.json").read_text())["baseline"]
    assert against["only_in_this_run"] == [gone] and against["only_in_the_baseline"] == ["ghost_layer"]
    status = {r["name"]: r["status"] for r in against["rows"]}
    assert status[gone] == "only in this run" and status["ghost_layer"] == "only in the baseline"
    assert against["rows"][0]["changed"] == {"where": ["accel", "cpu"]}
    assert f"1 layers only in this run: {gone}" in text and "1 layers only in the baseline: ghost_layer" in text


def test_measure_performance_shows_per_stage_and_total_deltas(cli, tmp_path, lenet):
    base, now = tmp_path / "b16.json", tmp_path / "b64.json"
    _run(cli, "measure-performance", lenet, "--batch-size", "16", "--json", base)
    text = _run(cli, "measure-performance", lenet, "--batch-size", "64", "--baseline", base, "--json", now,
                "--html", tmp_path / "r.html")
    before, after = json.loads(base.read_text()), json.loads(now.read_text())
    assert before["model"] == after["model"] == "lenet5"
    against = after["baseline"]
    assert against["matched_by"] == "kernel"
    old = {s["kernel"]: s for s in before["stages"]}
    for row, new in zip(against["rows"], after["stages"]):
        assert row["kernel"] == new["kernel"] and row["status"] == "both"
        assert row["deltas"]["stage_us"]["delta"] == pytest.approx(new["stage_us"] - old[new["kernel"]]["stage_us"])
    totals = against["totals"]
    assert totals["batch_size"] == {"baseline": 16, "now": 64, "delta": 48, "relative": 3.0}
    latency = after["totals"]["latency_us"] - before["totals"]["latency_us"]
    assert totals["latency_us"]["delta"] == pytest.approx(latency)
    assert "offchip_bytes_by_tier.hbm" in totals  # nested totals by dotted name
    assert "against the baseline" in text and "stage_us per stage" in text
    assert 'id="baseline"' in (tmp_path / "r.html").read_text()


def test_a_run_against_itself_changes_nothing(cli, tmp_path, lenet):
    base = tmp_path / "b.json"
    _run(cli, "measure-performance", lenet, "--json", base)
    _run(cli, "measure-performance", lenet, "--baseline", base, "--json", tmp_path / "again.json")
    against = json.loads((tmp_path / "again.json").read_text())["baseline"]
    assert all(d["delta"] == 0 for d in against["totals"].values() if "delta" in d)
    assert all(d["delta"] == 0 for r in against["rows"] for d in r["deltas"].values())
    assert not against["only_in_this_run"] and not against["only_in_the_baseline"]


@pytest.mark.parametrize("command, content, message", [
    ("simulate", "rdu", "an `nnbridge measure-performance --json` report; `simulate --baseline` takes"),
    ("measure-performance", "smv", "an `nnbridge simulate --json` report; `measure-performance --baseline` takes"),
    ("simulate", '{"inputs": []}', "not an nnbridge run report"),
    ("simulate", '{"backend": "smv", "rows": [', "not a JSON file"),
    ("simulate", None, "cannot read it"),
    ("simulate", "other model", "a report of model 'minerva', this run is of 'lenet5'"),
    ("measure-performance", "no model", "names no model"),
    ("simulate", '{"backend": "smv", "model": "lenet5", "rows": [{"op": "Conv"}], "totals": {}}',
     "rows[0] has no 'name' naming its layer"),
])
def test_a_baseline_of_another_kind_or_model_is_refused_in_one_line_before_any_output(cli, tmp_path, lenet,
                                                                                       command, content, message):
    baseline = tmp_path / "baseline.json"
    if content == "rdu":
        _run(cli, "measure-performance", lenet, "--json", baseline)
    elif content == "smv":
        _run(cli, "simulate", lenet, "--perf-only", "--json", baseline)
    elif content == "other model":
        other = tmp_path / "minerva.onnx"
        onnx.save(zoo.build("minerva"), other)
        _run(cli, "simulate", other, "--perf-only", "--json", baseline)
    elif content == "no model":  # an estimate written before the JSON named its model
        _run(cli, "measure-performance", lenet, "--json", baseline)
        data = json.loads(baseline.read_text())
        del data["model"]
        baseline.write_text(json.dumps(data))
    elif content is not None:
        baseline.write_text(content)
    extra = ["--perf-only"] if command == "simulate" else []
    out = tmp_path / "out"
    code, text = cli(command, lenet, *extra, "--baseline", baseline, "--json", out / "r.json", "--html",
                     out / "r.html")
    assert code == 1 and message in text and text.strip().count("\n") == 0, text
    assert text.strip().startswith(f"error: --baseline {baseline}") and not out.exists()
