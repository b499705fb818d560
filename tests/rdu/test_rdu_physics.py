"""Physics as property tests over generated models and RDU machines (hypothesis, a fixed
derandomised budget): no estimate beats peak FLOPs or the off-chip bandwidth its weights need,
utilisations stay ≤ 100 %, and more batch never lowers throughput."""

from __future__ import annotations

import os

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

import nnbridge
from nnbridge.zoo import OnnxBuilder

#: 500 generated cases in make test; make bench runs more (NNBRIDGE_PROPERTY_CASES, bench/bench_physics.py)
CASES = settings(max_examples=int(os.environ.get("NNBRIDGE_PROPERTY_CASES", 500)), deadline=None, derandomize=True,
                 suppress_health_check=list(HealthCheck))


@st.composite
def models(draw):
    """A chain of 1–4 layers: linear layers (transformer-style) or convolutions."""
    b = OnnxBuilder("chain", seed=0)
    if draw(st.booleans()):
        width = draw(st.integers(8, 2048))
        x = b.input("x", [draw(st.integers(1, 8)), width])
        for i in range(draw(st.integers(1, 4))):
            out = draw(st.integers(8, 2048))
            x = b.op("Relu", [b.linear(x, width, out, hint=f"l{i}")])
            width = out
    else:
        c = draw(st.integers(1, 64))
        x = b.input("x", [1, c, draw(st.integers(4, 32)), draw(st.integers(4, 32))])
        for i in range(draw(st.integers(1, 4))):
            out = draw(st.integers(1, 128))
            x = b.op("Relu", [b.conv(x, c, out, draw(st.sampled_from([1, 3])), hint=f"c{i}")])
            c = out
    b.output(x)
    return b.model()


@st.composite
def machines(draw):
    """A preset, mode and batch; on SN40L sometimes an HBM too small for the weights, so they
    spill into DDR (the other presets have one tier, which holds whatever is left)."""
    cfg = {"preset": draw(st.sampled_from(["plasticine", "sn10", "sn40l"])),
           "mode": draw(st.sampled_from(["o0", "o1"])), "batch_size": draw(st.sampled_from([1, 2, 8, 64]))}
    if cfg["preset"] == "sn40l" and draw(st.booleans()):
        cfg["hbm_capacity_bytes"] = draw(st.sampled_from([10_000, 300_000, 3_000_000]))
        cfg["sram_bytes"] = draw(st.sampled_from([100_000, 1_000_000]))  # weights off chip
    return cfg


def value_of(machine, field: str) -> float:
    tiers = machine.tier_fields()
    if field in tiers:
        i, name = tiers[field]
        return getattr(machine.tiers[i], name)
    return getattr(machine, field)


@CASES
@given(models(), machines())
def test_estimates_respect_peak_compute_bandwidth_and_capacity(model, cfg):
    exe = nnbridge.compile(model, "rdu", **cfg)
    t, machine = exe.estimate.totals, exe.machine
    batch = cfg["batch_size"]
    assert 0 <= t["flops_utilization"] <= 1 + 1e-9 and 0 <= t["steady_flops_utilization"] <= 1 + 1e-9
    assert t["latency_us"] * 1e-6 >= batch * t["flop_per_sample"] / machine.peak_flops * (1 - 1e-9)
    assert 0 <= t["memory_utilization"] <= 1 + 1e-9
    streamed = [k for s in exe.sections for k in s.kernels if k.streamed_weights]
    assert t["weights_resident"] is False or not streamed
    streamed_bytes = sum(k.weight_bytes for k in streamed)  # read from off-chip at least once
    assert t["latency_us"] * 1e-6 >= streamed_bytes / max(x.bw_gbps for x in machine.tiers) / 1e9 * (1 - 1e-9)
    for tier in machine.tiers:  # every tier: time ≥ the bytes it delivers / its bandwidth
        assert t["latency_us"] * 1e-6 >= t["offchip_bytes_by_tier"][tier.name] / (tier.bw_gbps * 1e9) * (1 - 1e-9)
    for tier in machine.tiers[:-1]:  # weights live in a tier only up to its capacity
        assert t["weights_by_tier"][tier.name] <= tier.capacity_bytes
    assert sum(t["weights_by_tier"].values()) == sum(k.weight_bytes for s in exe.sections for k in s.kernels)


@CASES
@given(models(), machines())
def test_more_batch_never_lowers_throughput(model, cfg):
    exe = nnbridge.compile(model, "rdu", **cfg)
    one = exe.measure_performance(batch_size=cfg["batch_size"]).totals["throughput_samples_per_s"]
    more = exe.measure_performance(batch_size=cfg["batch_size"] * 4).totals["throughput_samples_per_s"]
    assert more >= one * (1 - 1e-9)


def _never_slower(model, cfg, field):
    base = nnbridge.compile(model, "rdu", **cfg)
    if field not in base.machine.tier_fields() and not hasattr(base.machine, field):
        return
    if field in base.machine.tier_fields() and field not in cfg and field.endswith("capacity_bytes"):
        return  # the preset's own capacity: nothing spills, doubling changes nothing
    bigger = nnbridge.compile(model, "rdu", **{**cfg, field: value_of(base.machine, field) * 2})
    assert bigger.estimate.totals["latency_us"] <= base.estimate.totals["latency_us"] * (1 + 1e-6), field


@pytest.mark.parametrize("field", [
    "n_pcu", "n_pmu", "sram_bytes", "clock_ghz", "pmu_bytes", "flop_per_pcu_per_cycle", "hbm_bw_gbps", "ddr_bw_gbps",
    "hbm_capacity_bytes", "link_gbps",
])
def test_a_bigger_or_faster_machine_is_never_slower(field):
    @CASES
    @given(models(), machines())
    def holds(model, cfg):
        _never_slower(model, cfg, field)

    holds()


def _chain(kind: str, shape: list[int], widths: list[int], k: int = 3):
    """A generated case of ``models()`` rebuilt by hand (for the regressions the longer run found)."""
    b = OnnxBuilder("chain", seed=0)
    x = b.input("x", shape)
    width = shape[1]
    for i, out in enumerate(widths):
        layer = b.linear(x, width, out, hint=f"l{i}") if kind == "linear" else \
            b.conv(x, width, out, 1 if i == 0 else k, hint=f"c{i}")
        x = b.op("Relu", [layer])
        width = out
    b.output(x)
    return b.model()


@pytest.mark.parametrize("model, cfg, field", [
    # the smaller machine's best plan was made for a quarter of its SRAM (weights streamed at batch 1)
    (_chain("linear", [1, 8], [82, 301, 245]),
     {"preset": "sn40l", "mode": "o1", "batch_size": 1, "hbm_capacity_bytes": 10_000, "sram_bytes": 100_000},
     "sram_bytes"),
    # with twice the DDR bandwidth the water-fill spent on the slowest stage PCUs that shortened the way
    (_chain("conv", [1, 1, 9, 14], [1, 97, 99, 59]), {"preset": "sn10", "mode": "o1", "batch_size": 2},
     "ddr_bw_gbps"),
])
def test_what_the_longer_run_found_stays_fixed(model, cfg, field):
    _never_slower(model, cfg, field)
