"""ai.onnx.preview.training optimiser steps (onnxruntime has no kernels for them):
hand-computed single steps, and the grouped input/output order of several tensors."""

from __future__ import annotations

import numpy as np
import onnx
import pytest
from onnx import helper

import nnbridge
from nnbridge.ir import DType

TRAINING = "ai.onnx.preview.training"


def step(op, tensors, roles, attrs, rate=0.1, t=0):
    """One optimiser step over ``tensors`` (lists per role); returns outputs grouped by role."""
    feeds = {"R": np.array(rate, np.float32), "T": np.array(t, np.int64)}
    names = ["R", "T"]
    for role, values in zip(roles, tensors):
        for i, value in enumerate(values):
            feeds[f"{role}{i}"] = np.asarray(value, np.float32)
            names.append(f"{role}{i}")
    n = len(tensors[0])
    state_roles = [roles[0]] + list(roles[2:])
    outputs = [f"{role}{i}_new" for role in state_roles for i in range(n)]
    node = helper.make_node(op, names, outputs, domain=TRAINING, **attrs)
    graph = helper.make_graph([node], op.lower(), [helper.make_tensor_value_info(k, DType.from_numpy(v.dtype).onnx,
                                                                                 v.shape) for k, v in feeds.items()],
                              [helper.make_value_info(o, onnx.TypeProto()) for o in outputs])
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 21), helper.make_opsetid(TRAINING, 1)])
    result = nnbridge.compile(model, passes=[]).run(feeds)
    return [[result[f"{role}{i}_new"] for i in range(n)] for role in state_roles]


def test_adagrad_single_step_and_two_tensors():
    (x,), (h,) = step("Adagrad", [[[1.0]], [[2.0]], [[0.0]]], "XGH", {"epsilon": 0.0})
    np.testing.assert_allclose(h, [4.0])
    np.testing.assert_allclose(x, [0.9])  # 1 - 0.1 * 2 / sqrt(4)
    xs, hs = step("Adagrad", [[[1.0], [5.0, 5.0]], [[2.0], [1.0, 3.0]], [[0.0], [0.0, 0.0]]], "XGH",
                  {"epsilon": 0.0, "decay_factor": 1.0}, t=1)
    np.testing.assert_allclose(xs[1], [5 - 0.05, 5 - 0.05])  # rate 0.1 / (1 + 1), |g| / sqrt(g^2) = 1
    np.testing.assert_allclose(hs[1], [1.0, 9.0])


@pytest.mark.parametrize("mode, expected_x", [("standard", 1 - 0.1 * 2.9), ("nesterov", 1 - 0.1 * (2 + 0.9 * 2.9))])
def test_momentum_first_step_takes_the_whole_gradient(mode, expected_x):
    attrs = {"alpha": 0.9, "beta": 0.1, "norm_coefficient": 0.0, "mode": mode}
    (x,), (v,) = step("Momentum", [[[1.0]], [[2.0]], [[1.0]]], "XGV", attrs)
    np.testing.assert_allclose(v, [2.9], rtol=1e-6)  # 0.9 * 1 + 1 * 2
    np.testing.assert_allclose(x, [expected_x], rtol=1e-6)
    (x,), (v,) = step("Momentum", [[[1.0]], [[2.0]], [[1.0]]], "XGV", attrs, t=3)
    np.testing.assert_allclose(v, [1.1], rtol=1e-6)  # later steps scale the gradient by beta


def test_adam_bias_correction_only_after_the_first_step():
    (x,), (v,), (h,) = step("Adam", [[[1.0]], [[2.0]], [[0.0]], [[0.0]]], "XGVH", {"epsilon": 0.0})
    np.testing.assert_allclose([v[0], h[0]], [0.2, 0.004], rtol=1e-4)
    np.testing.assert_allclose(x, [1 - 0.1 * 0.2 / np.sqrt(0.004)], rtol=1e-4)
    (x,), _, _ = step("Adam", [[[1.0]], [[2.0]], [[0.0]], [[0.0]]], "XGVH",
                      {"epsilon": 0.0, "norm_coefficient_post": 0.5}, t=1)
    corrected = 0.1 * np.sqrt(1 - 0.999) / (1 - 0.9)
    np.testing.assert_allclose(x, [0.5 * (1 - corrected * 0.2 / np.sqrt(0.004))], rtol=1e-4)
