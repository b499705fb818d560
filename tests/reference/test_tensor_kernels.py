"""Shape, indexing, creation and ordering kernels of the reference backend: edge
cases (negative axes and steps, clamping, uneven splits, pad modes, ties) checked
against onnxruntime on single-node models, or against hand-computed values.
"""

from __future__ import annotations

import numpy as np
import onnx
import pytest
from onnx import helper, numpy_helper
from single_node import node_model, run_ours

import nnbridge
from nnbridge.base.errors import UnsupportedOpError
from nnbridge.check import run_onnxruntime
from nnbridge.ir import DType, Graph, TensorType

INT64_MAX = np.iinfo(np.int64).max
RNG = np.random.default_rng(7)






def assert_same(actual, expected):
    actual, expected = np.asarray(actual), np.asarray(expected)
    assert actual.shape == expected.shape
    if expected.dtype.kind in "OUS":
        assert actual.dtype == object
        assert actual.tolist() == expected.astype(object).tolist()
        return
    assert actual.dtype == expected.dtype
    if expected.dtype.kind == "f":
        np.testing.assert_allclose(actual, expected, rtol=1e-5, atol=1e-6)
    else:
        np.testing.assert_array_equal(actual, expected)


def agree(op, inputs, attrs=None, outputs=1, inits=(), opset=21):
    """Run on the reference backend and on onnxruntime; every output must match exactly in dtype."""
    model, feeds = node_model(op, inputs, attrs, outputs, inits, opset)
    ours = run_ours(model, feeds)
    theirs = run_onnxruntime(model, feeds)
    assert len(ours) == outputs
    for i, value in enumerate(ours):
        assert_same(value, theirs[f"y{i}"])
    return ours


def refused(op, inputs, attrs=None, outputs=1, inits=(), opset=21):
    model, feeds = node_model(op, inputs, attrs, outputs, inits, opset)
    with pytest.raises(UnsupportedOpError):
        run_ours(model, feeds)


X345 = np.arange(60, dtype=np.float32).reshape(3, 4, 5)
I64 = np.int64


# -- shape ---------------------------------------------------------------------------

@pytest.mark.parametrize("attrs", [{}, {"start": 1}, {"end": -1}, {"start": -2, "end": 10}, {"start": 5}])
def test_shape_start_end(attrs):
    agree("Shape", [("x", X345)], attrs)


def test_size_of_empty_and_scalar():
    agree("Size", [("x", np.zeros((3, 0, 2), np.float32))])
    agree("Size", [("x", np.array(5, np.int32))])


@pytest.mark.parametrize("target, allowzero", [([0, -1], 0), ([-1, 5], 0), ([3, 0, 5, 1], 0), ([2, 0], 1)])
def test_reshape_zero_and_minus_one(target, allowzero):
    x = X345 if not allowzero else np.zeros((0, 4), np.float32)
    agree("Reshape", [("x", x), ("s", np.array(target, I64))], {"allowzero": allowzero})


@pytest.mark.parametrize("axis", [0, 1, 3, -1, -3])
def test_flatten_axes(axis):
    agree("Flatten", [("x", np.zeros((2, 3, 4), np.float16))], {"axis": axis})


def test_transpose_default_reverses_and_perm():
    agree("Transpose", [("x", X345)])
    agree("Transpose", [("x", X345)], {"perm": [1, 0, 2]})


def test_squeeze_unsqueeze_negative_axes():
    x = np.zeros((1, 3, 1, 2), np.int64)
    agree("Squeeze", [("x", x)])
    agree("Squeeze", [("x", x), ("a", np.array([-2], I64))])
    agree("Unsqueeze", [("x", X345), ("a", np.array([-1, 0], I64))])
    agree("Unsqueeze", [("x", np.array(3.0, np.float32)), ("a", np.array([0, 1], I64))])


def test_concat_negative_axis_and_empty_part():
    agree("Concat", [("a", X345), ("b", np.zeros((3, 4, 0), np.float32)), ("c", X345[:, :, :2])], {"axis": -1})


@pytest.mark.parametrize("n", [2, 3, 4])
def test_split_num_outputs_uneven_last_chunk(n):
    x = np.arange(14, dtype=np.int32).reshape(7, 2)
    outs = agree("Split", [("x", x)], {"num_outputs": n, "axis": 0}, outputs=n, opset=18)
    assert sum(o.shape[0] for o in outs) == 7


def test_split_sizes_input():
    agree("Split", [("x", X345), ("s", np.array([1, 3], I64))], {"axis": -2}, outputs=2)


def test_expand_bidirectional_and_tile():
    agree("Expand", [("x", np.arange(3, dtype=np.float32).reshape(3, 1)), ("s", np.array([2, 1, 4], I64))])
    agree("Expand", [("x", X345), ("s", np.array([1, 1], I64))])
    agree("Tile", [("x", X345[:2, :2, :2]), ("r", np.array([2, 1, 3], I64))])


@pytest.mark.parametrize("mode", ["constant", "reflect", "edge", "wrap"])
@pytest.mark.parametrize("pads", [[1, 2, 0, 2, 1, 1], [0, -1, 2, 1, 2, -2]])
def test_pad_modes_and_negative_pads(mode, pads):
    x = np.arange(60, dtype=np.float32).reshape(3, 4, 5)
    inputs = [("x", x), ("p", np.array(pads, I64))]
    if mode == "constant":
        inputs.append(("v", np.array(2.5, np.float32)))
    agree("Pad", inputs, {"mode": mode})


def test_pad_axes_input_negative_axes():
    agree("Pad", [("x", X345), ("p", np.array([1, 2, 3, 0], I64)), None, ("a", np.array([-1, 0], I64))],
          {"mode": "edge"})


def test_identity_and_dropout_inference():
    agree("Identity", [("x", np.array(["a", "b"], dtype=object))])
    y, mask = agree("Dropout", [("x", X345)], outputs=2)
    assert mask.all() and mask.dtype == bool


def test_dropout_training_is_refused_unless_deterministic():
    ratio, training = ("r", np.array(0.5, np.float32)), ("t", np.array(True))
    refused("Dropout", [("x", X345), ratio, training], inits=("r", "t"))
    model, feeds = node_model("Dropout", [("x", X345), ratio, training])
    with pytest.raises(UnsupportedOpError):  # known only at run time: refused by the kernel
        run_ours(model, feeds)
    agree("Dropout", [("x", X345), ("r", np.array(0.0, np.float32)), training], outputs=2)


# -- indexing ------------------------------------------------------------------------

@pytest.mark.parametrize("starts, ends, axes, steps", [
    ([1, 0], [INT64_MAX, 3], [0, 1], [1, 1]),
    ([-1], [-INT64_MAX], [2], [-1]),
    ([10, -10], [-10, 10], [1, 2], [-2, 3]),
    ([2], [1000], [-1], [2]),
    ([-100], [100], [0], [1]),
    ([3], [0], [1], [-1]),
    ([0], [-1], [0], [-1]),
])
def test_slice_negative_steps_and_clamping(starts, ends, axes, steps):
    agree("Slice", [("x", X345), ("s", np.array(starts, I64)), ("e", np.array(ends, I64)),
                    ("a", np.array(axes, I64)), ("t", np.array(steps, I64))])


def test_slice_without_axes_and_steps():
    agree("Slice", [("x", X345), ("s", np.array([1, 1], I64)), ("e", np.array([-1, 3], I64))])


def test_gather_family_negative_indices():
    agree("Gather", [("x", X345), ("i", np.array([[-1, 0], [2, -3]], I64))], {"axis": -2})
    agree("Gather", [("x", X345), ("i", np.array(-1, np.int32))], {"axis": 0})
    agree("GatherElements", [("x", X345), ("i", RNG.integers(-5, 5, (3, 4, 2)))], {"axis": -1})


@pytest.mark.parametrize("batch_dims, indices", [
    (0, [[0, 1], [2, -1]]),
    (0, [[[1]], [[0]]]),
    (1, [[1, 2], [0, 0], [3, 4]]),
    (1, [[[-1]], [[0]], [[2]]]),
])
def test_gather_nd_batch_dims(batch_dims, indices):
    agree("GatherND", [("x", X345), ("i", np.array(indices, I64))], {"batch_dims": batch_dims})


@pytest.mark.parametrize("reduction", ["none", "add", "mul", "max", "min"])
def test_scatter_elements_reductions(reduction):
    indices = np.array([[1, 0, 2], [0, 2, -1]], I64)
    updates = np.arange(1, 7, dtype=np.float32).reshape(2, 3)
    if reduction == "none":
        indices = np.array([[1, 0, 2], [0, 2, 1]], I64)  # unique positions: deterministic
    agree("ScatterElements", [("x", np.ones((3, 3), np.float32)), ("i", indices), ("u", updates)],
          {"axis": 1, "reduction": reduction})


@pytest.mark.parametrize("reduction", ["none", "add", "mul", "max", "min"])
def test_scatter_nd_reductions(reduction):
    indices = np.array([[0, 1], [2, -1]] if reduction == "none" else [[0, 1], [0, 1], [2, 3]], I64)
    updates = np.arange(len(indices) * 5, dtype=np.float32).reshape(len(indices), 5) - 3
    agree("ScatterND", [("x", X345), ("i", indices), ("u", updates)], {"reduction": reduction})


def test_compress_nonzero_trilu_reverse_sequence():
    agree("Compress", [("x", X345), ("c", np.array([True, False, True]))], {"axis": -3})
    agree("Compress", [("x", X345), ("c", np.array([False, True, True]))])
    agree("NonZero", [("x", np.array([[0, 2, 0], [1, 0, 3]], np.int32))])
    for k in (-1, 0, 2):
        for upper in (0, 1):
            agree("Trilu", [("x", X345), ("k", np.array(k, I64))], {"upper": upper})
    x = np.arange(24, dtype=np.float32).reshape(4, 3, 2)
    agree("ReverseSequence", [("x", x), ("l", np.array([4, 1, 2], I64))], {"batch_axis": 1, "time_axis": 0})
    agree("ReverseSequence", [("x", x.transpose(1, 0, 2).copy()), ("l", np.array([3, 0, 4], I64))],
          {"batch_axis": 0, "time_axis": 1})


# -- creation ------------------------------------------------------------------------

def test_constant_of_shape_value_dtype_and_empty_shape():
    agree("ConstantOfShape", [("s", np.array([2, 3], I64))],
          {"value": numpy_helper.from_array(np.array([7], np.int32))})
    agree("ConstantOfShape", [("s", np.array([], I64))])
    agree("ConstantOfShape", [("s", np.array([0, 2], I64))])


@pytest.mark.parametrize("start, limit, delta, dtype", [
    (0, 10, 3, np.int64), (10, 1, -3, np.int32), (1.0, 2.0, 0.3, np.float32), (5, 5, 1, np.int64),
    (-1.5, 4.0, 0.5, np.float64), (3, 1, 1, np.int32),
])
def test_range(start, limit, delta, dtype):
    agree("Range", [("a", np.array(start, dtype)), ("b", np.array(limit, dtype)), ("d", np.array(delta, dtype))])


@pytest.mark.parametrize("attr, value, expected", [
    ("value_float", 1.5, np.array(1.5, np.float32)),
    ("value_floats", [1.0, 2.0], np.array([1.0, 2.0], np.float32)),
    ("value_int", 3, np.array(3, np.int64)),
    ("value_ints", [4, 5], np.array([4, 5], np.int64)),
    ("value_string", "hi", np.array("hi", dtype=object)),
    ("value_strings", ["a", "b"], np.array(["a", "b"], dtype=object)),
])
def test_constant_attribute_kinds(attr, value, expected):
    model, feeds = node_model("Constant", [], {attr: value})
    (actual,) = run_ours(model, feeds)
    assert_same(actual, expected)


def test_eyelike_and_onehot():
    agree("EyeLike", [("x", np.zeros((3, 5), np.int32))], {"k": 2})
    agree("EyeLike", [("x", np.zeros((4, 3), np.float32))], {"k": -1, "dtype": onnx.TensorProto.DOUBLE})
    indices = np.array([[0, -1, 5], [2, 1, -7]], I64)
    for axis in (-1, 0, 1):
        agree("OneHot", [("i", indices), ("d", np.array(4, I64)), ("v", np.array([2, 9], np.float32))],
              {"axis": axis})


# -- ordering ------------------------------------------------------------------------

def test_topk_ties_take_the_lower_index_first():
    x = np.array([[3, 1, 3, 2, 3], [0, 0, -1, 0, 5]], np.int32)
    model, feeds = node_model("TopK", [("x", x), ("k", np.array([3], I64))], {"largest": 1}, outputs=2)
    values, indices = run_ours(model, feeds)
    np.testing.assert_array_equal(values, [[3, 3, 3], [5, 0, 0]])
    np.testing.assert_array_equal(indices, [[0, 2, 4], [4, 0, 1]])
    assert values.dtype == np.int32 and indices.dtype == np.int64
    model, feeds = node_model("TopK", [("x", x), ("k", np.array([2], I64))], {"largest": 0}, outputs=2)
    values, indices = run_ours(model, feeds)
    np.testing.assert_array_equal(indices, [[1, 3], [2, 0]])


@pytest.mark.parametrize("dtype", [np.float32, np.int64, np.uint8, np.float16])
@pytest.mark.parametrize("axis", [0, -1])
def test_topk_against_onnxruntime(dtype, axis):
    x = RNG.permutation(24).reshape(4, 6).astype(dtype)
    for largest in (0, 1):
        agree("TopK", [("x", x), ("k", np.array([3], I64))], {"axis": axis, "largest": largest}, outputs=2)


@pytest.mark.parametrize("sorted_", [0, 1])
@pytest.mark.parametrize("axis", [None, 0, 1, -1])
def test_unique_all_four_outputs(sorted_, axis):
    x = np.array([[2, 1, 2], [0, 1, 0], [2, 1, 2], [0, 5, 0]], np.int64)
    attrs = {"sorted": sorted_} | ({} if axis is None else {"axis": axis})
    agree("Unique", [("x", x)], attrs, outputs=4)


def test_unique_strings():
    (values,) = agree("Unique", [("x", np.array(["b", "a", "b", "c"], dtype=object))])
    assert values.tolist() == ["a", "b", "c"]


# -- nnbridge-domain ops and refusals ------------------------------------------------

def test_reorder_and_repeat():
    g = Graph("g")
    x = g.add_input("x", TensorType(DType.FLOAT32, (3, 4, 5)))
    r = g.add_node("Reorder", [x], ["r"], {"perm": [2, 0, 1]}, domain="nnbridge").outputs[0]
    t = g.add_node("Repeat", [x], ["t"], {"multiples": [1, 2, 1]}, domain="nnbridge").outputs[0]
    g.outputs.extend([r, t])
    out = nnbridge.compile(g, passes=[]).run({"x": X345})
    np.testing.assert_array_equal(out["r"], X345.transpose(2, 0, 1))
    np.testing.assert_array_equal(out["t"], np.tile(X345, (1, 2, 1)))


def test_unsupported_attribute_values_are_refused():
    refused("Pad", [("x", X345), ("p", np.zeros(6, I64))], {"mode": "mirror"})
    refused("ScatterElements", [("x", X345), ("i", np.zeros((1, 1, 1), I64)), ("u", X345[:1, :1, :1])],
            {"reduction": "avg"})
    refused("NonZero", [("x", np.array(1.0, np.float32))])


def test_center_crop_pad_centres_odd_differences():
    x = np.arange(20, dtype=np.float32).reshape(4, 5)
    model, feeds = node_model("CenterCropPad", [("x", x), ("s", np.array([3, 8], I64))], opset=18)
    (out,) = run_ours(model, feeds)
    expected = np.zeros((3, 8), np.float32)
    expected[:, 1:6] = x[0:3]  # crop 4→3 starts at row 0 (rounded down); pad 5→8 puts 1 left, 2 right
    assert_same(out, expected)
    model, feeds = node_model("CenterCropPad", [("x", x), ("s", np.array([2], I64))], {"axes": [-1]}, opset=18)
    assert_same(run_ours(model, feeds)[0], x[:, 1:3])


@pytest.mark.parametrize("mode", ["linear", "circular"])
def test_tensor_scatter_writes_each_batch_entry_at_its_index(mode):
    past = np.zeros((2, 1, 4, 2), np.float32)
    update = np.arange(1, 9, dtype=np.float32).reshape(2, 1, 2, 2)
    starts = np.array([1, 2 if mode == "linear" else 3], I64)
    model, feeds = node_model("TensorScatter", [("p", past), ("u", update), ("w", starts)], {"mode": mode},
                              opset=24)
    (out,) = run_ours(model, feeds)
    expected = past.copy()
    expected[0, :, 1:3] = update[0]
    if mode == "linear":
        expected[1, :, 2:4] = update[1]
    else:  # positions 3, 4 → 3, 0
        expected[1, :, 3], expected[1, :, 0] = update[1, :, 0], update[1, :, 1]
    assert_same(out, expected)


def test_string_concat_broadcasts():
    agree("StringConcat", [("a", np.array(["a", "bé"], dtype=object)), ("b", np.array([["x"], [""]], dtype=object))],
          opset=20)


@pytest.mark.parametrize("attrs", [{}, {"delimiter": "-"}, {"delimiter": "-", "maxsplit": 1}, {"delimiter": ""}])
def test_string_split_pads_with_empty_strings(attrs):
    x = np.array([["a-b--c", "  x  y "], ["", "z"]], dtype=object)
    model, feeds = node_model("StringSplit", [("x", x)], attrs, outputs=2, opset=20)
    parts, counts = run_ours(model, feeds)
    delimiter, maxsplit = attrs.get("delimiter") or None, attrs.get("maxsplit", -1)
    expected = [[s.split(delimiter, maxsplit) for s in row] for row in x.tolist()]
    assert counts.dtype == np.int64 and counts.tolist() == [[len(p) for p in row] for row in expected]
    assert parts.shape == (2, 2, counts.max())
    for i, j in np.ndindex(2, 2):
        n = counts[i, j]
        assert parts[i, j, :n].tolist() == expected[i][j] and set(parts[i, j, n:].tolist()) <= {""}


def test_regex_full_match_and_refused_patterns():
    x = np.array(["ab12", "ab", "x@y.com"], dtype=object)
    model, feeds = node_model("RegexFullMatch", [("x", x)], {"pattern": r"[a-z]+\d*"}, opset=20)
    (out,) = run_ours(model, feeds)
    assert out.dtype == bool and out.tolist() == [True, True, False]
    refused("RegexFullMatch", [("x", x)], {"pattern": r"(a)\1"}, opset=20)
    refused("RegexFullMatch", [("x", x)], {"pattern": r"a(?=b)"}, opset=20)


def test_constant_of_shape_with_constant_shape_is_folded_at_compile_time():
    fill = helper.make_node("ConstantOfShape", ["s"], ["w"], value=numpy_helper.from_array(np.array([1.5], np.float32)))
    add = helper.make_node("Add", ["x", "w"], ["y"])
    graph = helper.make_graph([fill, add], "g", [helper.make_tensor_value_info("x", onnx.TensorProto.FLOAT, [2, 3])],
                              [helper.make_tensor_value_info("y", onnx.TensorProto.FLOAT, [2, 3])],
                              [numpy_helper.from_array(np.array([2, 3], I64), "s")])
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 21)])
    unfolded = nnbridge.compile(model, opt_level=0)
    folded = nnbridge.compile(model)  # the default pipeline computes the weight once, as an initializer
    assert [n.op for n in unfolded.graph.nodes] == ["ConstantOfShape", "Add"]
    assert [n.op for n in folded.graph.nodes] == ["Add"]
    x = np.ones((2, 3), np.float32)
    for exe in (unfolded, folded):
        assert_same(exe.run({"x": x})["y"], np.full((2, 3), 2.5, np.float32))


def test_bfloat16_topk_and_unique_keep_dtype():
    import ml_dtypes

    x = np.array([1.5, -2.0, 3.0, 3.0, 0.25], ml_dtypes.bfloat16)
    model, feeds = node_model("TopK", [("x", x), ("k", np.array([2], I64))], outputs=2)
    values, indices = run_ours(model, feeds)
    assert values.dtype == x.dtype and values.astype(np.float32).tolist() == [3.0, 3.0]
    assert indices.tolist() == [2, 3]
    model, feeds = node_model("Unique", [("x", x)], outputs=4)
    values, first, inverse, counts = run_ours(model, feeds)
    assert values.dtype == x.dtype and values.astype(np.float32).tolist() == [-2.0, 0.25, 1.5, 3.0]
    assert first.tolist() == [1, 4, 0, 2] and inverse.tolist() == [2, 0, 3, 3, 1] and counts.tolist() == [1, 1, 1, 2]


@pytest.mark.parametrize("op", ["HannWindow", "HammingWindow", "BlackmanWindow"])
@pytest.mark.parametrize("periodic", [0, 1])
def test_window_functions(op, periodic):
    agree(op, [("n", np.array(10, I64))], {"periodic": periodic}, opset=17)
    agree(op, [("n", np.array(7, np.int32))], {"periodic": periodic, "output_datatype": onnx.TensorProto.DOUBLE},
          opset=17)


@pytest.mark.parametrize("center_point_box", [0, 1])
@pytest.mark.parametrize("iou, score", [(0.3, None), (0.5, 0.4), (1.0, 0.0)])
def test_non_max_suppression_against_onnxruntime(center_point_box, iou, score):
    rng = np.random.default_rng(3)
    corners = rng.uniform(0, 10, (2, 12, 2, 2))
    boxes = np.concatenate([corners[..., 0, :], corners[..., 0, :] + rng.uniform(1, 4, (2, 12, 2))], axis=-1)
    scores = np.round(rng.uniform(0, 1, (2, 3, 12)), 1).astype(np.float32)  # rounded: ties happen
    inputs = [("b", boxes.astype(np.float32)), ("s", scores), ("m", np.array([4], I64)),
              ("i", np.array([iou], np.float32))] + ([] if score is None else [("t", np.array([score], np.float32))])
    agree("NonMaxSuppression", inputs, {"center_point_box": center_point_box})


@pytest.mark.parametrize("inverse, onesided, channels", [(0, 0, 1), (0, 0, 2), (1, 0, 2), (0, 1, 1), (1, 1, 2)])
@pytest.mark.parametrize("axis, length", [(1, None), (-2, 6), (2, 12)])
def test_dft_against_onnxruntime(inverse, onesided, channels, axis, length):
    x = np.random.default_rng(5).standard_normal((2, 8, 5, channels)).astype(np.float32)
    inputs = [("x", x), None if length is None else ("n", np.array(length, I64)), ("a", np.array(axis, I64))]
    model, feeds = node_model("DFT", inputs, {"inverse": inverse, "onesided": onesided}, opset=20)
    if inverse and onesided and length is not None:  # the spec leaves this case ambiguous: refused
        with pytest.raises(UnsupportedOpError):
            run_ours(model, feeds)
        return
    (ours,) = run_ours(model, feeds)
    theirs = run_onnxruntime(model, feeds)["y0"]
    assert ours.shape == theirs.shape and ours.dtype == theirs.dtype
    np.testing.assert_allclose(ours, theirs, rtol=1e-4, atol=1e-5)


@pytest.mark.parametrize("onesided, channels", [(1, 1), (0, 1), (0, 2)])
@pytest.mark.parametrize("with_window", [False, True])
def test_stft_against_onnxruntime(onesided, channels, with_window):
    signal = np.random.default_rng(6).standard_normal((2, 40, channels)).astype(np.float32)
    window = ("w", np.hanning(16).astype(np.float32)) if with_window else None
    inputs = [("x", signal), ("s", np.array(6, I64)), window, ("n", np.array(16, I64))]
    model, feeds = node_model("STFT", inputs, {"onesided": onesided}, opset=17)
    (ours,) = run_ours(model, feeds)
    theirs = run_onnxruntime(model, feeds)["y0"]
    assert ours.shape == theirs.shape == (2, 5, 9 if onesided else 16, 2) and ours.dtype == theirs.dtype
    np.testing.assert_allclose(ours, theirs, rtol=1e-4, atol=1e-5)


def test_range_of_16_bit_floats_counts_past_their_integer_precision():
    model, feeds = node_model("Range", [("a", np.array(0, np.float16)), ("b", np.array(3000, np.float16)),
                                        ("d", np.array(1, np.float16))])
    (out,) = run_ours(model, feeds)
    assert out.dtype == np.float16 and out.shape == (3000,)
    np.testing.assert_array_equal(out, np.arange(3000).astype(np.float16))
