"""Every row of the decompositions table (``ir/decompositions.py``) computes what its op does:
the rewritten graph runs on the reference backend against onnxruntime on the original op, with
attributes away from their defaults, and the op is gone where the rule applies."""

from __future__ import annotations

import numpy as np
import onnx
import onnxruntime as ort
import pytest
from onnx import TensorProto, helper, numpy_helper

import nnbridge
from nnbridge.ir import op_traits
from nnbridge.ir.decompositions import DECOMPOSITIONS, LAYER_NORM_START_DIM, Target
from nnbridge.passes.decompose import decompose

RNG = np.random.default_rng(11)


def model(op: str, shapes: list[tuple], out_shape: tuple, consts: dict | None = None, **attrs) -> onnx.ModelProto:
    names = [f"x{i}" for i in range(len(shapes))]
    inits = [numpy_helper.from_array(np.asarray(a), n) for n, a in (consts or {}).items()]
    node = helper.make_node(op, names + list(consts or {}), ["y"], **attrs)
    graph = helper.make_graph([node], op, [helper.make_tensor_value_info(n, TensorProto.FLOAT, s)
                                           for n, s in zip(names, shapes)],
                              [helper.make_tensor_value_info("y", TensorProto.FLOAT, out_shape)], inits)
    return helper.make_model(graph, opset_imports=[helper.make_opsetid("", 18)], ir_version=9)


def gelu(approximate: str) -> onnx.ModelProto:
    """Gelu is an opset-20 op."""
    m = model("Gelu", [(2, 3, 5)], (2, 3, 5), approximate=approximate)
    m.opset_import[0].version = 20
    return m


CASES = {
    "hard-sigmoid-lbann": ("lbann", model("HardSigmoid", [(2, 3, 4, 4)], (2, 3, 4, 4), alpha=0.3, beta=0.4)),
    "hard-sigmoid-smaug": ("smaug", model("HardSigmoid", [(2, 3, 4, 4)], (2, 3, 4, 4), alpha=0.3, beta=0.4)),
    "hard-swish-lbann": ("lbann", model("HardSwish", [(2, 5)], (2, 5))),
    "hard-swish-smaug": ("smaug", model("HardSwish", [(1, 4, 3, 3)], (1, 4, 3, 3))),
    "spatial-mean-smaug": ("smaug", model("ReduceMean", [(2, 3, 5, 4)], (2, 3, 1, 1),
                                          {"axes": np.array([-1, 2], np.int64)})),
    "spatial-mean-squeezed-smaug": ("smaug", model("ReduceMean", [(2, 3, 5, 4)], (2, 3),
                                                   {"axes": np.array([2, 3], np.int64)}, keepdims=0)),
    "layer-norm-last-axis-lbann": ("lbann", model("LayerNormalization", [(2, 4, 6)], (2, 4, 6),
                                                  {"g": RNG.standard_normal(6).astype(np.float32),
                                                   "b": RNG.standard_normal(6).astype(np.float32)},
                                                  axis=-1, epsilon=1e-3)),
    "layer-norm-two-trailing-axes-lbann": ("lbann", model("LayerNormalization", [(2, 3, 4, 5)], (2, 3, 4, 5),
                                                          {"g": RNG.standard_normal((4, 5)).astype(np.float32)},
                                                          axis=2)),
    "broadcast-mul-lbann": ("lbann", model("Mul", [(2, 8, 4, 4), (2, 8, 1, 1)], (2, 8, 4, 4))),
    "broadcast-sub-lower-rank-lbann": ("lbann", model("Sub", [(2, 3, 6), (6,)], (2, 3, 6))),
    "broadcast-div-both-lbann": ("lbann", model("Div", [(2, 3, 1), (2, 1, 5)], (2, 3, 5))),
    "broadcast-add-lbann": ("lbann", model("Add", [(2, 1, 6), (2, 4, 6)], (2, 4, 6))),
    "gelu-exact-lbann": ("lbann", gelu("none")),  # LBANN's GeluOperator is the tanh approximation
}


def feeds_for(m: onnx.ModelProto) -> dict[str, np.ndarray]:
    shapes = {v.name: [d.dim_value for d in v.type.tensor_type.shape.dim] for v in m.graph.input}
    return {n: (RNG.standard_normal(s) * 4).astype(np.float32) + (1.5 if n == "x1" else 0) for n, s in shapes.items()}


@pytest.mark.parametrize("case", sorted(CASES))
def test_a_decomposition_computes_what_its_op_does(case):
    target, m = CASES[case]
    op = m.graph.node[0].op_type
    feeds = feeds_for(m)
    want = ort.InferenceSession(m.SerializeToString(), providers=["CPUExecutionProvider"]).run(None, feeds)[0]
    graph = nnbridge.load(m)
    rewritten = decompose(graph, Target(target))
    assert rewritten == {op: 1}
    if op in ("Add", "Sub", "Mul", "Div"):  # the op stays, on operands tiled to its output's shape
        (node,) = [n for n in graph.nodes if n.op == op]
        assert all(tuple(v.type.shape) == tuple(node.outputs[0].type.shape) for v in node.inputs)
    else:
        assert op not in [n.op for n in graph.nodes]
    assert [v.name for v in graph.outputs] == ["y"]
    got = nnbridge.run(graph, feeds)["y"]
    np.testing.assert_allclose(got, want, rtol=1e-5, atol=1e-5)


def test_a_rule_leaves_what_the_target_takes_as_it_is():
    """LBANN develop normalizes trailing dims itself; a whole-sample LayerNorm is LBANN's own;
    same-shape operands need no tiling; SMAUG's mean over one spatial axis has no pool."""
    kept = [
        (Target("lbann", frozenset({LAYER_NORM_START_DIM})), CASES["layer-norm-last-axis-lbann"][1]),
        (Target("lbann"), model("LayerNormalization", [(2, 4, 6)], (2, 4, 6),
                                {"g": np.ones((4, 6), np.float32)}, axis=1)),
        (Target("lbann"), model("Mul", [(2, 3), (2, 3)], (2, 3))),
        (Target("smaug"), model("ReduceMean", [(2, 3, 5, 4)], (2, 3, 5, 1), {"axes": np.array([3], np.int64)})),
        (Target("smaug"), model("HardSwish", [(2, 3, 4)], (2, 3, 4))),  # SMAUG's BatchNorm is 2-D or 4-D
        (Target("lbann"), gelu("tanh")),  # LBANN's GeluOperator
    ]
    for target, m in kept:
        graph = nnbridge.load(m)
        assert not decompose(graph, target)
        assert [n.op for n in graph.nodes] == [m.graph.node[0].op_type]


def test_the_table_is_filed_in_the_op_traits():
    for (domain, op, target), fn in DECOMPOSITIONS.items():
        assert op_traits(op, domain).decompositions[target] is fn
    assert set(op_traits("HardSwish").decompositions) == {"smaug", "lbann"}


def test_a_rule_registered_later_reaches_the_op_and_a_second_one_is_refused():
    from nnbridge.base.errors import DuplicateRegistrationError
    from nnbridge.ir.decompositions import decomposes

    @decomposes("Cube", "lbann", domain="com.example")
    def cube(b, node, target):
        return None

    try:
        assert op_traits("Cube", "com.example").decompositions == {"lbann": cube}
        with pytest.raises(DuplicateRegistrationError, match=r"decompositions: \('com.example', 'Cube', 'lbann'\) "
                                                              r"is defined twice"):
            decomposes("Cube", "lbann", domain="com.example")(lambda b, node, target: None)
    finally:
        DECOMPOSITIONS.unregister(("com.example", "Cube", "lbann"))


def test_rows_merged_from_the_batch_through_a_gemm_become_a_matmul_over_the_last_axis():
    """HF's Conv1D: x.view(-1, k) → Gemm → .view(*x.shape[:-1], n), with transB, alpha and beta."""
    w = RNG.standard_normal((6, 4)).astype(np.float32)
    c = RNG.standard_normal(6).astype(np.float32)
    inits = [numpy_helper.from_array(w, "w"), numpy_helper.from_array(c, "c"),
             numpy_helper.from_array(np.array([-1, 4], np.int64), "rows"),
             numpy_helper.from_array(np.array([2, 3, 6], np.int64), "back")]
    nodes = [helper.make_node("Reshape", ["x", "rows"], ["flat"]),
             helper.make_node("Gemm", ["flat", "w", "c"], ["g"], transB=1, alpha=0.5, beta=2.0),
             helper.make_node("Reshape", ["g", "back"], ["y"])]
    graph = helper.make_graph(nodes, "conv1d", [helper.make_tensor_value_info("x", TensorProto.FLOAT, (2, 3, 4))],
                              [helper.make_tensor_value_info("y", TensorProto.FLOAT, (2, 3, 6))], inits)
    m = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 18)], ir_version=9)
    x = RNG.standard_normal((2, 3, 4)).astype(np.float32)
    want = ort.InferenceSession(m.SerializeToString(), providers=["CPUExecutionProvider"]).run(None, {"x": x})[0]
    g = nnbridge.load(m)
    assert decompose(g, Target("lbann")) == {"Reshape": 1}
    assert sorted(n.op for n in g.nodes) == ["Add", "MatMul"]
    np.testing.assert_allclose(nnbridge.run(g, {"x": x})["y"], want, rtol=1e-5, atol=1e-5)


def test_a_same_shape_reshape_is_nothing_for_lbann():
    m = model("Reshape", [(2, 5)], (2, 5), {"s": np.array([2, 5], np.int64)})
    g = nnbridge.load(m)
    assert decompose(g, Target("lbann")) == {"Reshape": 1}
    assert not g.nodes and [v.name for v in g.outputs] == ["x0"]
