"""SMV configuration (defaults with provenance, TOML, --set) and the command line."""

from __future__ import annotations

import json

import onnx
import pytest

import nnbridge
from nnbridge.backends.smv import MemPolicy, SmvConfig, make_config
from nnbridge.base.errors import InputError
from nnbridge.zoo import build


def test_every_setting_has_provenance_and_spec_values():
    cfg = SmvConfig()
    assert all(prov and doc for _, _, prov, doc in cfg.describe())
    assert (cfg.num_pes, cfg.maccs_per_pe, cfg.vector_width, cfg.max_tile_elems, cfg.dma_setup_cycles,
            cfg.page_bytes, cfg.cacheline_bytes, cfg.clock_ghz) == (8, 32, 8, 16384, 100, 4096, 32, 1.0)


def test_toml_file_and_overrides(tmp_path):
    path = tmp_path / "smv.toml"
    path.write_text('[smv]\nnum_accels = 4\nmem_policy = "acp"\ndma_setup_cycles = 50\n')
    cfg = make_config(str(path), accels=2, set={"tiling_threads": "8"})
    assert (cfg.num_accels, cfg.mem_policy, cfg.dma_setup_cycles, cfg.tiling_threads) == (2, MemPolicy.ACP, 50, 8)
    assert SmvConfig.from_toml(path).num_accels == 4


@pytest.mark.parametrize("bad, message", [({"no_such": 1}, "no setting"), ({"num_accels": "nine"}, "expected int"),
                                          ({"num_accels": 9}, "between 1 and 8"),
                                          ({"mem_policy": "sram"}, "one of dma"),
                                          ({"clock_ghz": "0"}, "clock_ghz=0.0: must be a finite number > 0"),
                                          ({"dram_gbps": "-1"}, "dram_gbps"), ({"num_pes": "0"}, "num_pes"),
                                          ({"memcpy_gbps": "inf"}, "finite"), ({"flush_ns_per_line": "-1"}, ">= 0"),
                                          ({"spad_bytes": "64"}, "at least 1024 bytes")])
def test_bad_settings_are_clear_errors(bad, message):
    with pytest.raises(InputError, match=message):
        SmvConfig().with_overrides(bad)


def test_bad_toml_is_a_clear_error(tmp_path):
    path = tmp_path / "bad.toml"
    path.write_text("num_accels = [")
    with pytest.raises(InputError, match="not valid TOML"):
        SmvConfig.from_toml(path)


def test_setting_changes_the_simulation():
    model = build("lenet5")
    base = nnbridge.compile(model, backend="smv", perf_only=True).report.totals["accel_cycles"]
    slower = nnbridge.compile(model, backend="smv", perf_only=True, set={"dma_setup_cycles": "400"})
    assert slower.report.totals["accel_cycles"] > base



def test_simulate_writes_table_json_and_plot(tmp_path, shared_data, cli):
    topo = shared_data / "smaug" / "lenet5" / "lenet5_smv_topo.pbtxt"
    code, text = cli("simulate", topo, "--json", tmp_path / "r.json", "--plot", tmp_path / "r.png",
                      "--accels", "2", "--mem-policy", "acp")
    assert code == 0 and "smv report: lenet5_smv" in text and "invocations: 55" in text
    data = json.loads((tmp_path / "r.json").read_text())
    assert data["totals"]["invocations"] == 55 and data["totals"]["accels"] == 2
    assert data["totals"]["mem_policy"] == "acp"
    assert {"compute_us", "transfer_us", "cpu_us", "accel_cycles", "dram_kb", "tiles"} <= set(data["rows"][0])
    assert (tmp_path / "r.png").read_bytes()[:4] == b"\x89PNG"


def test_simulate_perf_only_and_show_config(shared_data, cli):
    topo = shared_data / "smaug" / "imagenet-resnet" / "resnet_smv_topo.pbtxt"
    code, text = cli("simulate", topo, "--perf-only", "--show-config", "--top", "5", "--set",
                      "tiling_threads=8")
    assert code == 0 and "provenance" in text and "latency_ms" in text


def test_simulate_bad_setting_is_one_line_error(shared_data, cli):
    topo = shared_data / "smaug" / "minerva" / "minerva_smv_topo.pbtxt"
    code, text = cli("simulate", topo, "--set", "num_accels=12")
    assert code == 1 and "between 1 and 8" in text and "Traceback" not in text


def test_run_and_check_through_the_generic_backend_interface(tmp_path, cli):
    path = tmp_path / "cnn10.onnx"
    onnx.save(build("cnn10"), path)
    code, text = cli("run", path, "--backend", "smv", "--profile")
    assert code == 0 and "smv report" in text and "invocations: 154" in text
    code, text = cli("check", path, "--backend", "smv")
    assert code == 0 and "agree" in text


def test_unsupported_ops_are_listed_together():
    from onnx import TensorProto, helper

    nodes = [helper.make_node("Foo", ["x"], ["a"], domain="x.y"), helper.make_node("Bar", ["a"], ["b"], domain="x.y")]
    graph = helper.make_graph(nodes, "g", [helper.make_tensor_value_info("x", TensorProto.FLOAT, [1, 8])],
                              [helper.make_tensor_value_info("b", TensorProto.FLOAT, [1, 8])])
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17), helper.make_opsetid("x.y", 1)])
    with pytest.raises(nnbridge.UnsupportedOpError) as err:
        nnbridge.compile(model, backend="smv")
    assert "Foo" in str(err.value) and "Bar" in str(err.value)


def test_cpu_fallback_and_nchw_reorders_are_reported():
    """Ops SMV lacks run on the CPU with the reason; an NCHW graph pays CPU reorders around NHWC kernels."""
    model = build("transformer_tiny")
    rows = nnbridge.compile(model, backend="smv", perf_only=True).report.rows
    cpu = [r for r in rows if r["where"] == "cpu"]
    assert {"LayerNormalization", "Gelu"} <= {r["op"] for r in cpu} and all(r.get("note") for r in cpu)
    assert all(r["cpu_us"] > 0 and r["invocations"] == 0 for r in cpu)
    cnn = build("cnn10")
    nchw = nnbridge.compile(cnn, backend="smv", perf_only=True, passes=[]).report.totals
    nhwc = nnbridge.compile(cnn, backend="smv", perf_only=True).report.totals
    assert nchw["invocations"] == nhwc["invocations"] and nchw["cpu_pct"] > nhwc["cpu_pct"]


def test_config_object_and_report_available_before_run():
    exe = nnbridge.compile(build("mlp"), backend="smv", config=SmvConfig(num_accels=2, mem_policy=MemPolicy.ACP))
    assert exe.report.totals["accels"] == 2 and exe.report.totals["mem_policy"] == "acp"
    assert "energy" in exe.report.notes[0]


def test_simulate_prints_the_top_layers_and_roll_ups_that_add_up_to_the_total(tmp_path, cli):
    """On a ~300-layer model: the 10 most expensive layers, the rest summed, and the time by op
    type and by where it runs (accelerator, or the CPU and why) — each adding up to the total."""
    import json

    import onnx

    from nnbridge.zoo.generated import generated_model

    onnx.save(generated_model(300), tmp_path / "big.onnx")
    code, text = cli("simulate", tmp_path / "big.onnx", "--perf-only", "--top", "10", "--json", tmp_path / "r.json")
    assert code == 0 and "the 10 layers with the most latency time" in text and "more layers:" in text
    assert "latency by op type" in text and "latency by where it runs" in text and "CPU: " in text
    report = json.loads((tmp_path / "r.json").read_text())
    assert len(report["rows"]) >= 250
    total_us = report["totals"]["latency_ms"] * 1e3
    for groups in report["rollups"].values():
        assert abs(sum(g["latency_us"] for g in groups) - total_us) <= 1e-3 * total_us
    latencies = sorted((r["latency_us"] for r in report["rows"]), reverse=True)
    top_text = text[:text.index("more layers:")]
    assert f"{latencies[0]:.4g}"[:4] in top_text  # the most expensive layer is in the top table


def test_simulate_json_dash_is_standard_output_not_a_file(tmp_path, cli, monkeypatch):
    import json

    import onnx

    from nnbridge.zoo import build

    onnx.save(build("lenet5"), tmp_path / "lenet5.onnx")
    monkeypatch.chdir(tmp_path)
    code, text = cli("simulate", "lenet5.onnx", "--perf-only", "--json", "-")
    assert code == 0 and not (tmp_path / "-").exists()
    report = json.loads(text)
    assert report["rollups"]["by_op"] and report["totals"]["latency_ms"] > 0
