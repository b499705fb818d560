"""If / Loop / Scan / sequence / optional kernels on hand-built models, checked against onnxruntime."""

from __future__ import annotations

import numpy as np
import pytest
from onnx import TensorProto, helper

import nnbridge
from nnbridge.base.errors import KernelError
from nnbridge.check import run_onnxruntime

F, I64, B = TensorProto.FLOAT, TensorProto.INT64, TensorProto.BOOL


def _model(nodes, inputs, outputs, initializers=()):
    graph = helper.make_graph(nodes, "g", inputs, outputs, initializer=list(initializers))
    return helper.make_model(graph, opset_imports=[helper.make_opsetid("", 21)], ir_version=10)


def _agrees_with_ort(model, feeds, rtol=1e-6):
    ours = nnbridge.run(model, feeds)
    theirs = run_onnxruntime(model, feeds)
    assert list(ours) == list(theirs)
    for name, expected in theirs.items():
        np.testing.assert_allclose(ours[name], expected, rtol=rtol, err_msg=name)
        assert ours[name].dtype == expected.dtype and ours[name].shape == expected.shape
    return ours


def _accumulating_loop():
    """sum += x[i] while sum < limit (at most M trips); scan output: the running sum."""
    body = helper.make_graph(
        [helper.make_node("Gather", ["x", "i"], ["row"], axis=0),
         helper.make_node("Add", ["s_in", "row"], ["s_out"]),
         helper.make_node("ReduceSum", ["s_out"], ["total"], keepdims=0),
         helper.make_node("Less", ["total", "limit"], ["cond_out"]),
         helper.make_node("Identity", ["s_out"], ["scan"])],
        "body",
        [helper.make_tensor_value_info("i", I64, []), helper.make_tensor_value_info("c", B, []),
         helper.make_tensor_value_info("s_in", F, [2])],
        [helper.make_tensor_value_info("cond_out", B, []), helper.make_tensor_value_info("s_out", F, [2]),
         helper.make_tensor_value_info("scan", F, [2])])
    return _model(
        [helper.make_node("Loop", ["M", "cond", "s0"], ["s_final", "sums"], body=body)],
        [helper.make_tensor_value_info(n, t, s) for n, t, s in
         [("M", I64, []), ("cond", B, []), ("s0", F, [2]), ("x", F, [5, 2]), ("limit", F, [])]],
        [helper.make_tensor_value_info("s_final", F, [2]), helper.make_tensor_value_info("sums", F, None)])


@pytest.mark.parametrize("trips, cond, limit", [(5, True, 1e9), (5, True, 6.0), (0, True, 1e9), (5, False, 1e9)])
def test_loop_trip_count_condition_and_scan_outputs(trips, cond, limit):
    feeds = {"M": np.array(trips, np.int64), "cond": np.array(cond), "s0": np.zeros(2, np.float32),
             "x": np.arange(10, dtype=np.float32).reshape(5, 2), "limit": np.array(limit, np.float32)}
    out = _agrees_with_ort(_accumulating_loop(), feeds)
    expected_trips = {(5, True, 1e9): 5, (5, True, 6.0): 2, (0, True, 1e9): 0, (5, False, 1e9): 0}
    assert out["sums"].shape == (expected_trips[(trips, cond, limit)], 2)


def test_loop_carries_a_sequence():
    body = helper.make_graph(
        [helper.make_node("Cast", ["i"], ["f"], to=F),
         helper.make_node("SequenceInsert", ["seq_in", "f"], ["seq_out"]),
         helper.make_node("Identity", ["c"], ["c_out"])],
        "body",
        [helper.make_tensor_value_info("i", I64, []), helper.make_tensor_value_info("c", B, []),
         helper.make_tensor_sequence_value_info("seq_in", F, None)],
        [helper.make_tensor_value_info("c_out", B, []), helper.make_tensor_sequence_value_info("seq_out", F, None)])
    model = _model(
        [helper.make_node("SequenceEmpty", [], ["empty"], dtype=F),
         helper.make_node("Loop", ["M", "", "empty"], ["seq"], body=body),
         helper.make_node("ConcatFromSequence", ["seq"], ["stacked"], axis=0, new_axis=1),
         helper.make_node("SequenceLength", ["seq"], ["n"])],
        [helper.make_tensor_value_info("M", I64, [])],
        [helper.make_tensor_value_info("stacked", F, None), helper.make_tensor_value_info("n", I64, [])])
    out = _agrees_with_ort(model, {"M": np.array(4, np.int64)})
    np.testing.assert_array_equal(out["stacked"], [0, 1, 2, 3])
    assert int(out["n"]) == 4


@pytest.mark.parametrize("in_dir, out_dir, out_axis", [(0, 0, 0), (1, 0, 1), (0, 1, -1), (1, 1, 0)])
def test_scan_axes_and_directions(in_dir, out_dir, out_axis):
    body = helper.make_graph(
        [helper.make_node("Add", ["acc_in", "col"], ["acc_out"]),
         helper.make_node("Mul", ["acc_out", "col"], ["y"])],
        "body",
        [helper.make_tensor_value_info("acc_in", F, [3]), helper.make_tensor_value_info("col", F, [3])],
        [helper.make_tensor_value_info("acc_out", F, [3]), helper.make_tensor_value_info("y", F, [3])])
    model = _model(
        [helper.make_node("Scan", ["acc0", "x"], ["acc", "ys"], body=body, num_scan_inputs=1,
                          scan_input_axes=[1], scan_input_directions=[in_dir],
                          scan_output_axes=[out_axis], scan_output_directions=[out_dir])],
        [helper.make_tensor_value_info("acc0", F, [3]), helper.make_tensor_value_info("x", F, [3, 4])],
        [helper.make_tensor_value_info("acc", F, [3]), helper.make_tensor_value_info("ys", F, None)])
    rng = np.random.default_rng(0)
    feeds = {"acc0": rng.standard_normal(3).astype(np.float32), "x": rng.standard_normal((3, 4)).astype(np.float32)}
    _agrees_with_ort(model, feeds, rtol=1e-5)


@pytest.mark.parametrize("flag", [True, False])
def test_if_branches_read_outer_values(flag):
    then = helper.make_graph([helper.make_node("Add", ["a", "b"], ["r"])], "then", [],
                             [helper.make_tensor_value_info("r", F, [2])])
    other = helper.make_graph([helper.make_node("Sub", ["a", "b"], ["r2"])], "else", [],
                              [helper.make_tensor_value_info("r2", F, [2])])
    model = _model([helper.make_node("If", ["c"], ["out"], then_branch=then, else_branch=other)],
                   [helper.make_tensor_value_info("c", B, []), helper.make_tensor_value_info("a", F, [2]),
                    helper.make_tensor_value_info("b", F, [2])],
                   [helper.make_tensor_value_info("out", F, [2])])
    a, b = np.array([1, 2], np.float32), np.array([10, 20], np.float32)
    out = _agrees_with_ort(model, {"c": np.array(flag), "a": a, "b": b})
    np.testing.assert_array_equal(out["out"], a + b if flag else a - b)


def test_split_erase_at_and_optional():
    model = _model(
        [helper.make_node("SplitToSequence", ["x", "size"], ["parts"], axis=1),
         helper.make_node("SequenceErase", ["parts", "minus_one"], ["kept"]),
         helper.make_node("SequenceAt", ["kept", "minus_one"], ["last"]),
         helper.make_node("SequenceLength", ["kept"], ["n"]),
         helper.make_node("Optional", [], ["none"], type=helper.make_tensor_type_proto(F, None)),
         helper.make_node("OptionalHasElement", ["none"], ["has"])],
        [helper.make_tensor_value_info("x", F, [2, 7])],
        [helper.make_tensor_value_info("last", F, None), helper.make_tensor_value_info("n", I64, []),
         helper.make_tensor_value_info("has", B, [])],
        [helper.make_tensor(n, I64, [], [v]) for n, v in (("size", 3), ("minus_one", -1))])
    x = np.arange(14, dtype=np.float32).reshape(2, 7)
    out = _agrees_with_ort(model, {"x": x})
    np.testing.assert_array_equal(out["last"], x[:, 3:6])  # chunks 3,3,1; the short last one was erased
    assert int(out["n"]) == 2 and not out["has"]


def test_sequence_position_out_of_range_is_a_clean_error():
    model = _model([helper.make_node("SequenceConstruct", ["x", "x"], ["s"]),
                    helper.make_node("SequenceAt", ["s", "p"], ["y"])],
                   [helper.make_tensor_value_info("x", F, [2]), helper.make_tensor_value_info("p", I64, [])],
                   [helper.make_tensor_value_info("y", F, [2])])
    with pytest.raises(KernelError, match="position 2 is out of range"):
        nnbridge.run(model, {"x": np.zeros(2, np.float32), "p": np.array(2, np.int64)})


def _bag_loop(reduce: str) -> object:
    """nn.EmbeddingBag as torch.onnx.export writes it: trip i reduces table[ids[starts[i]:ends[i]]] over axis 0."""
    body = helper.make_graph(
        [helper.make_node("Gather", ["starts", "i"], ["lo0"], axis=0),
         helper.make_node("Unsqueeze", ["lo0", "zero_axis"], ["lo"]),
         helper.make_node("Gather", ["ends", "i"], ["hi0"], axis=0),
         helper.make_node("Unsqueeze", ["hi0", "zero_axis"], ["hi"]),
         helper.make_node("Slice", ["ids", "lo", "hi", "zero_axis"], ["bag_ids"]),
         helper.make_node("Gather", ["table", "bag_ids"], ["rows"], axis=0),
         helper.make_node(reduce, ["rows", "zero_axis"], ["bag"], keepdims=0),
         helper.make_node("Identity", ["c"], ["c_out"])],
        "bag_body",
        [helper.make_tensor_value_info("i", I64, []), helper.make_tensor_value_info("c", B, [])],
        [helper.make_tensor_value_info("c_out", B, []), helper.make_tensor_value_info("bag", F, [3])])
    return _model(
        [helper.make_node("Loop", ["trips", "true"], ["bags"], body=body)],
        [helper.make_tensor_value_info(n, I64, [None]) for n in ("ids", "starts", "ends")]
        + [helper.make_tensor_value_info("trips", I64, [])],
        [helper.make_tensor_value_info("bags", F, None)],
        [helper.make_tensor("true", B, [], [True]), helper.make_tensor("zero_axis", I64, [1], [0]),
         helper.make_tensor("table", F, [6, 3], np.arange(18, dtype=np.float32) - 7.5)])


@pytest.fixture
def bag_fast_path(monkeypatch):
    """Records, per Loop run, whether the bag-reduction fast path computed it."""
    from nnbridge.kernels.ops import controlflow

    taken = []
    original = controlflow._bag_reduction

    def spy(ctx, body, trips):
        result = original(ctx, body, trips)
        taken.append(result is not None)
        return result

    monkeypatch.setattr(controlflow, "_bag_reduction", spy)
    return taken


def _bag_feeds(ids, starts, ends):
    return {"ids": np.array(ids, np.int64), "starts": np.array(starts, np.int64),
            "ends": np.array(ends, np.int64), "trips": np.array(len(starts), np.int64)}


@pytest.mark.parametrize("reduce", ["ReduceSum", "ReduceMean", "ReduceMax", "ReduceMin"])
def test_embedding_bag_loops_are_one_gather_and_segmented_reduction(reduce, bag_fast_path):
    feeds = _bag_feeds([0, 5, 2, 2, -1, 3, 1], [0, 2, 3, -2], [2, 3, 6, 7])  # a negative id and a negative start
    _agrees_with_ort(_bag_loop(reduce), feeds)
    assert bag_fast_path == [True]


def test_an_empty_bag_runs_the_loop_itself(bag_fast_path):
    _agrees_with_ort(_bag_loop("ReduceSum"), _bag_feeds([0, 5, 2], [0, 2, 2], [2, 2, 3]))
    assert bag_fast_path == [False]


def test_an_out_of_range_id_in_a_bag_is_reported_by_the_loops_gather(bag_fast_path):
    with pytest.raises(KernelError, match="Gather"):
        nnbridge.run(_bag_loop("ReduceSum"), _bag_feeds([0, 9], [0], [2]))
    assert bag_fast_path == [False]


def test_a_run_subgraphs_plan_does_not_keep_its_model_alive():
    """The evaluator plans a Loop body once per graph; the plan goes with the graph, so a model
    and its weights are freed when the caller drops them (a process used to keep every model whose
    subgraphs it had run: a pytest worker held ~1 GB of earlier tests' weights)."""
    import gc

    from nnbridge.ir import Graph

    def graphs() -> int:
        gc.collect()
        return sum(isinstance(o, Graph) for o in gc.get_objects())

    feeds = {"M": np.array(3, np.int64), "cond": np.array(True), "s0": np.zeros(2, np.float32),
             "x": np.arange(10, dtype=np.float32).reshape(5, 2), "limit": np.array(1e9, np.float32)}
    model = _accumulating_loop()
    before = graphs()
    assert nnbridge.run(model, feeds)["sums"].shape == (3, 2)
    assert graphs() == before

