"""Every pass alone and every pipeline, on the whole corpus, against onnxruntime.

Corpus: the nine light models, the ``pytorch-converted`` cases and the zoo. For each
model the oracle runs once; then each registered pass is applied alone (and must
change nothing when applied again), and each backend pipeline at each level runs;
every resulting graph is executed and compared. Pipelines always run on the
reference backend (the path backends take, Fused kernels included); single passes
on the light models run on onnxruntime after export when their weights are small
(same graph; the numpy convolutions are the slow part), else on the reference.
Graphs that print identically to one already checked are not run twice. The
pytorch cases whose float64/opset-6 ops onnxruntime lacks use their shipped
expected outputs.
"""

from __future__ import annotations

import functools
from pathlib import Path

import numpy as np
import onnx
import pytest
from onnx import numpy_helper
from passcheck import BACKENDS, LIGHT_MODELS, assert_close, light_case, light_graph, pipeline_for, run, run_exported

import nnbridge
from nnbridge.api.inputs import random_inputs
from nnbridge.base.errors import NNBridgeError
from nnbridge.check import run_onnxruntime
from nnbridge.ir import Graph
from nnbridge.passes import available_passes, run_passes

PYTORCH = Path(onnx.__file__).parent / "backend" / "test" / "data" / "pytorch-converted"
PYTORCH_CASES = sorted(p.name for p in PYTORCH.iterdir() if (p / "model.onnx").is_file())
HEAVY = {"vgg19", "densenet121"}  # the two slowest light models to execute (marked slow)
#: light models make bench checks (matrix); make test keeps a plain conv stack (alexnet), inception
#: (v1), residual (resnet50), grouped/shuffled (shufflenet) and fire (squeezenet) blocks
MATRIX = {"vgg19", "densenet121", "inception_v2", "zfnet512"}


def _light_param(name: str):
    return pytest.param(name, marks=([pytest.mark.slow] if name in HEAVY else [])
                        + ([pytest.mark.matrix] if name in MATRIX else []))


def _pipelines() -> list[tuple[str, int]]:
    return [(b, level) for b in BACKENDS for level in [0, 1, 2, 3]]


def _small(graph: Graph) -> bool:
    """Exporting costs ~15 ms per MB of weights: worth it only while the weights are small."""
    return sum(a.nbytes for a in graph.initializers.values()) < 32 << 20


def verify_corpus_model(graph: Graph, feeds: dict, want: dict, passes_on_ort: bool = False) -> list[str]:
    """Check every pass alone and every pipeline; return what was executed (for the log)."""
    try:  # the baseline: a model that disagrees before any pass is an import or kernel bug, not a skip
        assert_close(run_exported(graph, feeds) if passes_on_ort and _small(graph)
                     else run(graph.copy(), feeds, passes=[]), want)
    except (AssertionError, NNBridgeError) as exc:
        raise AssertionError(f"the model disagrees before any pass: {type(exc).__name__}: {exc}") from exc
    checked = {str(graph)}
    executed = []
    cases = [(name, [name]) for name in sorted(available_passes())]
    cases += [(f"{b}-O{level}", pipeline_for(b, level)) for b, level in _pipelines()]
    after: dict[tuple[str, ...], Graph] = {(): graph}  # graph after each pass prefix (shared by pipelines)
    for label, passes in cases:
        done = max(k for k in range(len(passes) + 1) if tuple(passes[:k]) in after)
        g = after[tuple(passes[:done])].copy()
        for k in range(done, len(passes)):
            run_passes(g, [passes[k]])
            after[tuple(passes[:k + 1])] = g.copy()
        if len(passes) == 1:
            assert available_passes()[passes[0]].fn(g) is False, f"{label} is not idempotent"
        text = str(g)
        if text in checked:
            continue
        checked.add(text)
        try:
            assert_close(run_exported(g, feeds) if passes_on_ort and len(passes) == 1 and _small(g)
                         else run(g, feeds), want)
        except (AssertionError, NNBridgeError) as exc:
            raise AssertionError(f"outputs differ after {label}: {exc}") from exc
        executed.append(label)
    return executed


@pytest.mark.slow
@pytest.mark.parametrize("name", [_light_param(n) for n in LIGHT_MODELS])
def test_light_model_after_each_pass_and_pipeline(name):
    feeds, want = light_case(name)
    executed = verify_corpus_model(light_graph(name), feeds, want, passes_on_ort=True)
    print(name, "checked after:", ", ".join(executed))
    assert executed


@functools.cache
def _pytorch_case(case: str) -> tuple[onnx.ModelProto, dict, dict]:
    model = onnx.load(str(PYTORCH / case / "model.onnx"))
    data = PYTORCH / case / "test_data_set_0"
    graph = nnbridge.load(model)
    inputs = [numpy_helper.to_array(onnx.load_tensor(str(p))) for p in sorted(data.glob("input_*.pb"))]
    feeds = dict(zip((v.name for v in graph.inputs), inputs)) if inputs else random_inputs(graph)
    try:
        want = run_onnxruntime(model, feeds)
    except NNBridgeError:
        outputs = [numpy_helper.to_array(onnx.load_tensor(str(p))) for p in sorted(data.glob("output_*.pb"))]
        want = dict(zip((v.name for v in graph.outputs), outputs))
    return model, feeds, want


@pytest.mark.parametrize("case", PYTORCH_CASES)
def test_pytorch_converted_case_after_each_pass_and_pipeline(case):
    model, feeds, want = _pytorch_case(case)
    verify_corpus_model(nnbridge.load(model), feeds, want)


def _zoo_names() -> list[str]:
    from nnbridge.zoo import names

    return names()


@pytest.mark.parametrize("name", _zoo_names())
def test_zoo_model_after_each_pass_and_pipeline(name):
    from nnbridge.zoo import build

    model = build(name)
    graph = nnbridge.load(model)
    feeds = random_inputs(graph, seed=1)
    verify_corpus_model(graph, feeds, run_onnxruntime(model, feeds))


def test_float64_models_keep_their_precision():
    model, feeds, want = _pytorch_case("test_Conv2d")
    graph = nnbridge.load(model)
    run_passes(graph, pipeline_for("reference", 3))
    got = run(graph, feeds)
    assert all(np.asarray(got[k]).dtype == np.asarray(v).dtype for k, v in want.items())
