"""Adding an elementwise op is one traits row and one kernel: through the public registration API a
toy op runs on the reference backend, folds, fuses, gets its shape inferred and is costed on RDU."""

from __future__ import annotations

import numpy as np
import pytest
from onnx import helper

import nnbridge
from nnbridge.backends.rdu.costs import op_cost
from nnbridge.ir import OP_TRAITS, OpSchema, OpTraits, PatternKind, ShapeRule, register_op
from nnbridge.ir.schema import CUSTOM_SCHEMAS
from nnbridge.kernels import KERNELS, kernel
from nnbridge.passes import run_passes

DOMAIN = "com.example"


@pytest.fixture
def cube_op():
    """Cube(x) {scale = 1.0} = scale·x³, elementwise, 2 FLOP per element: the row, the schema and the
    kernel, whose keyword is the schema's attribute."""
    register_op(OpTraits("Cube", DOMAIN, PatternKind.ELEMWISE, ShapeRule.SAME, flops_per_element=2.0,
                         schema=OpSchema("Cube", DOMAIN, 1, 1, 1, 1, {"scale": 1.0}, doc="x cubed, scaled")))

    @kernel("Cube", domain=DOMAIN)
    def cube(ctx, x, *, scale=1.0):
        return x * x * x * x.dtype.type(scale)

    yield
    OP_TRAITS.unregister((DOMAIN, "Cube"))
    CUSTOM_SCHEMAS.unregister((DOMAIN, "Cube"))
    KERNELS.unregister((DOMAIN, "Cube"))


def _model():
    rng = np.random.default_rng(0)
    w = rng.uniform(-1, 1, (8, 8)).astype(np.float32)
    k = rng.uniform(-1, 1, (8,)).astype(np.float32)
    nodes = [helper.make_node("MatMul", ["x", "w"], ["m"]),
             helper.make_node("Cube", ["m"], ["c"], domain=DOMAIN),
             helper.make_node("Relu", ["c"], ["r"]),
             helper.make_node("Cube", ["k"], ["kc"], domain=DOMAIN, scale=2.0),  # fed by a constant: folds
             helper.make_node("Add", ["r", "kc"], ["y"])]
    graph = helper.make_graph(nodes, "cube", [helper.make_tensor_value_info("x", 1, [4, 8])],
                              [helper.make_tensor_value_info("y", 1, None)],
                              [helper.make_tensor(n, 1, a.shape, a.ravel()) for n, a in (("w", w), ("k", k))])
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17), helper.make_opsetid(DOMAIN, 1)],
                              ir_version=8)
    return model, w, k


def test_an_elementwise_op_is_one_traits_row_and_one_kernel(cube_op):
    model, w, k = _model()
    x = np.random.default_rng(1).uniform(-1, 1, (4, 8)).astype(np.float32)
    want = np.maximum((x @ w) ** 3, 0) + 2 * k ** 3  # the folded Cube's scale reaches its kernel

    got = nnbridge.run(model, {"x": x}, backend="reference", opt_level=0)["y"]  # the kernel runs
    np.testing.assert_allclose(got, want, rtol=1e-5, atol=1e-6)

    graph = nnbridge.load(model)
    run_passes(graph, ["fold", "eliminate", "infer-shapes"])
    cubes = [n for n in graph.nodes if n.op == "Cube"]
    assert len(cubes) == 1 and cubes[0].inputs[0].name == "m"  # the constant one was folded
    assert graph.values["c"].type.shape == (4, 8)  # the traits' shape rule, not onnx's inference

    run_passes(graph, ["fuse"])
    fused = [n for n in graph.nodes if n.op == "Fused"]
    assert len(fused) == 1 and [n.op for n in fused[0].attrs["body"].nodes] == ["MatMul", "Cube", "Relu", "Add"]

    cost = op_cost(cubes[0], float_bytes=2)
    assert cost.flops == 2.0 * 4 * 8  # flops_per_element from the row

    exe = nnbridge.compile(model, "rdu")
    np.testing.assert_allclose(exe.run({"x": x})["y"], want, rtol=5e-2, atol=5e-2)  # bf16 storage
    assert exe.report is not None


def test_without_its_kernel_the_toy_op_is_refused_by_name(cube_op):
    KERNELS.unregister((DOMAIN, "Cube"))
    try:
        with pytest.raises(nnbridge.UnsupportedOpError, match="Cube"):
            nnbridge.compile(_model()[0], "reference", opt_level=0)
    finally:
        kernel("Cube", domain=DOMAIN)(lambda ctx, x: x * x * x)


def _summed(model):
    """The model with sum(y) as a second output, shapes inferred: a scalar to differentiate."""
    graph = nnbridge.load(model)
    loss = graph.add_node("ReduceSum", [graph.outputs[0]], attrs={"keepdims": 0}, name="loss").outputs[0]
    graph.outputs.append(loss)
    run_passes(graph, ["fold", "eliminate", "infer-shapes"])
    return graph, loss


def test_a_gradient_rule_registered_after_the_row_reaches_autodiff_and_a_second_one_is_refused(cube_op):
    from nnbridge.base.errors import DuplicateRegistrationError
    from nnbridge.ir.gradients import RULES, rule
    from nnbridge.passes.autodiff import gradients

    model, w, _ = _model()
    graph, loss = _summed(model)
    with pytest.raises(nnbridge.UnsupportedOpError, match="Cube"):
        gradients(graph, loss, [graph.values["x"]])

    @rule("Cube", domain=DOMAIN)
    def cube_grad(b, node, grads):  # d(x³) = 3x² dx
        x = node.inputs[0]
        return [b.op("Mul", grads[0], b.op("Mul", b.scalar(3.0, x), b.op("Mul", x, x, like=x), like=x), like=x)]

    try:
        with pytest.raises(DuplicateRegistrationError, match=r"gradient rules: \('com.example', 'Cube'\)"):
            rule("Cube", domain=DOMAIN)(cube_grad)
        graph, loss = _summed(model)
        grad = gradients(graph, loss, [graph.values["x"]])["x"]
        graph.outputs.append(grad)
        x = np.random.default_rng(1).uniform(-1, 1, (4, 8)).astype(np.float32)
        got = nnbridge.compile(graph, "reference", opt_level=0).run({"x": x})[grad.name]
        m = x @ w
        want = (3 * m * m * (m > 0)) @ w.T  # through the Relu of m³
        np.testing.assert_allclose(got, want, rtol=1e-4, atol=1e-5)
    finally:
        RULES.unregister((DOMAIN, "Cube"))
