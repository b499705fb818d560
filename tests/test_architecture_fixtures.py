"""Real architectures (``tests/fixtures/architectures``, exported by ``make fixtures`` from HF
transformers and plain-torch CNN blocks with seeded random weights) through every path: the
reference backend, the SMV and RDU simulators, the ONNX round trip, and SMAUG / LBANN conversion.
Each is judged by onnxruntime on the source model; SMAUG files also by SMAUG's own runtime. What a
target expresses must convert and agree; the rest must be refused cleanly (UnsupportedOpError,
nothing written)."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import onnx
import onnxruntime as ort
import pytest
from architecture_fixtures import CONVERTS, FIXTURES, MANIFEST, NAMES, SUFFIX, load
from real_smaug import relative_error as smaug_relative_error

import nnbridge
from nnbridge.base.errors import InputError, UnsupportedOpError


def oracle(path: Path, feeds: dict) -> list[np.ndarray]:
    session = ort.InferenceSession(str(path), providers=["CPUExecutionProvider"])
    return session.run(None, feeds)


def relative_error(got, want: np.ndarray) -> float:
    """real_smaug's measure, on outputs a converted model may lay out in another (same-size) shape."""
    return smaug_relative_error(np.reshape(got, want.shape), want)


def pins(feeds: dict) -> dict:
    return {k: tuple(v.shape) for k, v in feeds.items()}


def test_the_fixtures_are_real_architectures_with_static_named_minus_one_and_unnamed_dims():
    assert {"bert", "gpt2", "gpt2-past", "t5-encoder", "vit", "llama-gqa", "whisper-encoder", "mobilenetv3",
            "efficientnet", "convnext", "regnet", "poolformer"} <= set(NAMES)
    declared = {name: MANIFEST[name]["inputs"] for name in NAMES}
    assert declared["bert-dynamic"] == {"input_ids": ["batch", "sequence"]}
    assert declared["mobilenetv3-dynamic"] == {"image": ["batch", 3, "height", "width"]}
    assert declared["efficientnet"] == {"image": [-1, 3, 32, 32]}
    assert declared["convnext-unnamed"] == {"image": [None, 3, 32, 32]}
    for name in NAMES:
        model = onnx.load(str(FIXTURES / f"{name}.onnx"))
        onnx.checker.check_model(model)
        for value in model.graph.input:
            dims = [d.dim_value if d.HasField("dim_value") else (d.dim_param or None)
                    for d in value.type.tensor_type.shape.dim]
            assert dims == declared[name][value.name]
        assert (FIXTURES / f"{name}.onnx").stat().st_size < 300_000  # small enough to commit


@pytest.mark.parametrize("name", NAMES)
def test_the_reference_backend_computes_what_onnxruntime_does(name):
    path, feeds = load(name)
    want = oracle(path, feeds)
    got = nnbridge.run(str(path), feeds)
    assert len(got) == len(want)
    for value, expected in zip(got.values(), want):
        assert relative_error(value, expected) < 1e-5


@pytest.mark.parametrize("backend", ["smv", "rdu"])
@pytest.mark.parametrize("name", NAMES)
def test_the_simulators_compute_what_onnxruntime_does(name, backend):
    """fp16 (SMV) and bf16 (RDU) arithmetic: within 2 % of the output's scale."""
    path, feeds = load(name)
    want = oracle(path, feeds)
    got = nnbridge.run(str(path), feeds, backend=backend)
    for value, expected in zip(got.values(), want):
        assert relative_error(value, expected) < 2e-2


@pytest.mark.parametrize("name", NAMES)
def test_the_onnx_round_trip_runs_in_onnxruntime_with_the_same_outputs(name, tmp_path):
    path, feeds = load(name)
    nnbridge.convert(str(path), tmp_path / "copy.onnx")
    written = onnx.load(str(tmp_path / "copy.onnx"))
    assert [(o.domain, o.version) for o in written.opset_import] == [("", MANIFEST[name]["opset"])]  # the source's
    for got, want in zip(oracle(tmp_path / "copy.onnx", feeds), oracle(path, feeds)):
        assert relative_error(got, want) < 1e-5


@pytest.mark.parametrize("target", sorted(CONVERTS))
@pytest.mark.parametrize("name", NAMES)
def test_a_fixture_converts_and_agrees_or_is_refused_cleanly(name, target, tmp_path):
    path, feeds = load(name)
    destination = tmp_path / f"{name.replace('-', '_')}{SUFFIX[target]}"
    options = {"smaug_backend": target.split("-")[1]} if target.startswith("smaug") else \
        {"lbann_version": "develop"} if target == "lbann-develop" else {}
    if name not in CONVERTS[target]:
        with pytest.raises(UnsupportedOpError) as refused:
            nnbridge.convert(str(path), destination, input_shapes=pins(feeds), **options)
        assert refused.value.items and all(item.reason for item in refused.value.items)
        assert not any(tmp_path.iterdir())
        return
    nnbridge.convert(str(path), destination, input_shapes=pins(feeds), **options)
    converted = nnbridge.load(destination)
    got = nnbridge.run(converted, dict(zip((v.name for v in converted.inputs), feeds.values())))
    want = oracle(path, feeds)
    assert len(got) == len(want)
    for value, expected in zip(got.values(), want):
        assert relative_error(value, expected) < 1e-5
    back = tmp_path / "back.onnx"  # and on to ONNX, at an opset deployed runtimes load
    nnbridge.convert(destination, back)
    assert onnx.load(str(back)).opset_import[0].version == 17
    session = ort.InferenceSession(str(back), providers=["CPUExecutionProvider"])
    got = session.run(None, dict(zip((i.name for i in session.get_inputs()), feeds.values())))
    for value, expected in zip(got, want):
        assert relative_error(value, expected) < 1e-5


@pytest.mark.parametrize("name", ["bert-dynamic", "mobilenetv3-dynamic", "efficientnet", "convnext-unnamed"])
def test_a_dynamic_fixture_is_pinned_before_conversion_or_refused_in_one_line(name, tmp_path):
    path, _ = load(name)
    with pytest.raises(InputError) as unpinned:
        nnbridge.convert(str(path), tmp_path / "m.prototext")
    message = str(unpinned.value)
    assert "\n" not in message and ("--input-shape" in message or "--dim" in message)
    assert not any(tmp_path.iterdir())


@pytest.mark.parametrize("name", ["mobilenetv3", "efficientnet"])
def test_smaugs_own_runtime_computes_the_decomposed_cnn_blocks_as_onnxruntime_does(name, tmp_path):
    """HardSwish/HardSigmoid (BatchNorm + fused HardTanh), squeeze-and-excite means (global
    average pools) and their broadcasting multiplies (Repeat) run in the real SMAUG binary."""
    from real_smaug import as_onnx_layout, run_smaug, stored_feeds

    path, feeds = load(name)
    topo = tmp_path / "m_topo.pbtxt"
    nnbridge.convert(str(path), topo, input_shapes=pins(feeds), smaug_backend="Reference", smaug_inputs=feeds)
    run = run_smaug(topo)
    assert run.ok, f"the real runtime failed ({run.status}): {run.message}"
    model = onnx.load(str(path))
    expected = oracle(path, stored_feeds(topo, model))[0]
    got = as_onnx_layout(run, expected)
    assert got.shape == expected.shape
    assert smaug_relative_error(got, expected) <= 1e-5


def test_the_fixture_script_regenerates_the_committed_cnn_fixtures(tmp_path):
    """``make fixtures`` (tools/architecture_fixtures.py) writes what is committed: the plain-torch
    fixtures export to the same graph and weights here (HF ones need the bench extra)."""
    pytest.importorskip("torch")
    from bench.architectures import FIXTURES as BUILDERS
    from bench.architectures import export

    for arch in [a for a in BUILDERS if a.name in ("regnet", "mobilenetv3-dynamic", "convnext-unnamed")]:
        path, feeds = export(arch, tmp_path, 18)
        fresh, committed = onnx.load(str(path)), onnx.load(str(FIXTURES / f"{arch.name}.onnx"))
        assert [n.op_type for n in fresh.graph.node] == [n.op_type for n in committed.graph.node]
        assert list(fresh.graph.input) == list(committed.graph.input)
        weights = {t.name: onnx.numpy_helper.to_array(t) for t in committed.graph.initializer}
        for tensor in fresh.graph.initializer:
            np.testing.assert_array_equal(onnx.numpy_helper.to_array(tensor), weights[tensor.name])
        for key, array in load(arch.name)[1].items():
            np.testing.assert_array_equal(feeds[key], array)


def price(graph, backend: str) -> dict:
    exe = nnbridge.compile(graph, backend, opt_level=2, **({"perf_only": True} if backend == "smv" else {}))
    report = exe.report if backend == "smv" else exe.section_report()
    return {"rows": report.rows, "totals": report.totals}


@pytest.mark.parametrize("dynamic, static", [("bert-dynamic", "bert"), ("mobilenetv3-dynamic", "mobilenetv3"),
                                             ("convnext-unnamed", "convnext")])
def test_a_pinned_dynamic_fixture_prices_like_its_static_export(dynamic, static):
    """The same model exported with named or unnamed dims: once pinned, the SMV and RDU estimates
    (every row and total) equal the static export's."""
    _, feeds = load(static)
    pinned = nnbridge.load(str(FIXTURES / f"{dynamic}.onnx"), input_shapes=pins(feeds))
    fixed = nnbridge.load(str(FIXTURES / f"{static}.onnx"))
    for backend in ("smv", "rdu"):
        assert price(pinned, backend) == price(fixed, backend)
