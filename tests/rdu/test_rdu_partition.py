"""Kernels (fusion by pattern kind), sections under resource limits, PCU allocation."""

from __future__ import annotations

import pytest
from rdu_graphs import conv_chain, linear_relu

import nnbridge
from nnbridge.backends.rdu import machine_for
from nnbridge.backends.rdu.allocate import water_fill
from nnbridge.backends.rdu.partition import build_kernels, partition
from nnbridge.base.errors import InputError
from nnbridge.passes.fuse_chains import chain_groups
from nnbridge.zoo import build

SN40L = machine_for("sn40l")


def kernel_ops(model, fuse=True):
    graph = nnbridge.load(model)
    return [list(k.ops) for k in build_kernels(graph, SN40L, chain_groups(graph) if fuse else None)]


@pytest.mark.parametrize("ops, groups", [
    (["conv", "bias", "relu"], 1),                      # anchor + broadcast/elementwise epilogue
    (["conv", "relu", "conv", "relu"], 2),              # never two anchors in one kernel
    (["conv", "reshape", "relu", "conv"], 2),           # [conv] [reshape relu conv]: injective prologue
    (["relu", "sigmoid", "relu"], 1),
])
def test_fusion_by_pattern_kind(ops, groups):
    assert len(kernel_ops(conv_chain(ops))) == groups


def test_reshape_does_not_join_an_anchored_kernel():
    kernels = kernel_ops(conv_chain(["conv", "reshape", "relu", "conv"]))
    assert kernels == [["conv0"], ["reshape1", "relu2", "conv3"]]


def test_o0_has_one_operator_per_section():
    graph = nnbridge.load(build("transformer_tiny"))
    sections = partition(graph, SN40L, "o0")
    assert len(sections) == len(graph.nodes)
    assert all(len(s.kernels) == 1 and len(s.kernels[0].ops) == 1 for s in sections)


@pytest.mark.parametrize("name", ["transformer_tiny", "resnet_tiny", "cnn10"])
def test_kernel_graph_is_acyclic_and_covers_every_op(name):
    graph = nnbridge.load(build(name))
    sections = partition(graph, SN40L, "o1", chain_groups(graph))
    seen: set[str] = {v.name for v in graph.inputs} | set(graph.initializers)
    ops = []
    for s in sections:
        for k in s.kernels:
            assert set(k.inputs) <= seen | {o for kk in s.kernels for o in kk.outputs}
            ops.extend(k.ops)
        for k in s.kernels:
            seen |= set(k.outputs)
    assert sorted(ops) == sorted(n.name for n in graph.nodes)
    for s in sections:  # values crossing sections are spilled by their producer and filled by the consumer
        for name in s.fills:
            assert any(name in other.spills for other in sections[: s.index])


def test_small_sram_forces_several_sections():
    graph = nnbridge.load(build("vgg_cifar"))
    big = partition(graph, SN40L, "o1", chain_groups(graph))
    small_machine = machine_for("sn40l", sram_bytes=64 * 1024, n_pmu=64)
    small = partition(graph, small_machine, "o1", chain_groups(graph))
    assert len(big) == 1
    assert len(small) >= 2
    for s in small:
        assert sum(k.pmus for k in s.kernels) <= 64


def test_port_limit_bounds_off_chip_streams():
    graph = nnbridge.load(build("resnet_tiny"))
    sections = partition(graph, machine_for("sn40l", max_section_ports=2), "o1", chain_groups(graph))
    assert len(sections) > 1
    for s in sections:
        if len(s.kernels) > 1:
            assert len(s.fills) + len(s.host_in) + len(s.spills) + len(s.host_out) <= 2


def test_water_fill_gives_pcus_in_proportion_to_work():
    work = [3.0, 1.0]
    pcus = water_fill(2, 8, [100, 100], lambda i, p: (work[i] / p, "compute"))
    assert pcus == [6, 2]


def test_water_fill_gives_what_the_stuck_slowest_stage_cannot_use_to_the_others():
    """Throughput is the slowest stage's (stuck at 5 here); the PCUs left shorten the other stage,
    which every token also passes (the latency of a small batch)."""
    times = [lambda p: (5.0, "pmu"), lambda p: (1.0 / p, "compute")]
    assert water_fill(2, 10, [100, 100], lambda i, p: times[i](p)) == [1, 9]
    plateau = [lambda p: (5.0, "pmu"), lambda p: (max(1.0 / p, 0.25), "compute")]
    assert water_fill(2, 10, [100, 100], lambda i, p: plateau[i](p)) == [1, 4]  # up to its plateau only


def test_water_fill_respects_parallelism():
    assert water_fill(1, 64, [4], lambda i, p: (1.0 / p, "compute")) == [4]


def test_linear_relu_is_one_kernel_with_external_edges_only():
    graph = nnbridge.load(linear_relu())
    (kernel,) = build_kernels(graph, SN40L, chain_groups(graph))
    assert kernel.anchor == "MatMul"
    assert list(kernel.inputs) == ["x"] and list(kernel.outputs) == ["y"]
    assert kernel.flops == 2 * 2 * 16 * 8 + 2 * 8 + 2 * 8


def test_bad_options_are_clear():
    with pytest.raises(InputError, match="unknown RDU preset"):
        machine_for("tpu")
    with pytest.raises(InputError, match="unknown RDU machine parameter"):
        machine_for("sn40l", warp_speed=9)
    with pytest.raises(InputError, match="mode"):
        nnbridge.compile(linear_relu(), backend="rdu", mode="o3")
    with pytest.raises(InputError, match="micro-batch"):
        nnbridge.compile(linear_relu(), backend="rdu", batch_size=2, micro_batch=4)


@pytest.mark.parametrize("fusion", ["fuse-chains", "fuse"])
def test_fusion_is_decided_once_and_the_partitioner_takes_the_groups(fusion):
    """Whichever fusion pass ran, its groups are the kernels (o0 ignores them); no second decision."""
    from collections import Counter

    from nnbridge.backends.rdu.unfuse import inline_fused
    from nnbridge.passes import run_passes

    original = nnbridge.load(build("transformer_tiny"))
    fused = original.copy()
    run_passes(fused, [fusion])
    bodies = [[m.name for m in n.attrs["body"].nodes] for n in fused.nodes if n.op == "Fused"]
    assert bodies
    groups = inline_fused(fused)
    fused.verify()
    assert Counter(n.op for n in fused.nodes) == Counter(n.op for n in original.nodes)
    kernels = [k.ops for s in partition(fused, SN40L, "o1", groups) for k in s.kernels]
    assert [k for k in kernels if len(k) > 1] == bodies
    assert len(partition(fused, SN40L, "o0", groups)) == len(original.nodes)


def test_the_rdu_pipeline_fuses_chains_once_and_compiles_plain_ops():
    graph = nnbridge.load(build("transformer_tiny"))
    o1 = nnbridge.compile(graph, backend="rdu", mode="o1")
    assert not any(n.op == "Fused" for n in o1.graph.nodes)
    assert o1.estimate.totals["ops"] == len(o1.graph.nodes)
    assert o1.estimate.totals["kernels"] == len(chain_groups(graph))


def test_a_small_batchs_allocation_is_refined_against_its_latency():
    """Two tokens through a chain cost the way once plus the slowest stage once more. The greedy
    water-fill (ties broken by stage order) gives 2, 3, 1 PCUs (2 + 2.67 + 4 + 4 = 12.67); moving
    PCUs between stages while the latency falls finds 2, 2, 2 (2 + 4 + 2 + 4 = 12)."""
    work, floor = [4.0, 8.0, 4.0], [0.0, 0.0, 0.5]

    def stage(i, p):
        return max(work[i] / p, floor[i]), "compute"

    def latency(pcus):
        times = [stage(i, p)[0] for i, p in enumerate(pcus)]
        return sum(times) + max(times)

    assert water_fill(3, 6, [100] * 3, stage) == [2, 3, 1]
    assert water_fill(3, 6, [100] * 3, stage, latency) == [2, 2, 2]


def test_compile_effort_is_kernels_times_plans(monkeypatch):
    """The plan search considers the first budget / kernels plans (at least the machine's own),
    counted by the partitions it makes: a huge graph gets one, a small one every variant."""
    import nnbridge.backends.rdu.backend as rdu_backend

    made = []
    monkeypatch.setattr(rdu_backend, "partition", lambda *a, **k: made.append(a[1]) or partition(*a, **k))
    model = build("cnn10")
    nnbridge.compile(model, "rdu", preset="sn40l")
    assert len(made) > 2  # the default budget: the variants too
    made.clear()
    monkeypatch.setattr(rdu_backend, "PLAN_KERNEL_BUDGET", 1)
    nnbridge.compile(model, "rdu", preset="sn40l")
    assert made == [machine_for("sn40l")]
