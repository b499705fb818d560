"""ai.onnx.ml tensor ops of the reference backend against onnxruntime."""

from __future__ import annotations

import numpy as np
import onnx
import pytest
from onnx import helper

import nnbridge
from nnbridge.base.errors import UnsupportedOpError
from nnbridge.check import run_onnxruntime
from nnbridge.ir import DType


def ml_model(op, x, attrs, extra=None):
    inputs = [("x", x)] + ([] if extra is None else [("i", extra)])
    node = helper.make_node(op, [n for n, _ in inputs], ["y"], domain="ai.onnx.ml", **attrs)
    graph = helper.make_graph([node], op.lower(),
                              [helper.make_tensor_value_info(n, DType.from_numpy(a.dtype).onnx, a.shape)
                               for n, a in inputs], [helper.make_value_info("y", onnx.TypeProto())])
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 21),
                                                    helper.make_opsetid("ai.onnx.ml", 4)])
    return onnx.shape_inference.infer_shapes(model), dict(inputs)


def agree(op, x, attrs, extra=None):
    model, feeds = ml_model(op, x, attrs, extra)
    ours = nnbridge.compile(model, passes=[]).run(feeds)["y"]
    theirs = run_onnxruntime(model, feeds)["y"]
    assert ours.shape == theirs.shape and ours.dtype == theirs.dtype
    assert ours.tolist() == theirs.tolist()
    return ours


@pytest.mark.parametrize("attrs", [
    {"keys_strings": ["a", "b"], "values_int64s": [1, 2], "default_int64": 7},
    {"keys_int64s": [5, 1, 9], "values_strings": ["five", "one", "nine"]},
    {"keys_int64s": [5, 1], "values_floats": [0.5, 1.5], "default_float": -2.0},
])
def test_label_encoder_maps_keys_with_default(attrs):
    x = (np.array([["a", "c"], ["b", "a"]], dtype=object) if "keys_strings" in attrs
         else np.array([[1, 5, 2], [9, 9, 0]], np.int64))
    agree("LabelEncoder", x, attrs)


def test_binarizer_and_array_feature_extractor():
    agree("Binarizer", np.array([[-1.0, 0.5], [2.0, 0.1]], np.float32), {"threshold": 0.3})
    x = np.arange(12, dtype=np.float32).reshape(3, 4)
    agree("ArrayFeatureExtractor", x, {}, np.array([3, 0, 3], np.int64))
    agree("ArrayFeatureExtractor", x[0], {}, np.array([1], np.int64))


def test_label_encoder_repeated_keys_are_refused():
    model, feeds = ml_model("LabelEncoder", np.array(["a"], dtype=object),
                            {"keys_strings": ["a", "a"], "values_int64s": [1, 2]})
    with pytest.raises(UnsupportedOpError):
        nnbridge.compile(model, passes=[])


def _tfidf_model(x, attrs):
    node = helper.make_node("TfIdfVectorizer", ["x"], ["y"], **attrs)
    graph = helper.make_graph([node], "tfidf", [helper.make_tensor_value_info("x", DType.from_numpy(x.dtype).onnx,
                                                                               x.shape)],
                              [helper.make_value_info("y", onnx.TypeProto())])
    return onnx.shape_inference.infer_shapes(helper.make_model(graph, opset_imports=[helper.make_opsetid("", 21)]))


@pytest.mark.parametrize("mode", ["TF", "IDF", "TFIDF"])
@pytest.mark.parametrize("grams, skip", [((1, 1), 0), ((2, 2), 0), ((1, 2), 2), ((2, 3), 1)])
@pytest.mark.parametrize("strings", [False, True])
def test_tfidf_vectorizer_against_onnxruntime(mode, grams, skip, strings):
    rng = np.random.default_rng(8)
    x = rng.integers(0, 6, (3, 9)).astype(np.int64)
    pool = [1, 2, 5] + [1, 2, 2, 1, 3, 4] + [0, 1, 2]  # 3 unigrams, 3 bigrams, 1 trigram
    attrs = {"mode": mode, "min_gram_length": grams[0], "max_gram_length": grams[1], "max_skip_count": skip,
             "ngram_counts": [0, 3, 9], "ngram_indexes": [6, 0, 2, 1, 5, 3, 4],
             "weights": [0.5, 2.0, 1.0, 3.0, 1.5, 0.25, 4.0]}
    if strings:
        x = np.vectorize(lambda v: f"w{v}", otypes=[object])(x)
        attrs["pool_strings"] = [f"w{v}" for v in pool]
    else:
        attrs["pool_int64s"] = pool
    model = _tfidf_model(x, attrs)
    ours = nnbridge.compile(model, passes=[]).run({"x": x})["y"]
    theirs = run_onnxruntime(model, {"x": x})["y"]
    assert ours.shape == theirs.shape and ours.dtype == theirs.dtype
    np.testing.assert_allclose(ours, theirs)


def _tree_model(aggregate):
    """Tree 0: x0 <= 0.5 (NaN → true) ? 1@t0 : (x1 > 2 ? 2@t0 : 3@t1); tree 1: x1 in {1, 3} ? 10@t1 : 20@t0."""
    f32 = onnx.TensorProto.FLOAT
    attrs = {
        "n_targets": 2, "aggregate_function": aggregate, "tree_roots": [0, 2],
        "nodes_featureids": [0, 1, 1], "nodes_truenodeids": [0, 1, 3], "nodes_trueleafs": [1, 1, 1],
        "nodes_falsenodeids": [1, 2, 4], "nodes_falseleafs": [0, 1, 1], "nodes_missing_value_tracks_true": [1, 0, 0],
        "nodes_modes": helper.make_tensor("modes", onnx.TensorProto.UINT8, [3], [0, 3, 6]),
        "nodes_splits": helper.make_tensor("splits", f32, [3], [0.5, 2.0, 0.0]),
        "membership_values": helper.make_tensor("members", f32, [2], [1.0, 3.0]),
        "leaf_targetids": [0, 0, 1, 1, 0],
        "leaf_weights": helper.make_tensor("weights", f32, [5], [1.0, 2.0, 3.0, 10.0, 20.0]),
    }
    node = helper.make_node("TreeEnsemble", ["x"], ["y"], domain="ai.onnx.ml", **attrs)
    graph = helper.make_graph([node], "trees", [helper.make_tensor_value_info("x", f32, [4, 2])],
                              [helper.make_tensor_value_info("y", f32, [4, 2])])
    return helper.make_model(graph, opset_imports=[helper.make_opsetid("", 21), helper.make_opsetid("ai.onnx.ml", 5)])


@pytest.mark.parametrize("aggregate, expected", [
    (1, [[1, 10], [2, 10], [21, 0], [20, 3]]),  # SUM
    (0, [[0.5, 5], [1, 5], [10.5, 0], [10, 1.5]]),  # AVERAGE over the two trees
    (3, [[1, 10], [2, 10], [20, 0], [20, 3]]),  # MAX; a target no leaf reaches stays 0
])
def test_tree_ensemble_branch_modes_nan_and_membership(aggregate, expected):
    x = np.array([[0.2, 1.0], [0.7, 3.0], [np.nan, 5.0], [0.9, 0.0]], np.float32)
    model = _tree_model(aggregate)
    out = nnbridge.compile(model, passes=[]).run({"x": x})["y"]
    assert out.dtype == np.float32
    np.testing.assert_allclose(out, expected)
    np.testing.assert_allclose(out, run_onnxruntime(model, {"x": x})["y"])
