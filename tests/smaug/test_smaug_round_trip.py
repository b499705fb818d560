"""SMAUG → IR → SMAUG (directly and through ONNX) gives the shipped files back; the writer's
params regenerated with SMAUG's random-data recipe are byte-identical to the shipped ones."""

from __future__ import annotations

import shutil

import numpy as np
import pytest
from smaug_data import PARAMS, SCALE, TOPOLOGIES

from nnbridge.converters.onnx import load_onnx, save_onnx
from nnbridge.converters.smaug import load_inputs, load_smaug, read_topology, save_smaug
from nnbridge.protos.smaug import smaug_tensor_pb2 as tpb
from nnbridge.protos.smaug import smaug_types_pb2 as pb


def params_of(rel: str) -> str:
    return rel.replace("_topo.pbtxt", "_params.pb")


@pytest.mark.parametrize("rel", TOPOLOGIES)
def test_load_save_reproduces_the_files(smaug_dir, tmp_path, rel):
    source = smaug_dir / rel
    graph = load_smaug(source, synthetic_scale=SCALE.get(rel, 0.005))
    topo, params = save_smaug(graph, tmp_path / source.name, smaug_inputs=load_inputs(source, graph))
    assert open(topo, "rb").read() == source.read_bytes()
    if params_of(rel) in PARAMS:
        assert open(params, "rb").read() == (smaug_dir / params_of(rel)).read_bytes()


@pytest.mark.parametrize("rel", TOPOLOGIES)
def test_round_trip_through_onnx(smaug_dir, tmp_path, rel):
    source = smaug_dir / rel
    graph = load_smaug(source, synthetic_scale=SCALE.get(rel, 0.005))
    save_onnx(graph, tmp_path / "model.onnx")
    back = load_onnx(tmp_path / "model.onnx")
    topo, params = save_smaug(back, tmp_path / source.name, smaug_inputs=load_inputs(source, graph))
    assert open(topo, "rb").read() == source.read_bytes()
    if params_of(rel) in PARAMS:
        assert open(params, "rb").read() == (smaug_dir / params_of(rel)).read_bytes()


def recipe_params(topology, scale: float) -> bytes:
    """The frontend's recipe, written independently of nnbridge's writer: every Data tensor is
    RandomState(1234).rand(*dims) * scale in the backend dtype, last dim padded, fp16 pairs packed."""
    array = tpb.TensorDataArray()
    for node in topology.nodes:
        if node.op != pb.Data:
            continue
        t = node.input_tensors[0]
        dims = list(t.shape.dims)
        half = t.data_type == pb.Float16
        values = (np.random.RandomState(1234).rand(*dims) * scale).astype(np.float16 if half else np.float32)
        if t.shape.alignment:
            extra = -dims[-1] % t.shape.alignment
            values = np.pad(values, [(0, 0)] * (len(dims) - 1) + [(0, extra)])
        flat = values.reshape(-1)
        entry = array.data_array.add(name=t.name)
        if half:
            if flat.size % 2:
                flat = np.append(flat, np.float16(0))
            entry.half_data.extend(flat.view(np.int32).tolist())
        else:
            entry.float_data.extend(flat.tolist())
    return array.SerializeToString()


@pytest.mark.parametrize("rel", TOPOLOGIES)
def test_writer_regenerates_params_from_the_recipe(smaug_dir, tmp_path, rel):
    """Topology alone → synthetic params → written file equals the recipe (and the shipped file)."""
    scale = SCALE.get(rel, 0.005)
    source = tmp_path / "in" / (smaug_dir / rel).name
    source.parent.mkdir()
    shutil.copy(smaug_dir / rel, source)  # without its params file
    graph = load_smaug(source, synthetic_scale=scale)
    assert graph.metadata["nnbridge.synthetic_params"] == "true"
    _, params = save_smaug(graph, tmp_path / "out" / source.name)
    written = open(params, "rb").read()
    if params_of(rel) in PARAMS:
        assert written == (smaug_dir / params_of(rel)).read_bytes()
    assert written == recipe_params(read_topology(source), scale)


def test_save_writes_both_files_or_none(tmp_path):
    from nnbridge.errors import UnsupportedOpError
    from nnbridge.ir import Graph, TensorType
    from nnbridge.ir.dtypes import DType

    graph = Graph("bad")
    x = graph.add_input("x", TensorType(DType.FLOAT32, (1, 8)))
    graph.outputs = [graph.add_node("Erf", [x]).outputs[0]]
    graph.outputs[0].type = x.type
    with pytest.raises(UnsupportedOpError, match="Erf"):
        save_smaug(graph, tmp_path / "bad_topo.pbtxt")
    assert list(tmp_path.iterdir()) == []
