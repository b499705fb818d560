"""make demo's tables say what the other commands say about the same files."""

from __future__ import annotations

import json

import pytest

from nnbridge import zoo


@pytest.mark.slow
def test_the_demo_counts_each_written_file_as_summary_does(tmp_path, cli):
    """The round-trip table counted every initializer (601,418: the Reshape's int64 shape too) and
    showed the source's count on the SMAUG file's row; `summary` counts parameters (601,416)."""
    from nnbridge.apps.demo import _convert_chain

    rows, final = _convert_chain(zoo.build("lenet5"), tmp_path, "lenet5")
    assert final == tmp_path / "lenet5_roundtrip.onnx" and len(rows) == 4
    for _, written, nodes, count, _ in rows:
        extra = ["--input-shape", "input=1x28x28"] if written.endswith(".prototext") else []
        code, text = cli("summary", tmp_path / written, *extra, "--json", tmp_path / "s.json")
        assert code == 0, text
        header = json.loads((tmp_path / "s.json").read_text())
        assert (int(count.replace(",", "")), int(nodes)) == (header["parameters"], header["nodes"]), written
    code, text = cli("convert", tmp_path / "lenet5_topo.pbtxt", tmp_path / "again.prototext", "--json",
                     tmp_path / "c.json")
    assert code == 0, text
    assert f"{json.loads((tmp_path / 'c.json').read_text())['parameters']:,}" == rows[1][3]  # the same SMAUG file
