"""Where the time goes: Chrome traces of both simulators and the RDU roll-ups, checked against
the totals the simulators report (a trace that does not add up would mislead)."""

from __future__ import annotations

import json
from collections import defaultdict

import pytest
from browser import probe


def _tracks(trace: dict) -> dict[tuple[int, int], list[dict]]:
    tracks = defaultdict(list)
    for event in trace["traceEvents"]:
        assert event["ph"] in ("X", "M")
        if event["ph"] == "X":
            assert event["dur"] > 0 and event["ts"] >= 0
            tracks[(event["pid"], event["tid"])].append(event)
    for events in tracks.values():  # a resource does one thing at a time
        events.sort(key=lambda e: e["ts"])
        for a, b in zip(events, events[1:]):
            assert a["ts"] + a["dur"] <= b["ts"] + 1e-6 * max(1.0, b["ts"]), (a["name"], b["name"])
    return tracks


@pytest.mark.parametrize("accels", [1, 4])
def test_the_smv_trace_lays_every_layer_on_the_host_and_each_accelerator(cli, tmp_path, onnx_data, accels):
    path = tmp_path / "trace.json"
    code, text = cli("simulate", onnx_data / "light" / "light_resnet50.onnx", "--perf-only", "--accels", accels,
                     "--trace", path, "--json", tmp_path / "report.json")
    assert code == 0, text
    trace, report = json.loads(path.read_text()), json.loads((tmp_path / "report.json").read_text())
    tracks = _tracks(trace)
    names = {e["args"]["name"] for e in trace["traceEvents"] if e["name"] == "thread_name"}
    assert names == {"host CPU", *(f"accelerator {a}" for a in range(accels))}
    end = max(e["ts"] + e["dur"] for events in tracks.values() for e in events)
    assert end == pytest.approx(report["totals"]["latency_ms"] * 1e3, rel=1e-9)
    busy = sum(e["dur"] for e in tracks[(1, 0)]) + sum(e["dur"] for e in tracks[(1, 1)])
    assert busy == pytest.approx(end, rel=1e-9)  # the host and accelerator 0 together are the whole run


@pytest.mark.slow
def test_the_rdu_trace_and_roll_ups_add_up_to_the_batch_latency(cli, tmp_path, onnx_data):
    path = tmp_path / "trace.json"
    model = onnx_data / "light" / "light_resnet50.onnx"
    code, text = cli("measure-performance", model, "--batch-size", "8", "--trace", path, "--json", tmp_path / "e.json",
                     "--top", "5")  # one estimate for the trace, the totals and the table (3.5 CPU-s each)
    assert code == 0, text
    estimate = json.loads((tmp_path / "e.json").read_text())
    latency = estimate["totals"]["latency_us"]
    tracks = _tracks(json.loads(path.read_text()))
    assert sum(e["dur"] for e in tracks[(1, 0)]) == pytest.approx(latency, rel=1e-9)
    stage_tracks = [events for (pid, tid), events in tracks.items() if tid > 0]
    assert stage_tracks and all(e["ts"] + e["dur"] <= latency * (1 + 1e-9) for t in stage_tracks for e in t)
    assert sum(len(t) for t in stage_tracks) == len(estimate["stages"])  # every stage busy in its section
    for groups in estimate["rollups"].values():
        assert sum(g["us"] for g in groups) == pytest.approx(latency, rel=1e-3)
    slowest = max(s["stage_us"] for s in estimate["stages"])
    assert code == 0 and "the 5 slowest of" in text and f"{slowest:,.2f}" in text
    assert "batch latency by what bounds it" in text and "stage bound: compute" in text


def test_plots_stay_readable_at_any_size(tmp_path):
    """300 layers with long names: the top 25 and one bar for the rest, full names that neither
    overlap nor leave the picture, in a PNG of bounded size."""
    import matplotlib.pyplot as plt
    from PIL import Image

    from nnbridge.reporting.report import Report

    report = Report("smv", "ocr_detector")
    for i in range(300):
        report.add_row(name=f"backbone.stage{i // 50}.block{i % 50}.hardswish/Mul_{i}", op="Mul",
                       compute_us=float(i % 17), transfer_us=float(i % 5), cpu_us=float(i % 7))
    fig = report.figure(["compute_us", "transfer_us", "cpu_us"])
    fig.canvas.draw()
    renderer = fig.canvas.get_renderer()
    ax = fig.axes[0]
    labels = [t for t in ax.get_yticklabels() if t.get_text()]
    assert len(labels) == 26 and labels[-1].get_text().startswith("… 275 more: ")
    assert {t.get_text() for t in labels[:-1]} <= {r["name"] for r in report.rows}
    boxes = sorted((t.get_window_extent(renderer) for t in labels), key=lambda b: b.y0)
    assert all(a.y1 <= b.y0 for a, b in zip(boxes, boxes[1:]))  # no two labels overlap
    frame = fig.bbox
    assert all(b.x0 >= frame.x0 and b.x1 <= frame.x1 and b.y0 >= frame.y0 and b.y1 <= frame.y1 for b in boxes)
    plt.close(fig)
    report.plot(tmp_path / "layers.png", ["compute_us", "transfer_us", "cpu_us"])
    width, height = Image.open(tmp_path / "layers.png").size
    assert width <= 1400 and height <= 1200


def test_the_html_report_renders_in_headless_chromium_with_the_graph_coloured_by_time(cli, tmp_path, onnx_data,
                                                                                      chromium):
    """The page opens in a real browser: its script sorts the layer table, the graph has one box
    per node of the compiled graph (the slowest one red), and a screenshot is not blank."""
    import subprocess

    from PIL import Image

    page = tmp_path / "report.html"
    code, text = cli("simulate", onnx_data / "light" / "light_resnet50.onnx", "--perf-only", "--html", page,
                     "--json", tmp_path / "r.json")
    assert code == 0, text
    rows = json.loads((tmp_path / "r.json").read_text())["rows"]
    probe_out = probe(chromium, page, """
  var tables = document.querySelectorAll('table.sortable');
  var table = tables[tables.length - 1];
  var heads = Array.prototype.slice.call(table.tHead.rows[0].cells);
  var column = heads.findIndex(function (h) { return h.textContent === 'latency_us'; });
  heads[column].click();
  var values = Array.prototype.map.call(table.tBodies[0].rows, function (r) { return r.cells[column].textContent; });
  var reds = Array.prototype.filter.call(document.querySelectorAll('g.node rect'),
    function (r) { return r.getAttribute('fill') === 'rgb(255,0,0)'; }).length;
  window.probe = {values: values, nodes: document.querySelectorAll('g.node').length, reds: reds};
""", tmp_path)
    values = [float(v) for v in probe_out["values"]]
    assert len(values) == len(rows) and values == sorted(values)
    assert probe_out["nodes"] >= len(rows) and probe_out["reds"] >= 1
    shot = tmp_path / "shot.png"
    subprocess.run([chromium, "--headless", "--no-sandbox", "--disable-gpu", f"--screenshot={shot}",
                    "--window-size=1200,1600", page.as_uri()], capture_output=True, timeout=120, check=True)
    image = Image.open(shot).convert("L")
    assert image.size == (1200, 1600) and len(set(image.getdata())) > 50  # text, bars and tables, not a blank page


def test_measure_performance_writes_an_html_page_with_its_stages_and_graph(cli, tmp_path, onnx_data):
    page = tmp_path / "rdu.html"
    code, text = cli("measure-performance", onnx_data / "light" / "light_squeezenet.onnx", "--html", page,
                     "--json", tmp_path / "e.json")
    assert code == 0, text
    estimate, html = json.loads((tmp_path / "e.json").read_text()), page.read_text()
    assert html.count('<g class="node">') >= len(estimate["stages"])  # every op of every stage drawn
    assert 'fill="rgb(255,0,0)"' in html and "by_cause" not in html and "by cause" in html
    assert html.count("<tr>") >= len(estimate["stages"])


def test_rdu_bars_are_labelled_by_their_stage_and_section_in_the_page_and_the_plot(cli, tmp_path, onnx_data,
                                                                                   chromium):
    """The bars of measure-performance --html name each stage's kernel and its bound, as the
    slowest-stages table does (they read '0 (compute)', '1 (compute)': the row's rank); --plot's
    bars name each section and its slowest stage. Read from the page in a browser and from the SVG."""
    import xml.etree.ElementTree as ET

    page, plot = tmp_path / "rdu.html", tmp_path / "sections.svg"
    code, text = cli("measure-performance", onnx_data / "light" / "light_squeezenet.onnx", "--batch-size", "4",
                     "--html", page, "--plot", plot, "--json", tmp_path / "e.json")
    assert code == 0, text
    estimate = json.loads((tmp_path / "e.json").read_text())
    labels = probe(chromium, page, """
  var chart = document.querySelector('figure[aria-label="where the time goes"] svg');
  window.probe = Array.prototype.map.call(chart.querySelectorAll('text'), function (t) { return t.textContent; });
""", tmp_path)
    stages = sorted(estimate["stages"], key=lambda s: -s["stage_us"])
    assert len(stages) > 25  # the top 25 are drawn and the rest summed in one bar
    expected = [f"{s['kernel']} ({s['bottleneck']})" for s in stages[:25]]
    drawn = [t for t in labels if t in expected]
    assert sorted(drawn) == sorted(expected), labels
    assert not [t for t in labels if t.split(" ")[0].isdigit()]  # no bar named by its rank
    assert any(t.startswith(f"… {len(stages) - 25} more: ") for t in labels)
    texts = [t.text for t in ET.parse(plot).iter("{http://www.w3.org/2000/svg}text")]
    sections = [f"section {s['index']} ({s['bottleneck']})" for s in estimate["sections"]]
    assert set(sections) <= set(texts), texts


def test_a_plot_refuses_to_label_bars_by_a_column_its_rows_do_not_have():
    from nnbridge.reporting.report import Report

    report = Report("rdu", "m")
    report.add_row(kernel="k0", stage_us=1.0)
    with pytest.raises(ValueError, match="1 of 1 rows have no 'name' column"):
        report.figure(["stage_us"])
