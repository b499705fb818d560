"""``check MODEL --against OTHER``: two files, each on its own backend, on the same inputs."""

from __future__ import annotations

import json

import numpy as np
import onnx
import pytest
from models import model, tensor
from onnx import helper, numpy_helper

import nnbridge
from nnbridge import zoo
from nnbridge.base.errors import InputError


@pytest.fixture(scope="module")
def lenet(tmp_path_factory):
    """lenet5 as ONNX, its SMAUG conversion (fp32 weights) and that file's LBANN conversion."""
    folder = tmp_path_factory.mktemp("against")
    onnx.save(zoo.build("lenet5"), folder / "lenet5.onnx")
    nnbridge.convert(folder / "lenet5.onnx", folder / "lenet5_topo.pbtxt", smaug_backend="Reference")
    nnbridge.convert(folder / "lenet5_topo.pbtxt", folder / "lenet5.prototext")
    return folder


@pytest.mark.parametrize("other, backend, row", [("lenet5_topo.pbtxt", "reference", "fp32"),
                                                 ("lenet5.prototext", "reference", "fp32"),
                                                 ("lenet5_topo.pbtxt", "smv", "fp16")])
def test_an_onnx_model_agrees_with_its_smaug_and_lbann_conversions(lenet, other, backend, row):
    result = nnbridge.check(lenet / "lenet5.onnx", against=lenet / other, against_backend=backend)
    assert result.ok and result.rule.name == row  # the looser side chooses the row
    assert result.oracle == f"{other} on {backend}" and result.backend == "lenet5.onnx on reference"
    assert result.outputs[0].max_abs_err > 0 or backend == "reference"


def test_a_perturbed_copy_differs_naming_the_output(lenet, tmp_path, cli):
    proto = onnx.load(lenet / "lenet5.onnx")
    weight = [w for w in proto.graph.initializer if len(w.dims) == 1][-1]  # the last layer's bias: whatever
    values = numpy_helper.to_array(weight).copy()                           # the input (a SMAUG file stores one)
    values.flat[0] += 0.5 * (np.abs(values).max() + 1)
    weight.CopyFrom(numpy_helper.from_array(values, weight.name))
    onnx.save(proto, tmp_path / "perturbed.onnx")
    code, text = cli("check", lenet / "lenet5.onnx", "--against", tmp_path / "perturbed.onnx")
    (name,) = [o.name for o in proto.graph.output]
    assert code == 1 and text.strip().splitlines()[-1] == f"outputs differ: '{name}'"
    code, text = cli("check", lenet / "lenet5_topo.pbtxt", "--against", tmp_path / "perturbed.onnx", "--json")
    data = json.loads(text)
    assert code == 1 and [o["ok"] for o in data["outputs"]] == [False]
    assert data["oracle"] == "perturbed.onnx on reference"


def test_a_compiled_program_against_its_model(lenet, tmp_path, cli):
    pef = tmp_path / "lenet5.pef"
    assert cli("compile", lenet / "lenet5.onnx", "--backend", "rdu", "-o", pef)[0] == 0
    result = nnbridge.check(pef, against=lenet / "lenet5.onnx")
    assert result.ok and result.rule.name == "bf16" and result.backend == "lenet5.pef (rdu program)"
    assert nnbridge.check(lenet / "lenet5.onnx", against=pef).rule.name == "bf16"
    with pytest.raises(InputError, match="compiled RDU program; it runs on rdu, not on smv"):
        nnbridge.check(lenet / "lenet5.onnx", against=pef, against_backend="smv")
    # a program on its own (against the reference backend) takes per-output tolerances too
    strict = nnbridge.check(pef, tolerances={"fc1": (0.0, 0.0)})
    assert not strict.ok and strict.outputs[0].rule == "custom (fc1)" and strict.output_rules["fc1"].atol == 0


def test_inputs_that_match_neither_by_name_nor_by_count_are_refused(tmp_path):
    one = model([helper.make_node("Relu", ["x"], ["y"])], [tensor("x", [2])], [tensor("y", [2])])
    two = model([helper.make_node("Add", ["p", "q"], ["y"])], [tensor("p", [2]), tensor("q", [2])], [tensor("y", [2])])
    renamed = model([helper.make_node("Relu", ["z"], ["w"])], [tensor("z", [2])], [tensor("w", [2])])
    for name, m in (("one", one), ("two", two), ("renamed", renamed)):
        onnx.save(m, tmp_path / f"{name}.onnx")
    with pytest.raises(InputError, match=r"cannot match inputs: one.onnx on reference has \['x'\], two.onnx on "
                                         r"reference has \['p', 'q'\]") as err:
        nnbridge.check(tmp_path / "one.onnx", against=tmp_path / "two.onnx")
    assert "\n" not in str(err.value)
    by_position = nnbridge.check(tmp_path / "one.onnx", against=tmp_path / "renamed.onnx")
    assert by_position.ok and "inputs matched by position: 'x' ↔ 'z'" in by_position.notes


def test_cli_refuses_an_against_backend_without_against_or_unknown(lenet, cli):
    code, text = cli("check", lenet / "lenet5.onnx", "--against-backend", "smv")
    assert code == 2 and "--against-backend names the backend of the --against file" in text
    code, text = cli("check", lenet / "lenet5.onnx", "--against", lenet / "lenet5.onnx", "--against-backend", "smb")
    assert code == 1 and text.strip() == ("error: --against-backend: unknown backend 'smb'; choose from reference, "
                                          "smv, rdu")
