"""SambaFlow-style workflow: CLI compile / run .pef / measure-performance / measure-sections; Python API."""

from __future__ import annotations

import json

import numpy as np
import onnx
import pytest

from nnbridge import sambaflow as api
from nnbridge.base.errors import InputError
from nnbridge.cli import main
from nnbridge.zoo import build


@pytest.fixture
def model_path(tmp_path):
    path = tmp_path / "mlp.onnx"
    onnx.save(build("mlp"), path)
    return path


def test_cli_compile_run_and_measure(model_path, tmp_path, capsys):
    pef = tmp_path / "out" / "mlp.pef"
    assert main(["compile", str(model_path), "--backend", "rdu", "-o", str(pef), "--mode", "o0",
                 "--preset", "sn10"]) == 0
    assert pef.is_file()
    assert main(["run", str(pef), "--out", str(tmp_path / "res")]) == 0
    assert (tmp_path / "res" / "prob.npy").is_file()
    capsys.readouterr()
    assert main(["measure-performance", str(pef), "--batch-size", "32", "--json"]) == 0
    perf = json.loads(capsys.readouterr().out)
    assert perf["batch_size"] == 32 and perf["mode"] == "o0" and perf["machine"] == "sn10"
    assert perf["totals"]["throughput_samples_per_s"] > 0
    assert main(["measure-sections", str(model_path), "--json", "--plot", str(tmp_path / "s.png")]) == 0
    sections = json.loads(capsys.readouterr().out)
    assert sections["rows"] and {"pcus", "stage_us", "bottleneck"} <= set(sections["rows"][0])
    assert (tmp_path / "s.png").stat().st_size > 0


def test_cli_measure_performance_text_and_plot(model_path, tmp_path, capsys):
    assert main(["measure-performance", str(model_path), "-B", "16", "--preset", "plasticine",
                 "--set", "n_pmu=none", "--plot", str(tmp_path / "p.png")]) == 0
    out = capsys.readouterr().out
    assert "samples/s" in out and "utilization" in out and "latency" in out
    assert (tmp_path / "p.png").is_file()
    assert main(["measure-sections", str(model_path), "--stages"]) == 0


def test_cli_errors_are_one_line(model_path, tmp_path, capsys):
    assert main(["compile", str(model_path), "--set", "warp=9"]) == 2
    assert "the rdu backend has no setting 'warp'" in capsys.readouterr().err
    bad = tmp_path / "bad.pef"
    bad.write_bytes(b"not a zip")
    assert main(["run", str(bad)]) == 1
    err = capsys.readouterr().err
    assert "not a valid artifact" in err and "Traceback" not in err
    assert main(["compile", str(model_path), "--backend", "reference"]) == 2
    assert "only the rdu backend" in capsys.readouterr().err


def test_python_api_compile_run_measure(tmp_path):
    pef = tmp_path / "t.pef"
    program = api.compile(build("transformer_tiny"), mode="o1", batch_size=4, pef=pef)
    x = np.random.default_rng(0).standard_normal((1, 8, 32)).astype(np.float32)
    out = api.run(program, [x], section_types=["fwd"])
    again = api.run(api.load(pef), {"input": x})
    for name in out:
        np.testing.assert_array_equal(out[name], again[name])
    perf = api.measure_performance(program, batch_size=64)
    assert perf["batch_size"] == 64 and perf["totals"]["throughput_samples_per_s"] > 0
    with pytest.raises(InputError, match="section types"):
        api.run(program, [x], section_types=["bckwd"])
    with pytest.raises(InputError, match="inputs given"):
        api.run(program, [x, x])
    assert api.measure_performance(build("mlp"), mode="o0")["mode"] == "o0"


def test_python_api_from_torch(tmp_path):
    torch = pytest.importorskip("torch")
    module = torch.nn.Sequential(torch.nn.Linear(8, 4), torch.nn.ReLU())
    x = torch.randn(2, 8)
    program = api.compile(module, [x])
    (out,) = api.run(program, [x]).values()
    np.testing.assert_allclose(out, module(x).detach().numpy(), rtol=2e-2, atol=2e-2)
    with pytest.raises(InputError, match="example inputs"):
        api.compile(module)


def test_a_program_runs_the_batch_it_was_compiled_for_and_a_batch_below_one_is_refused(tmp_path, cli):
    """SambaFlow's semantics: a .pef compiled for batch 16 runs 16 samples (a batch-1 graph call by
    call), each the reference's answer for its own input."""
    import nnbridge
    from nnbridge.api.inputs import batch_inputs
    from nnbridge.zoo import build

    source, pef = tmp_path / "lenet.onnx", tmp_path / "lenet.pef"
    onnx.save(build("lenet5"), source)
    for bad in ("0", "-3"):
        code, text = cli("compile", source, "-o", pef, "--batch-size", bad)
        assert code == 1 and "batch size and micro-batch must be >= 1" in text and not pef.exists()
    assert cli("compile", source, "-o", pef, "--batch-size", "16")[0] == 0
    code, text = cli("run", pef, "--out", tmp_path / "out", "--seed", "3")
    assert code == 0 and "fc1: float32[16, 10]" in text
    got = np.load(tmp_path / "out" / "fc1.npy")
    graph = nnbridge.load(pef)
    _, _, calls = batch_inputs(graph, 16, seed=3)
    expected = np.concatenate([nnbridge.run(source, call)["fc1"] for call in calls])
    np.testing.assert_allclose(got, expected, rtol=0.05, atol=0.05)  # bf16 on the RDU
    assert len({tuple(row) for row in got.round(3)}) == 16  # 16 different samples
