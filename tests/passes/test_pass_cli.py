"""CLI faces of the passes: fused groups and peak memory in `summary`, `ir --print-after`,
and `check --debug-passes` naming the first pass that changed the outputs."""

from __future__ import annotations

import onnx
import pytest

from nnbridge.passes import PASSES, register_pass
from nnbridge.zoo import build


@pytest.fixture(scope="module")
def resnet_path(tmp_path_factory):
    path = tmp_path_factory.mktemp("passes_cli") / "resnet_tiny.onnx"
    onnx.save(build("resnet_tiny"), path)
    return path



def test_summary_shows_fused_groups_and_peak_memory(resnet_path, cli):
    code, text = cli("summary", resnet_path, "--backend", "reference", "--opt-level", "2")
    assert code == 0
    assert "fused groups)" in text and "fused: Conv + Add + Relu" in text
    assert "peak activation memory:" in text
    code, text = cli("summary", resnet_path)  # unfused: what fusion would make
    assert code == 0 and "fusion would make" in text


def test_ir_prints_after_each_pass(resnet_path, cli):
    code, text = cli("ir", resnet_path, "--passes", "fold,simplify,fuse", "--print-after")
    assert code == 0
    assert text.index("// after fold") < text.index("// after simplify") < text.index("// after fuse")
    assert "nnbridge.Fused(" in text


def test_debug_passes_names_the_first_pass_that_changed_outputs(resnet_path, cli):
    code, text = cli("check", resnet_path, "--debug-passes", "--opt-level", "3")
    assert code == 0 and "every pass kept the outputs" in text

    def sabotage(graph):
        """Negate one weight (a deliberately wrong pass)."""
        value = next(v for v in graph.values.values() if v.const is not None and v.const.ndim == 4)
        graph.set_initializer(value, -value.const)
        return True

    register_pass("sabotage")(sabotage)
    try:
        code, text = cli("check", resnet_path, "--debug-passes", "--passes", "simplify,sabotage,fuse")
    finally:
        PASSES.unregister("sabotage")
    assert code == 1 and "first change of outputs: sabotage" in text


def test_disable_pass_leaves_one_pass_out(resnet_path, cli):
    code, text = cli("ir", resnet_path, "--backend", "reference", "--opt-level", "2",
                      "--disable-pass", "fuse", "--print-after")
    assert code == 0 and "// after fold" in text and "// after fuse" not in text and "Fused(" not in text
    code, text = cli("check", resnet_path, "--opt-level", "2", "--disable-pass", "simplify")
    assert code == 0 and "agree" in text
    code, text = cli("summary", resnet_path, "--disable-pass", "no-such-pass")
    assert code == 1 and "unknown pass 'no-such-pass'" in text
