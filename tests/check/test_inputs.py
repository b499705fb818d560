"""The inputs check uses: reported, index-aware, ranged, saved, and SMAUG's stored ones."""

from __future__ import annotations

import numpy as np
import onnx
import pytest
from models import embedding, large_outputs

import nnbridge
from nnbridge.api.inputs import generate_inputs, index_ranges
from nnbridge.base.errors import InputError


def test_every_input_is_described_with_its_distribution_seed_and_range():
    result = nnbridge.check(large_outputs(), seed=7)
    (info,) = result.input_info
    x = result.inputs["x"]
    assert (info.name, info.shape, info.dtype) == ("x", [4, 64], "float32")
    assert info.distribution == "normal(0, 1)" and info.seed == 7
    assert (info.min, info.max) == (float(x.min()), float(x.max()))


def test_integer_inputs_that_index_an_embedding_are_drawn_in_its_range():
    graph = nnbridge.load(embedding(vocab=7))
    assert index_ranges(graph) == {"ids": (7, "Gather 'lookup'")}
    for seed in range(5):  # [0, 10) would read past the 7 rows, and onnxruntime would refuse
        result = nnbridge.check(embedding(vocab=7), seed=seed)
        assert result.ok
        ids = result.inputs["ids"]
        assert ids.min() >= 0 and ids.max() < 7
    assert result.input_info[0].distribution == "integers [0, 7) (indices into Gather 'lookup')"


def test_input_range_sets_floats_and_integers():
    graph = nnbridge.load(embedding(vocab=7))
    feeds, infos = generate_inputs(graph, seed=1, ranges={"ids": (2, 4), "x": (-0.5, 0.5)})
    assert set(np.unique(feeds["ids"])) <= {2, 3} and feeds["ids"].dtype == np.int64
    assert -0.5 <= feeds["x"].min() and feeds["x"].max() < 0.5
    assert [i.distribution for i in infos] == ["integers [2, 4)", "uniform[-0.5, 0.5)"]


@pytest.mark.parametrize("ranges, message", [
    ({"nope": (0, 1)}, "--input-range 'nope': the model has no input named so; its inputs are ids [2x3 int64]"),
    ({"ids": (3, 3)}, "LO must be below HI"),
    ({"ids": (0.5, 3)}, "use integers"),
])
def test_bad_input_ranges_are_one_line_errors(ranges, message):
    with pytest.raises(InputError, match=message.replace("(", r"\(").replace(")", r"\)").replace("[", r"\[")):
        generate_inputs(nnbridge.load(embedding()), ranges=ranges)


def test_cli_input_range_save_inputs_and_reproduction(cli, tmp_path):
    path = tmp_path / "emb.onnx"
    onnx.save(embedding(vocab=30), path)
    code, text = cli("check", path, "--input-range", "ids=0:30", "--seed", "3", "--save-inputs", tmp_path / "in")
    assert code == 0 and "integers [0, 30)" in text and "reproduce with: nnbridge check" in " ".join(text.split())
    ids, x = np.load(tmp_path / "in" / "ids.npy"), np.load(tmp_path / "in" / "x.npy")
    again = nnbridge.check(str(path), inputs={"ids": ids, "x": x})
    first = nnbridge.check(str(path), seed=3, input_ranges={"ids": (0, 30)})
    np.testing.assert_array_equal(again.inputs["ids"], first.inputs["ids"])
    assert again.input_info[0].distribution == "given"
    code, text = cli("check", path, "--input-range", "ids=0-30")
    assert code != 0 and "write LO:HI" in text and "Traceback" not in text


def test_a_smaug_model_is_checked_on_the_input_its_params_file_stores(shared_data):
    topo = shared_data / "smaug" / "lenet5" / "lenet5_smv_topo.pbtxt"
    result = nnbridge.check(str(topo), backend="smv")
    (info,) = result.input_info
    assert info.distribution == "stored in lenet5_smv_params.pb" and info.seed is None
    assert 0 <= info.min and info.max <= 0.005 * (1 + 2**-10)  # SMAUG's recipe: rand * 0.005 in fp16
    assert result.ok and result.rule.name == "fp16" and result.precision == "fp16"
    generated = nnbridge.check(str(topo), backend="smv", stored_inputs=False)
    assert generated.input_info[0].distribution == "normal(0, 1)"


def test_indices_are_followed_through_the_ops_that_only_move_them():
    """A Reshape (injective) passes the integers on to the Gather they index; an Add computes new
    numbers from them, so a Gather behind it bounds nothing."""
    from nnbridge.ir import DType, Graph, TensorType

    g = Graph("g")
    ids = g.add_input("ids", TensorType(DType.INT64, (2, 3)))
    other = g.add_input("other", TensorType(DType.INT64, (6,)))
    table = g.add_initializer("table", np.zeros((5, 4), np.float32))
    shape = g.add_initializer("shape", np.array([6], np.int64))
    flat = g.add_node("Reshape", [ids, shape], name="flat").outputs[0]
    g.add_node("Gather", [table, flat], name="lookup")
    moved = g.add_node("Add", [other, other], name="shift").outputs[0]
    g.add_node("Gather", [table, moved], name="behind_add")
    assert index_ranges(g) == {"ids": (5, "Gather 'lookup'")}
