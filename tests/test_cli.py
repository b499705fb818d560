"""The nnbridge command: every subcommand runs, prints what it promises, and has examples."""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import onnx
import pytest

from nnbridge.cli import build_parser
from nnbridge.zoo import build


@pytest.fixture(scope="module")
def model_path(tmp_path_factory):
    path = tmp_path_factory.mktemp("cli") / "mlp.onnx"
    onnx.save(build("mlp"), path)
    return path



def test_every_command_has_help_with_examples():
    parser = build_parser()
    sub = next(a for a in parser._actions if a.dest == "command")
    assert {"convert", "run", "check", "summary", "ir", "ops"} <= set(sub.choices)
    for name, p in sub.choices.items():
        assert "examples:" in (p.epilog or ""), name


def test_run_writes_outputs(tmp_path, model_path, cli):
    x = tmp_path / "x.npy"
    np.save(x, np.ones((1, 64), np.float32))
    code, text = cli("run", model_path, "--input", f"input={x}", "--out", tmp_path / "out")
    assert code == 0 and "prob: float32[1, 10]" in text
    assert np.load(tmp_path / "out" / "prob.npy").shape == (1, 10)


def test_check_table_and_json(model_path, cli):
    code, text = cli("check", model_path, "--seed", 4)
    assert code == 0 and "agree" in text and "prob" in text
    code, text = cli("check", model_path, "--json")
    assert code == 0 and json.loads(text)["ok"] is True


def test_summary_ir_ops_convert(tmp_path, model_path, cli):
    code, text = cli("summary", model_path)
    assert code == 0 and "Gemm" in text and "2,410 parameters" in text
    code, text = cli("ir", model_path)
    assert code == 0 and "Softmax(" in text
    code, text = cli("ops", "--filter", "Conv")
    assert code == 0 and "Conv" in text
    code, text = cli("convert", model_path, tmp_path / "copy.onnx")
    assert code == 0 and (tmp_path / "copy.onnx").is_file()


def test_symbolic_dims_need_a_value(tmp_path, cli):
    from onnx import TensorProto, helper

    x = helper.make_tensor_value_info("x", TensorProto.FLOAT, ["batch", 3])
    y = helper.make_tensor_value_info("y", TensorProto.FLOAT, ["batch", 3])
    model = helper.make_model(helper.make_graph([helper.make_node("Relu", ["x"], ["y"])], "g", [x], [y]),
                              opset_imports=[helper.make_opsetid("", 17)], ir_version=9)
    path = tmp_path / "dyn.onnx"
    onnx.save(model, path)
    code, text = cli("check", path)
    assert code == 1 and "--dim batch=1" in text
    code, text = cli("check", path, "--dim", "batch=5")
    assert code == 0 and "5x3" in text


def test_an_unexpected_exception_is_one_internal_error_line_with_the_way_to_the_traceback(cli, monkeypatch):
    """Bad input raises nnbridge's errors; anything else is a bug — still no traceback by default."""
    import nnbridge.cli.commands.summary as summary

    def broken(args):
        raise KeyError("boom [x]")

    monkeypatch.setattr(summary, "run", broken)
    monkeypatch.delenv("NNBRIDGE_TRACEBACK", raising=False)
    code, text = cli("summary", "model.onnx")
    assert code == 3 and text.count("\n") == 1 and "Traceback" not in text
    assert text.startswith("internal error: KeyError: 'boom [x]'") and "NNBRIDGE_TRACEBACK=1 nnbridge summary" in text
    monkeypatch.setenv("NNBRIDGE_TRACEBACK", "1")
    with pytest.raises(KeyError):
        cli("summary", "model.onnx")


def test_the_format_is_read_from_the_content_when_the_name_does_not_tell(tmp_path, cli):
    """A valid ONNX named .bin, a SMAUG topology named .pbtxt (its params beside it as
    <stem>_params.pb), a .pef and an LBANN prototext named .txt are summarised like the same
    models under their usual names; --format names the format; unknown content says how to."""
    import re
    import shutil

    import nnbridge
    from nnbridge.zoo import build

    smaug = Path(__file__).resolve().parents[2] / "shared" / "data" / "smaug" / "minerva"
    onnx.save(build("lenet5"), tmp_path / "lenet5.onnx")
    nnbridge.save(nnbridge.load(build("mlp")), tmp_path / "mlp.prototext")
    nnbridge.compile(build("mlp"), "rdu").save(tmp_path / "mlp.pef")
    renamed = {"model.bin": tmp_path / "lenet5.onnx", "minerva.pbtxt": smaug / "minerva_ref_topo.pbtxt",
               "minerva_params.pb": smaug / "minerva_ref_params.pb", "mlp.txt": tmp_path / "mlp.prototext",
               "weights.dat": tmp_path / "lenet5.onnx"}
    for name, source in renamed.items():
        shutil.copy(source, tmp_path / name)

    def parameters(*argv) -> str:
        code, text = cli("summary", *argv)
        assert code == 0, text
        return re.search(r"([\d,]+) parameters, ", text).group(1)

    assert parameters(tmp_path / "model.bin") == parameters(tmp_path / "lenet5.onnx") == "600,810"
    assert parameters(tmp_path / "minerva.pbtxt") == parameters(smaug / "minerva_ref_topo.pbtxt")
    assert nnbridge.load(tmp_path / "minerva.pbtxt").metadata.get("nnbridge.synthetic_params") != "true"
    assert parameters(tmp_path / "mlp.txt") == parameters(tmp_path / "mlp.prototext")
    assert parameters(tmp_path / "mlp.pef") == parameters(tmp_path / "mlp.prototext")
    assert parameters(tmp_path / "weights.dat", "--format", "onnx") == "600,810"
    (tmp_path / "notes.dat").write_text("hello")
    code, text = cli("summary", tmp_path / "notes.dat")
    assert code == 1 and "--format" in text and text.count("\n") == 1


@pytest.mark.parametrize("kind", ["onnx", "smaug", "lbann"])
def test_summary_starts_with_inputs_outputs_ops_parameters_and_flop(tmp_path, cli, kind):
    import nnbridge
    from nnbridge.zoo import build

    path = {"onnx": tmp_path / "lenet5.onnx", "smaug": tmp_path / "lenet5_topo.pbtxt",
            "lbann": tmp_path / "lenet5.prototext"}[kind]
    nnbridge.save(nnbridge.load(build("lenet5")), path)
    code, text = cli("summary", path)
    assert code == 0 and text.index("inputs and outputs") < text.index("nodes")
    assert "input " in text and "ops (" in text and "parameters" in text and "MFLOP per run" in text
    code, text = cli("summary", path, "--json", "-")
    header = json.loads(text)
    assert code == 0 and len(header["inputs"]) == 1 and header["outputs"]
    assert header["parameters"] >= 600_810 and header["flop"] > 12e6 and header["ops"]
    assert header["inputs"][0]["shape"][-2:] in ([28, 28], [28, 1])  # NCHW, or NHWC for SMAUG's SMV files


def test_run_out_writes_every_output_or_nothing(tmp_path, cli):
    """A sequence output cannot be a .npy: refused before the first file, the folder not created."""
    from onnx import TensorProto, helper

    x = helper.make_tensor_value_info("x", TensorProto.FLOAT, [3])
    nodes = [helper.make_node("Relu", ["x"], ["y"]), helper.make_node("SplitToSequence", ["x"], ["s"])]
    graph = helper.make_graph(nodes, "seq", [x], [helper.make_tensor_value_info("y", TensorProto.FLOAT, None),
                                                  helper.make_tensor_sequence_value_info("s", TensorProto.FLOAT, None)])
    onnx.save(helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)]), tmp_path / "seq.onnx")
    code, text = cli("run", tmp_path / "seq.onnx", "--out", tmp_path / "out")
    assert code == 1 and "output 's' is not a tensor" in text and not (tmp_path / "out").exists()
    onnx.save(helper.make_model(helper.make_graph(nodes[:1], "one", [x], [helper.make_tensor_value_info(
        "y", TensorProto.FLOAT, None)]), opset_imports=[helper.make_opsetid("", 17)]), tmp_path / "one.onnx")
    code, text = cli("run", tmp_path / "one.onnx", "--out", tmp_path / "out")
    assert code == 0 and np.load(tmp_path / "out" / "y.npy").shape == (3,)


def test_parameters_are_counted_after_folding_and_convert_lists_its_files_and_changes(tmp_path, cli, onnx_data):
    """VGG-19's weights are ConstantOfShape recipes (217 initializer values): its 143.7 M parameters
    count as folding would store them; convert names every file written and the fp16 change."""
    code, text = cli("summary", onnx_data / "light" / "light_vgg19.onnx", "--json", "-")
    header = json.loads(text)
    assert code == 0 and header["parameters"] == 143_667_242 and header["parameter_bytes"] == 4 * 143_667_242
    source = tmp_path / "lenet.onnx"
    onnx.save(build("lenet5"), source)
    code, text = cli("convert", source, tmp_path / "out" / "le_topo.pbtxt")
    first, *notes = text.strip().splitlines()
    assert code == 0 and f"{tmp_path / 'out' / 'le_topo.pbtxt'}, {tmp_path / 'out' / 'le_params.pb'}" in first
    assert "600,810 parameters" in first
    assert any("SMV stores float16" in n for n in notes) and any("random-data recipe" in n for n in notes)
    code, text = cli("convert", source, tmp_path / "out" / "le.prototext", "--lbann-weights", "npy")
    assert code == 0 and "+ 7 files in" in text and "became mini_batch_size" in text


def test_every_command_that_produces_data_writes_json_to_a_file_or_alone_to_stdout(tmp_path, model_path, cli):
    runs = {
        "run": (["run", model_path], lambda d: d["outputs"][0]["shape"] == [1, 10] and d["inputs"][0]["name"]),
        "convert": (["convert", model_path, tmp_path / "m_topo.pbtxt"],
                    lambda d: [Path(f["path"]).name for f in d["files"]] == ["m_topo.pbtxt", "m_params.pb"]
                    and d["parameters"] == 2410),
        "ir": (["ir", model_path, "--passes", "fuse"], lambda d: any(n["op"] == "Fused" for n in d["nodes"])),
        "ops": (["ops", "--filter", "Conv"], lambda d: d["ops"]["Conv"]["reference"] is True),
        "summary": (["summary", model_path], lambda d: d["parameters"] == 2410),
    }
    for name, (argv, holds) in runs.items():
        code, text = cli(*argv, "--json", "-")
        assert code == 0, text
        assert holds(json.loads(text)), name  # stdout carries the JSON alone: it parses whole
        target = tmp_path / f"{name}.json"
        code, _ = cli(*argv, "--json", target)
        assert code == 0 and holds(json.loads(target.read_text())), name


def test_long_work_reports_progress_for_the_pass_pipeline_and_each_long_graph_run(onnx_data):
    """What the terminal's bars (with the time left) are fed: (done, total) of the pipeline's steps and
    of a long plan's kernel steps, ending at total; nothing is reported unless someone listens."""
    import nnbridge
    from nnbridge.kernels.evaluator import STEP_PROGRESS
    from nnbridge.passes.manager import PASS_PROGRESS

    seen: dict[str, list[tuple[int, int]]] = {"passes": [], "nodes": []}
    tokens = (PASS_PROGRESS.set(lambda d, t: seen["passes"].append((d, t))),
              STEP_PROGRESS.set(lambda d, t: seen["nodes"].append((d, t))))
    try:
        model = onnx_data / "light" / "light_resnet50.onnx"
        exe = nnbridge.compile(model, "reference")
        exe.run({"gpu_0/data_0": np.zeros((1, 3, 224, 224), np.float32)})
    finally:
        PASS_PROGRESS.reset(tokens[0])
        STEP_PROGRESS.reset(tokens[1])
    for kind, calls in seen.items():
        total = calls[-1][1]
        assert calls[0][0] == 0 and calls[-1] == (total, total) and total > 5, kind
        assert [d for d, _ in calls] == sorted(d for d, _ in calls), kind


def test_convert_dry_run_reports_per_op_type_and_writes_nothing(tmp_path, cli):
    onnx.save(build("lstm_small"), tmp_path / "lstm.onnx")
    onnx.save(build("lenet5"), tmp_path / "lenet.onnx")
    code, text = cli("convert", tmp_path / "lstm.onnx", tmp_path / "lstm.prototext", "--dry-run")
    assert code == 1 and "nothing written" in text
    assert "LSTM                             1  refused: LBANN has no equivalent layer or operator (1)" in text
    code, text = cli("convert", tmp_path / "lenet.onnx", tmp_path / "lenet_topo.pbtxt", "--dry-run")
    assert code == 0 and "Conv                             2  converts" in text
    assert "would write" in text and "lenet_params.pb" in text
    assert sorted(p.name for p in tmp_path.iterdir()) == ["lenet.onnx", "lstm.onnx"]


def test_opt_level_help_is_derived_from_the_backends_pipelines(capsys, monkeypatch):
    """The help names what each level adds, read from the pipelines (it said "2 + folding" while the
    pipelines folded at 0 and fused at 2)."""
    from nnbridge.backends import get_backend
    from nnbridge.cli import main

    def help_text() -> str:
        with pytest.raises(SystemExit) as done:
            main(["run", "--help"])
        assert done.value.code == 0
        return " ".join(capsys.readouterr().out.split())

    text = help_text()
    assert "reference: 0 simplify layout-nchw" in text and "2 +fuse" in text
    assert "rdu: 0 fold eliminate infer-shapes simplify" in text and "1 +fuse-chains" in text
    reference = get_backend("reference")
    monkeypatch.setitem(reference.pipelines, 2, [*reference.pipelines[1], "fuse-chains"])
    assert "2 +fuse-chains" in help_text()


def test_run_takes_an_lbann_files_batch_and_refuses_it_for_other_formats(tmp_path, cli):
    import json

    import onnx
    from onnx import TensorProto, helper

    graph = helper.make_graph([helper.make_node("Relu", ["x"], ["y"])], "small",
                              [helper.make_tensor_value_info("x", TensorProto.FLOAT, [1, 4])],
                              [helper.make_tensor_value_info("y", TensorProto.FLOAT, [1, 4])])
    onnx.save(helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)]), tmp_path / "m.onnx")
    assert cli("convert", tmp_path / "m.onnx", tmp_path / "m.prototext")[0] == 0
    code, text = cli("run", tmp_path / "m.prototext", "--batch-size", "3", "--json", "-")
    assert code == 0 and json.loads(text)["outputs"][0]["shape"] == [3, 4]
    code, text = cli("run", tmp_path / "m.onnx", "--batch-size", "3")
    assert code == 2 and "batch_size: not read when reading the onnx file" in text
    code, text = cli("run", tmp_path / "m.prototext", "--batch-size", "0")
    assert code == 2 and "--batch-size 0: a batch holds at least one sample" in text


def test_smaug_synthetic_scale_sets_the_made_up_weights_of_a_topology_without_params(tmp_path, cli):
    import onnx
    from onnx import TensorProto, helper, numpy_helper

    w = np.random.default_rng(0).uniform(-1, 1, (4, 8)).astype(np.float32)
    graph = helper.make_graph([helper.make_node("MatMul", ["x", "w"], ["y"])], "mm",
                              [helper.make_tensor_value_info("x", TensorProto.FLOAT, [1, 4])],
                              [helper.make_tensor_value_info("y", TensorProto.FLOAT, [1, 8])],
                              [helper.make_tensor("w", TensorProto.FLOAT, w.shape, w.ravel())])
    onnx.save(helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)]), tmp_path / "mm.onnx")
    assert cli("convert", tmp_path / "mm.onnx", tmp_path / "mm_topo.pbtxt", "--smaug-backend", "Reference")[0] == 0
    (tmp_path / "mm_params.pb").unlink()
    for scale in (0.001, 0.1):
        code, _ = cli("convert", tmp_path / "mm_topo.pbtxt", tmp_path / "back.onnx", "--smaug-synthetic-scale", scale)
        weights = onnx.load(tmp_path / "back.onnx").graph.initializer
        peak = max(float(np.abs(numpy_helper.to_array(t)).max()) for t in weights)
        assert code == 0 and scale / 10 < peak <= scale
    code, text = cli("run", tmp_path / "mm.onnx", "--smaug-synthetic-scale", "0.001")
    assert code == 2 and "synthetic_scale: not read when reading the onnx file" in text
    code, text = cli("run", tmp_path / "mm_topo.pbtxt", "--smaug-synthetic-scale", "-1")
    assert code == 2 and "--smaug-synthetic-scale -1.0: a scale is a positive number" in text


def test_smaug_activations_is_a_smaug_load_option_on_every_loading_command(tmp_path, cli):
    """--smaug-activations reaches the SMAUG reader (tested against the real runtime in
    tests/smaug/test_smaug_builder_scripts.py); another format refuses it in one line (exit 2)."""
    import onnx
    from onnx import TensorProto, helper

    graph = helper.make_graph([helper.make_node("Tanh", ["x"], ["y"])], "t",
                              [helper.make_tensor_value_info("x", TensorProto.FLOAT, [1, 4])],
                              [helper.make_tensor_value_info("y", TensorProto.FLOAT, [1, 4])])
    onnx.save(helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)]), tmp_path / "t.onnx")
    assert cli("convert", tmp_path / "t.onnx", tmp_path / "t_topo.pbtxt", "--smaug-backend", "Reference")[0] == 0
    for command in (["run"], ["summary"], ["ir"], ["check"], ["simulate"], ["compile", "--backend", "rdu"]):
        code, text = cli(*command, tmp_path / "t.onnx", "--smaug-activations", "reference")
        assert code == 2 and "activations: not read when reading the onnx file" in text, (command, text)
    code, text = cli("ir", tmp_path / "t_topo.pbtxt", "--smaug-activations", "reference")
    assert code == 0 and "Tanh" not in text and "Exp" in text  # tanh as 2σ(2x) − 1
    code, text = cli("run", tmp_path / "t_topo.pbtxt", "--smaug-activations", "exp")
    assert code == 2 and "invalid choice: 'exp'" in text
