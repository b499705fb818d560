"""Random ops: a seed repeats the draw, no seed draws afresh, and the values follow the op's
distribution (judged by statistics; no two runtimes share a generator)."""

from __future__ import annotations

import numpy as np
import pytest
from onnx import TensorProto, helper

import nnbridge


def _run(node, inputs=None, feeds=None, out_type=TensorProto.FLOAT, shape=(200, 500)):
    graph = helper.make_graph([node], "r", inputs or [], [helper.make_tensor_value_info("y", out_type, list(shape))])
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 22)])
    return nnbridge.run(nnbridge.load(model), feeds or {})["y"]


def test_seeded_normal_repeats_and_follows_its_distribution():
    node = helper.make_node("RandomNormal", [], ["y"], shape=[200, 500], mean=2.0, scale=3.0, seed=7.0)
    first, second = _run(node), _run(node)
    np.testing.assert_array_equal(first, second)
    assert first.dtype == np.float32 and abs(first.mean() - 2.0) < 0.05 and abs(first.std() - 3.0) < 0.05


def test_unseeded_uniform_draws_afresh_within_its_bounds():
    node = helper.make_node("RandomUniform", [], ["y"], shape=[200, 500], low=-1.0, high=3.0,
                            dtype=TensorProto.DOUBLE)
    first, second = _run(node, out_type=TensorProto.DOUBLE), _run(node, out_type=TensorProto.DOUBLE)
    assert first.dtype == np.float64 and not np.array_equal(first, second)
    assert first.min() >= -1.0 and first.max() < 3.0 and abs(first.mean() - 1.0) < 0.02


@pytest.mark.parametrize("p", [0.0, 0.3, 1.0])
def test_bernoulli_draws_ones_with_the_given_probability(p):
    node = helper.make_node("Bernoulli", ["p"], ["y"], seed=1.0)
    x = helper.make_tensor_value_info("p", TensorProto.FLOAT, [200, 500])
    y = _run(node, [x], {"p": np.full((200, 500), p, np.float32)})
    assert set(np.unique(y)) <= {0.0, 1.0} and abs(y.mean() - p) < 0.01


def test_like_ops_take_the_input_shape_and_type():
    node = helper.make_node("RandomNormalLike", ["x"], ["y"], seed=3.0)
    x = helper.make_tensor_value_info("x", TensorProto.FLOAT16, [4, 5])
    y = _run(node, [x], {"x": np.zeros((4, 5), np.float16)}, TensorProto.FLOAT16, (4, 5))
    assert y.shape == (4, 5) and y.dtype == np.float16
