"""Nothing silent (#31): what a user gives is used or refused in one line.

The table test runs every CLI command with a misspelt input name, a misspelt option and a
misspelt ``--set`` key: each ends in one ``error:`` line, exit 2, nothing written. The named
tests below pin the cases the issue reproduced (each failed before the fix).
"""

from __future__ import annotations

import numpy as np
import onnx
import pytest
from onnx import TensorProto, helper

import nnbridge
from nnbridge.backends import get_backend
from nnbridge.base.errors import InputError, OptionError, UsageError
from nnbridge.cli import build_parser
from nnbridge.zoo import build


@pytest.fixture(scope="module")
def files(tmp_path_factory):
    """mlp.onnx (input 'input' [1x64 float32]), an input for it, its RDU program, and a folder for outputs."""
    d = tmp_path_factory.mktemp("silent")
    onnx.save(build("mlp"), d / "mlp.onnx")
    np.save(d / "x.npy", np.ones((1, 64), np.float32))
    nnbridge.compile(d / "mlp.onnx", backend="rdu").save(d / "mlp.pef")
    return d


#: command → (its arguments on the mlp files, how it names an input: '--input', '--input-shape' or None)
COMMANDS = {
    "convert": (["{d}/mlp.onnx", "{d}/out/copy.onnx"], "--input-shape"),
    "port": (["{d}/mlp.onnx", "--out-dir", "{d}/out", "--keep", "--json", "{d}/out/port.json"], "--input-shape"),
    "run": (["{d}/mlp.onnx", "--out", "{d}/out"], "--input"),
    "run .pef": (["{d}/mlp.pef", "--out", "{d}/out"], "--input"),
    "check": (["{d}/mlp.onnx", "--save-inputs", "{d}/out"], "--input"),
    "check .pef": (["{d}/mlp.pef"], "--input"),
    "check --against": (["{d}/mlp.onnx", "--against", "{d}/mlp.onnx", "--save-outputs", "{d}/out/run.npz"], "--input"),
    "train": (["{d}/mlp.onnx", "--data", "digits", "--out", "{d}/out/trained.onnx"], "--input-shape"),
    "summary": (["{d}/mlp.onnx"], "--input-shape"),
    "ir": (["{d}/mlp.onnx"], "--input-shape"),
    "ops": ([], None),
    "simulate": (["{d}/mlp.onnx", "--json", "{d}/out/report.json"], "--input"),
    "compile": (["{d}/mlp.onnx", "-o", "{d}/out/mlp.pef"], "--input-shape"),
    "measure-performance": (["{d}/mlp.onnx", "--json", "{d}/out/perf.json"], "--input-shape"),
    "measure-sections": (["{d}/mlp.onnx"], "--input-shape"),
    "sweep": (["{d}/spec.toml", "--out", "{d}/out"], None),
    "sweep-report": (["{d}/out"], None),
}
MISSPELT = {
    "input": lambda flag: [flag or "--input", "inptu=1x64" if flag == "--input-shape" else "inptu={d}/x.npy"],
    "option": lambda flag: ["--bogus-flag"],
    "set": lambda flag: ["--set", "bogus=1"],
    "repeated input": lambda flag: [flag or "--input",
                                    "input=1x64" if flag == "--input-shape" else "input={d}/x.npy"] * 2,
}
#: what each case's one line must say (a command that takes no input names refuses the flag itself)
SAID = {"input": "inptu", "option": "--bogus-flag", "set": "bogus", "repeated input": "given twice"}


def test_the_table_covers_every_command():
    sub = next(a for a in build_parser()._actions if a.dest == "command")
    assert set(sub.choices) == {name.split()[0] for name in COMMANDS}


@pytest.mark.parametrize("case", MISSPELT)
@pytest.mark.parametrize("command", COMMANDS)
def test_every_command_refuses_a_misspelt_input_option_or_setting_in_one_line(files, cli, command, case):
    args, input_flag = COMMANDS[command]
    argv = [command.split()[0], *args, *MISSPELT[case](input_flag)]
    code, text = cli(*(a.format(d=files) for a in argv))
    assert code == 2 and text.startswith("error:") and text.strip().count("\n") == 0, text
    assert SAID[case] in text or (input_flag is None and "unrecognized arguments: --input" in text), text
    assert not (files / "out").exists()  # nothing written


def test_an_unknown_input_name_is_refused_with_what_the_model_takes(files, cli):
    for command in ("run", "check", "simulate"):
        code, text = cli(command, files / "mlp.onnx", "--input", f"dta={files / 'x.npy'}")
        assert code == 2 and "input 'dta': the model has no input named so; its inputs are input [1x64 float32]" in text
    with pytest.raises(InputError, match="no input named so"):
        nnbridge.check(files / "mlp.onnx", inputs={"dta": np.ones((1, 64), np.float32)})


@pytest.mark.parametrize("command", ["run", "check", "simulate", "run .pef", "check .pef"])
def test_a_seed_is_refused_when_every_input_is_given(files, cli, command):
    """--seed draws only inputs that have no value: with every input given it changes nothing."""
    model = files / ("mlp.pef" if command.endswith(".pef") else "mlp.onnx")
    code, text = cli(command.split()[0], model, "--input", f"input={files / 'x.npy'}", "--seed", "3")
    assert code == 2 and text.strip().count("\n") == 0, text
    assert "--seed 3: not read, as every input of the model already has a value (input)" in text, text
    assert cli(command.split()[0], model, "--seed", "3")[0] == 0  # it draws the input


def test_a_seed_given_to_python_with_every_input_is_refused_and_the_default_is_not(files):
    x = {"input": np.ones((1, 64), np.float32)}
    with pytest.raises(InputError, match="--seed 0: not read"):
        nnbridge.check(files / "mlp.onnx", inputs=x, seed=0)
    assert nnbridge.check(files / "mlp.onnx", inputs=x).ok


def test_python_and_the_cli_refuse_a_given_input_by_the_same_rule(files, cli, tmp_path):
    """One rule (ir/feeds.py match_inputs): Executable.run raises the line the CLI prints (a
    UsageError, so an InputError to Python callers; exit 2 in the CLI)."""
    np.save(tmp_path / "wide.npy", np.ones((1, 64)))
    with pytest.raises(UsageError) as info:
        nnbridge.run(files / "mlp.onnx", {"input": np.ones((1, 64))})
    code, text = cli("run", files / "mlp.onnx", "--input", f"input={tmp_path / 'wide.npy'}")
    assert code == 2 and text.strip() == f"error: {info.value}"


def test_a_given_input_of_another_dtype_or_shape_is_refused_before_compiling(files, cli, tmp_path):
    np.save(tmp_path / "wide.npy", np.ones((1, 64)))
    np.save(tmp_path / "long.npy", np.ones((1, 65), np.float32))
    code, text = cli("run", files / "mlp.onnx", "--backend", "rdu", "--input", f"input={tmp_path / 'wide.npy'}")
    assert code == 2 and "input 'input' has dtype float64, not float32; its inputs are input [1x64 float32]" in text
    code, text = cli("check", files / "mlp.pef", "--input", f"input={tmp_path / 'long.npy'}")
    assert code == 2 and "input 'input' has shape 1x65, not 1x64" in text


def test_every_backend_refuses_unknown_compile_options_from_python(files):
    graph = nnbridge.load(files / "mlp.onnx")
    for backend in ("reference", "smv", "rdu"):
        with pytest.raises(OptionError, match=f"the {backend} backend has no option 'bogus'; it takes "):
            nnbridge.compile(graph, backend=backend, bogus=1)
        with pytest.raises(TypeError):  # as Python refuses an unexpected keyword
            get_backend(backend).compile(graph.copy(), bogus=1)


def test_a_setting_of_the_wrong_type_is_refused_in_one_line(files, cli):
    graph = nnbridge.load(files / "mlp.onnx")
    with pytest.raises(OptionError, match="n_pcu='many': the rdu backend's n_pcu must be an integer"):
        nnbridge.compile(graph, backend="rdu", n_pcu="many")
    code, text = cli("run", files / "mlp.onnx", "--backend", "smv", "--set", "accels=four")
    assert code == 2 and "--set accels=four: the smv backend's accels must be an integer" in text
    code, text = cli("run", files / "mlp.onnx", "--set", "profile=maybe")
    assert code == 2 and "must be true or false" in text


def test_set_values_are_parsed_by_their_declared_types(files, cli):
    code, text = cli("measure-performance", files / "mlp.onnx", "--set", "n_pmu=none", "--set", "clock_ghz=2",
                     "--json", "-")
    assert code == 0, text
    exe = nnbridge.compile(nnbridge.load(files / "mlp.onnx"), backend="rdu", n_pmu="none", clock_ghz=2)
    assert exe.machine.n_pmu is None and exe.machine.clock_ghz == 2.0


def test_set_help_lists_the_settings_each_backend_declares(capsys):
    with pytest.raises(SystemExit):
        build_parser().parse_args(["run", "--help"])
    text = " ".join(capsys.readouterr().out.split())
    for backend in ("reference", "smv", "rdu"):
        declared = [name for name, s in get_backend(backend).settings.items() if s.cli]
        assert f"{backend}: {', '.join(declared)}" in text


def test_summary_opt_level_runs_the_reference_pipeline_as_its_example_says(files, cli):
    code, plain = cli("summary", files / "mlp.onnx")
    assert code == 0 and "fusion would make" in plain
    code, text = cli("summary", files / "mlp.onnx", "--opt-level", "2")
    assert code == 0 and "fused groups)" in text and "fusion would make" not in text


def test_passes_and_opt_level_together_are_refused(files, cli):
    for command in ("run", "summary", "ir", "simulate"):
        code, text = cli(command, files / "mlp.onnx", "--passes", "fold", "--opt-level", "2")
        assert code == 2 and "give one of them" in text, command


def test_a_compiled_program_refuses_what_it_does_not_read(files, cli):
    code, text = cli("run", files / "mlp.pef", "--backend", "smv")
    assert code == 2 and "runs on rdu, not --backend smv" in text
    for extra in (["--set", "mode=o0"], ["--opt-level", "3"], ["--input-shape", "input=1x64"]):
        for command in ("run", "check", "measure-performance"):
            code, text = cli(command, files / "mlp.pef", *extra)
            assert code == 2 and f"{' '.join(extra)}: not read by a compiled program" in text, (command, extra)
    code, text = cli("measure-performance", files / "mlp.pef", "--mode", "o0")
    assert code == 2 and "--mode o0: not read" in text


def test_options_of_another_model_kind_are_refused(files, cli):
    code, text = cli("measure-performance", files / "mlp.onnx", "--context", "100")
    assert code == 2 and "--context 100: not read for" in text and "llama-3.1-8b" in text
    code, text = cli("compile", files / "mlp.onnx", "--lr", "0.1", "-o", files / "lr.pef")
    assert code == 2 and "--lr 0.1: not read without --optimizer" in text and not (files / "lr.pef").exists()
    code, text = cli("run", files / "mlp.onnx", "--data", "digits")
    assert code == 2 and "--data trains a compiled training program" in text
    code, text = cli("simulate", files / "mlp.onnx", "--perf-only", "--input", f"input={files / 'x.npy'}")
    assert code == 2 and "not read with --perf-only" in text
    code, text = cli("simulate", files / "mlp.onnx", "--accels", "2", "--set", "num_accels=4")
    assert code == 2 and "--accels and --set num_accels" in text
    code, text = cli("check", files / "mlp.onnx", "--debug-passes", "--layerwise")
    assert code == 2 and "--layerwise: not read by --debug-passes" in text


def test_flags_a_mode_of_a_command_does_not_read_are_refused(files, cli, tmp_path):
    code, text = cli("convert", files / "mlp.onnx", tmp_path / "c.onnx", "--dry-run", "--json", tmp_path / "c.json")
    assert code == 2 and "--json" in text and "not read by --dry-run" in text and not list(tmp_path.iterdir())
    code, text = cli("ir", files / "mlp.onnx", "--print-after")
    assert code == 2 and "--print-after: not read without passes" in text
    code, text = cli("summary", files / "mlp.onnx", "--style", "smaug", "--opt-level", "2")
    assert code == 2 and "--opt-level 2: not read with --style smaug" in text


def test_momentum_is_refused_with_adam(files, cli):
    for command in (["train", files / "mlp.onnx", "--data", "digits"], ["compile", files / "mlp.onnx"]):
        code, text = cli(*command, "--optimizer", "adam", "--momentum", "0.5", "-o", files / "adam.out")
        assert code == 2 and "--momentum 0.5: not read by --optimizer adam" in text
        assert not (files / "adam.out").exists()


def test_compile_reads_disable_pass(files, cli):
    code, text = cli("compile", files / "mlp.onnx", "--disable-pass", "fuse-chain", "-o", files / "typo.pef")
    assert code != 0 and "fuse-chain" in text and not (files / "typo.pef").exists()


def test_format_options_another_format_reads_are_refused(files, cli, tmp_path):
    code, text = cli("convert", files / "mlp.onnx", tmp_path / "copy.onnx", "--lbann-weights", "npy")
    assert code == 2 and "lbann_weights: not read when writing the onnx file" in text
    code, text = cli("convert", files / "mlp.onnx", tmp_path / "copy.onnx", "--option", "opset=17")
    assert code == 2 and "opset: not read" in text and "onnx_opset" in text
    code, text = cli("run", files / "mlp.onnx", "--lbann-training-layers")
    assert code == 2 and "lbann_training_layers: not read when reading the onnx file" in text
    assert not list(tmp_path.iterdir())


def test_convert_batch_size_zero_is_refused_as_run_refuses_it(files, cli, tmp_path):
    """convert's --batch-size is the reader option run reads (common.load_options), not a copy that
    dropped a 0."""
    for command in (["convert", files / "mlp.onnx", tmp_path / "copy.onnx"], ["run", files / "mlp.onnx"]):
        code, text = cli(*command, "--batch-size", "0")
        assert code == 2 and "--batch-size 0: a batch holds at least one sample" in text
    assert not list(tmp_path.iterdir())


def test_reader_options_are_refused_for_a_model_in_memory():
    with pytest.raises(OptionError, match="lbann_training_layers: not read for a model already in memory"):
        nnbridge.load(build("mlp"), lbann_training_layers=True)


def _two_outputs_one_file(path):
    x = helper.make_tensor_value_info("x", TensorProto.FLOAT, [2])
    outs = [helper.make_tensor_value_info(n, TensorProto.FLOAT, [2]) for n in ("a/b", "a_b")]
    graph = helper.make_graph([helper.make_node("Relu", ["x"], ["a/b"]), helper.make_node("Neg", ["x"], ["a_b"])],
                              "two", [x], outs)
    onnx.save(helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)]), path)


def test_run_out_refuses_two_outputs_that_would_share_a_file(cli, tmp_path):
    _two_outputs_one_file(tmp_path / "two.onnx")
    code, text = cli("run", tmp_path / "two.onnx", "--out", tmp_path / "out")
    assert code == 1 and "outputs 'a/b' and 'a_b' would both be written as a_b.npy" in text
    assert text.strip().count("\n") == 0 and not (tmp_path / "out").exists()


def test_saved_inputs_never_overwrite_each_other(tmp_path):
    from nnbridge.api.inputs import save_inputs

    with pytest.raises(InputError, match="inputs 'x:0' and 'x_0' would both be written as x_0.npy"):
        save_inputs({"x:0": np.zeros(2), "x_0": np.ones(2)}, tmp_path)
    assert not list(tmp_path.iterdir())
