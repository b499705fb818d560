"""Bad SMAUG input: one clear FormatError naming the file and the fault, no partial output."""

from __future__ import annotations

import re
import shutil
import subprocess
import sys

import pytest

from nnbridge.base.errors import FormatError
from nnbridge.converters.smaug import graph_from_proto, load_smaug, read_topology
from nnbridge.converters.smaug.files import parse_topology, topology_text


@pytest.fixture()
def minerva(smaug_dir, tmp_path):
    for name in ("minerva_smv_topo.pbtxt", "minerva_smv_params.pb"):
        shutil.copy(smaug_dir / "minerva" / name, tmp_path / name)
        (tmp_path / name).chmod(0o644)
    return tmp_path / "minerva_smv_topo.pbtxt"


def node(graph, name):
    return next(n for n in graph.nodes if n.name == name)


def edit_topology(path, fn):
    graph = read_topology(path)
    fn(graph)
    path.write_text(topology_text(graph))


def test_corrupt_topology(minerva):
    minerva.write_text(minerva.read_text()[:-40])
    with pytest.raises(FormatError, match="minerva_smv_topo.pbtxt: not a valid SMAUG topology"):
        load_smaug(minerva)


def test_corrupt_params(minerva):
    params = minerva.with_name("minerva_smv_params.pb")
    params.write_bytes(params.read_bytes()[:1000])
    with pytest.raises(FormatError, match="minerva_smv_params.pb: not a valid SMAUG params file"):
        load_smaug(minerva)


def test_params_missing_a_tensor(minerva):
    edit_topology(minerva, lambda g: setattr(node(g, "data_1").input_tensors[0], "name", "nowhere/input0"))
    with pytest.raises(FormatError, match="no entry 'nowhere/input0' for Data node 'data_1'"):
        load_smaug(minerva)


def test_dims_disagree_with_params(minerva):
    def grow(graph):
        for t in (node(graph, "data_1").input_tensors[0], node(graph, "data_1").output_tensors[0],
                  node(graph, "mat_mul").input_tensors[1]):
            t.shape.dims[0] = 255

    edit_topology(minerva, grow)
    with pytest.raises(FormatError, match="params entry 'data_1/input0' holds 200704 fp16 values, expected 199920"):
        load_smaug(minerva)


def test_declared_output_dims_are_checked(minerva):
    def wrong(graph):  # the producer and its reader agree, but not with what the op computes
        node(graph, "mat_mul").output_tensors[0].shape.dims[1] = 100
        node(graph, "mat_mul_1").input_tensors[0].shape.dims[1] = 100

    edit_topology(minerva, wrong)
    with pytest.raises(FormatError, match="node 'mat_mul' .* declares output dims \\[1, 100\\]"):
        load_smaug(minerva)


@pytest.mark.parametrize("where, message", [
    ("data output", "node 'data_1' outputs [255, 784], but its input tensor is [256, 784]"),
    ("reader", "node 'mat_mul' reads output 0 of 'data_1' as [255, 784], but 'data_1' declares [256, 784]"),
])
def test_dims_written_twice_must_agree(minerva, where, message):
    def edit(graph):
        tensor = (node(graph, "data_1").output_tensors[0] if where == "data output"
                  else node(graph, "mat_mul").input_tensors[1])
        tensor.shape.dims[0] = 255

    edit_topology(minerva, edit)
    with pytest.raises(FormatError, match=re.escape(message) + ": the file contradicts itself"):
        load_smaug(minerva)


def test_unknown_enum_value(minerva):
    text = minerva.read_text().replace("op: InnerProduct", "op: FancyProduct", 1)
    minerva.write_text(text)
    with pytest.raises(FormatError, match="FancyProduct"):
        load_smaug(minerva)
    graph = parse_topology(text.replace("op: FancyProduct", "op: 77"))  # proto3 keeps unknown numbers
    with pytest.raises(FormatError, match="unknown OpType value 77"):
        graph_from_proto(graph, None, "t")


def test_cycle_among_nodes(minerva):
    def loop(graph):
        node(graph, "mat_mul").parents[0] = "mat_mul_2"

    edit_topology(minerva, loop)
    with pytest.raises(FormatError, match="cycle"):
        load_smaug(minerva)


def test_unknown_parent(minerva):
    edit_topology(minerva, lambda g: g.nodes[-1].parents.__setitem__(0, "ghost"))
    with pytest.raises(FormatError, match="parent 'ghost'"):
        load_smaug(minerva)


def test_cli_reports_one_line_and_writes_nothing(minerva, tmp_path):
    minerva.write_text("name: \"x\"\nnodes { name: ")
    out = tmp_path / "out.onnx"
    result = subprocess.run([sys.executable, "-m", "nnbridge", "convert", str(minerva), str(out)],
                            capture_output=True, text=True)
    assert result.returncode != 0
    assert "not a valid SMAUG topology" in result.stderr + result.stdout
    assert "Traceback" not in result.stderr
    assert not out.exists()
