"""LLM serving on the RDU model, judged outside nnbridge: the zoo's Llama 3.1 configurations have
exactly Meta's parameter counts and the bytes per token the Kernel Looping paper tabulates; every
decode estimate (8B, 70B, 405B on 1, 8 and 16 SN40L sockets) stays under the capacity-aware
roofline computed from the configuration and the preset alone (tests/rdu/llm_roofline.py); one
socket's 70B and 405B read most weights from DDR and are bounded by it; compute-heavy work at
large batch reaches half the peak."""

from __future__ import annotations

import functools
import json

import numpy as np
import pytest
from llm_roofline import KERNEL_LOOPING_8B, decode_roofline

import nnbridge
from nnbridge.backends.rdu.presets import SN40L
from nnbridge.base.errors import InputError
from nnbridge.zoo import bert_base
from nnbridge.zoo.llm import LLAMA_3_1, llama_config, llama_graph

#: Meta's model cards (config.json): parameters including the input embedding table
META_PARAMETERS = {"8b": 8_030_261_248, "70b": 70_553_706_496, "405b": 405_853_388_800}
GIB = 2**30


@functools.cache
def decode_totals(size: str, sockets: int = 1) -> dict:
    """The SN40L decode estimate of one step at context 4096, compiled once per session (several
    tests judge the same one)."""
    return nnbridge.compile(llama_graph(LLAMA_3_1[size], sockets=sockets, context=4096), "rdu",
                            preset="sn40l").estimate.totals


@pytest.mark.parametrize("size", sorted(META_PARAMETERS))
def test_the_configurations_have_metas_parameter_counts(size):
    config = LLAMA_3_1[size]
    assert config.parameters + config.vocab * config.hidden == META_PARAMETERS[size]
    graph = llama_graph(config)  # weights as shapes: zero-stride views, so 405B holds no weight memory
    weights = [a for a in graph.initializers.values() if a.dtype == np.float32]
    assert sum(a.size for a in weights) == config.parameters
    assert all(a.strides == (0,) * a.ndim for a in weights)


@pytest.mark.slow
def test_8b_decode_reads_what_the_kernel_looping_paper_tabulates():
    config = llama_config("llama-3.1-8b")
    read = decode_totals("8b")["offchip_bytes_by_tier"]["hbm"]
    embedding = config.vocab * config.hidden * 2  # the paper counts the table; the host reads 1 row of it
    expected = (KERNEL_LOOPING_8B["parameters_gib"] + KERNEL_LOOPING_8B["kv_cache_gib"]) * GIB - embedding
    assert read == pytest.approx(expected, rel=0.03)


#: make test: the 8B on 16 sockets (the Kernel Looping fraction) and the 70B on one (DDR-bound);
#: the rest of the matrix is marked matrix (make bench: bench_matrix, and bench_llm's table)
REPRESENTATIVES = {("8b", 16), ("70b", 1)}
CASES = [pytest.param(size, sockets, id=f"{size}-{sockets}sockets",
                      marks=[pytest.mark.slow] if (size, sockets) == ("70b", 1) else  # 7 CPU-s
                      [] if (size, sockets) in REPRESENTATIVES else [pytest.mark.matrix])
         for size in ("8b", "70b", "405b") for sockets in (1, 8, 16)]


@pytest.mark.parametrize("size, sockets", CASES)
def test_decode_estimates_stay_under_the_capacity_aware_roofline(size, sockets):
    config = LLAMA_3_1[size]
    t = decode_totals(size, sockets)
    roof = decode_roofline(config, SN40L, sockets=sockets, context=4096)
    assert t["latency_us"] * 1e-6 >= roof.seconds * (1 - 1e-9)
    if sockets == 1 and size != "8b":  # more weights than HBM holds: DDR bounds the step
        assert roof.ddr_bytes > 0 and t["weights_by_tier"]["ddr"] > 0
        assert t["latency_us"] * 1e-6 >= t["offchip_bytes_by_tier"]["ddr"] / (SN40L.tiers[1].bw_gbps * 1e9)
    if size == "8b" and sockets == 16:  # Kernel Looping reports > 90 % on SN40L; the issue asks ≥ 70 %
        assert roof.seconds / (t["latency_us"] * 1e-6) >= 0.7


@pytest.mark.slow
def test_compute_heavy_work_at_large_batch_reaches_half_the_peak(cli, tmp_path):
    """An 8B prefill of 512 tokens at batch 8, estimated from the command line (its header and
    table; the totals in --json); BERT-base at batch 64 is in the matrix (make bench)."""
    code, text = cli("measure-performance", "llama-3.1-8b", "--phase", "prefill", "--prompt", "512",
                     "--batch-size", "8", "--json", tmp_path / "prefill.json")
    assert code == 0 and "llama-3.1-8b prefill: batch 1, prompt 512" in text and "tokens/s" in text, text
    assert "batch: 8 (micro-batch" in text
    assert json.loads((tmp_path / "prefill.json").read_text())["totals"]["flops_utilization"] >= 0.5


@pytest.mark.matrix
def test_bert_base_at_large_batch_reaches_half_the_peak():
    bert = nnbridge.compile(bert_base(1), "rdu", preset="sn40l", batch_size=64).estimate.totals
    assert bert["flops_utilization"] >= 0.5


def test_llms_are_estimated_from_the_command_line(cli):
    code, text = cli("measure-performance", "llama-3.1-8b", "--sockets", "8", "--json", "-")
    assert code == 0, text
    totals = json.loads(text)["totals"]
    assert totals["weights_by_tier"]["hbm"] > 0 and totals["latency_us"] > 0
    code, text = cli("measure-performance", "llama-3.1-8b", "--sockets", "3")
    assert code != 0 and "do not split over 3 sockets" in text and len(text.strip().splitlines()) == 1
    with pytest.raises(InputError, match="context must be a positive integer"):
        llama_graph(llama_config("8b"), context=0)


@pytest.mark.slow
@pytest.mark.parametrize("size", ["8b", pytest.param("70b", marks=pytest.mark.matrix)])
def test_more_sockets_never_decode_slower(size):
    latencies = [decode_totals(size, n)["latency_us"] for n in (1, 2, 4, 8, 16)]
    assert all(later <= earlier for earlier, later in zip(latencies, latencies[1:])), latencies
