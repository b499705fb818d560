"""Prepared convolutions (``kernels/ops/conv_prepared.py``): a 1×1 convolution of one image and a
small depthwise one, prepared when the plan is built, return the Conv kernel's values bit for bit,
alone and with an activation applied in their own pass (``with_epilogue``), with numba on and off,
and run the kernel for an input of another shape. The ONNX node tests hold neither kind, so
``test_prepared.py`` leaves Conv to this file."""

from __future__ import annotations

import numpy as np
import pytest
from single_node import node_model

import nnbridge
from nnbridge.kernels import compiled, get_kernel
from nnbridge.kernels.evaluator import KernelContext
from nnbridge.kernels.ops.activation import curve_of
from nnbridge.kernels.ops.conv_prepared import Columns, Depthwise, Direct, Pointwise

RNG = np.random.default_rng(5)
ACTIVATIONS = [("Relu", {}), ("HardSwish", {}), ("HardSigmoid", {"alpha": 0.3, "beta": 0.4}), ("Sigmoid", {}),
               ("Swish", {})]

# (x shape, w shape, attributes): pointwise ones, then depthwise ones of the small maps' loops and
# of the planes
CASES = [
    ((1, 16, 3, 12), (40, 16, 1, 1), {}),
    ((1, 24, 1, 1), (96, 24, 1, 1), {}),
    ((1, 8, 7, 7), (8, 8, 1, 1), {"pads": [0, 0, 0, 0], "strides": [1, 1]}),
    ((1, 33, 5, 7), (70, 33, 1, 1), {}),  # odd sizes: np.dot's GEMM call and the curve in one compiled call
    ((1, 32, 2, 6), (200, 32, 1, 1), {}),
    ((1, 24, 6, 9), (24, 1, 3, 3), {"group": 24, "pads": [1, 1, 1, 1]}),
    ((1, 40, 7, 7), (40, 1, 5, 5), {"group": 40, "pads": [2, 2, 2, 2], "strides": [2, 2]}),
    ((2, 16, 5, 6), (16, 1, 3, 3), {"group": 16, "pads": [2, 2, 2, 2], "dilations": [2, 2]}),
    ((1, 12, 9, 9), (12, 1, 3, 3), {"group": 12, "auto_pad": "SAME_UPPER", "strides": [2, 2]}),
    ((1, 8, 24, 96), (8, 1, 3, 3), {"group": 8, "pads": [1, 1, 1, 1], "strides": [2, 2]}),  # planes
    ((2, 6, 17, 15), (6, 1, 5, 3), {"group": 6, "pads": [2, 0, 1, 3], "strides": [1, 3], "dilations": [2, 1]}),
    ((1, 3, 32, 32), (16, 3, 4, 4), {"strides": [4, 4]}),  # columns: a patch embedding
    ((1, 16, 8, 8), (32, 16, 3, 3), {"pads": [1, 0, 2, 1], "strides": [2, 2]}),  # a downsampling
    ((1, 16, 16, 16), (16, 16, 1, 1), {"strides": [2, 2]}),  # a strided 1×1 shortcut
    ((1, 16, 64), (32, 16, 3), {"pads": [1, 1], "dilations": [2]}),  # 1-D
    ((1, 32, 8, 8), (32, 8, 3, 3), {"group": 4, "pads": [1, 1, 1, 1], "strides": [2, 2]}),  # grouped (RegNet's)
    ((1, 3, 48, 192), (8, 3, 3, 3), {"pads": [1, 1, 1, 1], "strides": [2, 2]}),  # direct loops: the OCR stem
    ((1, 4, 30, 41), (16, 4, 3, 5), {"pads": [2, 0, 1, 3], "dilations": [2, 1]}),
]
KINDS = [Pointwise] * 5 + [Depthwise] * 6 + [Columns] * 5 + [Direct] * 2


def _prepared(x_shape, w_shape, attrs, bias: bool):
    x = RNG.standard_normal(x_shape).astype(np.float32)
    w = RNG.standard_normal(w_shape).astype(np.float32)
    inputs = [("x", x), ("w", w)] + ([("b", RNG.standard_normal(w_shape[0]).astype(np.float32))] if bias else [])
    model, _ = node_model("Conv", inputs, attrs, inits=[name for name, _ in inputs[1:]])
    graph = nnbridge.load(model)
    node = graph.nodes[0]
    consts = tuple(graph.initializers.get(v.name) for v in node.inputs)
    spec = get_kernel("Conv")
    return spec, node, spec.prepared(node, consts), x, consts[1:]


@pytest.mark.parametrize("bias", [True, False], ids=["bias", "no-bias"])
@pytest.mark.parametrize(("x_shape", "w_shape", "attrs", "kind"), [(*case, kind) for case, kind in zip(CASES, KINDS)])
def test_a_prepared_convolution_is_the_kernel_bit_for_bit(x_shape, w_shape, attrs, kind, bias):
    spec, node, fn, x, weights = _prepared(x_shape, w_shape, attrs, bias)
    if kind is Depthwise and compiled.load("conv") is None:  # NNBRIDGE_NO_NUMBA: the kernel's numpy path
        assert fn is None
        return
    assert isinstance(fn, kind)
    ctx = KernelContext(node)
    kwargs = spec.bind(node)
    for numpy_only in (False, True):
        with compiled.numpy_only(numpy_only):
            want = spec.fn(ctx, x, *weights, **kwargs)
            got = fn(ctx, x, *weights)
            assert got.dtype == want.dtype and got.shape == want.shape
            np.testing.assert_array_equal(got, want)
            for op, act_attrs in ACTIVATIONS:
                act_node = nnbridge.load(node_model(op, [("x", want)], act_attrs, opset=24)[0]).nodes[0]
                with_epilogue = getattr(fn, "with_epilogue", None)  # none: the plan overwrites the result
                joint = None if with_epilogue is None else with_epilogue(*curve_of(act_node))
                then = get_kernel(op).fn(KernelContext(act_node), want.copy(), **get_kernel(op).bind(act_node))
                result = None if joint is None else joint(ctx, x, *weights)
                if result is None:  # the plan then runs the activation's own pass
                    assert numpy_only or isinstance(fn, Direct) or (isinstance(fn, (Pointwise, Columns))
                                                                    and not bias), op
                    continue
                np.testing.assert_array_equal(result, then, err_msg=op)
            if kind in (Pointwise, Columns):  # a residual sum joined (``_Biased``): the kernel's result plus it
                residual = RNG.standard_normal(want.shape).astype(np.float32)
                joint = fn.with_residual()
                summed = None if joint is None else joint(ctx, x, *weights, residual)
                assert summed is not None or numpy_only or not bias or not fn.one_gemm
                if summed is not None:
                    np.testing.assert_array_equal(summed, want + residual)
    other = RNG.standard_normal((*x_shape[:-1], x_shape[-1] + 1)).astype(np.float32)
    np.testing.assert_array_equal(fn(ctx, other, *weights), spec.fn(ctx, other, *weights, **kwargs))


def test_a_direct_loops_stem_is_prepared_and_the_kernels_other_paths_are_not():
    """A one-group stem on the direct loops is prepared (``Direct``); other paths of the kernel are not."""
    assert _prepared((1, 3, 64, 64), (4, 3, 3, 3), {"pads": [1, 1, 1, 1]}, True)[2] is None  # columns too large
    assert isinstance(_prepared((1, 3, 96, 96), (16, 3, 3, 3), {"pads": [1, 1, 1, 1]}, True)[2], Direct)  # prepared
    assert _prepared((1, 64, 28, 28), (64, 16, 3, 3), {"group": 4}, True)[2] is None  # grouped, direct loops
    assert _prepared((2, 8, 6, 6), (4, 8, 1, 1), {}, True)[2] is None  # two images: conv_nd's batched product
    assert _prepared((1, 8, 6, 6), (16, 1, 3, 3), {"group": 8}, True)[2] is None  # two filters per channel


@pytest.mark.parametrize("numba", [True, False], ids=["compiled", "numpy"])
@pytest.mark.parametrize(("squeeze", "gate_act"), [("GlobalAveragePool", "HardSigmoid"), ("ReduceMean", "Sigmoid")])
def test_a_mobile_block_runs_in_fewer_entries_with_the_watched_runs_values(numba, squeeze, gate_act):
    """A MobileNetV3 block (1×1 expansion + HardSwish, depthwise + Relu, squeeze-excite, 1×1
    projection): the fast program runs the convolutions' activations in their own loops and the
    excitation's last convolution and its Mul as one ``_Gate`` entry; every output equals the
    watched run's (one step per node, each kernel judged on its own) bit for bit, numba on or off."""
    from nnbridge.kernels.evaluator import _Gate
    from nnbridge.zoo import OnnxBuilder

    b = OnnxBuilder("mobile_block", seed=1)
    x = b.input("x", [1, 8, 7, 7])
    e = b.op("HardSwish", [b.conv(x, 8, 24, 1, hint="expand")])
    d = b.op("Relu", [b.op("Conv", [e, b.weight("dw_w", (24, 1, 3, 3)), b.bias("dw_b", 24)], "dw", group=24,
                                 kernel_shape=[3, 3], pads=[1, 1, 1, 1])])
    if squeeze == "ReduceMean":
        s = b.op("ReduceMean", [d, b.const("axes", np.array([2, 3], np.int64))], keepdims=1)
    else:
        s = b.op(squeeze, [d])
    g = b.op(gate_act, [b.conv(b.op("Relu", [b.conv(s, 24, 8, 1, hint="se1")]), 8, 24, 1, hint="se2")])
    b.output(b.conv(b.op("Mul", [d, g]), 24, 8, 1, hint="project"))
    model = b.model()
    feeds = {"x": RNG.standard_normal((1, 8, 7, 7)).astype(np.float32)}
    with compiled.numpy_only(not numba):
        exe = nnbridge.compile(model, backend="reference")
        fast = exe.run(feeds)
        watched = exe.plan.execute(feeds, timings=[])
        gates = sum(isinstance(entry[0], _Gate) for entry in exe.plan._program)
        numba_on = compiled.load("curves") is not None
    # numba off as the plan is built: no gate is offered (its curve's pass is compiled), its steps run
    assert gates == (1 if numba_on else 0)
    for (name, got), want in zip(fast.items(), watched):
        np.testing.assert_array_equal(got, want, err_msg=name)
