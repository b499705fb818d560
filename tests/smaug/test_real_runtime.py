"""Every SMAUG file the suite writes, run by SMAUG's own runtime (../shared/tools/smaug/smaug) and
compared with onnxruntime on the source model fed the input stored in the file.

Reference files must match within fp32 tolerance, SMV files within fp16 tolerance (real_smaug.
TOLERANCE); an SMV file the runtime would compute wrong must be refused at convert time instead.
No run may abort, crash or produce NaN.
"""

from __future__ import annotations

from pathlib import Path

import numpy as np
import onnx
import onnxruntime as ort
import pytest
from real_smaug import (
    TOLERANCE,
    RealRun,
    as_onnx_layout,
    matching_output,
    relative_error,
    run_smaug,
    same_fp16_bits,
    stored_feeds,
)
from single_ops import MODELS

import nnbridge
import nnbridge.zoo
from nnbridge.base.errors import NNBridgeWarning, UnsupportedOpError
from nnbridge.check import CheckResult

LIGHT = Path(onnx.__file__).parent / "backend" / "test" / "data" / "light"
ZOO = ["mlp", "minerva", "lenet5", "cnn10", "vgg_cifar", "resnet_tiny", "lstm_small"]
#: single-op models that SMV cannot run as written, and what the refusal names (rules confirmed in
#: test_smv_rules.py)
REFUSED_ON_SMV = {"concat_c3_c5": ("Concat", "overruns"), "flatten_fc": ("InnerProduct", "uninitialised"),
                  "depthwise_conv": ("Conv", "does nothing on SMV")}


def build(name: str) -> onnx.ModelProto:
    if name in MODELS:
        return MODELS[name]()
    if name.startswith("light_"):
        return onnx.load(LIGHT / f"{name}.onnx")
    return nnbridge.zoo.build(name)


def write(model: onnx.ModelProto, backend: str, folder: Path, inputs: dict | None = None, **options) -> Path:
    """Convert as a user does (``nnbridge.save``), storing ``inputs`` (by default a standard-normal
    network input)."""
    graph = nnbridge.load(model)
    rng = np.random.default_rng(0)
    if inputs is None:
        inputs = {v.name: rng.standard_normal(v.type.shape).astype(np.float32) for v in graph.inputs}
    topo, _ = nnbridge.save(graph, folder / "m_topo.pbtxt", smaug_backend=backend, smaug_inputs=inputs, **options)
    return Path(topo)


def params_path(topo: Path) -> Path:
    return topo.with_name(topo.name.replace("_topo.pbtxt", "_params.pb"))


def onnxruntime_output(model: onnx.ModelProto, feeds: dict) -> np.ndarray:
    session = ort.InferenceSession(model.SerializeToString(), providers=["CPUExecutionProvider"])
    return session.run(None, feeds)[0]


def check_real_run(model: onnx.ModelProto, backend: str, folder: Path) -> float:
    topo = write(model, backend, folder)
    again = nnbridge.save(nnbridge.load(topo), folder / "again" / topo.name)  # load → save loses nothing
    assert [Path(p).read_bytes() for p in again] == [topo.read_bytes(), params_path(topo).read_bytes()]
    run = run_smaug(topo)
    assert run.ok, f"the real runtime failed ({run.status}): {run.message}"
    expected = onnxruntime_output(model, stored_feeds(topo, model))
    got = as_onnx_layout(run, expected)
    assert got.shape == expected.shape
    assert not np.isnan(got.astype(np.float64)).any()
    error = relative_error(got, expected)
    assert error <= TOLERANCE[backend], f"{error:.3g} relative to the output scale"
    if backend == "SMV":  # the simulator predicts the real runtime, and check's verdict with it
        result = simulated(topo, run)
        assert result.ok
    return error


def simulated(topo: Path, run: RealRun) -> CheckResult:
    """``check`` of the SMAUG file on nnbridge's SMV backend, after asserting that the simulator's
    output there (check runs the file's stored input by default, as the runtime did) equals the
    real runtime's bit for bit: one simulation serves both."""
    result = nnbridge.check(topo, backend="smv")
    assert same_fp16_bits(matching_output(result.actual, run), run.output)
    return result


@pytest.mark.parametrize("backend", ["Reference", "SMV"])
@pytest.mark.parametrize("name", sorted(MODELS) + ZOO)
def test_real_smaug_computes_what_onnxruntime_does(tmp_path, name, backend):
    model = build(name)
    if backend == "SMV" and name in REFUSED_ON_SMV:
        op, why = REFUSED_ON_SMV[name]
        with pytest.raises(UnsupportedOpError) as info:
            write(model, backend, tmp_path)
        assert [i.op for i in info.value.items] == [op] and why in info.value.items[0].reason
        assert not any(tmp_path.iterdir())
        return
    check_real_run(model, backend, tmp_path)


def _conv(batch: int) -> onnx.ModelProto:
    b = nnbridge.zoo.OnnxBuilder("conv", seed=0)
    b.output(b.conv(b.input("x", [batch, 128, 16, 16]), 128, 4, 3, bias=False, hint="conv"))
    return b.model()


def test_sub_batch_calls_compute_what_the_runtime_computes_on_each_sub_batch(tmp_path):
    """A 128→4-channel 3×3 conv on two 16×16 samples: SMAUG's tiler cuts the channels of two
    samples otherwise than of one (32 + 32 + … against 64 + 64), and two one-sample calls are
    faster, so the compiler runs those (docs/smv.md). The simulated values are then the real
    runtime's on each sample alone, bit for bit. With ``smaug_schedule`` they follow SMAUG's
    whole-batch tiles, which the runtime's first sample shows (2 outputs sum their channel tiles
    in another order and round otherwise). The runtime's conv kernel computes only the first
    sample of an input tile holding several, leaving the others 0: that is not simulated
    (docs/smv.md)."""
    x = np.random.default_rng(3).standard_normal((2, 128, 16, 16)).astype(np.float32)
    whole = write(_conv(2), "SMV", tmp_path / "whole", {"x": x})
    each = [run_smaug(write(_conv(1), "SMV", tmp_path / str(k), {"x": x[k:k + 1]})) for k in range(2)]
    runtime = run_smaug(whole)
    assert runtime.ok and all(run.ok for run in each)
    per_sample = np.concatenate([run.output for run in each])
    assert not runtime.output[1:].any()  # the runtime's whole batch: the second sample never computed
    assert not same_fp16_bits(per_sample[:1], runtime.output[:1])
    schedules = {s: nnbridge.check(whole, backend="smv", smaug_schedule=s) for s in (False, True)}
    assert same_fp16_bits(matching_output(schedules[False].actual, runtime), per_sample)
    assert same_fp16_bits(matching_output(schedules[True].actual, runtime)[:1], runtime.output[:1])
    assert any(note.startswith("conv: 2 calls of 1 sample: each output sums") for note in schedules[False].notes)
    assert not any("calls" in note for note in schedules[True].notes)
    assert schedules[False].ok and schedules[True].ok  # both within fp16 tolerance of onnxruntime


# the pooling split is SMV's (``_pool_group``): SMV is the family's representative in make test
@pytest.mark.slow
@pytest.mark.parametrize("backend", [pytest.param("Reference", marks=pytest.mark.matrix), "SMV"])
def test_light_densenet121(tmp_path, backend):
    """Max pooling whose SMAUG tiles would not pair up (the runtime segfaults) is split into
    channel groups it tiles consistently."""
    check_real_run(build("light_densenet121"), backend, tmp_path)


# squeezenet represents the family in make test; ResNet-50 and VGG-19 (its 411 MB folded FC weight:
# 40 CPU-s in SMAUG's runtime) run in make bench
@pytest.mark.slow
@pytest.mark.parametrize("name", ["light_squeezenet", pytest.param("light_resnet50", marks=pytest.mark.matrix),
                                  pytest.param("light_vgg19", marks=pytest.mark.matrix)])
def test_light_models_on_reference(tmp_path, name, monkeypatch):
    monkeypatch.setenv("NNBRIDGE_FOLD_LIMIT_MB", "1024")  # VGG-19's FC weight (411 MB) is a ConstantOfShape
    check_real_run(build(name), "Reference", tmp_path)


@pytest.mark.slow
@pytest.mark.parametrize("name", ["light_squeezenet", pytest.param("light_resnet50", marks=pytest.mark.matrix)])
def test_light_models_whose_activations_exceed_fp16_are_refused_for_smv(tmp_path, name):
    """With every weight 0.02 these models' activations leave fp16's range (65504) on the way:
    the SMV files are refused at convert time, naming the first node that overflows. Written
    anyway, the real runtime confirms the rule: it computes inf/NaN (no crash), the simulator
    reproduces it bit for bit, and onnxruntime's fp32 values show why."""
    model = build(name)
    with pytest.raises(UnsupportedOpError) as info:
        write(model, "SMV", tmp_path)
    [item] = info.value.items
    assert "beyond fp16's largest finite 65504" in item.reason and "--smaug-input" in item.reason
    assert not any(tmp_path.iterdir())
    topo = write(model, "SMV", tmp_path, smaug_allow_overflow=True)
    run = run_smaug(topo)
    assert run.ok, run.message
    assert not np.isfinite(run.output.astype(np.float32)).all()
    assert not simulated(topo, run).ok
    assert largest_activation(model, stored_feeds(topo, model)) > float(np.finfo(np.float16).max)


def largest_activation(model: onnx.ModelProto, feeds: dict) -> float:
    """The largest |value| any node computes in onnxruntime (fp32)."""
    model = onnx.shape_inference.infer_shapes(model)
    known = {v.name for v in model.graph.output}
    floats = [v for v in model.graph.value_info if v.type.tensor_type.elem_type == onnx.TensorProto.FLOAT]
    model.graph.output.extend(v for v in floats if v.name not in known)
    return max(float(np.abs(out).max()) for out in ort.InferenceSession(
        model.SerializeToString(), providers=["CPUExecutionProvider"]).run(None, feeds) if out.size)


SHIPPED = ["minerva/minerva_smv_topo.pbtxt", "lenet5/lenet5_smv_topo.pbtxt", "cifar10-cnn/cnn_smv_topo.pbtxt",
           "cifar10-vgg/vgg_smv_topo.pbtxt",
           pytest.param("imagenet-resnet/resnet_smv_topo.pbtxt", marks=[pytest.mark.slow, pytest.mark.matrix])]


@pytest.mark.parametrize("rel", SHIPPED)
def test_smv_simulator_reproduces_smaugs_own_files_bit_for_bit(smaug_dir, tmp_path, rel):
    """SMAUG's example models: those without a params file get SMAUG's recipe weights (data
    README §1); the real runtime and the simulator run the same stored input."""
    source = smaug_dir / rel
    topo = source
    if not source.with_name(source.name.replace("_topo.pbtxt", "_params.pb")).is_file():
        scale = 0.008 if "resnet" in rel else 0.005
        with pytest.warns(NNBridgeWarning, match="random-data recipe"):
            topo = Path(nnbridge.save(nnbridge.load(source, synthetic_scale=scale), tmp_path / source.name)[0])
        assert topo.read_bytes() == source.read_bytes()
    run = run_smaug(topo)
    assert run.ok, run.message
    assert simulated(topo, run).ok


@pytest.mark.parametrize("rel, backend", [("minerva/minerva_ref_topo.pbtxt", "reference"),
                                          ("lenet5/lenet5_smv_topo.pbtxt", "smv")])
def test_run_prints_what_smaug_prints(smaug_dir, tmp_path, cli, rel, backend):
    """``nnbridge run`` on a SMAUG file runs its stored input: the values it prints are the ones
    SMAUG's runtime prints for the file (``-p``: six significant digits)."""
    import subprocess

    from real_smaug import binary

    topo = smaug_dir / rel
    printed = subprocess.run([str(binary()), str(topo), str(params_path(topo)), "-p"], cwd=tmp_path,
                             capture_output=True, text=True, timeout=120).stdout
    smaug_values = printed.split("[")[-1].split("]")[0].split()
    code, text = cli("run", topo, "--backend", backend)
    ours = text.split("[")[-1].split("]")[0].split()
    assert code == 0 and len(ours) == 10 and ours == smaug_values
