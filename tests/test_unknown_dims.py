"""Unnamed dims, ``-1`` and ``dim_param "?"`` are each their own unknown; named dims still agree.

Exporters write ``?`` for "unknown" (a real pretrained model declares ``x: [-1, 3, '?', '?']``):
it names no dimension, so a non-square image and a second input with ``?`` dims of other sizes
run, as they do on onnxruntime. A named dim such as ``batch`` must be the same in every input.
"""

from __future__ import annotations

import numpy as np
import onnx
import pytest
from onnx import TensorProto, helper, numpy_helper

import nnbridge
from nnbridge.base.errors import InputError
from nnbridge.check import run_onnxruntime

F = TensorProto.FLOAT


def _model(x_dims=(-1, 3, "?", "?"), y_dims=("?", "?")):
    """Conv + ReLU on ``x`` (an image of any height and width) and Sigmoid on ``y``."""
    w = np.random.default_rng(0).standard_normal((4, 3, 3, 3)).astype(np.float32)
    graph = helper.make_graph(
        [helper.make_node("Conv", ["x", "w"], ["c"], pads=[1, 1, 1, 1]), helper.make_node("Relu", ["c"], ["a"]),
         helper.make_node("Sigmoid", ["y"], ["b"])], "unknown_dims",
        [helper.make_tensor_value_info("x", F, list(x_dims)), helper.make_tensor_value_info("y", F, list(y_dims))],
        [helper.make_tensor_value_info("a", F, None), helper.make_tensor_value_info("b", F, None)],
        initializer=[numpy_helper.from_array(w, "w")])
    return helper.make_model(graph, opset_imports=[helper.make_opsetid("", 21)], ir_version=10)


def _inputs() -> dict[str, np.ndarray]:
    rng = np.random.default_rng(1)  # a 5×7 image and a 3×6 second input: no two '?' dims agree
    return {"x": rng.standard_normal((2, 3, 5, 7)).astype(np.float32),
            "y": rng.standard_normal((3, 6)).astype(np.float32)}


def test_unknown_dims_are_read_as_distinct_unknowns():
    graph = nnbridge.load(_model())
    assert [v.type.shape for v in graph.inputs] == [(None, 3, None, None), (None, None)]


@pytest.mark.parametrize("backend", ["reference", "smv", "rdu"])
def test_unknown_dims_of_other_sizes_run_and_match_onnxruntime(backend):
    model, feeds = _model(), _inputs()
    ours, theirs = nnbridge.run(model, feeds, backend=backend), run_onnxruntime(model, feeds)
    assert {k: v.shape for k, v in ours.items()} == {"a": (2, 4, 5, 7), "b": (3, 6)}
    if backend == "reference":
        for name, expected in theirs.items():
            np.testing.assert_allclose(ours[name], expected, rtol=1e-5, atol=1e-6, err_msg=name)
    result = nnbridge.check(model, backend=backend, inputs=feeds)
    assert result.ok, result


def test_unknown_dims_via_cli_run(cli, tmp_path):
    path = tmp_path / "m.onnx"
    onnx.save(_model(), path)
    feeds = _inputs()
    for name, value in feeds.items():
        np.save(tmp_path / f"{name}.npy", value)
    given = [arg for name in feeds for arg in ("--input", f"{name}={tmp_path / name}.npy")]
    code, text = cli("run", path, *given, "--out", tmp_path / "out")
    assert code == 0, text
    for name, expected in run_onnxruntime(_model(), feeds).items():
        np.testing.assert_allclose(np.load(tmp_path / "out" / f"{name}.npy"), expected, rtol=1e-5, atol=1e-6)
    code, text = cli("run", path, *given, "--backend", "smv", "--input-shape", "x=2x3x5x7", "--input-shape", "y=3x6")
    assert code == 0 and "a: float32[2, 4, 5, 7]" in text and "b: float32[3, 6]" in text, text


def test_a_named_dim_must_still_agree_across_inputs():
    model = _model(x_dims=("batch", 3, "?", "?"), y_dims=("batch", "?"))
    with pytest.raises(InputError, match="symbolic dim 'batch' is 3 here but 2 in input 'x'"):
        nnbridge.run(model, _inputs())
