"""Dynamic input dims (named, unnamed, -1) run as they are, and are pinned on any command
(``--input-shape``, ``--dim``) before an exporter or simulator sees the graph; once pinned, the
shape arithmetic folds away and every figure equals a statically exported copy's."""

from __future__ import annotations

import json

import numpy as np
import onnx
import onnxruntime as ort
import pytest
from onnx import TensorProto, helper, numpy_helper

import nnbridge
from nnbridge.base.errors import InputError

RNG = np.random.default_rng(3)


def detector(dims: list) -> onnx.ModelProto:
    """Conv → Relu → GlobalAveragePool → a Shape → Gather → Concat → Reshape flatten → Gemm, as
    torch exports ``x.view(x.size(0), -1)``."""
    weights = np.random.default_rng(0)
    inits = [numpy_helper.from_array(weights.standard_normal((8, 3, 3, 3)).astype(np.float32), "w"),
             numpy_helper.from_array(weights.standard_normal((8, 2)).astype(np.float32), "fc"),
             numpy_helper.from_array(np.array(0, np.int64), "zero"),
             numpy_helper.from_array(np.array([0], np.int64), "axes"),
             numpy_helper.from_array(np.array([-1], np.int64), "rest")]
    nodes = [helper.make_node("Conv", ["x", "w"], ["c"], pads=[1, 1, 1, 1]),
             helper.make_node("Relu", ["c"], ["r"]),
             helper.make_node("GlobalAveragePool", ["r"], ["p"]),
             helper.make_node("Shape", ["p"], ["s"]),
             helper.make_node("Gather", ["s", "zero"], ["n"], axis=0),
             helper.make_node("Unsqueeze", ["n", "axes"], ["n1"]),
             helper.make_node("Concat", ["n1", "rest"], ["target"], axis=0),
             helper.make_node("Reshape", ["p", "target"], ["flat"]),
             helper.make_node("MatMul", ["flat", "fc"], ["y"])]
    graph = helper.make_graph(nodes, "det", [helper.make_tensor_value_info("x", TensorProto.FLOAT, dims)],
                              [helper.make_tensor_value_info("y", TensorProto.FLOAT, None)], inits)
    return helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)], ir_version=9)


NAMED = ["batch", 3, "height", "width"]
UNNAMED = [-1, 3, None, 16]  # -1 and an unnamed dim: dynamic, not errors


def oracle(model: onnx.ModelProto, x: np.ndarray) -> np.ndarray:
    return ort.InferenceSession(model.SerializeToString(), providers=["CPUExecutionProvider"]).run(None, {"x": x})[0]


@pytest.mark.parametrize("dims", [NAMED, UNNAMED], ids=["named", "unnamed"])
def test_dynamic_models_run_as_they_are(dims):
    model = detector(dims)
    x = RNG.standard_normal((2, 3, 12, 16)).astype(np.float32)
    np.testing.assert_allclose(nnbridge.run(model, {"x": x})["y"], oracle(model, x), rtol=1e-5, atol=1e-5)
    for backend in ("smv", "rdu"):  # simulators pin the shapes of the inputs they are given
        np.testing.assert_allclose(nnbridge.run(model, {"x": x}, backend=backend)["y"], oracle(model, x),
                                   rtol=0.05, atol=0.05)


@pytest.mark.parametrize("dims, pins", [
    (NAMED, {"dims": {"batch": 1, "height": 16, "width": 16}}),
    (UNNAMED, {"input_shapes": {"x": (1, 3, 16, 16)}}),
], ids=["named", "unnamed"])
def test_pinned_models_fold_their_shape_arithmetic_and_price_like_a_static_export(dims, pins):
    graph = nnbridge.load(detector(dims), **pins)
    assert graph.inputs[0].type.shape == (1, 3, 16, 16)
    assert not {"Shape", "Gather", "Concat", "Unsqueeze"} & {n.op for n in graph.nodes}
    static = detector([1, 3, 16, 16])  # its shape chain folds at opt level 2 (RDU's level 1 keeps it)
    assert price(graph, "smv") == price(static, "smv") and price(graph, "rdu") == price(static, "rdu")
    x = RNG.standard_normal((1, 3, 16, 16)).astype(np.float32)
    np.testing.assert_allclose(nnbridge.run(graph, {"x": x})["y"], oracle(static, x), rtol=1e-5, atol=1e-5)


def price(model, backend: str) -> dict:
    exe = nnbridge.compile(model, backend, opt_level=2, **({"perf_only": True} if backend == "smv" else {}))
    report = exe.report if backend == "smv" else exe.section_report()
    return {"rows": report.rows, "totals": report.totals}


def test_simulators_and_writers_refuse_unpinned_dims_in_one_line_that_says_how(tmp_path, cli):
    path = tmp_path / "det.onnx"
    onnx.save(detector(NAMED), path)
    out = tmp_path / "out"
    for argv in (["simulate", path], ["measure-performance", path], ["compile", path, "-o", tmp_path / "d.pef"],
                 ["convert", path, out / "d_topo.pbtxt"], ["convert", path, out / "d.prototext"], ["run", path]):
        code, text = cli(*argv)
        assert code == 1 and len(text.strip().splitlines()) == 1, (argv, text)
        assert "'x' [batch, 3, height, width]" in text and "--dim batch=1 --dim height=N --dim width=N" in text
    assert not (tmp_path / "out").exists() and not (tmp_path / "d.pef").exists()
    pins = ["--dim", "batch=1", "--dim", "height=16", "--dim", "width=16"]
    for target in ("d_topo.pbtxt", "d.prototext"):
        code, text = cli("convert", path, tmp_path / "out" / target, *pins)
        assert code == 0, text
    x = RNG.standard_normal((1, 3, 16, 16)).astype(np.float32)
    for written in (tmp_path / "out" / "d_topo.pbtxt", tmp_path / "out" / "d.prototext"):
        back = nnbridge.load(written)
        given = x.transpose(0, 2, 3, 1) if back.inputs[0].type.shape[-1] == 3 else x  # SMV stores NHWC
        feeds = {back.inputs[0].name: given.astype(back.inputs[0].type.dtype.numpy)}
        got = next(iter(nnbridge.run(back, feeds).values()))
        np.testing.assert_allclose(got.reshape(1, 2), oracle(detector(NAMED), x), rtol=0.02, atol=0.02)
    code, text = cli("simulate", path, *pins, "--json", "-")
    assert code == 0 and json.loads(text)["totals"]["latency_ms"] > 0


@pytest.mark.parametrize("pins, message", [
    ({"input_shapes": {"y": (1, 3, 8, 8)}}, "names 'y', not an input of 'det' (its inputs: x)"),
    ({"dims": {"depth": 2}}, "names 'depth', not a symbolic dim"),
    ({"dims": {"batch": 0}}, "a dimension is a positive integer"),
    ({"input_shapes": {"x": (1, 4, 8, 8)}}, "dim 1 of [batch, 3, height, width] is fixed at 3"),
    ({"input_shapes": {"x": (1, 3, 8)}}, "has 3 dims; the input is [batch, 3, height, width] (4 dims)"),
    ({"input_shapes": {"x": (2, 3, 8, 8)}, "dims": {"batch": 1}}, "gives batch=2, --dim batch=1"),
])
def test_pins_that_cannot_apply_are_one_line_errors(pins, message):
    with pytest.raises(InputError) as info:
        nnbridge.load(detector(NAMED), **pins)
    assert message in str(info.value)


def test_three_hundred_inexpressible_nodes_are_one_line_per_reason_with_counts_root_cause_first(tmp_path, cli):
    def chain(dims) -> onnx.ModelProto:
        nodes, prev = [], "x"
        for i in range(150):
            nodes += [helper.make_node("Sin", [prev], [f"s{i}"], name=f"sin_{i}"),
                      helper.make_node("Cos", [f"s{i}"], [f"c{i}"], name=f"cos_{i}")]
            prev = f"c{i}"
        graph = helper.make_graph(nodes, "waves", [helper.make_tensor_value_info("x", TensorProto.FLOAT, dims)],
                                  [helper.make_tensor_value_info(prev, TensorProto.FLOAT, dims)])
        return helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)], ir_version=9)

    static, dynamic = tmp_path / "static.onnx", tmp_path / "dynamic.onnx"
    onnx.save(chain([1, 8]), static)
    onnx.save(chain(["batch", 8]), dynamic)
    code, text = cli("convert", static, tmp_path / "out" / "w_topo.pbtxt")
    lines = text.strip().splitlines()
    assert code == 1 and len(lines) == 3 and "300 node(s)" in lines[0]
    assert lines[1].strip().startswith("Sin (150 nodes: 'sin_0', 'sin_1', 'sin_2', …): ")
    assert lines[2].strip().startswith("Cos (150 nodes: 'cos_0', 'cos_1', 'cos_2', …): ")
    code, text = cli("convert", dynamic, tmp_path / "out" / "w_topo.pbtxt")  # the root cause, not 300 consequences
    assert code == 1 and len(text.strip().splitlines()) == 1 and "--dim batch=1" in text
