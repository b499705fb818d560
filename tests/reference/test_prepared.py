"""Kernels' prepared callables (``@kernel(prepare=...)``: the node's work done once, when the plan
is built) return exactly what their kernels return: over every ONNX node-test case of each op that
prepares, with the case's other inputs as the plan's weights, and when a call brings a shape
other than the one the plan was prepared for."""

from __future__ import annotations

import numpy as np
import pytest
from single_node import node_model

import nnbridge
from nnbridge.apps import conformance
from nnbridge.kernels import get_kernel, registered_ops
from nnbridge.kernels.evaluator import KernelContext

PREPARED = sorted(op for (domain, op), spec in registered_ops().items() if spec.prepare is not None and not domain)
#: ops whose node tests hold none of the cases they prepare, and the tests that judge those cases
ELSEWHERE = {"Conv": "test_prepared_conv.py (no node test is a 1×1 or a depthwise convolution)",
             "LayerNormalization": "test_prepared_norms_equal_their_kernels (every node test also asks for the "
                                   "statistics outputs, which the prepared form leaves to the kernel)"}


def _same(got, want) -> bool:
    if isinstance(want, tuple):
        return isinstance(got, tuple) and len(got) == len(want) and all(_same(g, w) for g, w in zip(got, want))
    got, want = np.asarray(got), np.asarray(want)
    return (got.dtype == want.dtype and got.shape == want.shape
            and np.array_equal(got, want, equal_nan=want.dtype.kind in "fc"))


def _cases(op: str):
    for case, _ in conformance.collect(op):
        if len(case.model.graph.node) == 1 and case.data_sets:
            yield case


def _one_node(model):
    graph = nnbridge.load(model)
    return graph, graph.nodes[0]


@pytest.mark.parametrize("op", PREPARED)
def test_prepared_equals_the_kernel_on_the_node_tests(op):
    prepared = 0
    for case in _cases(op):
        graph, node = _one_node(case.model)
        if len(graph.nodes) != 1 or node.op != op:
            continue
        spec = get_kernel(node.op, node.domain)
        if spec.unsupported_reason(node):
            continue
        for inputs, _ in case.data_sets:
            given = dict(zip([v.name for v in graph.inputs], inputs))
            args = [None if v is None else given[v.name] for v in node.inputs]
            for constant_from in (1, len(args)):  # the other inputs as weights; then none (shapes only)
                consts = tuple(a if i >= constant_from else None for i, a in enumerate(args))
                fn = spec.prepared(node, consts)
                if fn is None:
                    continue
                ctx = KernelContext(node)
                try:
                    want = spec.fn(ctx, *args, **spec.bind(node))
                except Exception as exc:  # noqa: BLE001 - then the prepared callable must fail too
                    with pytest.raises(type(exc)):
                        fn(ctx, *args)
                    continue
                assert _same(fn(ctx, *args), want), f"{case.name}: prepared {op} differs from its kernel"
                prepared += 1
    assert prepared or op in ELSEWHERE, f"no node test of {op} ran a prepared callable"


@pytest.mark.parametrize("op, inputs, attrs, other", [
    ("Reshape", [("x", np.arange(6.0).reshape(2, 3)), ("shape", np.array([3, -1]))], {}, np.arange(12.0).reshape(4, 3)),
    ("Unsqueeze", [("x", np.arange(6.0).reshape(2, 3)), ("axes", np.array([0]))], {}, np.arange(4.0)),
    ("Flatten", [("x", np.arange(24.0).reshape(2, 3, 4))], {"axis": 2}, np.arange(6.0).reshape(1, 2, 3)),
    ("Expand", [("x", np.arange(3.0).reshape(3, 1)), ("shape", np.array([2, 3, 4]))], {}, np.arange(4.0)),
    ("MatMul", [("x", np.arange(6, dtype=np.float32).reshape(1, 2, 3)), ("w", np.ones((3, 4), np.float32))], {},
     np.arange(15, dtype=np.float32).reshape(5, 3)),
])
def test_a_call_with_another_shape_runs_the_kernel(op, inputs, attrs, other):
    """A subgraph's values may change shape between calls: a prepared callable checks the static
    shape it was prepared for and otherwise computes what the kernel does."""
    model, _ = node_model(op, inputs, attrs, inits=[name for name, _ in inputs[1:]])
    graph = nnbridge.load(model)
    node = graph.nodes[0]
    spec = get_kernel(op)
    consts = tuple(None if v is None else graph.initializers.get(v.name) for v in node.inputs)
    fn = spec.prepared(node, consts)
    assert fn is not None
    ctx = KernelContext(node)
    for x in (inputs[0][1], other):
        assert _same(fn(ctx, x, *consts[1:]), spec.fn(ctx, x, *consts[1:], **spec.bind(node)))


@pytest.mark.parametrize("op, with_bias", [("LayerNormalization", True), ("LayerNormalization", False),
                                          ("RMSNormalization", False)])
def test_prepared_norms_equal_their_kernels(op, with_bias):
    """A prepared float32 norm equals its kernel bit for bit: on the shape it was prepared for, on
    a transposed view of it (ConvNeXt's channels-last norm between two Transposes), and on another
    shape (then it runs the kernel)."""
    from nnbridge.kernels import compiled

    compiled.load("reduce")
    rng = np.random.default_rng(3)
    x = (rng.standard_normal((2, 6, 16)) * 3 + 1).astype(np.float32)
    weights = [("scale", rng.standard_normal(16).astype(np.float32))]
    if with_bias:
        weights.append(("bias", rng.standard_normal(16).astype(np.float32)))
    model, _ = node_model(op, [("x", x), *weights], {"epsilon": 1e-3}, inits=[name for name, _ in weights], opset=23)
    graph = nnbridge.load(model)
    node = graph.nodes[0]
    spec = get_kernel(op)
    consts = tuple(None if v is None else graph.initializers.get(v.name) for v in node.inputs)
    fn = spec.prepared(node, consts)
    assert fn is not None and spec.prepared(node, (None,) * len(consts)) is None  # weights given at run time: none
    ctx = KernelContext(node)
    transposed = np.ascontiguousarray(x.transpose(0, 2, 1)).transpose(0, 2, 1)
    for given in (x, transposed, x[:1], x.astype(np.float64)):
        assert _same(fn(ctx, given, *consts[1:]), spec.fn(ctx, given, *consts[1:], **spec.bind(node)))
