"""SMAUG → IR → SMAUG (directly and through ONNX) gives the shipped files back; the writer's
params regenerated with SMAUG's random-data recipe are byte-identical to the shipped ones."""

from __future__ import annotations

import shutil

import numpy as np
import pytest
from smaug_data import PARAMS, SCALE, TOPOLOGIES
from test_smaug_builder_scripts import MANIFEST, build_id, run_build

from nnbridge.converters.onnx import load_onnx, save_onnx
from nnbridge.converters.smaug import load_inputs, load_smaug, read_topology, save_smaug
from nnbridge.protos.smaug import smaug_tensor_pb2 as tpb
from nnbridge.protos.smaug import smaug_types_pb2 as pb

#: the ImageNet ResNet (no params file: 25 M recipe weights, 2-4 CPU-s a case) in make bench (matrix);
#: the CIFAR VGG and CNN files take the same recipe path in make test
CASES = [pytest.param(t, marks=pytest.mark.matrix) if t.startswith("imagenet-resnet/") else t for t in TOPOLOGIES]


def params_of(rel: str) -> str:
    return rel.replace("_topo.pbtxt", "_params.pb")


@pytest.mark.parametrize("rel", CASES)
def test_load_save_reproduces_the_files(smaug_dir, tmp_path, rel):
    source = smaug_dir / rel
    graph = load_smaug(source, synthetic_scale=SCALE.get(rel, 0.005))
    topo, params = save_smaug(graph, tmp_path / source.name, smaug_inputs=load_inputs(source, graph))
    assert open(topo, "rb").read() == source.read_bytes()
    if params_of(rel) in PARAMS:
        assert open(params, "rb").read() == (smaug_dir / params_of(rel)).read_bytes()


@pytest.mark.parametrize("rel", CASES)
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


@pytest.mark.parametrize("rel", CASES)
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
    from nnbridge.base.errors import UnsupportedOpError
    from nnbridge.ir import Graph, TensorType
    from nnbridge.ir.dtypes import DType

    graph = Graph("bad")
    x = graph.add_input("x", TensorType(DType.FLOAT32, (1, 8)))
    graph.outputs = [graph.add_node("Erf", [x]).outputs[0]]
    graph.outputs[0].type = x.type
    with pytest.raises(UnsupportedOpError, match="Erf"):
        save_smaug(graph, tmp_path / "bad_topo.pbtxt")
    assert list(tmp_path.iterdir()) == []


def load_save(topo, folder) -> tuple[bytes, bytes]:
    """``nnbridge.load`` then ``nnbridge.save`` with no help: the bytes of both files written (into
    ``folder/resaved``, never over the source, whose bytes the caller compares them with)."""
    import nnbridge

    out_topo, out_params = nnbridge.save(nnbridge.load(topo), folder / "resaved" / topo.name)
    return open(out_topo, "rb").read(), open(out_params, "rb").read()


@pytest.mark.parametrize("build", [b for b in MANIFEST["builds"] if b["script"] in ("lstm.py", "bidi_lstm.py")],
                         ids=build_id)
def test_lstm_files_keep_their_state_tensor_names_when_saved_again(tmp_path, monkeypatch, build):
    """SMAUG's LSTM layers name their zero states "lstm0:/h", "lstm0:/c" (not "<Data node>/input0"):
    a load and save keeps those names in topology and params, so the files come back byte for byte."""
    (tmp_path / "built").mkdir()
    run_build(build, tmp_path / "built", monkeypatch)
    (source,) = (tmp_path / "built").glob("*_topo.pbtxt")
    params = source.with_name(source.name.replace("_topo.pbtxt", "_params.pb"))
    assert ":/h" in source.read_text()
    assert load_save(source, tmp_path) == (source.read_bytes(), params.read_bytes())


@pytest.mark.parametrize("rel", [t for t in TOPOLOGIES if params_of(t) in PARAMS])
def test_load_save_alone_is_byte_identical(smaug_dir, tmp_path, rel):
    """The stored network input, Data-node order and params entries come back unchanged."""
    source = smaug_dir / rel
    assert load_save(source, tmp_path) == (source.read_bytes(), (smaug_dir / params_of(rel)).read_bytes())


def test_an_edited_input_is_kept_and_run(smaug_dir, tmp_path, cli):
    """A params file whose input was edited: load → save keeps the new values, and ``run`` on the
    file computes what the real runtime prints for it."""
    from real_smaug import run_smaug

    import nnbridge
    from nnbridge.converters.smaug import params as smaug_params

    rel = "minerva/minerva_ref_topo.pbtxt"
    folder = tmp_path / "edited"
    folder.mkdir()
    topo = folder / "minerva_ref_topo.pbtxt"
    shutil.copy(smaug_dir / rel, topo)
    array = tpb.TensorDataArray()
    array.ParseFromString((smaug_dir / params_of(rel)).read_bytes())
    entry = next(e for e in array.data_array if e.name == "data/input0")
    new_input = np.linspace(-1, 1, 28 * 28, dtype=np.float32).reshape(1, 28, 28, 1)
    entry.Clear()
    smaug_params.encode("data/input0", new_input, pb.Float32, 0, entry)
    (folder / "minerva_ref_params.pb").write_bytes(array.SerializeToString())
    assert load_save(topo, tmp_path) == (topo.read_bytes(), (folder / "minerva_ref_params.pb").read_bytes())
    real = run_smaug(topo).output
    graph = nnbridge.load(topo)
    np.testing.assert_array_equal(graph.input_values["data"], new_input)
    ours = nnbridge.run(graph, graph.input_values)["mat_mul_3/output0"]
    np.testing.assert_allclose(ours, real, rtol=1e-5)
    code, text = cli("run", topo)
    assert code == 0 and f"{float(real.reshape(-1)[0]):.6g}" in text


def test_scoped_names_and_a_lone_data_node_round_trip(tmp_path):
    """':' is SMAUG's scope separator: names keep it. A graph of one Data node is kept too (the
    runtime prints that node's values)."""
    from real_smaug import run_smaug

    import nnbridge.smaug as sg

    with sg.Graph(name="scoped", backend="SMV") as g:
        x = sg.input_data(sg.Tensor(data_layout=sg.NC, tensor_data=np.ones((1, 8), np.float16)), name="in:x")
        y = sg.nn.relu(x, name="block:relu")
        sg.math.add(y, sg.Tensor(data_layout=sg.NC, tensor_data=np.full((1, 8), 2, np.float16)), name="block:add")
    with sg.Graph(name="lone", backend="SMV") as lone:
        sg.input_data(sg.Tensor(data_layout=sg.NC, tensor_data=np.arange(8, dtype=np.float16).reshape(1, 8)))
    for graph in (g, lone):
        topo, params = graph.write_graph(tmp_path / graph.name)
        assert load_save(topo, tmp_path) == (topo.read_bytes(), params.read_bytes())
    assert [n.name for n in read_topology(topo).nodes] == ["data"]
    np.testing.assert_array_equal(run_smaug(topo).output, np.arange(8).reshape(1, 8))


def test_writing_synthetic_weights_says_so(smaug_dir, tmp_path, cli):
    import nnbridge
    from nnbridge.base.errors import NNBridgeWarning

    source = smaug_dir / "cifar10-cnn/cnn_smv_topo.pbtxt"
    with pytest.warns(NNBridgeWarning, match="random-data recipe"):
        nnbridge.save(nnbridge.load(source), tmp_path / "a" / source.name)
    code, text = cli("convert", source, tmp_path / "cnn.onnx")
    assert code == 0 and "warning:" in text and "without its params file" in text


#: what SMAUG's runtime computes for a standalone activation whatever its params say (quirks Q1, Q2)
RUNTIME_ACTIVATION = {
    "lrelu": (dict(slope=0.5), lambda x: np.where(x >= 0, x, 0.1 * x)),
    "elu": (dict(alpha=0.2), lambda x: np.where(x < 0, 0.1 * np.expm1(x), x)),
    "selu": (dict(alpha=0.4, lambda_param=0.8), lambda x: 1.0507 * np.where(x < 0, 1.6733 * np.expm1(x), x)),
    "hard_tanh": (dict(min=-1.5, max=1.5), lambda x: np.clip(x, -1, 1)),
}


@pytest.mark.parametrize("kind", list(RUNTIME_ACTIVATION))
def test_parameters_the_runtime_ignores_are_kept_and_computed_as_it_does(tmp_path, kind):
    """SMAUG's runtime runs a standalone LReLU/ELU/SELU/HardTanh with its own constants (measured here on
    the real runtime), and nnbridge computes what it does; a load and save keeps the params the file
    states (the runtime ignores them either way) instead of rewriting them to the runtime's constants."""
    from real_smaug import run_smaug

    import nnbridge
    import nnbridge.smaug as sg

    params, runtime = RUNTIME_ACTIVATION[kind]
    x = np.linspace(-3, 3, 16, dtype=np.float32).reshape(1, 16)
    with sg.Graph(name=kind, backend="Reference") as g:
        getattr(sg.nn, kind)(sg.input_data(sg.Tensor(data_layout=sg.NC, tensor_data=x)), name=kind, **params)
    topo, params_file = g.write_graph(tmp_path / kind)
    real = run_smaug(topo)
    np.testing.assert_allclose(real.output, runtime(x.astype(np.float64)), rtol=1e-5, atol=1e-6)
    graph = nnbridge.load(topo)
    np.testing.assert_allclose(nnbridge.run(graph, graph.input_values)[f"{kind}/output0"], real.output, rtol=1e-6)
    assert load_save(topo, tmp_path) == (topo.read_bytes(), params_file.read_bytes())


def test_a_fused_softmax_the_runtime_drops_is_kept_and_dropped(tmp_path):
    """The runtime's activation decoder turns a fused Softmax into no activation (quirk Q3, seen here on
    the real runtime); nnbridge computes that, and a load and save writes the Softmax back."""
    from real_smaug import run_smaug

    import nnbridge
    import nnbridge.smaug as sg

    rng = np.random.default_rng(0)
    x = rng.standard_normal((1, 2, 4, 4)).astype(np.float32)
    w = rng.standard_normal((3, 2, 3, 3)).astype(np.float32)
    with sg.Graph(name="conv_softmax", backend="Reference") as g:
        sg.nn.convolution(sg.input_data(sg.Tensor(data_layout=sg.NCHW, tensor_data=x)),
                          sg.Tensor(data_layout=sg.NCHW, tensor_data=w), stride=[1, 1], padding="same",
                          activation="softmax", name="conv")
    topo, params_file = g.write_graph(tmp_path / g.name)
    real = run_smaug(topo)
    graph = nnbridge.load(topo)
    assert "Softmax" not in [n.op for n in graph.nodes]
    ours = nnbridge.run(graph, graph.input_values)["conv/output0"]
    np.testing.assert_allclose(ours, real.output, rtol=1e-5, atol=1e-6)
    assert real.output.min() < 0  # not a softmax's output
    assert load_save(topo, tmp_path) == (topo.read_bytes(), params_file.read_bytes())
