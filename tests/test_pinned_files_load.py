"""Every ONNX file nnbridge writes from a pinned model loads and runs in onnxruntime, with the
unpinned model's numbers: pinned shapes reach no subgraph where they do not hold, and an If whose
condition folds to a constant becomes the branch it takes (onnxruntime checks both branches'
shapes when it loads a file, and the untaken one may be impossible under the pinned shapes)."""

from __future__ import annotations

import numpy as np
import onnx
import onnxruntime as ort
import pytest
from architecture_fixtures import MANIFEST, load
from onnx import TensorProto, helper, numpy_helper

import nnbridge
from nnbridge.zoo.corpus import DATA

mk = helper.make_node
RNG = np.random.default_rng(31)


def model(nodes, inputs: dict, outputs: dict, consts: dict | None = None) -> onnx.ModelProto:
    graph = helper.make_graph(
        nodes, "pinned", [helper.make_tensor_value_info(n, TensorProto.FLOAT, d) for n, d in inputs.items()],
        [helper.make_tensor_value_info(n, TensorProto.FLOAT, d) for n, d in outputs.items()],
        [numpy_helper.from_array(np.asarray(v), k) for k, v in (consts or {}).items()])
    return helper.make_model(graph, opset_imports=[helper.make_opsetid("", 18)], ir_version=9)


def branch(name: str, nodes, out: str, dims) -> onnx.GraphProto:
    return helper.make_graph(nodes, name, [], [helper.make_tensor_value_info(out, TensorProto.FLOAT, dims)])


def squeeze_if_one() -> onnx.ModelProto:
    """``x.squeeze(2) if x.shape[2] == 1 else x.amax(2)``, as torch exports a shape test: the
    then-branch's Squeeze is impossible whenever ``n`` is not 1."""
    then = branch("then", [mk("Squeeze", ["x", "axis2"], ["t"])], "t", ["batch", 3])
    other = branch("else", [mk("ReduceMax", ["x", "axis2"], ["e"], keepdims=0)], "e", ["batch", 3])
    return model([mk("Shape", ["x"], ["s"]), mk("Gather", ["s", "two"], ["n"], axis=0),
                  mk("Equal", ["n", "one"], ["c"]),
                  mk("If", ["c"], ["picked"], then_branch=then, else_branch=other), mk("Relu", ["picked"], ["y"])],
                 {"x": ["batch", 3, "n"]}, {"y": ["batch", 3]},
                 {"two": np.array(2, np.int64), "one": np.array(1, np.int64), "axis2": np.array([2], np.int64)})


def oracle(source: onnx.ModelProto | str, feeds: dict) -> list[np.ndarray]:
    data = source.SerializeToString() if isinstance(source, onnx.ModelProto) else str(source)
    return ort.InferenceSession(data, providers=["CPUExecutionProvider"]).run(None, feeds)


def assert_loads_and_agrees(written, original, feeds: dict) -> None:
    """``written`` loads in onnxruntime and computes what ``original`` computes on ``feeds``."""
    for got, want in zip(oracle(str(written), feeds), oracle(original, feeds), strict=True):
        np.testing.assert_allclose(got, want, rtol=1e-4, atol=1e-5)


@pytest.mark.parametrize("flags, shape", [
    (["--dim", "batch=1", "--dim", "n=2"], (1, 3, 2)),
    (["--input-shape", "x=2x3x5"], (2, 3, 5)),
    (["--input-shape", "x=2x3x1"], (2, 3, 1)),  # the then-branch taken
], ids=["dims", "input-shape", "then-taken"])
def test_a_pinned_if_whose_untaken_branch_squeezes_a_dim_loads_in_onnxruntime(flags, shape, tmp_path, cli):
    source = tmp_path / "branchy.onnx"
    onnx.save(squeeze_if_one(), source)
    x = RNG.standard_normal(shape).astype(np.float32)
    code, text = cli("convert", source, tmp_path / "cli.onnx", *flags)
    assert code == 0, text
    assert_loads_and_agrees(tmp_path / "cli.onnx", squeeze_if_one(), {"x": x})
    nnbridge.convert(str(source), tmp_path / "api.onnx", input_shapes={"x": shape})
    assert_loads_and_agrees(tmp_path / "api.onnx", squeeze_if_one(), {"x": x})
    nnbridge.save(nnbridge.load(squeeze_if_one(), input_shapes={"x": shape}), tmp_path / "graph.onnx")
    assert_loads_and_agrees(tmp_path / "graph.onnx", squeeze_if_one(), {"x": x})
    written = onnx.load(tmp_path / "cli.onnx")
    assert "If" not in {n.op_type for n in written.graph.node}, "the constant condition's If is inlined"


def test_an_if_whose_condition_stays_dynamic_keeps_both_branches(tmp_path):
    """Pinning only the batch leaves ``n`` free: the If stays, and the file runs for either n."""
    nnbridge.convert(squeeze_if_one(), tmp_path / "batch.onnx", dims={"batch": 2})
    assert "If" in {n.op_type for n in onnx.load(tmp_path / "batch.onnx").graph.node}
    for n in (1, 4):
        assert_loads_and_agrees(tmp_path / "batch.onnx", squeeze_if_one(),
                                {"x": RNG.standard_normal((2, 3, n)).astype(np.float32)})


# -- control flow whose bodies the pinned shapes must not enter ---------------------------------

def data_if() -> onnx.ModelProto:
    """A data-dependent condition: both branches stay, each keeps its own shapes."""
    then = branch("then", [mk("ReduceSum", ["x", "axis0"], ["t"], keepdims=1)], "t", [1, 4])
    other = branch("else", [mk("Neg", ["x"], ["e"])], "e", ["batch", 4])
    return model([mk("ReduceSum", ["x"], ["total"], keepdims=0), mk("Greater", ["total", "zero"], ["c"]),
                  mk("If", ["c"], ["y"], then_branch=then, else_branch=other)],
                 {"x": ["batch", 4]}, {"y": [None, 4]},
                 {"zero": np.array(0, np.float32), "axis0": np.array([0], np.int64)})


def growing_loop() -> onnx.ModelProto:
    """A Loop whose carried value grows every trip (its body's shapes vary per iteration) and
    whose body reads that value's row count; inside it, an If on the outer input's shape."""
    then = branch("then", [mk("Squeeze", ["x", "axis0"], ["sq"]), mk("Unsqueeze", ["sq", "axis0"], ["t"])], "t",
                  [1, 3])
    other = branch("else", [mk("Identity", ["x"], ["e"])], "e", ["batch", 3])
    body = helper.make_graph(
        [mk("Shape", ["x"], ["xs"]), mk("Gather", ["xs", "zero"], ["b"], axis=0),
         mk("Equal", ["b", "one"], ["one_row"]),
         mk("If", ["one_row"], ["picked"], then_branch=then, else_branch=other),
         mk("Concat", ["acc_in", "picked"], ["acc_out"], axis=0), mk("Identity", ["c_in"], ["c_out"]),
         mk("Shape", ["acc_in"], ["rows_of"]), mk("Gather", ["rows_of", "zero"], ["r"], axis=0),
         mk("Cast", ["r"], ["rows_f"], to=TensorProto.FLOAT)],
        "body", [helper.make_tensor_value_info("i", TensorProto.INT64, []),
                 helper.make_tensor_value_info("c_in", TensorProto.BOOL, []),
                 helper.make_tensor_value_info("acc_in", TensorProto.FLOAT, ["rows", 3])],
        [helper.make_tensor_value_info("c_out", TensorProto.BOOL, []),
         helper.make_tensor_value_info("acc_out", TensorProto.FLOAT, ["rows2", 3]),
         helper.make_tensor_value_info("rows_f", TensorProto.FLOAT, [])],
        [numpy_helper.from_array(np.array(0, np.int64), "zero"), numpy_helper.from_array(np.array(1, np.int64), "one"),
         numpy_helper.from_array(np.array([0], np.int64), "axis0")])
    return model([mk("Loop", ["trips", "", "x"], ["acc", "counts"], body=body)],
                 {"x": ["batch", 3]}, {"acc": [None, 3], "counts": [3]}, {"trips": np.array(3, np.int64)})


def scan_sum() -> onnx.ModelProto:
    """A Scan over a symbolic number of steps: a running sum and every partial sum."""
    body = helper.make_graph(
        [mk("Add", ["s_in", "row"], ["s_out"]), mk("Identity", ["s_out"], ["each"])], "step",
        [helper.make_tensor_value_info("s_in", TensorProto.FLOAT, ["width"]),
         helper.make_tensor_value_info("row", TensorProto.FLOAT, ["width"])],
        [helper.make_tensor_value_info("s_out", TensorProto.FLOAT, ["width"]),
         helper.make_tensor_value_info("each", TensorProto.FLOAT, ["width"])])
    return model([mk("ReduceSum", ["x", "axis0"], ["start"], keepdims=0),
                  mk("Scan", ["start", "x"], ["total", "partial"], body=body, num_scan_inputs=1)],
                 {"x": ["steps", "width"]}, {"total": ["width"], "partial": ["steps", "width"]},
                 {"axis0": np.array([0], np.int64)})


def sequence_model() -> str:
    """onnx's only shipped corpus model with a symbolic dim (``X: [n]``, split into a sequence)."""
    return str(DATA / "simple" / "test_sequence_model8" / "model.onnx")


def floats(*shape: int) -> np.ndarray:
    return RNG.standard_normal(shape).astype(np.float32)


GENERATED = {  # name → (model, pins, feeds)
    "if-squeeze": (squeeze_if_one, {"dims": {"batch": 3, "n": 2}}, {"x": floats(3, 3, 2)}),
    "if-data": (data_if, {"dims": {"batch": 2}}, {"x": floats(2, 4)}),
    "loop-growing": (growing_loop, {"dims": {"batch": 2}}, {"x": floats(2, 3)}),
    "loop-growing-one": (growing_loop, {"dims": {"batch": 1}}, {"x": floats(1, 3)}),
    "scan": (scan_sum, {"dims": {"steps": 5, "width": 3}}, {"x": floats(5, 3)}),
    "sequence": (sequence_model, {"dims": {"n": 6}}, {"X": floats(6), "Splits": np.array([1, 2, 3], np.int64)}),
}
DYNAMIC_FIXTURES = sorted(name for name, entry in MANIFEST.items()
                          if any(not isinstance(d, int) or d < 0 for dims in entry["inputs"].values() for d in dims))


@pytest.mark.parametrize("name", sorted(GENERATED))
def test_a_pinned_control_flow_model_written_as_onnx_loads_and_agrees(name, tmp_path):
    build, pins, feeds = GENERATED[name]
    source = build()
    nnbridge.convert(source, tmp_path / "pinned.onnx", **pins)
    assert_loads_and_agrees(tmp_path / "pinned.onnx", source, feeds)


def other_shape(declared: list, example: tuple) -> tuple:
    """Another sensible pin than the fixture's example: a batch of 2, free dims 8 longer."""
    return tuple(d if isinstance(d, int) and d > 0 else (2 if axis == 0 else e + 8)
                 for axis, (d, e) in enumerate(zip(declared, example)))


@pytest.mark.parametrize("name", DYNAMIC_FIXTURES)
@pytest.mark.parametrize("which", ["example", "other"])
def test_a_pinned_dynamic_fixture_written_as_onnx_loads_and_agrees(name, which, tmp_path):
    path, stored = load(name)
    feeds = stored
    if which == "other":
        shapes = {k: other_shape(MANIFEST[name]["inputs"][k], v.shape) for k, v in stored.items()}
        feeds = {k: (RNG.integers(0, 100, shapes[k]) if v.dtype.kind == "i" else RNG.standard_normal(shapes[k]))
                 .astype(v.dtype) for k, v in stored.items()}
    nnbridge.convert(str(path), tmp_path / "pinned.onnx", input_shapes={k: v.shape for k, v in feeds.items()})
    pinned = onnx.load(tmp_path / "pinned.onnx")
    assert all(d.HasField("dim_value") for vi in pinned.graph.input for d in vi.type.tensor_type.shape.dim)
    assert_loads_and_agrees(tmp_path / "pinned.onnx", str(path), feeds)


def test_a_fixture_pinned_in_part_keeps_its_free_dim(tmp_path):
    """bert with only the batch pinned: the written file runs at any sequence length."""
    path, feeds = load("bert-dynamic")
    nnbridge.convert(str(path), tmp_path / "batch.onnx", dims={"batch": 1})
    for length in (5, 16):
        ids = RNG.integers(0, 128, (1, length)).astype(feeds["input_ids"].dtype)
        assert_loads_and_agrees(tmp_path / "batch.onnx", str(path), {"input_ids": ids})


def test_a_data_dependent_if_whose_branch_the_pins_make_impossible_is_refused_in_one_line(tmp_path, cli):
    """``x.squeeze(0) if x.sum() > 0 else x.sum(0)`` pinned to two rows: onnxruntime would refuse
    the file (it checks both branches' shapes at load), so nothing is written."""
    then = branch("then", [mk("Squeeze", ["x", "axis0"], ["t"])], "t", [4])
    other = branch("else", [mk("ReduceSum", ["x", "axis0"], ["e"], keepdims=0)], "e", [4])
    source = tmp_path / "data_if.onnx"
    onnx.save(model([mk("ReduceSum", ["x"], ["total"], keepdims=0), mk("Greater", ["total", "zero"], ["c"]),
                     mk("If", ["c"], ["y"], then_branch=then, else_branch=other)],
                    {"x": ["batch", 4]}, {"y": [4]},
                    {"zero": np.array(0, np.float32), "axis0": np.array([0], np.int64)}), source)
    code, text = cli("convert", source, tmp_path / "two.onnx", "--dim", "batch=2")
    assert code != 0 and len(text.strip().splitlines()) == 1, text
    assert "then_branch of If" in text and "Squeeze" in text and "must be 1 instead of 2" in text
    assert not (tmp_path / "two.onnx").exists()
    code, text = cli("convert", source, tmp_path / "one.onnx", "--dim", "batch=1")
    assert code == 0, text
    assert_loads_and_agrees(tmp_path / "one.onnx", onnx.load(source), {"x": floats(1, 4)})
