"""On onnx's light models and SMAUG's files, every backend's verdict is the one docs/check.md documents."""

from __future__ import annotations

import json
import re
from pathlib import Path

import pytest
from shared_paths import ONNX_DATA, REPO, SHARED_DATA

import nnbridge
from nnbridge.check import RULES

#: model x backend runs over ~2 s each (all-inf fp16 activations of untrained weights, big convs)
SLOW = {("light_vgg19", "smv"), ("light_bvlc_alexnet", "smv"), ("light_zfnet512", "smv"),
        ("light_resnet50", "smv"), ("light_vgg19", "rdu"), ("light_densenet121", "rdu"),
        ("light_inception_v2", "rdu"), ("light_densenet121", "reference"), ("light_inception_v2", "smv")}


def documented() -> dict[tuple[str, str], str]:
    """(model, backend) → verdict, from the 'Verdicts on the zoo' table of docs/check.md."""
    text = (REPO / "docs" / "check.md").read_text()
    section = text.split("## Verdicts on the zoo", 1)[1].split("\n## ", 1)[0]
    rows = [line for line in section.splitlines() if line.startswith("| ") and "---" not in line]
    header = [c.strip() for c in rows[0].strip("|").split("|")]
    table = {}
    for line in rows[1:]:
        cells = [c.strip() for c in line.strip("|").split("|")]
        for backend, verdict in zip(header[1:], cells[1:]):
            table[(cells[0], backend)] = verdict
    return table


def model_path(name: str) -> Path:
    return SHARED_DATA / name if name.startswith("smaug/") else ONNX_DATA / "light" / f"{name}.onnx"


#: the one row make bench alone checks: SMAUG's ImageNet ResNet (25 M recipe weights, 3.5-5 CPU-s a
#: backend), whose recipe path CIFAR's CNN and VGG files keep in make test
BENCH_ONLY_ROW = "smaug/imagenet-resnet/resnet_smv_topo.pbtxt"
#: cases make test leaves to make bench (``matrix``), the costliest (2.5-7.5 CPU-s each): every other
#: row and every (backend, verdict kind) pair keeps a case in make test (squeezenet overflows on SMV,
#: inception_v2 agrees there, alexnet/vgg19/shufflenet are refused; each model agrees elsewhere)
MATRIX = {("light_resnet50", "smv"), ("light_zfnet512", "smv"), ("light_inception_v1", "smv"),
          ("light_densenet121", "smv"), ("light_vgg19", "reference"), ("light_vgg19", "rdu"),
          ("light_zfnet512", "rdu"), ("light_densenet121", "rdu"), ("light_bvlc_alexnet", "rdu"),
          ("light_resnet50", "rdu"), ("light_inception_v2", "rdu"), ("smaug/cifar10-vgg/vgg_smv_topo.pbtxt", "rdu"),
          *((BENCH_ONLY_ROW, backend) for backend in ("reference", "smv", "rdu"))}


#: runs whose worker peaks over 1 GB (VGG-19's 548 MiB of weights made by onnxruntime, then folded
#: and laid out for SMV before the tiler refuses it: 1.76 GB; ZFNet-512 on the reference: 0.98-1.03 GB)
MEMORY = {("light_vgg19", "smv"), ("light_zfnet512", "reference")}


def _marks(model: str, backend: str) -> list[pytest.MarkDecorator]:
    return ([pytest.mark.slow] if (model, backend) in SLOW else []) + (
        [pytest.mark.matrix] if (model, backend) in MATRIX else []) + (
        [pytest.mark.memory] if (model, backend) in MEMORY else [])


CASES = [pytest.param(model, backend, verdict, id=f"{model}-{backend}", marks=_marks(model, backend))
         for (model, backend), verdict in documented().items()]


def test_make_test_keeps_every_model_and_every_backends_verdict_kinds():
    """The matrix split leaves no row and no (backend, verdict kind) of the table to make bench alone."""
    table = documented()
    kept = {case: verdict for case, verdict in table.items() if case not in MATRIX}
    assert MATRIX <= set(table)
    assert {model for model, _ in kept} | {BENCH_ONLY_ROW} == {model for model, _ in table}
    kinds = {(backend, verdict.split(" at ")[0]) for (_, backend), verdict in table.items()}
    assert {(backend, verdict.split(" at ")[0]) for (_, backend), verdict in kept.items()} == kinds


def test_the_table_covers_every_light_model_and_smaug_file_on_every_backend():
    models = {m for m, _ in documented()}
    light = {p.stem for p in (ONNX_DATA / "light").glob("*.onnx")}
    smaug = {f"smaug/{p.relative_to(SHARED_DATA / 'smaug')}" for p in (SHARED_DATA / "smaug").glob("*/*_topo.pbtxt")}
    assert models == light | smaug
    assert {b for _, b in documented()} == {"reference", "smv", "rdu"}


@pytest.mark.parametrize("model, backend, verdict", CASES)
def test_verdict_matches_the_documented_table(model, backend, verdict):
    path = model_path(model)
    if verdict.startswith("refused at "):
        with pytest.raises(nnbridge.UnsupportedOpError) as info:
            nnbridge.check(str(path), backend=backend)
        assert [i.node for i in info.value.items] == verdict.removeprefix("refused at ").split(", ")
        return
    result = nnbridge.check(str(path), backend=backend)
    graph_precision = result.precision
    expected_row = {"smv": "fp16", "rdu": "bf16"}.get(backend, graph_precision)
    assert result.rule == RULES[expected_row]
    if verdict == "agree":
        assert result.ok, [(o.name, o.err_vs_scale, o.outside, o.note) for o in result.outputs]
        assert result.origin is None
    else:
        node = re.fullmatch(r"overflow at (\S+)", verdict).group(1)
        assert not result.ok
        assert result.origin is not None and result.origin.node == node and result.origin.overflow


def test_smaugs_vgg_smv_file_agrees_on_the_default_check(cli):
    """The fp16 file used to fail an fp32 tolerance: outputs ≈ 25 000 differ by one fp16 ulp (16)."""
    code, text = cli("check", SHARED_DATA / "smaug" / "cifar10-vgg" / "vgg_smv_topo.pbtxt", "--json")
    assert code == 0
    (out,) = json.loads(text)["outputs"]
    assert out["rule"] == "fp16" and out["max_abs_err"] == 16 and out["ulp_err"] == 1
