"""ONNX node-test conformance of the reference backend, and the import normalization it relies on.

Every case of ``collect_testcases(None)`` must end as passed or as a clean
``UnsupportedOpError``: never mismatched, never crashed (a FormatError or a
KernelError counts as a crash).
"""

from __future__ import annotations

import numpy as np
import onnx
import onnx.defs
import pytest
from onnx import TensorProto, helper

import nnbridge
from nnbridge.apps import conformance
from nnbridge.base.errors import UnsupportedOpError
from nnbridge.check import run_onnxruntime
from nnbridge.converters.onnx.opset import TYPE_ONLY_BUMPS
from nnbridge.ir.schema import IR_OPSET

#: passes reached so far (the acceptance target is 1300); raise it as kernels land
PASS_FLOOR = 1810


@pytest.fixture(scope="module")
def outcomes() -> list[conformance.Outcome]:
    return conformance.run_all(["nnbridge"], progress=False)["nnbridge"]


@pytest.mark.slow
def test_no_case_mismatches_or_crashes(outcomes):
    bad = [f"{o.status}: {o.case} ({o.op}): {o.detail}" for o in outcomes if o.status in ("mismatched", "crashed")]
    assert not bad, "\n".join(bad)


@pytest.mark.slow
def test_pass_count_reaches_the_floor(outcomes):
    passed = sum(o.status == "passed" for o in outcomes)
    assert len(outcomes) == len(conformance.collect())
    assert passed >= PASS_FLOOR, f"{passed} of {len(outcomes)} node tests pass; the floor is {PASS_FLOOR}"


# -- newer opsets: TYPE_ONLY_BUMPS must be exactly the type-only changes in onnx.defs -----------

def _signature(schema):
    attrs = sorted((name, a.type, a.default_value.SerializeToString()) for name, a in schema.attributes.items())
    io = [(p.name, p.option, p.type_str) for p in (*schema.inputs, *schema.outputs)]
    return attrs, io, sorted(t.type_param_str for t in schema.type_constraints)


def _type_only_bumps_in_onnx() -> dict[str, int]:
    found: dict[str, int] = {}
    for schema in onnx.defs.get_all_schemas_with_history():
        if schema.domain or schema.since_version <= IR_OPSET or schema.deprecated:
            continue
        try:
            old = onnx.defs.get_schema(schema.name, IR_OPSET, "")
        except onnx.defs.SchemaError:
            continue  # an op that is new after the IR opset
        if _signature(old) == _signature(schema):
            found[schema.name] = max(found.get(schema.name, 0), schema.since_version)
    return found


def test_type_only_bumps_match_onnx_schemas():
    for op, version in TYPE_ONLY_BUMPS.items():
        new = onnx.defs.get_schema(op, version, "")
        assert new.since_version == version > IR_OPSET, op
        assert _signature(new) == _signature(onnx.defs.get_schema(op, IR_OPSET, "")), op
    assert _type_only_bumps_in_onnx() == TYPE_ONLY_BUMPS


def _single_node(op, opset, inputs, outputs, initializers=(), **attrs):
    node = helper.make_node(op, [n for n, *_ in inputs if n] + [t.name for t in initializers],
                            [n for n, *_ in outputs], **attrs)
    graph = helper.make_graph([node], op.lower(), [helper.make_tensor_value_info(*i) for i in inputs],
                              [helper.make_tensor_value_info(*o) for o in outputs], list(initializers))
    return helper.make_model(graph, opset_imports=[helper.make_opsetid("", opset)], ir_version=7)


def test_newer_op_with_a_new_behaviour_is_refused_cleanly():
    model = _single_node("SpaceToDepth", 28, [("x", TensorProto.FLOAT, [1, 1, 4, 4])],
                         [("y", TensorProto.FLOAT, None)], blocksize=2, mode="CRD")
    with pytest.raises(UnsupportedOpError, match="mode CRD"):
        nnbridge.load(model)
    model.graph.node[0].attribute[1].s = b"DCR"  # the default mode is the IR behaviour: accepted
    assert [n.op for n in nnbridge.load(model)] == ["SpaceToDepth"]


# -- older opsets: our adapters where onnx.version_converter has no upgrade path ---------------

def test_cast_1_type_name_becomes_the_enum_code():
    model = _single_node("Cast", 1, [("x", TensorProto.FLOAT, [3])], [("y", TensorProto.INT32, [3])], to="INT32")
    out = nnbridge.run(model, {"x": np.array([1.7, -2.2, 3.0], np.float32)})
    np.testing.assert_array_equal(out["y"], np.array([1, -2, 3], np.int32))


def test_split_1_sizes_attribute_becomes_an_input():
    model = _single_node("Split", 1, [("x", TensorProto.FLOAT, [5])],
                         [("a", TensorProto.FLOAT, None), ("b", TensorProto.FLOAT, None)], axis=0, split=[2, 3])
    out = nnbridge.run(model, {"x": np.arange(5, dtype=np.float32)})
    np.testing.assert_array_equal(out["b"], [2, 3, 4])


def test_tile_1_count_and_axis_become_repeats():
    init = [helper.make_tensor("tiles", TensorProto.INT64, [], [3]),
            helper.make_tensor("axis", TensorProto.INT64, [], [1])]
    model = _single_node("Tile", 1, [("x", TensorProto.FLOAT, [2, 2])], [("y", TensorProto.FLOAT, None)], init)
    x = np.arange(4, dtype=np.float32).reshape(2, 2)
    np.testing.assert_array_equal(nnbridge.run(model, {"x": x})["y"], np.tile(x, (1, 3)))


def _scan_8(**attrs):
    body = helper.make_graph(
        [helper.make_node("Add", ["s_in", "x_t"], ["s_out"]), helper.make_node("Identity", ["s_out"], ["y_t"])],
        "body", [helper.make_tensor_value_info(n, TensorProto.FLOAT, [2]) for n in ("s_in", "x_t")],
        [helper.make_tensor_value_info(n, TensorProto.FLOAT, [2]) for n in ("s_out", "y_t")])
    node = helper.make_node("Scan", ["", "s0", "x"], ["s", "y"], body=body, num_scan_inputs=1, **attrs)
    graph = helper.make_graph([node], "scan8", [helper.make_tensor_value_info("s0", TensorProto.FLOAT, [3, 2]),
                                                helper.make_tensor_value_info("x", TensorProto.FLOAT, [3, 4, 2])],
                              [helper.make_tensor_value_info("s", TensorProto.FLOAT, [3, 2]),
                               helper.make_tensor_value_info("y", TensorProto.FLOAT, [3, 4, 2])])
    return helper.make_model(graph, opset_imports=[helper.make_opsetid("", 8)], ir_version=3)


@pytest.mark.parametrize("direction", [0, 1])
def test_scan_8_keeps_its_batch_axis(direction):
    """onnx's converter drops Scan-8's batch axis; our adapter scans over the batch instead."""
    rng = np.random.default_rng(3)
    s0, x = rng.standard_normal((3, 2)).astype(np.float32), rng.standard_normal((3, 4, 2)).astype(np.float32)
    out = nnbridge.run(_scan_8(directions=[direction]), {"s0": s0, "x": x})
    steps = x[:, ::-1] if direction else x
    running = s0[:, None, :] + np.cumsum(steps, axis=1)
    np.testing.assert_allclose(out["y"], running, rtol=1e-6)
    np.testing.assert_allclose(out["s"], running[:, -1], rtol=1e-6)


def test_scan_8_with_sequence_lengths_is_refused():
    model = _scan_8()
    model.graph.node[0].input[0] = "lens"
    model.graph.input.append(helper.make_tensor_value_info("lens", TensorProto.INT32, [3]))
    with pytest.raises(UnsupportedOpError, match="sequence_lens"):
        nnbridge.load(model)


def test_element_types_unknown_to_the_ir_are_unsupported_not_crashes():
    model = _single_node("Cast", 25, [("x", TensorProto.FLOAT, [2])], [("y", TensorProto.FLOAT6E2M3, [2])],
                         to=TensorProto.FLOAT6E2M3)
    with pytest.raises(UnsupportedOpError, match="FLOAT6E2M3 has no IR equivalent"):
        nnbridge.load(model)


# -- Cast to and from strings: onnx ships no node test for it, so onnxruntime is the oracle ------

@pytest.mark.parametrize("src, values", [
    (TensorProto.FLOAT, np.array([0.1, -2.5, 1e-5, np.inf, -np.inf, np.nan, 123456789], np.float32)),
    (TensorProto.DOUBLE, np.array([0.33, -8.25, 3.3e-5, 1e300, -0.0, np.nan, 7], np.float64)),
    (TensorProto.FLOAT16, np.array([0.1, -2.5, 1e-5, np.inf, 65504, np.nan, 3], np.float16)),
    (TensorProto.INT64, np.array([1, -2, 3, 0, 2**40, 7, -9], np.int64)),
])
def test_numbers_to_strings_like_onnxruntime(src, values):
    model = _single_node("Cast", 21, [("x", src, [7])], [("y", TensorProto.STRING, [7])], to=TensorProto.STRING)
    ours = nnbridge.run(model, {"x": values})["y"]
    np.testing.assert_array_equal(ours, run_onnxruntime(model, {"x": values})["y"])


@pytest.mark.parametrize("dst", [TensorProto.FLOAT, TensorProto.DOUBLE, TensorProto.FLOAT16, TensorProto.INT32])
def test_strings_to_numbers_like_onnxruntime(dst):
    text = ["12", "-7", "1e3", "0", "+INF", "nan", "-inf"] if dst != TensorProto.INT32 else \
        ["12", "-7", "1000", "0", "2147483647", "5", "-2147483648"]
    values = np.array(text, dtype=object)
    model = _single_node("Cast", 21, [("x", TensorProto.STRING, [7])], [("y", dst, [7])], to=dst)
    ours = nnbridge.run(model, {"x": values})["y"]
    theirs = run_onnxruntime(model, {"x": values})["y"]
    assert ours.dtype == theirs.dtype
    np.testing.assert_array_equal(ours, theirs)


def test_adapters_reach_into_subgraphs():
    def branch(name, to):
        return helper.make_graph([helper.make_node("Cast", ["x"], [name], to=to)], name, [],
                                 [helper.make_tensor_value_info(name, TensorProto.INT32, [2])])

    node = helper.make_node("If", ["c"], ["y"], then_branch=branch("t", "INT32"), else_branch=branch("e", "INT32"))
    graph = helper.make_graph([node], "if5", [helper.make_tensor_value_info("c", TensorProto.BOOL, []),
                                              helper.make_tensor_value_info("x", TensorProto.FLOAT, [2])],
                              [helper.make_tensor_value_info("y", TensorProto.INT32, [2])])
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 5)], ir_version=3)
    out = nnbridge.run(model, {"c": np.array(True), "x": np.array([2.7, -1.5], np.float32)})
    np.testing.assert_array_equal(out["y"], np.array([2, -1], np.int32))


@pytest.mark.parametrize("saturate, expected", [(1, [448, -448, 0.3125]), (0, [np.nan, np.nan, 0.3125])])
def test_strings_to_float8_follow_the_saturate_rule(saturate, expected):
    model = _single_node("Cast", 21, [("x", TensorProto.STRING, [3])], [("y", TensorProto.FLOAT8E4M3FN, [3])],
                         to=TensorProto.FLOAT8E4M3FN, saturate=saturate)
    out = nnbridge.run(model, {"x": np.array(["1e6", "-INF", "0.3"], dtype=object)})["y"]
    np.testing.assert_array_equal(out.astype(np.float32), np.array(expected, np.float32))
