"""Physics as property tests over generated graph families (tests/graph_families.py: MLP, conv,
residual, attention, decoder with a KV cache, recurrent) on generated SMV configurations
(hypothesis, a fixed derandomised budget): an invocation never beats the PE array's peak, a
network never beats DRAM or the accelerators' peak, utilisation stays ≤ 100 %, twice the batch
never lowers throughput, and a bigger or faster machine (one more accelerator, twice the PEs,
MACs, DRAM bandwidth, clock or vector width) is never slower. Each case judges every property;
the test counts the cases per property and fails when one got fewer than the budget
(tests/physics_cases.py)."""

from __future__ import annotations

import dataclasses
import functools

import pytest
from hypothesis import strategies as st

import nnbridge
from nnbridge.backends.smv.cost.compute import compute_cycles
from nnbridge.base.errors import UnsupportedOpError
from nnbridge.zoo import OnnxBuilder
from tests.graph_families import FAMILIES, drawings, graph_of
from tests.physics_cases import assert_every_property_judged, tally

configs = st.fixed_dictionaries({
    "num_pes": st.sampled_from([1, 2, 4, 8, 16, 32]), "maccs_per_pe": st.sampled_from([4, 8, 16, 32, 64]),
    "vector_width": st.sampled_from([4, 8, 16]),
    "num_accels": st.integers(1, 8), "dram_gbps": st.floats(0.05, 200.0), "clock_ghz": st.floats(0.2, 3.0),
})

#: the settings a bigger or faster value of which must never be slower: one more accelerator,
#: twice the others
FIELDS = ("num_accels", "num_pes", "maccs_per_pe", "dram_gbps", "clock_ghz", "vector_width")


def simulate(model, cfg: dict):
    return nnbridge.compile(model, "smv", perf_only=True, **cfg)


@functools.lru_cache(maxsize=512)
def _simulated(drawing: tuple, cfg: tuple):
    """One drawing simulated on one configuration, once; None when SMAUG's tiler cannot split one
    of its layers for it (no tile fits the scratchpads: tests/smaug checks those refusals against
    the real runtime), which is no case of these properties."""
    try:
        return simulate(graph_of(*drawing), dict(cfg))
    except UnsupportedOpError:
        return None


def simulated(drawing: tuple, cfg: dict):
    return _simulated(drawing, tuple(sorted(cfg.items())))


def grown(cfg: dict, field: str) -> dict:
    return {**cfg, field: min(8, cfg[field] + 1) if field == "num_accels" else cfg[field] * 2}


#: the bounds every simulation keeps (``bounds_violated``)
BOUNDS = ("invocation cycles >= MACs / PE array peak", "time >= DRAM bytes / bandwidth",
          "time >= MACs / peak of every accelerator", "utilisation in [0, 100] %")


def bounds_violated(exe, cfg: dict) -> list[str]:
    """The physical bounds a simulation breaks: no invocation beats the PE array's peak, the
    network never beats DRAM nor every accelerator's peak MACs, utilisation in [0, 100] %."""
    broken = []
    peak = cfg["num_pes"] * cfg["maccs_per_pe"]
    macs = 0
    for plans in exe.plans:
        for plan in plans:
            macs += plan.calls * sum(inv.macs for inv in plan.invocations)
            if any(compute_cycles(plan.family, inv, exe.config) < inv.macs / peak - 1e-9 for inv in plan.invocations):
                broken.append("invocation cycles >= MACs / PE array peak")
    totals = exe.report.totals
    if totals["latency_ms"] * 1e6 < totals["dram_mb"] * 2**20 / cfg["dram_gbps"] * (1 - 1e-9):
        broken.append("time >= DRAM bytes / bandwidth")
    if totals["latency_ms"] * 1e6 < macs / (peak * cfg["num_accels"] * cfg["clock_ghz"]) * (1 - 1e-9):
        broken.append("time >= MACs / peak of every accelerator")
    utils = [totals.get("macc_util_pct", 0)] + [row.get("macc_util_%") or 0 for row in exe.report.rows]
    if not all(0 <= u <= 100 + 1e-9 for u in utils):
        broken.append("utilisation in [0, 100] %")
    return broken


def judge(drawing: tuple, cfg: dict) -> dict[str, bool] | None:
    """Every property on one case (a drawn graph on a drawn configuration), by name: the bounds
    of the simulation and of each bigger machine's, twice the batch never lowering throughput, and
    each setting grown never slower; None when SMAUG cannot tile the graph, at its batch or twice
    it, for the configuration (so every property is judged on every case). The test asserts them
    all; bench/bench_physics.py counts violations."""
    base = simulated(drawing, cfg)
    batch = drawing[1][0]
    twice = simulated((drawing[0], (2 * batch, *drawing[1][1:])), cfg)
    if base is None or twice is None:
        return None
    latency = base.report.totals["latency_ms"]
    broken = bounds_violated(base, cfg)
    verdicts = {"2x batch never lowers throughput":
                2 * batch / twice.report.totals["latency_ms"] >= batch / latency * (1 - 1e-9)}
    for field in FIELDS:
        more = grown(cfg, field)
        other = simulated(drawing, more)  # a bigger machine tiles whatever the smaller one did
        broken += bounds_violated(other, more)
        name = "one more accelerator never slower" if field == "num_accels" else f"2x {field} never slower"
        verdicts[name] = other.report.totals["latency_ms"] <= latency * (1 + 1e-9)
    return {**{f"bounds: {name}": name not in broken for name in BOUNDS}, **verdicts}


CASE_GRAPHS = st.sampled_from(FAMILIES).flatmap(lambda family: drawings(family, batches=(1, 2), big=False))


@pytest.mark.slow  # 500 cases a property: ~20 CPU-s (make test runs it)
def test_every_family_obeys_physics_on_every_configuration():
    assert_every_property_judged(tally(CASE_GRAPHS, configs, judge), "SMV")


def _three_convs(channels: tuple[int, ...], image: int, kernels: tuple[int, ...], strides: tuple[int, ...] = (1, 1, 1)):
    b = OnnxBuilder("convs", seed=0)
    x = b.input("x", [1, channels[0], image, image])
    for i, (k, s) in enumerate(zip(kernels, strides)):
        x = b.op("Relu", [b.conv(x, channels[i], channels[i + 1], k, stride=s, hint=f"c{i}")])
    b.output(x)
    return b.model()


@pytest.mark.parametrize(("channels", "image", "kernels", "strides", "machine"), [
    # issue 35's case rebuilt: on the issue's code (6cc4508) 4 accelerators were +6.39 % slower than 3 at
    # default settings with +40.9 % DRAM bytes (the issue: +6.2 %, 41 %), +40.5 % at 0.1 GB/s (the issue:
    # up to +40 %); SMAUG's schedule gives the same numbers today
    ((108, 36, 62, 52), 32, (3, 1, 5), (2, 1, 2), {}),
    ((108, 36, 62, 52), 32, (3, 1, 5), (2, 1, 2), {"dram_gbps": 0.1}),
    ((25, 39, 37, 64), 24, (3, 5, 1), (1, 1, 1), {}),  # default settings: +0.37 % with SMAUG's schedule
    ((24, 128, 25, 24), 8, (3, 3, 5), (1, 1, 1), {"dram_gbps": 1.6}),  # low DRAM bandwidth: +1.36 %
])
def test_one_more_accelerator_is_never_slower(channels, image, kernels, strides, machine):
    """Issue #35 item 3: dealing every conv over all the accelerators (SMAUG's runtime,
    ``smaug_schedule``) changes which tiles each accelerator keeps and moves more DRAM bytes than
    the extra accelerator saves; the compiler keeps the best count of accelerators per operator.
    (Random 3-conv nets on the issue's code and on today's, docs/smv.md.)"""
    model = _three_convs(channels, image, kernels, strides)
    ours = {n: simulate(model, {**machine, "num_accels": n}).report.totals["latency_ms"] for n in range(1, 9)}
    assert all(ours[n + 1] <= ours[n] * (1 + 1e-12) for n in range(1, 8)), ours
    smaug = {n: simulate(model, {**machine, "num_accels": n, "smaug_schedule": True}).report.totals["latency_ms"]
             for n in (3, 4)}
    assert smaug[4] > smaug[3]  # SMAUG's own schedule: 4 accelerators slower than 3
    assert ours[4] < smaug[4]


#: the first case bench_physics found where SMAUG's whole-batch tiling lowers throughput at twice
#: the batch (4 of 2,997 cases, make bench of 2026-11-28): a 6→91→2→61→51-channel 3×3 conv stack
SMAUG_CUTS_IT_WORSE = ("conv", (1, (6, 91, 2, 61, 51), 15, (3, 3, 3, 3), (1, 1, 1, 1), False, False))
SMAUG_CUTS_IT_WORSE_ON = {"vector_width": 4, "dram_gbps": 9.52485055863321, "num_pes": 8,
                          "clock_ghz": 2.2196885453960733, "num_accels": 2, "maccs_per_pe": 4}


def _at_batch(batch: int, **settings):
    drawing = (SMAUG_CUTS_IT_WORSE[0], (batch, *SMAUG_CUTS_IT_WORSE[1][1:]))
    return simulate(graph_of(*drawing), {**SMAUG_CUTS_IT_WORSE_ON, **settings})


def test_twice_the_batch_runs_as_sub_batches_where_smaug_cuts_it_worse():
    """SMAUG's tiler cuts the second conv (91→2) of two samples into other channel tiles than of
    one, and its tiling copies take 2.5× as long; the compiler runs that conv (and any other
    operator where it is faster) as two one-sample calls, so the throughput does not drop (it
    dropped 0.75 % while sub-batches had to keep SMAUG's whole-batch channel tiles), and the
    report says so."""
    assert judge(SMAUG_CUTS_IT_WORSE, SMAUG_CUTS_IT_WORSE_ON)["2x batch never lowers throughput"]
    one, two = _at_batch(1), _at_batch(2)
    rows = {row["name"]: row for row in two.report.rows}
    assert rows["c1"]["calls"] == 2 and rows["c1"]["tiles"].startswith("2 calls of 1x15x15x64 ")
    assert two.report.totals["latency_ms"] <= 2 * one.report.totals["latency_ms"]
    # its values are not SMAUG's whole batch's (other channel tiles), and the report says so
    assert any("c1 (2 calls of 1 sample)" in note for note in two.report.notes)


def test_smaug_schedule_keeps_smaugs_whole_batch_tiling_and_its_slower_figure():
    """``smaug_schedule`` runs every operator on its whole batch with SMAUG's tiles: the second
    conv's tiling copies take 427 µs at batch 2 against 171 µs at batch 1 (docs/smv.md), and
    twice the batch lowers the throughput."""
    one, two = _at_batch(1, smaug_schedule=True), _at_batch(2, smaug_schedule=True)
    assert all(plan.calls == 1 for plans in two.plans for plan in plans)
    assert [[p.tiles for p in step.plans] for step in two.steps] == [[p.tiles for p in plans] for plans in two.plans]
    tiling = {batch: {row["name"]: row["tiling_us"] for row in exe.report.rows} for batch, exe in ((1, one), (2, two))}
    assert (round(tiling[1]["c1"]), round(tiling[2]["c1"])) == (171, 427)
    assert 2 / two.report.totals["latency_ms"] < 1 / one.report.totals["latency_ms"]
    assert not any("calls" in note for note in two.report.notes)


def test_pes_and_maccs_change_compute_as_the_array_would():
    """A 64→64-channel 3×3 conv, which SMAUG's tiler splits into 24 + 24 + 16 output channels:
    8 PEs × 32 MACs is the spec's array (3 + 3 + 2 blocks of output channels); 16 PEs need
    2 + 2 + 1 (5/8 of the cycles); 4 MACs per PE take 16 reduction steps for 64 channels, not 2."""
    b = OnnxBuilder("conv", seed=0)
    b.output(b.conv(b.input("x", [1, 64, 8, 8]), 64, 64, 3, bias=False))
    compute = {s: simulate(b.model(), {"num_pes": s[0], "maccs_per_pe": s[1]}).costs
               for s in ((8, 32), (16, 32), (8, 4))}
    array = {s: sum(c.compute_cycles - c.convert_cycles for c in costs) for s, costs in compute.items()}
    assert array[(16, 32)] == pytest.approx(array[(8, 32)] * 5 / 8)
    assert array[(8, 4)] == pytest.approx(array[(8, 32)] * 8)
    conversions = {s: sum(c.convert_cycles for c in costs) for s, costs in compute.items()}
    assert conversions[(8, 32)] > 0 and len(set(conversions.values())) == 1  # the fp16 loads do not use the array


def test_the_vector_width_sets_pool_bn_and_eltwise_cycles():
    """Pooling, batch norm and elementwise ops issue one ``vector_width``-wide op per cycle: twice
    the lanes, half the vector cycles (64 channels, a multiple of both widths); every config field
    is used (num_spads and cpu_ghz, which nothing read, are gone)."""
    b = OnnxBuilder("vector", seed=0)
    x = b.input("x", [1, 64, 16, 16])
    pooled = b.op("MaxPool", [b.op("Relu", [x])], kernel_shape=[2, 2], strides=[2, 2])
    b.output(b.op("Add", [pooled, pooled]))
    cycles = {w: sum(c.compute_cycles for c in simulate(b.model(), {"vector_width": w}).costs) for w in (8, 16)}
    assert cycles[8] > 0 and cycles[16] == pytest.approx(cycles[8] / 2)
    from nnbridge.backends.smv.config import SmvConfig

    assert not {"num_spads", "cpu_ghz"} & {f.name for f in dataclasses.fields(SmvConfig)}


def test_dram_bandwidth_binds_a_single_accelerator():
    b = OnnxBuilder("fc", seed=0)
    b.output(b.dense(b.input("x", [1, 1024]), 1024, 1024))
    slow = simulate(b.model(), {"dram_gbps": 0.1}).report.totals
    assert slow["latency_ms"] * 1e6 >= slow["dram_mb"] * 2**20 / 0.1
    assert dataclasses.is_dataclass(simulate(b.model(), {}).config)
