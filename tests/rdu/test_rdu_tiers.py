"""Off-chip memory by capacity: weights live in HBM until it is full, then in DDR, and each byte
is read at the bandwidth of the tier that holds it; every tier is settable with ``--set``."""

from __future__ import annotations

import pytest

import nnbridge
from nnbridge.base.errors import InputError
from nnbridge.zoo import OnnxBuilder


def mlp(layers: int = 4, width: int = 1024):
    b = OnnxBuilder("mlp", seed=0)
    x = b.input("x", [1, width])
    for i in range(layers):
        x = b.op("Relu", [b.linear(x, width, width, hint=f"l{i}")])
    b.output(x)
    return b.model()


def estimate(model, **overrides):
    # 0.5 MB of SRAM: every layer's 2 MB (bf16) of weights is read from off chip
    return nnbridge.compile(model, "rdu", preset="sn40l", sram_bytes=500_000, **overrides).estimate.totals


def test_weights_fill_hbm_then_ddr_and_are_read_at_each_tiers_bandwidth():
    model = mlp()
    roomy = estimate(model)
    assert roomy["weights_by_tier"] == {"hbm": pytest.approx(4 * 2 * 1024 * 1025, rel=0.01), "ddr": 0}
    cramped = estimate(model, hbm_capacity_bytes=5_000_000)  # 5 MB in HBM (less the input and output)
    assert 4_990_000 < cramped["weights_by_tier"]["hbm"] < 5_000_000 and cramped["weights_by_tier"]["ddr"] > 3_000_000
    assert cramped["latency_us"] > 5 * roomy["latency_us"]  # DDR is 16× slower than HBM
    assert cramped["offchip_bytes_by_tier"]["ddr"] == cramped["weights_by_tier"]["ddr"]  # read once per call
    ddr_floor = cramped["offchip_bytes_by_tier"]["ddr"] / 100e9  # the SN40L preset's DDR: 100 GB/s
    assert cramped["latency_us"] * 1e-6 >= ddr_floor
    faster = estimate(model, hbm_capacity_bytes=5_000_000, ddr_bw_gbps=400)
    assert faster["latency_us"] < cramped["latency_us"]


def test_tiers_are_set_like_any_machine_field_and_bad_values_are_one_line(cli, tmp_path):
    import onnx

    path = tmp_path / "mlp.onnx"
    onnx.save(mlp(2, 256), path)
    code, text = cli("measure-performance", path, "--preset", "sn40l", "--set", "hbm_bw_gbps=800",
                     "--set", "hbm_capacity_bytes=1e5", "--json", "-")
    assert code == 0, text
    for bad, message in (("hbm_bw_gbps=-1", "hbm_bw_gbps > 0"), ("tape_bw_gbps=1", "has no setting 'tape_bw_gbps'"),
                         ("hbm_capacity_bytes=nan", "must be an integer"), ("sram_bytes=-5", "sram_bytes must be > 0")):
        code, text = cli("measure-performance", path, "--set", bad)
        assert code != 0 and message in text and len(text.strip().splitlines()) == 1, text
    with pytest.raises(InputError, match="hbm_bw_gbps"):
        nnbridge.compile(mlp(1, 64), "rdu", preset="sn40l", hbm_bw_gbps=0)


def test_a_toml_file_sets_the_machine_and_set_overrides_it(cli, tmp_path):
    import json

    import onnx

    path = tmp_path / "mlp.onnx"
    onnx.save(mlp(), path)
    machine = tmp_path / "machine.toml"
    machine.write_text("[rdu]\nhbm_capacity_bytes = 5e6\nsram_bytes = 500_000\n")
    code, text = cli("measure-performance", path, "--config", machine, "--json", "-")
    assert code == 0, text
    from_file = json.loads(text)["totals"]
    assert from_file["latency_us"] == pytest.approx(estimate(mlp(), hbm_capacity_bytes=5_000_000)["latency_us"])
    code, text = cli("measure-performance", path, "--config", machine, "--set", "hbm_capacity_bytes=1e9",
                     "--json", "-")
    assert json.loads(text)["totals"]["weights_by_tier"]["ddr"] == 0  # --set wins
    for content, message in (("[rdu]\nsram_bytes = [1, 2]\n", "must be an integer or none"),
                             ("[rdu\n", "not valid TOML"), ("rdu = 3\n", "must be a table")):
        machine.write_text(content)
        code, text = cli("measure-performance", path, "--config", machine)
        assert code != 0 and message in text and len(text.strip().splitlines()) == 1, text
