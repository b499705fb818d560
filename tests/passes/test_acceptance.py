"""Issue 3 acceptance figures on the light models: folding, fusion vs onnxruntime's
extended optimisation, SMV layout Reorders, and peak activation memory (printed)."""

from __future__ import annotations

import onnx
import pytest
from passcheck import LIGHT_MODELS, assert_close, count_ops, light_case, light_graph, light_model, pipeline_for

import nnbridge
from nnbridge.check import ort_session
from nnbridge.ir import Graph
from nnbridge.passes import run_passes
from nnbridge.passes.fold_constants import fold_limit_bytes
from nnbridge.passes.plan_memory import plan_memory

WEIGHTED = {"Conv": 1, "Gemm": 1}


#: light models whose pass runs peak a worker over 1 GB (VGG-19: 1.9 GB): one at a time (``memory``)
HEAVY = {"vgg19"}


def _light(names) -> list:
    return [pytest.param(name, marks=[pytest.mark.memory] if name in HEAVY else []) for name in names]


@pytest.mark.parametrize("name", _light(LIGHT_MODELS))
def test_folding_leaves_no_constant_of_shape_and_weights_as_initializers(name, monkeypatch):
    graph = light_graph(name).copy()
    assert count_ops(graph, "ConstantOfShape") > 0
    limit = fold_limit_bytes()
    over = [n.outputs[0].name for n in graph.nodes if n.op == "ConstantOfShape" and n.outputs[0].type.nbytes > limit]
    at_default = graph.copy()
    run_passes(at_default, ["fold", "eliminate"])  # weights over the limit (VGG-19's 411 MB FC) stay ops
    assert [n.outputs[0].name for n in at_default.nodes if n.op == "ConstantOfShape"] == over
    monkeypatch.setenv("NNBRIDGE_FOLD_LIMIT_MB", "1024")
    run_passes(graph, ["fold", "eliminate"])
    assert count_ops(graph, "ConstantOfShape") == 0
    weights = [n.inputs[WEIGHTED[n.op]] for n in graph.nodes if n.op in WEIGHTED]
    assert weights and all(w.const is not None for w in weights)


def test_resnet50_fused_kernels_not_more_than_onnxruntime_extended(tmp_path):
    optimized = tmp_path / "resnet50_ort_extended.onnx"
    ort_session(light_model("resnet50"), level="ORT_ENABLE_EXTENDED", optimized_path=str(optimized))
    ort_nodes = len(onnx.load(str(optimized), load_external_data=False).graph.node)
    graph = light_graph("resnet50").copy()
    run_passes(graph, pipeline_for("reference", 2))
    exe = nnbridge.compile(graph, "reference", passes=[], profile=True)
    feeds, want = light_case("resnet50")
    assert_close(exe.run(feeds), want)
    executed = len(exe.report.rows)
    print(f"light ResNet-50: nnbridge executed {executed} kernels "
          f"({count_ops(graph, 'Fused')} fused groups); onnxruntime ORT_ENABLE_EXTENDED has {ort_nodes} nodes")
    assert executed <= ort_nodes


def _flattens(graph: Graph) -> int:
    return sum(1 for n in graph.nodes if n.op == "Flatten" or (n.op == "Reshape" and n.outputs[0].type.rank == 2))


@pytest.mark.parametrize("name", _light(["vgg19", "resnet50"]))
def test_smv_layout_reorders_only_at_inputs_and_flattens(name):
    graph = light_graph(name).copy()
    allowed = len(graph.inputs) + _flattens(graph)
    run_passes(graph, pipeline_for("smv", 1))
    reorders = count_ops(graph, "Reorder")
    convs = [n for n in graph.nodes if n.op == "Conv"]
    print(f"light {name} on SMV: {reorders} Reorder(s); allowed {allowed} "
          f"({len(graph.inputs)} input(s) + {_flattens(graph)} flatten(s))")
    assert reorders <= allowed
    assert all(c.inputs[0].type.layout.value == "NHWC" and c.inputs[1].const is not None for c in convs)


def _min_peak_for_order(graph: Graph) -> int:
    """Independent bound: max over steps of bytes of activations alive during the step."""
    nodes = graph.nodes
    last = {}
    for i, n in enumerate(nodes):
        for v in n.inputs:
            if v is not None:
                last[v.name] = i
    for v in graph.outputs:
        last[v.name] = len(nodes)
    spans = [(i, last.get(o.name, i), o.type.nbytes) for i, n in enumerate(nodes) for o in n.outputs]
    return max(sum(b for s, e, b in spans if s <= i <= e) for i in range(len(nodes)))


@pytest.mark.parametrize("level", [1, 2])
def test_resnet50_peak_activation_memory_near_the_order_minimum(level):
    graph = light_graph("resnet50").copy()
    run_passes(graph, ["fold", *pipeline_for("reference", level)])
    plan = plan_memory(graph)
    bound = _min_peak_for_order(graph)
    print(f"light ResNet-50 (O{level}, {len(graph)} kernels): peak activation memory {plan.total_bytes:,} B "
          f"in {len(plan.storage_bytes)} buffers; minimum for this order {bound:,} B; unshared "
          f"{plan.unshared_bytes:,} B")
    assert plan.total_bytes <= 1.2 * bound
    assert plan.total_bytes <= plan.unshared_bytes
