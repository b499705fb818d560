"""Helpers for pass tests: oracle outputs (cached per model), run a graph, compare."""

from __future__ import annotations

import functools
from pathlib import Path

import numpy as np
import onnx

import nnbridge
from nnbridge.api.inputs import random_inputs
from nnbridge.check import run_onnxruntime
from nnbridge.ir import Graph
from nnbridge.zoo.corpus import TIED_SOFTMAX, logits_model

LIGHT = Path(onnx.__file__).parent / "backend" / "test" / "data" / "light"
LIGHT_MODELS = sorted(p.stem.removeprefix("light_") for p in LIGHT.glob("light_*.onnx"))
RTOL, ATOL = 1e-4, 1e-4  # fp32 after reassociation (folded BN / scales): a few ulps of 1e-5 relative


def light_path(name: str) -> Path:
    return LIGHT / f"light_{name}.onnx"


#: the two most recent light models stay loaded: tests use one or two at a time, and all nine held
#: at once weigh ~1.5 GB
@functools.lru_cache(maxsize=2)
def light_model(name: str) -> onnx.ModelProto:
    """The light model; its logits where its softmax is round-off's (``corpus.TIED_SOFTMAX``)."""
    model = onnx.load(str(light_path(name)))
    return logits_model(model) if name in TIED_SOFTMAX else model


@functools.lru_cache(maxsize=2)
def light_graph(name: str) -> Graph:
    return nnbridge.load(light_model(name))


@functools.cache
def light_case(name: str) -> tuple[dict, dict]:
    """(feeds, onnxruntime outputs) of a light model, computed once per test module (conftest)."""
    graph = light_graph(name)
    feeds = random_inputs(graph, seed=0)
    return feeds, run_onnxruntime(light_model(name), feeds)


def run(graph: Graph, feeds: dict, passes: list[str] | None = None) -> dict[str, np.ndarray]:
    """Run ``graph`` on the reference backend with exactly ``passes`` (default: only the layout
    pass that makes any graph executable there)."""
    default = ["layout-nchw", "cancel-transposes"]
    exe = nnbridge.compile(graph, "reference", passes=passes if passes is not None else default)
    return exe.run(feeds)


def run_exported(graph: Graph, feeds: dict) -> dict[str, np.ndarray]:
    """Run ``graph`` on onnxruntime: back to NCHW, exported (nnbridge ops lowered), then run.
    Much faster than the numpy reference on the big light models."""
    from nnbridge.check import run_onnxruntime
    from nnbridge.converters.onnx import graph_to_model, lowering  # noqa: F401 - registers the exporters
    from nnbridge.passes import run_passes

    g = graph.copy()
    run_passes(g, ["layout-nchw", "cancel-transposes"])
    return run_onnxruntime(graph_to_model(g), feeds)


def assert_close(actual: dict, expected: dict, rtol: float = RTOL, atol: float = ATOL) -> None:
    assert set(expected) <= set(actual), (sorted(actual), sorted(expected))
    for name, want in expected.items():
        got = np.asarray(actual[name])
        assert got.shape == want.shape, (name, got.shape, want.shape)
        scale = max(float(np.max(np.abs(want))), 1.0) if want.size else 1.0
        np.testing.assert_allclose(got, want, rtol=rtol, atol=atol * scale, err_msg=name)


def model_and_feeds(model: onnx.ModelProto, seed: int = 0) -> tuple[Graph, dict, dict]:
    """(graph, feeds, oracle outputs) for a model built in a test."""
    graph = nnbridge.load(model)
    feeds = random_inputs(graph, seed=seed)
    return graph, feeds, run_onnxruntime(model, feeds)


def count_ops(graph: Graph, op: str) -> int:
    return sum(1 for n in graph.nodes if n.op == op)


def build(nodes: list[onnx.NodeProto], inputs: dict[str, list], outputs: list[str],
          inits: dict[str, np.ndarray] | None = None, opset: int = 17) -> onnx.ModelProto:
    """A float32 ONNX model from helper nodes (outputs' shapes left to inference)."""
    from onnx import TensorProto, helper, numpy_helper

    graph = helper.make_graph(
        nodes, "test",
        [helper.make_tensor_value_info(n, TensorProto.FLOAT, s) for n, s in inputs.items()],
        [helper.make_tensor_value_info(n, TensorProto.FLOAT, None) for n in outputs],
        [numpy_helper.from_array(np.asarray(a), n) for n, a in (inits or {}).items()])
    return helper.make_model(graph, opset_imports=[helper.make_opsetid("", opset)], ir_version=8)


def rand(*shape: int, seed: int = 0, low: float = -1.0) -> np.ndarray:
    return np.random.default_rng(seed + len(shape)).uniform(low, 1.0, shape).astype(np.float32)


BACKENDS = ("reference", "smv", "rdu")


def pipeline_for(backend: str, level: int) -> list:
    """The pipeline ``backend`` declares for opt level ``level`` (backends own their pipelines)."""
    from nnbridge.backends import get_backend

    return get_backend(backend).pipeline(level)
