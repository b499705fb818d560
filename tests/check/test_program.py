"""SambaFlow's ``test``: ``nnbridge check model.pef`` against the reference backend."""

from __future__ import annotations

import json

import onnx
from models import large_outputs

from nnbridge.zoo.corpus import logits_model


def _light_squeezenet(onnx_data, tmp_path):
    """The light SqueezeNet up to its logits (its softmax is round-off's: ``corpus.TIED_SOFTMAX``)."""
    path = tmp_path / "light_squeezenet_logits.onnx"
    onnx.save(logits_model(onnx.load(onnx_data / "light" / "light_squeezenet.onnx")), path)
    return path


def test_a_compiled_light_squeezenet_agrees_like_its_model_on_rdu(cli, tmp_path, onnx_data):
    model = _light_squeezenet(onnx_data, tmp_path)
    pef = tmp_path / "squeezenet.pef"
    assert cli("compile", model, "--batch-size", "4", "-o", pef)[0] == 0
    code, text = cli("check", pef, "--json")
    program = json.loads(text)
    code_model, text_model = cli("check", model, "--backend", "rdu", "--json")
    on_model = json.loads(text_model)
    assert code == code_model == 0 and program["ok"] is on_model["ok"] is True
    assert program["oracle"] == "reference" and program["backend"] == "rdu (program)"
    assert program["rule"]["name"] == on_model["rule"]["name"] == "bf16"
    assert any("compiled for batch 4" in n and "ran 4 calls" in n for n in program["notes"])
    (out,) = program["outputs"]
    assert out["name"] == "softmaxout_1" and out["shape"] == [4, 1000, 1, 1] and out["outside"] == 0
    assert program["inputs"][0]["shape"][0] == 4  # the program's own batch: 4 batch-1 calls
    assert "seed 0+k" in program["inputs"][0]["distribution"]
    code, text = cli("check", pef)
    assert code == 0 and "rdu (program) vs reference" in text


def test_a_program_is_checked_on_given_inputs_of_its_whole_batch(cli, tmp_path, onnx_data):
    """--save-inputs writes the whole batch; fed back with --input, the same 4 calls run."""
    model = _light_squeezenet(onnx_data, tmp_path)
    pef = tmp_path / "squeezenet.pef"
    assert cli("compile", model, "--batch-size", "4", "-o", pef)[0] == 0
    code, text = cli("check", pef, "--save-inputs", tmp_path / "in", "--json")
    first = json.loads(text)
    (saved,) = (tmp_path / "in").iterdir()
    code2, text2 = cli("check", pef, "--input", f"data_0={saved}", "--json")
    again = json.loads(text2)
    assert code == code2 == 0 and again["inputs"][0]["shape"][0] == 4
    assert again["outputs"][0]["max_abs_err"] == first["outputs"][0]["max_abs_err"]


def test_the_program_comparison_is_real(cli, tmp_path):
    """bf16 rounding of ≈ 300-sized outputs shows up against a tight user rule."""
    path, pef = tmp_path / "boxes.onnx", tmp_path / "boxes.pef"
    onnx.save(large_outputs(), path)
    assert cli("compile", path, "-o", pef)[0] == 0
    assert cli("check", pef)[0] == 0
    code, text = cli("check", pef, "--rtol", "1e-6", "--json")
    assert code == 1 and json.loads(text)["outputs"][0]["max_abs_err"] > 0.1


def test_a_program_runs_on_rdu_only(cli, tmp_path):
    path, pef = tmp_path / "boxes.onnx", tmp_path / "boxes.pef"
    onnx.save(large_outputs(), path)
    assert cli("compile", path, "-o", pef)[0] == 0
    code, text = cli("check", pef, "--backend", "smv")
    assert code != 0 and "compiled RDU program" in text and "Traceback" not in text
    code, text = cli("check", pef, "--layerwise")
    assert code != 0 and "--layerwise needs the model" in text
