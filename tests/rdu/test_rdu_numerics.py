"""bf16 functional simulation against onnxruntime (fp32) on the zoo and onnx's light models."""

from __future__ import annotations

from pathlib import Path

import ml_dtypes
import numpy as np
import onnx
import pytest
from rdu_graphs import linear_relu

import nnbridge
from nnbridge.backends.rdu.numerics import round_bf16
from nnbridge.zoo import build, names

#: the three whose ConstantOfShape weights make a run take 8-20 s are marked slow (make test runs them)
HEAVY = {"light_vgg19", "light_densenet121", "light_inception_v2"}
#: make bench's (matrix, 3-5 CPU-s each): plain conv stacks and a residual net, whose families the zoo's
#: vgg_cifar and resnet_tiny keep in make test
MATRIX = {"light_vgg19", "light_zfnet512", "light_bvlc_alexnet", "light_resnet50"}
LIGHT = [pytest.param(p, id=p.stem, marks=([pytest.mark.slow] if p.stem in HEAVY else [])
                      + ([pytest.mark.matrix] if p.stem in MATRIX else []))
         for p in sorted((Path(onnx.__file__).parent / "backend" / "test" / "data" / "light").glob("*.onnx"))]


def assert_bf16_agreement(result) -> None:
    assert result.rule.name == "bf16"  # the verdict table's row for the RDU (docs/check.md)
    assert result.ok, [o for o in result.outputs if not o.ok]
    for name, expected in result.expected.items():
        actual = result.actual[name]
        assert actual.dtype == expected.dtype
        scale = float(np.max(np.abs(expected))) or 1.0
        # stricter than the elementwise tolerance: within 2 % of the output's scale everywhere
        assert float(np.max(np.abs(actual - expected))) <= 2e-2 * scale


def checked(model):
    return nnbridge.check(model, backend="rdu")  # an unsupported op is a failure, not a skip


@pytest.mark.parametrize("name", [pytest.param(n, marks=pytest.mark.slow) if n == "vgg_cifar" else n for n in names()])
def test_zoo_agrees_with_onnxruntime_in_bf16(name):
    assert_bf16_agreement(checked(build(name)))


@pytest.mark.parametrize("path", LIGHT)
def test_light_models_agree_with_onnxruntime_in_bf16(path):
    assert_bf16_agreement(checked(str(path)))


def test_round_bf16_is_round_to_nearest_even():
    x = np.array([1.0, 1 + 2**-8, 1 + 3 * 2**-8, 3.14159, -2.5e-3], np.float32)
    y = round_bf16(x)
    assert y.dtype == np.float32
    np.testing.assert_array_equal(y, x.astype(ml_dtypes.bfloat16).astype(np.float32))
    assert y[1] == 1.0 and y[2] == 1 + 4 * 2**-8  # ties go to even
    ints = np.arange(5)
    assert round_bf16(ints) is ints


def test_kernel_outputs_are_bf16_and_fused_intermediates_fp32():
    """relu(x @ W + b) is one kernel: bf16 operands, fp32 accumulate and epilogue, one rounding."""
    model = linear_relu()
    graph = nnbridge.load(model)
    W, b = graph.initializers["W"], graph.initializers["b"]
    x = np.random.default_rng(1).standard_normal((2, 16)).astype(np.float32)
    got = nnbridge.compile(model, backend="rdu").run({"x": x})["y"]
    bf = lambda a: a.astype(ml_dtypes.bfloat16).astype(np.float32)
    expected = bf(np.maximum(bf(x) @ bf(W) + bf(b), 0))
    np.testing.assert_array_equal(got, expected)
    # o0: every op is its own kernel, so the MatMul and Add results are rounded too
    got_o0 = nnbridge.compile(model, backend="rdu", mode="o0").run({"x": x})["y"]
    np.testing.assert_array_equal(got_o0, bf(np.maximum(bf(bf(bf(x) @ bf(W)) + bf(b)), 0)))
    assert not np.array_equal(got, x @ W + b)
