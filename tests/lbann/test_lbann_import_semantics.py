"""LBANN layer semantics that import must reproduce, each against values computed here with numpy
from LBANN's own definitions (src/layers, src/operators): padding_idx, hint_layer, tessellate to
any size, the composed binary operators and losses, noise layers; and the diagnostics for what
import does not handle."""

from __future__ import annotations

import itertools
import math
from pathlib import Path

import numpy as np
import pytest

import nnbridge
from nnbridge.base.errors import FormatError, ShapeError, UnsupportedOpError


def _file(tmp_path: Path, inputs: dict[str, tuple[int, ...]], body: str, weights: str = "") -> Path:
    header = "".join(f"# nnbridge-input: {n} {'x'.join(map(str, d))} float32\n" for n, d in inputs.items())
    layers = "".join(f'  layer {{ name: "{n}" input {{ data_field: "{n}" }} }}\n' for n in inputs)
    path = tmp_path / "m.prototext"
    path.write_text(f"{header}model {{\n{layers}{body}\n{weights}\n}}\n")
    return path


def _run(path: Path, feeds: dict[str, np.ndarray], **options) -> dict[str, np.ndarray]:
    graph = nnbridge.load(path, batch_size=len(next(iter(feeds.values()))), **options)
    return nnbridge.run(graph, {k: np.asarray(v, np.float32) for k, v in feeds.items()})


def _values(array: np.ndarray) -> str:
    return " ".join(f"values: {v!r}" for v in np.asarray(array, np.float64).reshape(-1).tolist())


def test_embedding_padding_idx_reads_zeros_for_that_index(tmp_path):
    table = np.arange(15, dtype=np.float32).reshape(5, 3) + 1  # 5 embeddings of dim 3
    body = ('  layer { name: "e" parents: "x" weights: "t" embedding { num_embeddings: 5 embedding_dim: 3 '
            'padding_idx { value: 2 } } }')
    # LBANN stores the D × N matrix column-major: embedding j's values are contiguous
    weights = f'  weights {{ name: "t" initializer {{ value_initializer {{ {_values(table)} }} }} }}'
    index = np.array([[0, 2, 4, 2]], np.float32)
    want = table.copy()
    want[2] = 0
    got = _run(_file(tmp_path, {"x": (4,)}, body, weights), {"x": index})["e"]
    np.testing.assert_array_equal(got, want[index.astype(int)])


def test_hint_layer_sizes_a_fully_connected_layer_and_shapes_its_output(tmp_path):
    rng = np.random.default_rng(0)
    w, b = rng.normal(size=(6, 4)).astype(np.float32), rng.normal(size=6).astype(np.float32)
    body = ('  layer { name: "r" parents: "h" reshape { dims: 2 dims: 3 } }\n'
            '  layer { name: "fc" parents: "x" hint_layer: "r" weights: "w" weights: "b" '
            'fully_connected { has_bias: true } }')
    weights = (f'  weights {{ name: "w" initializer {{ value_initializer {{ {_values(w.T)} }} }} }}\n'
               f'  weights {{ name: "b" initializer {{ value_initializer {{ {_values(b)} }} }} }}')
    x = rng.normal(size=(1, 4)).astype(np.float32)
    out = _run(_file(tmp_path, {"x": (4,), "h": (6,)}, body, weights), {"x": x, "h": np.zeros((1, 6))})
    (fc,) = [v for k, v in out.items() if k.startswith("fc")]
    np.testing.assert_allclose(fc, (x @ w.T + b).reshape(1, 2, 3), rtol=1e-5)


def test_hint_layer_gives_noise_its_dims_and_a_size_contradiction_is_refused(tmp_path):
    body = ('  layer { name: "n" hint_layer: "x" gaussian { mean: 3.0 stdev: 2.0 } }\n'
            '  layer { name: "s" parents: "n" parents: "x" sum {} }')
    out = _run(_file(tmp_path, {"x": (100, 100)}, body), {"x": np.zeros((1, 100, 100))})
    assert out["s"].shape == (1, 100, 100)
    assert abs(out["s"].mean() - 3.0) < 0.1 and abs(out["s"].std() - 2.0) < 0.1
    np.testing.assert_array_equal(out["s"], _run(_file(tmp_path, {"x": (100, 100)}, body),
                                                 {"x": np.zeros((1, 100, 100))})["s"])  # seeded
    bad = '  layer { name: "r" parents: "x" hint_layer: "y" relu {} }'
    with pytest.raises(ShapeError, match="hint_layer 'y' gives \\[5\\]"):
        nnbridge.load(_file(tmp_path, {"x": (4,), "y": (5,)}, bad))


def test_lbann_reduction_unit_test_sizes_its_weights_layer_from_the_hint(tmp_path):
    """LBANN's ci_test/unit_tests/test_unit_layer_reduction.py: a ``weights_layer`` without ``dims``
    takes its hint layer's size (Layer::setup_dims), and the metrics are numpy's sum and mean."""
    body = ('  layer { name: "sl" parents: "samples" slice { slice_points: 0 slice_points: 28 slice_points: 29 } }\n'
            '  layer { name: "x1" parents: "sl" identity {} }\n'
            '  layer { name: "x2" parents: "sl" identity {} }\n'
            '  layer { name: "wl" hint_layer: "x1" weights: "input_weights" weights_layer {} }\n'
            '  layer { name: "s" parents: "x1" parents: "wl" sum {} }\n'
            '  layer { name: "rs" parents: "s" reduction { mode: "sum" } }\n'
            '  layer { name: "rm" parents: "s" reduction { mode: "mean" } }\n'
            '  layer { name: "zs" parents: "rs" parents: "x2" operator_layer { ops { parameters {'
            ' [type.googleapis.com/lbann_data.MultiplyOperator] {} } } } }\n'
            '  layer { name: "zm" parents: "rm" parents: "x2" operator_layer { ops { parameters {'
            ' [type.googleapis.com/lbann_data.MultiplyOperator] {} } } } }')
    weights = '  weights { name: "input_weights" initializer { constant_initializer { value: 0.0 } } }'
    samples = np.random.default_rng(20210313).normal(size=(13, 29)).astype(np.float32)
    out = _run(_file(tmp_path, {"samples": (29,)}, body, weights), {"samples": samples})
    x = samples.astype(np.float64)
    np.testing.assert_allclose(out["zs"][:, 0], x[:, :-1].sum(1) * x[:, -1], rtol=1e-5, atol=1e-5)
    np.testing.assert_allclose(out["zm"][:, 0], x[:, :-1].mean(1) * x[:, -1], rtol=1e-5, atol=1e-6)


def test_vae_constant_and_gaussian_take_the_hinted_size(tmp_path):
    """The VAE/WAE idiom (applications/ATOM/models/vae.py): ``Constant(value, hint_layer=mu)``
    without ``num_neurons`` and ``Gaussian(hint_layer=mu)`` are as big as ``mu``."""
    body = ('  layer { name: "one" hint_layer: "mu" constant { value: 1.0 } }\n'
            '  layer { name: "eps" hint_layer: "mu" gaussian { mean: 0.0 stdev: 1.0 training_only: true } }\n'
            '  layer { name: "s" parents: "mu" parents: "one" parents: "eps" sum {} }')
    mu = np.arange(8, dtype=np.float32).reshape(2, 4)
    out = _run(_file(tmp_path, {"mu": (4,)}, body), {"mu": mu})
    np.testing.assert_array_equal(out["s"], mu + 1)


def test_noise_layers_at_inference_follow_lbann(tmp_path):
    body = ('  layer { name: "u" uniform { min: 2.0 max: 4.0 neuron_dims: 3 training_only: true } }\n'
            '  layer { name: "b" bernoulli { prob: 0.5 neuron_dims: 3 } }\n'
            '  layer { name: "s" parents: "u" parents: "b" parents: "x" sum {} }')
    out = _run(_file(tmp_path, {"x": (3,)}, body), {"x": np.ones((1, 3))})
    np.testing.assert_array_equal(out["s"], np.full((1, 3), 3.0 + 0.0 + 1.0))  # mean, zeros (not training)


def test_tessellate_repeats_to_a_size_that_is_no_multiple(tmp_path):
    x = np.arange(6, dtype=np.float32).reshape(1, 2, 3)
    body = '  layer { name: "t" parents: "x" tessellate { dims: 3 dims: 5 } }'
    got = _run(_file(tmp_path, {"x": (2, 3)}, body), {"x": x})["t"]
    np.testing.assert_array_equal(got, x[:, np.arange(3) % 2][:, :, np.arange(5) % 3])


A = np.array([[-2.5, -1.0, 0.0, 0.0, 0.4, 0.5, 1.0, 3.0, 7.5, 0.2]], np.float32)
B = np.array([[2.0, -1.0, 0.0, 2.0, 0.6, 0.5, 0.0, 0.0, -2.0, 0.9]], np.float32)
TRUE = lambda v: (v != 0) & ~np.isnan(v)  # noqa: E731 - LBANN's truth of a value


def _sigmoid_bce(x, y):
    z = np.clip(y, 0, 1)
    return np.where(x > 0, (1 - z) * x + np.log1p(np.exp(-x)), -x * z + np.log1p(np.exp(x)))


def _bce(p, y):
    with np.errstate(all="ignore"):
        return np.where(y > 0, -y * np.log(p), 0) + np.where(y < 1, -(1 - y) * np.log(1 - p), 0)


BINARY_CASES = {
    "SquaredDifferenceOperator": lambda a, b: (a - b) ** 2,
    "SafeDivideOperator": lambda a, b: np.where(np.isfinite(q := np.divide(a, b, where=b != 0,
                                                                          out=np.full_like(a, np.inf))), q, 0),
    "ModOperator": lambda a, b: np.fmod(a, np.where(b == 0, 1, b)) * (b != 0) + np.where(b == 0, np.nan, 0),
    "EqualOperator": lambda a, b: (a == b) * 1.0, "NotEqualOperator": lambda a, b: (a != b) * 1.0,
    "LessOperator": lambda a, b: (a < b) * 1.0, "LessEqualOperator": lambda a, b: (a <= b) * 1.0,
    "GreaterOperator": lambda a, b: (a > b) * 1.0, "GreaterEqualOperator": lambda a, b: (a >= b) * 1.0,
    "LogicalAndOperator": lambda a, b: (TRUE(a) & TRUE(b)) * 1.0,
    "LogicalOrOperator": lambda a, b: (TRUE(a) | TRUE(b)) * 1.0,
    "LogicalXorOperator": lambda a, b: (TRUE(a) ^ TRUE(b)) * 1.0,
    "BooleanAccuracyOperator": lambda a, b: ((a >= 0.5) == (b >= 0.5)) * 1.0,
    "BooleanFalseNegativeOperator": lambda a, b: (~(a >= 0.5) & (b >= 0.5)) * 1.0,
    "BooleanFalsePositiveOperator": lambda a, b: ((a >= 0.5) & ~(b >= 0.5)) * 1.0,
    "SigmoidBinaryCrossEntropyOperator": _sigmoid_bce,
    "BinaryCrossEntropyOperator": _bce,
}


@pytest.mark.parametrize("operator", sorted(BINARY_CASES))
def test_binary_operators_compute_what_lbann_defines(tmp_path, operator):
    a, b = A, B
    if operator == "BinaryCrossEntropyOperator":  # a probability and a label
        a, b = np.clip(np.abs(A) / 8, 1e-3, 1 - 1e-3), np.clip(B, 0, 1)
    body = (f'  layer {{ name: "o" parents: "a" parents: "b" operator_layer {{ ops {{ parameters {{ '
            f'[type.googleapis.com/lbann_data.{operator}] {{}} }} }} }} }}')
    got = _run(_file(tmp_path, {"a": (10,), "b": (10,)}, body), {"a": a, "b": b})["o"]
    with np.errstate(all="ignore"):
        want = BINARY_CASES[operator](a, b)
    np.testing.assert_allclose(got, want, rtol=1e-6, atol=1e-6, equal_nan=True)


@pytest.mark.parametrize(("operator", "fn"), [("LessConstantOperator", np.less), ("GreaterEqualConstantOperator",
                                                                                   np.greater_equal),
                                               ("EqualConstantOperator", np.equal)])
def test_comparisons_with_a_constant(tmp_path, operator, fn):
    body = (f'  layer {{ name: "o" parents: "a" operator_layer {{ ops {{ parameters {{ '
            f'[type.googleapis.com/lbann_data.{operator}] {{ constant: 0.5 }} }} }} }} }}')
    got = _run(_file(tmp_path, {"a": (10,)}, body), {"a": A})["o"]
    np.testing.assert_array_equal(got, fn(A, np.float32(0.5)) * 1.0)


def test_select_picks_by_closeness_to_value(tmp_path):
    body = ('  layer { name: "o" parents: "a" parents: "b" operator_layer { ops { parameters { '
            '[type.googleapis.com/lbann_data.SelectOperator] { value: 0.5 epsilon: 0.2 constant_if_true: true '
            'value_if_true: 9.0 } } } } }')
    got = _run(_file(tmp_path, {"a": (10,), "b": (10,)}, body), {"a": A, "b": B})["o"]
    np.testing.assert_array_equal(got, np.where(np.abs(A - 0.5) < 0.2, 9.0, B))


def test_a_layer_type_without_an_equivalent_is_unsupported_not_malformed(tmp_path):
    body = '  layer { name: "d" parents: "x" sort { descending: true } }'
    with pytest.raises(UnsupportedOpError, match="sort"):
        nnbridge.load(_file(tmp_path, {"x": (4,)}, body))


def test_slice_points_from_the_reader_are_given_or_named(tmp_path):
    """LBANN's slice takes its points from the data reader when it says so; nnbridge reads no
    reader: the points are given (lbann_slice_points) or the field and the option are named."""
    body = ('  layer { name: "s" parents: "x" children: "a" children: "b" slice { axis: 0 slice_points: 0 '
            'slice_points: 4 get_slice_points_from_reader: "independent" } }\n'
            '  layer { name: "a" parents: "s" identity {} }\n  layer { name: "b" parents: "s" identity {} }')
    path = _file(tmp_path, {"x": (4,)}, body)
    with pytest.raises(FormatError, match="get_slice_points_from_reader 'independent': its size comes from LBANN's "
                                          "data reader, which nnbridge does not read; give .*--lbann-slice-points"):
        nnbridge.load(path)
    out = nnbridge.run(nnbridge.load(path, lbann_slice_points={"independent": (0, 1, 4)}),
                       {"x": np.arange(4, dtype=np.float32).reshape(1, 4)})
    np.testing.assert_array_equal(out["b"], [[1, 2, 3]])
    bad = body.replace('"independent"', '"responses"')
    with pytest.raises(FormatError, match="get_slice_points_from_reader 'responses': LBANN's readers give "
                                          "'independent' or 'dependent'"):
        nnbridge.load(_file(tmp_path, {"x": (4,)}, bad))


def _run_training(path: Path, feeds: dict[str, np.ndarray]) -> dict[str, np.ndarray]:
    return _run(path, feeds, lbann_training_layers=True)


P = np.array([[0.1, 0.6, 0.3, 0.0], [0.25, 0.25, 0.4, 0.1], [0.7, 0.1, 0.1, 0.1]], np.float32)
Y = np.array([[0, 1, 0, 0], [0, 0, 0, 1], [0.5, 0.5, 0, 0]], np.float32)


@pytest.mark.parametrize(("layer", "want"), [
    ("cross_entropy {}", lambda p, y: np.where(y > 0, -y * np.log(np.where(p > 0, p, 1)), 0).sum(1)),
    ("mean_squared_error {}", lambda p, y: ((p - y) ** 2).mean(1)),
    ("mean_absolute_error {}", lambda p, y: np.abs(p - y).mean(1)),
    ("categorical_accuracy {}", lambda p, y: (p.argmax(1) == y.argmax(1)) * 1.0),
    ("top_k_categorical_accuracy { k: 2 }",  # the label's class is its last positive entry
     lambda p, y: np.array([(y.shape[1] - 1 - y[i, ::-1].argmax()) in np.argsort(-p[i], kind="stable")[:2]
                            for i in range(len(p))]) * 1.0),
])
def test_loss_and_metric_layers_give_one_value_per_sample(tmp_path, layer, want):
    body = f'  layer {{ name: "l" parents: "p" parents: "y" {layer} }}'
    got = _run_training(_file(tmp_path, {"p": (4,), "y": (4,)}, body), {"p": P, "y": Y})["l"]
    np.testing.assert_allclose(got, want(P, Y).reshape(-1, 1), rtol=1e-6)


def test_cross_entropy_with_labels_reads_class_indices(tmp_path):
    body = '  layer { name: "l" parents: "p" parents: "y" cross_entropy { use_labels: true } }'
    labels = np.array([[1], [3], [0]], np.float32)
    got = _run_training(_file(tmp_path, {"p": (4,), "y": (1,)}, body), {"p": P, "y": labels})["l"]
    np.testing.assert_allclose(got.reshape(-1), -np.log(P[np.arange(3), labels.reshape(-1).astype(int)]), rtol=1e-6)


@pytest.mark.parametrize(("layer", "want"), [
    ("l2_norm2 {}", lambda x: (x ** 2).sum(1)), ("l1_norm {}", lambda x: np.abs(x).sum(1)),
    ("variance {}", lambda x: x.var(1, ddof=1)), ("variance { biased: true }", lambda x: x.var(1)),
    ("argmax {}", lambda x: x.argmax(1)), ("argmin {}", lambda x: x.argmin(1)),
])
def test_statistics_layers(tmp_path, layer, want):
    body = f'  layer {{ name: "l" parents: "x" {layer} }}'
    got = _run_training(_file(tmp_path, {"x": (4,)}, body), {"x": P - 0.2})["l"]
    np.testing.assert_allclose(got, want(P - 0.2).reshape(-1, 1), rtol=1e-5, atol=1e-7)


def test_mini_batch_layers(tmp_path):
    body = '  layer { name: "i" mini_batch_index {} }\n  layer { name: "n" mini_batch_size {} }'
    out = nnbridge.run(nnbridge.load(_file(tmp_path, {}, body), batch_size=3), {})
    np.testing.assert_array_equal(out["i"], [[0], [1], [2]])
    np.testing.assert_array_equal(out["n"], [[3], [3], [3]])


def test_covariance_of_two_inputs(tmp_path):
    body = '  layer { name: "c" parents: "a" parents: "b" covariance { biased: false } }'
    got = _run(_file(tmp_path, {"a": (4,), "b": (4,)}, body), {"a": P, "b": Y})["c"]
    want = [np.cov(P[i], Y[i])[0, 1] for i in range(3)]
    np.testing.assert_allclose(got.reshape(-1), want, rtol=1e-5)


def test_one_hot_floors_and_zeroes_out_of_range(tmp_path):
    x = np.array([[2.7], [-0.5], [5.0], [0.0]], np.float32)
    got = _run(_file(tmp_path, {"x": (1,)}, '  layer { name: "h" parents: "x" one_hot { size: 5 } }'), {"x": x})["h"]
    want = np.zeros((4, 5), np.float32)
    want[0, 2] = want[3, 0] = 1  # floor(2.7) = 2; -0.5 floors to -1 and 5 is past the end: zeros
    np.testing.assert_array_equal(got, want)


def test_gather_and_scatter_follow_lbann_indexing(tmp_path):
    values = np.array([[10, 11, 12, 13, 14]], np.float32)
    index = np.array([[4.9, -1, 0, 7, 2]], np.float32)
    body = '  layer { name: "g" parents: "v" parents: "i" gather {} }'
    got = _run(_file(tmp_path, {"v": (5,), "i": (5,)}, body), {"v": values, "i": index})["g"]
    np.testing.assert_array_equal(got, [[14, 0, 10, 0, 12]])
    body = '  layer { name: "s" parents: "v" parents: "i" scatter { dims: 6 } }'
    got = _run(_file(tmp_path, {"v": (5,), "i": (5,)}, body), {"v": values, "i": np.array([[1, 1, 9, -2, 5.5]])})["s"]
    np.testing.assert_array_equal(got, [[0, 21, 0, 0, 0, 14]])  # repeated indices add up, others are skipped


def test_gather_rows_of_a_matrix_with_axis_0(tmp_path):
    values = np.arange(12, dtype=np.float32).reshape(1, 4, 3)
    body = '  layer { name: "g" parents: "v" parents: "i" gather { axis { value: 0 } } }'
    got = _run(_file(tmp_path, {"v": (4, 3), "i": (2,)}, body), {"v": values, "i": np.array([[3, 1]])})["g"]
    np.testing.assert_array_equal(got, values[:, [3, 1], :])


def test_batchwise_reduce_sum_and_upsample(tmp_path):
    x = np.arange(8, dtype=np.float32).reshape(2, 1, 2, 2)
    body = ('  layer { name: "b" parents: "x" batchwise_reduce_sum {} }\n'
            '  layer { name: "u" parents: "x" upsample { num_dims: 2 has_vectors: true scale_factors: 2 '
            'scale_factors: 3 upsample_mode: "nearest" } }')
    graph = nnbridge.load(_file(tmp_path, {"x": (1, 2, 2)}, body), batch_size=2)
    out = nnbridge.run(graph, {"x": x})
    np.testing.assert_array_equal(out["b"], np.broadcast_to(x.sum(0, keepdims=True), x.shape))
    np.testing.assert_array_equal(out["u"], x.repeat(2, axis=2).repeat(3, axis=3))


def test_entrywise_batch_normalization_uses_each_entrys_running_statistics(tmp_path):
    rng = np.random.default_rng(5)
    mean, var = rng.normal(size=(2, 3)).astype(np.float32), rng.uniform(0.5, 2, (2, 3)).astype(np.float32)
    body = ('  layer { name: "y" parents: "x" weights: "m" weights: "v" '
            'entrywise_batch_normalization { decay: 0.9 epsilon: 1e-5 } }')
    weights = (f'  weights {{ name: "m" initializer {{ value_initializer {{ {_values(mean.reshape(-1))} }} }} }}\n'
               f'  weights {{ name: "v" initializer {{ value_initializer {{ {_values(var.reshape(-1))} }} }} }}')
    x = rng.normal(size=(4, 2, 3)).astype(np.float32)
    got = _run(_file(tmp_path, {"x": (2, 3)}, body, weights), {"x": x})["y"]
    np.testing.assert_allclose(got, (x - mean) / np.sqrt(var + 1e-5), rtol=1e-5, atol=1e-6)


def test_dist_embedding_reads_rows_of_its_table(tmp_path):
    table = np.arange(12, dtype=np.float32).reshape(4, 3)  # 4 embeddings of dim 3
    body = ('  layer { name: "e" parents: "x" weights: "t" dist_embedding { num_embeddings: 4 embedding_dim: 3 '
            'sparse_sgd: true learning_rate: 0.1 } }')
    weights = f'  weights {{ name: "t" initializer {{ value_initializer {{ {_values(table)} }} }} }}'
    index = np.array([[3, 0, 1]], np.float32)
    got = _run(_file(tmp_path, {"x": (3,)}, body, weights), {"x": index})["e"]
    np.testing.assert_array_equal(got, table[index.astype(int)])


@pytest.mark.parametrize("axes, mode, fn", [((1, 3), "", np.sum), ((2, 0), "max", np.max), ((1,), "product", np.prod),
                                            ((0, 2), "minimum", np.min)])
def test_multidim_reduction_as_lbanns_unit_test(tmp_path, axes, mode, fn):
    """ci_test/unit_tests/test_unit_layer_multidim_reduction.py: axes count from the first sample dim."""
    field = f'mode: "{mode}" ' if mode else ""
    listed = " ".join(f"axes: {a}" for a in axes)
    body = f'  layer {{ name: "y" parents: "x" multidim_reduction {{ {field}{listed} }} }}'
    x = np.random.default_rng(20240228).random((2, 3, 4, 5, 6)).astype(np.float32)
    got = _run(_file(tmp_path, {"x": (3, 4, 5, 6)}, body), {"x": x})["y"]
    np.testing.assert_allclose(got, fn(x, axis=tuple(a + 1 for a in axes)), rtol=1e-5)


def test_input_shape_may_name_the_data_field_an_input_layer_reads(tmp_path):
    """LBANN's frontend names input layers itself (``input1``); users know the data field."""
    path = tmp_path / "m.prototext"
    path.write_text('model {\n  layer { name: "input1" input { data_field: "samples" } }\n'
                    '  layer { name: "y" parents: "input1" relu {} }\n}\n')
    graph = nnbridge.load(path, input_shapes={"samples": (29,)})
    assert graph.inputs[0].name == "input1" and graph.inputs[0].shape == (1, 29)
    with pytest.raises(nnbridge.InputError, match=r"input layers are input1 \(data fields samples\)"):
        nnbridge.load(path, input_shapes={"labels": (3,)})


@pytest.mark.parametrize("freeze", [False, True])
def test_identity_zero_gives_zeros_when_frozen(tmp_path, freeze):
    body = f'  layer {{ name: "y" parents: "x" freeze: {str(freeze).lower()} identity_zero {{}} }}'
    x = np.arange(6, dtype=np.float32).reshape(2, 3)
    np.testing.assert_array_equal(_run(_file(tmp_path, {"x": (3,)}, body), {"x": x})["y"], x * (not freeze))


def _operator(name: str, fields: str = "") -> str:
    return f'ops {{ parameters {{ [type.googleapis.com/lbann_data.{name}] {{ {fields} }} }} }}'


def test_erfinv_within_a_few_ulp_of_the_inverse_error_function(tmp_path):
    """LBANN's ErfInvOperator (Newton's method in double precision; −inf / inf at and past ∓1):
    against scipy, as LBANN's test_unit_layer_erfinv checks it."""
    special = pytest.importorskip("scipy.special")
    x = np.concatenate([np.linspace(-0.999999, 0.999999, 20001, dtype=np.float32),
                        np.float32([-1, 1, -1.5, 2, 0, np.nan])]).reshape(1, -1)
    body = f'  layer {{ name: "y" parents: "x" operator_layer {{ {_operator("ErfInvOperator")} }} }}'
    got = _run(_file(tmp_path, {"x": (x.size,)}, body), {"x": x})["y"][0]
    want = special.erfinv(x[0].astype(np.float64))
    want[np.abs(x[0]) > 1] = np.sign(x[0][np.abs(x[0]) > 1]) * np.inf  # LBANN: ±inf outside [-1, 1]
    np.testing.assert_allclose(got, want, rtol=3 * np.finfo(np.float32).eps, atol=0, equal_nan=True)


def test_gelu_is_lbanns_tanh_approximation_both_ways(tmp_path):
    """LBANN's GeluOperator is x/2 (1 + tanh(√(2/π)(x + 0.044715 x³))) (test_unit_layer_gelu's
    numpy); an ONNX exact Gelu is written over ErfOperator, a tanh Gelu as GeluOperator."""
    x = np.linspace(-6, 6, 41, dtype=np.float32).reshape(1, -1)
    body = f'  layer {{ name: "y" parents: "x" operator_layer {{ {_operator("GeluOperator")} }} }}'
    got = _run(_file(tmp_path, {"x": (41,)}, body), {"x": x})["y"]
    x64 = x.astype(np.float64)
    want = 0.5 * x64 * (1 + np.tanh(np.sqrt(2 / np.pi) * (x64 + 0.044715 * x64 ** 3)))
    np.testing.assert_allclose(got, want, rtol=1e-6, atol=1e-6)
    import onnx
    from onnx import helper

    for approximate in ("none", "tanh"):
        node = helper.make_node("Gelu", ["x"], ["y"], approximate=approximate)
        graph = helper.make_graph([node], "g", [helper.make_tensor_value_info("x", onnx.TensorProto.FLOAT, [1, 41])],
                                  [helper.make_tensor_value_info("y", onnx.TensorProto.FLOAT, [1, 41])])
        model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 20)])
        written = tmp_path / f"gelu_{approximate}.prototext"
        nnbridge.convert(model, written)
        assert ("GeluOperator" in written.read_text()) == (approximate == "tanh")
        back = nnbridge.run(nnbridge.load(written), {"x": x})["y"]
        exact = np.array([0.5 * v * (1 + math.erf(v / math.sqrt(2))) for v in x64[0]])
        np.testing.assert_allclose(back[0], want[0] if approximate == "tanh" else exact, rtol=2e-6, atol=2e-6)


def test_rowwise_weights_norms_of_a_matrix_another_layer_set_up(tmp_path):
    """test_unit_layer_rowwise_weights_norms: the L2 norm of each row of the fully connected
    layer's (height × width) matrix, for every sample; without a layer setting the weights up
    first (LBANN's hint_layer) it is refused."""
    mat = np.arange(1, 22, dtype=np.float32).reshape(7, 3) / 5
    weights = f'  weights {{ name: "w" initializer {{ value_initializer {{ {_values(mat.T)} }} }} }}'
    body = ('  layer { name: "c" constant { value: 1 num_neurons: 3 } }\n'
            '  layer { name: "fc" parents: "c" weights: "w" fully_connected { num_neurons: 7 } }\n'
            '  layer { name: "n" weights: "w" hint_layer: "fc" rowwise_weights_norms {} }\n'
            '  layer { name: "s" parents: "x" parents: "n" sum {} }')
    out = _run(_file(tmp_path, {"x": (7,)}, body, weights), {"x": np.zeros((2, 7))})
    np.testing.assert_allclose(out["s"], np.broadcast_to(np.linalg.norm(mat.astype(np.float64), axis=1), (2, 7)),
                               rtol=1e-6)
    lone = ('  layer { name: "n" weights: "w" rowwise_weights_norms {} }\n'
            '  layer { name: "s" parents: "x" parents: "n" sum {} }')
    with pytest.raises(ShapeError, match="its weights 'w' are not set up by a layer before it"):
        nnbridge.load(_file(tmp_path, {"x": (7,)}, lone, weights))


def test_cross_grid_sums_give_each_branch_the_sum_or_its_slice(tmp_path):
    """test_unit_multiple_grids_cross_grid_sum(_slice): every branch gets sin x + cos x; the
    slice variant gives branch i the i-th half of it."""
    x = np.linspace(-2, 2, 8, dtype=np.float32).reshape(1, 8)
    for kind, want in (("cross_grid_sum", lambda y: (y, y)), ("cross_grid_sum_slice", lambda y: (y[:, :4], y[:, 4:]))):
        body = (f'  layer {{ name: "s" parents: "x" operator_layer {{ {_operator("SinOperator")} }} }}\n'
                f'  layer {{ name: "c" parents: "x" operator_layer {{ {_operator("CosOperator")} }} }}\n'
                f'  layer {{ name: "g" parents: "s" parents: "c" children: "b1" children: "b2" {kind} {{}} }}\n'
                f'  layer {{ name: "b1" parents: "g" identity {{}} }}\n'
                f'  layer {{ name: "b2" parents: "g" identity {{}} }}')
        out = _run(_file(tmp_path, {"x": (8,)}, body), {"x": x})
        first, second = want(np.sin(x) + np.cos(x))
        np.testing.assert_allclose(out["b1"], first, rtol=1e-6)
        np.testing.assert_allclose(out["b2"], second, rtol=1e-6)


def test_distconv_gather_and_scatter_take_3d_tensors_along_axis_0(tmp_path):
    """LBANN's distconv build (test_unit_layer_gather_distconv, _scatter_distconv): values
    [N, W, 1], indices [K, 1, 1], axis 0: the rows of the 2-D form, a trailing dim of 1."""
    values = np.arange(12, dtype=np.float32).reshape(1, 4, 3, 1)
    index = np.array([3, 1.5, -1, 9], np.float32).reshape(1, 4, 1, 1)
    body = '  layer { name: "g" parents: "v" parents: "i" gather { axis { value: 0 } } }'
    got = _run(_file(tmp_path, {"v": (4, 3, 1), "i": (4, 1, 1)}, body), {"v": values, "i": index})["g"]
    want = np.zeros((1, 4, 3, 1), np.float32)
    want[0, 0], want[0, 1] = values[0, 3], values[0, 1]
    np.testing.assert_array_equal(got, want)
    body = '  layer { name: "s" parents: "v" parents: "i" scatter { dims: 5 dims: 3 dims: 1 axis { value: 0 } } }'
    got = _run(_file(tmp_path, {"v": (4, 3, 1), "i": (4, 1, 1)}, body), {"v": values, "i": index})["s"]
    want = np.zeros((1, 5, 3, 1), np.float32)
    want[0, 3] += values[0, 0]
    want[0, 1] += values[0, 1]
    np.testing.assert_array_equal(got, want)
    body = '  layer { name: "g" parents: "v" parents: "i" gather { axis { value: 1 } } }'
    with pytest.raises(ShapeError, match="LBANN's distconv form takes"):
        nnbridge.load(_file(tmp_path, {"v": (4, 3, 1), "i": (4, 1, 1)}, body))


def _lbann_unpool(a: np.ndarray, x: np.ndarray, kernel, stride, pads) -> np.ndarray:
    """LBANN's CPU max pooling + unpooling of one sample, loop by loop: windows over the
    zero-padded input, the first largest entry (strict >), col2im with max over every window that
    covers a position (0 from a window whose maximum lies elsewhere), 0 where no window reaches."""
    grid = [(d + 2 * p - k) // s + 1 for d, p, k, s in zip(a.shape[1:], pads, kernel, stride)]
    padded = np.pad(a, [(0, 0)] + [(p, p) for p in pads])
    offsets = list(itertools.product(*(range(k) for k in kernel)))
    out, seen = np.zeros_like(a), np.zeros(a.shape, bool)
    for c in range(a.shape[0]):
        for g in itertools.product(*(range(n) for n in grid)):
            vals = [padded[(c, *(gi * s + o for gi, s, o in zip(g, stride, off)))] for off in offsets]
            best = 0
            for i in range(1, len(vals)):
                if vals[i] > vals[best]:
                    best = i
            for i, off in enumerate(offsets):
                pos = tuple(gi * s + o - p for gi, s, o, p in zip(g, stride, off, pads))
                if all(0 <= q < d for q, d in zip(pos, a.shape[1:])):
                    v = x[(c, *g)] if i == best else 0.0
                    out[(c, *pos)] = max(out[(c, *pos)], v) if seen[(c, *pos)] else v
                    seen[(c, *pos)] = True
    return out


@pytest.mark.parametrize(("shape", "kernel", "stride", "pads"), [
    ((2, 5, 6), (2, 2), (1, 1), (0, 0)),  # v0.99's autoencoders: 2 × 2 windows, stride 1
    ((3, 7, 7), (3, 3), (2, 2), (1, 1)), ((1, 6, 5), (2, 3), (2, 1), (0, 1)), ((2, 8), (3,), (3,), (1,)),
    ((1, 7, 7), (2, 2), (3, 3), (0, 0))])  # strides past the window leave positions no window reaches
def test_unpooling_puts_values_where_the_paired_max_pooling_found_its_maxima(tmp_path, shape, kernel, stride, pads):
    grid = tuple((d + 2 * p - k) // s + 1 for d, p, k, s in zip(shape[1:], pads, kernel, stride))
    nd, size, vsize = len(kernel), math.prod(shape), shape[0] * math.prod(grid)
    lists = " ".join(f"pool_dims: {k} pool_strides: {s} pool_pads: {p}" for k, s, p in zip(kernel, stride, pads))
    body = (f'  layer {{ name: "a" parents: "x" reshape {{ {" ".join(f"dims: {d}" for d in shape)} }} }}\n'
            f'  layer {{ name: "p" parents: "a" pooling {{ num_dims: {nd} has_vectors: true pool_mode: "max" '
            f'{lists} }} }}\n'
            f'  layer {{ name: "vs" parents: "v" reshape {{ {" ".join(f"dims: {d}" for d in (shape[0], *grid))} }} }}\n'
            f'  layer {{ name: "u" parents: "vs" hint_layer: "p" unpooling {{ num_dims: {nd} }} }}')
    rng = np.random.default_rng(0)
    x = rng.normal(size=(2, size)).astype(np.float32)
    x[0, :4] = 0.25  # ties: the first one wins
    v = rng.normal(size=(2, vsize)).astype(np.float32)
    got = _run(_file(tmp_path, {"x": (size,), "v": (vsize,)}, body), {"x": x, "v": v})["u"]
    for b in range(2):
        want = _lbann_unpool(x[b].reshape(shape), v[b].reshape(shape[0], *grid), kernel, stride, pads)
        np.testing.assert_array_equal(got[b], want)


def test_era_a_unpooling_names_its_pooling_layer(tmp_path):
    """v0.99's ``unpooling { pooling_layer }`` is Era C's unpooling with that layer as hint_layer."""
    path = tmp_path / "a.prototext"
    path.write_text("""model {
  mini_batch_size: 2
  layer { name: "data" children: "x dummy" input {} }
  layer { name: "x" parents: "data" split {} }
  layer { name: "dummy" parents: "data" dummy {} }
  layer { name: "p" parents: "x" pooling { num_dims: 2 pool_dims: "2 2" pool_pads: "0 0" pool_strides: "1 1"
                                            pool_mode: "max" has_vectors: true } }
  layer { name: "u" parents: "p" unpooling { num_dims: 2 pooling_layer: "p" } }
}
""")
    x = np.random.default_rng(1).normal(size=(2, 1, 4, 5)).astype(np.float32)
    out = nnbridge.run(nnbridge.load(path, input_shapes={"x": (1, 4, 5)}), {"x": x})["u"]
    pooled = np.max(np.lib.stride_tricks.sliding_window_view(x, (2, 2), axis=(2, 3)), axis=(-2, -1))
    for b in range(2):
        np.testing.assert_array_equal(out[b], _lbann_unpool(x[b], pooled[b], (2, 2), (1, 1), (0, 0)))


def test_a_model_of_inputs_alone_gives_its_inputs(tmp_path):
    """LBANN's data-reader unit tests (LTFB's) are an input layer alone: it is the graph's output."""
    path = _file(tmp_path, {"x": (3,)}, "")
    graph = nnbridge.load(path)
    assert [v.name for v in graph.outputs] == ["x"]
    np.testing.assert_array_equal(nnbridge.run(graph, {"x": np.ones((1, 3), np.float32)})["x"], np.ones((1, 3)))
