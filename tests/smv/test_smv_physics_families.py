"""Physics of whole networks on SMV, as property tests over generated graph families
(tests/graph_families.py: MLP, conv, residual, attention, decoder with a KV cache, recurrent) on
generated SMV configurations (hypothesis, derandomised): no network beats DRAM or the PE arrays,
utilisation stays ≤ 100 %, one more accelerator or a bigger or faster array or DRAM is never
slower, and a larger batch never lowers throughput. test_smv_physics.py does the same per layer."""

from __future__ import annotations

import os

from hypothesis import HealthCheck, given, reject, settings
from hypothesis import strategies as st

import nnbridge
from nnbridge.base.errors import UnsupportedOpError
from tests.graph_families import FAMILIES, batched, drawings

#: 500 generated cases in make test; make bench runs more (NNBRIDGE_PROPERTY_CASES, bench/bench_physics.py)
CASES = settings(max_examples=int(os.environ.get("NNBRIDGE_PROPERTY_CASES", 500)), deadline=None, derandomize=True,
                 suppress_health_check=list(HealthCheck))

#: graphs small enough that a case costs milliseconds (every family, batches 1 and 2)
NETWORKS = st.sampled_from(FAMILIES).flatmap(lambda family: drawings(family, batches=(1, 2), big=False))

CONFIGS = st.fixed_dictionaries({
    "num_pes": st.sampled_from([1, 2, 4, 8, 16]), "maccs_per_pe": st.sampled_from([4, 8, 32]),
    "vector_width": st.sampled_from([4, 8, 16]), "num_accels": st.integers(1, 8),
    "dram_gbps": st.sampled_from([0.5, 2.0, 6.4, 25.6, 100.0]), "clock_ghz": st.sampled_from([0.5, 1.0, 2.5]),
})

#: a bigger or faster machine, from a setting: one more accelerator (SMAUG's maximum is 8), or twice the rest
BIGGER = {"num_accels": lambda n: min(8, n + 1), "num_pes": lambda n: 2 * n, "maccs_per_pe": lambda n: 2 * n,
          "vector_width": lambda n: 2 * n, "dram_gbps": lambda x: 2 * x, "clock_ghz": lambda x: 2 * x}


def simulate(drawing: tuple, cfg: dict, batch: int | None = None):
    """The timing-only simulation of a drawn network (at another ``batch``, if given); a network
    SMAUG's tiler cannot split for this configuration (no tile fits; tests/smaug checks those
    refusals against the real runtime) is not a case."""
    family, params = drawing
    try:
        return nnbridge.compile(batched(family, params, batch or params[0]), "smv", perf_only=True, **cfg)
    except UnsupportedOpError:
        reject()


def latency_ns(exe) -> float:
    return exe.report.totals["latency_ms"] * 1e6


@CASES
@given(NETWORKS, CONFIGS)
def test_no_network_beats_dram_or_the_pe_arrays_and_utilisation_stays_within_100_percent(drawing, cfg):
    exe = simulate(drawing, cfg)
    totals, config = exe.report.totals, exe.config
    assert latency_ns(exe) >= totals["dram_mb"] * 2**20 / config.dram_gbps * (1 - 1e-9)
    macs = sum(cost.macs for cost in exe.costs)  # the accelerators' (CPU fallbacks count none)
    assert latency_ns(exe) >= macs / (config.peak_maccs * config.clock_ghz * config.num_accels) * (1 - 1e-9)
    assert 0 <= totals.get("macc_util_pct", 0) <= 100 + 1e-9
    assert all(0 <= (row.get("macc_util_%") or 0) <= 100 + 1e-9 for row in exe.report.rows)
    assert all(row.get("accels", 1) <= config.num_accels for row in exe.report.rows)


@CASES
@given(NETWORKS, CONFIGS, st.sampled_from(sorted(BIGGER)))
def test_one_more_accelerator_or_a_bigger_or_faster_machine_is_never_slower(drawing, cfg, field):
    before = latency_ns(simulate(drawing, cfg))
    after = latency_ns(simulate(drawing, {**cfg, field: BIGGER[field](cfg[field])}))  # a bigger one runs it too
    assert after <= before * (1 + 1e-9), (field, before, after)


@CASES
@given(NETWORKS, CONFIGS)
def test_twice_the_batch_never_lowers_throughput(drawing, cfg):
    batch = drawing[1][0]
    one = batch / latency_ns(simulate(drawing, cfg))
    more = 2 * batch / latency_ns(simulate(drawing, cfg, 2 * batch))
    assert more >= one * (1 - 1e-9), (one, more)
