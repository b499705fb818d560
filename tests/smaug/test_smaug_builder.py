"""The SMAUG-style graph-building API: the shipped Minerva/LeNet-5 files are reproduced byte for byte
from SMAUG's random-data recipe, print_summary matches SMAUG's text, and to_ir runs."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest
from smaug_data import EXPECTED

import nnbridge
import nnbridge.smaug as sg
from nnbridge.base.errors import InputError

BACKENDS = [("SMV", "smv", np.float16), ("Reference", "ref", np.float32)]


def recipe(shape, dtype):
    return (np.random.RandomState(1234).rand(*shape) * 0.005).astype(dtype)


@pytest.mark.parametrize("backend, suffix, dtype", BACKENDS)
@pytest.mark.parametrize("network", ["minerva", "lenet5"])
def test_builder_reproduces_the_shipped_files(smaug_dir, tmp_path, network, backend, suffix, dtype):
    graph = sg.models.build(network, backend)
    topo, params = graph.write_graph(tmp_path / graph.name)
    name = f"{network}/{network}_{suffix}"
    assert topo.read_bytes() == (smaug_dir / f"{name}_topo.pbtxt").read_bytes()
    assert params.read_bytes() == (smaug_dir / f"{name}_params.pb").read_bytes()


@pytest.mark.parametrize("network, rel", [("cnn10", "cifar10-cnn/cnn_smv"), ("vgg", "cifar10-vgg/vgg_smv")])
def test_builder_reproduces_the_topology_only_models(smaug_dir, network, rel):
    from nnbridge.converters.smaug.files import topology_text

    graph = sg.models.build(network, "SMV")
    assert topology_text(graph.proto) == (smaug_dir / f"{rel}_topo.pbtxt").read_text()


@pytest.mark.parametrize("backend, suffix, dtype", BACKENDS)
def test_to_ir_runs_with_smaug_semantics(backend, suffix, dtype):
    graph = sg.models.lenet5(backend).to_ir()
    (out,) = nnbridge.run(graph, {"data": recipe((1, 28, 28, 1), dtype)}).values()
    np.testing.assert_allclose(out.reshape(-1), EXPECTED[f"lenet5/lenet5_{suffix}_topo.pbtxt"], rtol=1e-2)


TUTORIAL_SUMMARY = """\
=================================================================
      Summary of the network: my_model (SMV)
=================================================================
Host memory access policy: AllDma.
-----------------------------------------------------------------
Name: data (Data)
Parents:
Children:conv{sp}
Input tensors:
  data/input0 Float16 [1, 28, 28, 1] NHWC alignment(8)
Output tensors:
  data/output0 Float16 [1, 28, 28, 1] NHWC alignment(8)
-----------------------------------------------------------------
Name: data_1 (Data)
Parents:
Children:conv{sp}
Input tensors:
  data_1/input0 Float16 [32, 3, 3, 1] NHWC alignment(8)
Output tensors:
  data_1/output0 Float16 [32, 3, 3, 1] NHWC alignment(8)
-----------------------------------------------------------------
Name: conv (Convolution3d)
Parents:data data_1{sp}
Children:max_pool{sp}
Input tensors:
  data/output0 Float16 [1, 28, 28, 1] NHWC alignment(8)
  data_1/output0 Float16 [32, 3, 3, 1] NHWC alignment(8)
Output tensors:
  conv/output0 Float16 [1, 28, 28, 32] NHWC alignment(8)
-----------------------------------------------------------------
Name: max_pool (MaxPooling)
Parents:conv{sp}
Children:reorder{sp}
Input tensors:
  conv/output0 Float16 [1, 28, 28, 32] NHWC alignment(8)
Output tensors:
  max_pool/output0 Float16 [1, 14, 14, 32] NHWC alignment(8)
-----------------------------------------------------------------
Name: reorder (Reorder)
Parents:max_pool{sp}
Children:mat_mul{sp}
Input tensors:
  max_pool/output0 Float16 [1, 14, 14, 32] NHWC alignment(8)
Output tensors:
  reorder/output0 Float16 [1, 6272] NC alignment(8)
-----------------------------------------------------------------
Name: data_2 (Data)
Parents:
Children:mat_mul{sp}
Input tensors:
  data_2/input0 Float16 [10, 6272] NC alignment(8)
Output tensors:
  data_2/output0 Float16 [10, 6272] NC alignment(8)
-----------------------------------------------------------------
Name: mat_mul (InnerProduct)
Parents:reorder data_2{sp}
Children:
Input tensors:
  reorder/output0 Float16 [1, 6272] NC alignment(8)
  data_2/output0 Float16 [10, 6272] NC alignment(8)
Output tensors:
  mat_mul/output0 Float16 [1, 10] NC alignment(8)
-----------------------------------------------------------------
""".replace("{sp}", " ")  # spec §8: every parent/child name is followed by one space


def test_print_summary_of_the_tutorial_model(tmp_path, capsys):
    golden = tmp_path / "my_model_summary.txt"
    golden.write_text(TUTORIAL_SUMMARY)
    with sg.Graph(name="my_model", backend="SMV") as g:
        x = sg.Tensor(data_layout=sg.NHWC, tensor_data=recipe((1, 28, 28, 1), np.float16))
        conv_weights = sg.Tensor(data_layout=sg.NHWC, tensor_data=recipe((32, 3, 3, 1), np.float16))
        fc_weights = sg.Tensor(data_layout=sg.NC, tensor_data=recipe((10, 6272), np.float16))
        act = sg.input_data(x)
        act = sg.nn.convolution(act, conv_weights, stride=[1, 1], padding="same", activation="relu")
        act = sg.nn.max_pool(act, pool_size=[2, 2], stride=[2, 2])
        act = sg.nn.mat_mul(act, fc_weights)
    g.print_summary()
    assert capsys.readouterr().out == golden.read_text()
    assert list(act.shape.dims) == [1, 10] and act.dims(1) == 10


def test_graphs_are_independent_and_names_follow_the_frontend():
    a, b = sg.Graph(name="a", backend="Reference"), sg.Graph(name="b", backend="SMV")
    xa = sg.input_data(sg.Tensor(data_layout=sg.NC, tensor_data=np.ones((1, 4), np.float32)), graph=a)
    xb = sg.input_data(sg.Tensor(data_layout=sg.NC, tensor_data=np.ones((1, 4), np.float16), alignment=8), graph=b)
    ya = sg.math.add(sg.math.add(xa, xa), xa)
    yb = sg.nn.relu(xb)
    assert [n.name for n in a.proto.nodes] == ["data", "add", "add_1"]
    assert [n.name for n in b.proto.nodes] == ["data", "relu"]
    assert ya.graph is a and yb.graph is b
    with pytest.raises(InputError, match="belongs to graph 'b'"):
        sg.math.add(xa, yb)


def test_a_nested_graph_shares_names_and_joins_the_enclosing_one_as_in_smaug():
    with sg.Graph(name="outer", backend="Reference") as outer:
        x = sg.input_data(sg.Tensor(data_layout=sg.NC, tensor_data=np.ones((1, 4), np.float32)))
        with sg.Graph(name="inner", backend="Reference") as inner:
            y = sg.nn.relu(x)
            sg.nn.relu(y)
        assert y.graph is outer and inner.nodes == []
        sg.nn.relu(x)
    assert [n.name for n in outer.proto.nodes] == ["data", "relu", "relu_1", "relu_2"]


def test_broadcast_uses_repeat_and_batch_norm_runs():
    with sg.Graph(name="bn", backend="Reference") as g:
        x = sg.input_data(sg.Tensor(data_layout=sg.NCHW, tensor_data=np.ones((1, 2, 3, 3), np.float32)))
        stats = [sg.Tensor(data_layout=sg.NC, tensor_data=np.array([[v, v]], np.float32)) for v in (1, 0.5, 2, 3)]
        y = sg.nn.batch_norm(x, *stats, activation="relu")
        bias = sg.Tensor(data_layout=sg.NCHW, tensor_data=np.full((1, 2, 1, 1), 10, np.float32))
        sg.math.add(y, bias)
    ops = [n.op for n in g.proto.nodes]
    assert ops.count(sg.tensor.pb.Repeat) == 1
    x = np.full((1, 2, 3, 3), 2, np.float32)
    x[0, 1] = -9
    (out,) = nnbridge.run(g.to_ir(), {"data": x}).values()
    # (x − mean) · var′ · gamma + beta, relu, + 10:  (2 − 1)·0.5·2 + 3 = 4 → 14;  (−9 − 1)·1 + 3 < 0 → 10
    assert np.allclose(out[0, 0], 14.0) and np.allclose(out[0, 1], 10.0)


def test_standalone_activation_parameters_follow_the_runtime():
    """A standalone LReLU runs with slope 0.1 whatever the file says (quirk Q1) unless asked for
    the intended semantics; a fused one keeps its slope; a fused softmax is dropped (Q3)."""
    from nnbridge.converters.smaug import graph_from_proto

    with sg.Graph(name="acts", backend="Reference") as g:
        x = sg.input_data(sg.Tensor(data_layout=sg.NC, tensor_data=np.ones((1, 4), np.float32)))
        y = sg.nn.lrelu(x, slope=0.3)
        sg.nn.mat_mul(y, sg.Tensor(data_layout=sg.NC, tensor_data=np.eye(4, dtype=np.float32)),
                      activation="lrelu", activation_params={"slope": 0.25})
    feeds = {"data": -np.ones((1, 4), np.float32)}
    runtime = graph_from_proto(g.proto, g.params_array(), "acts")
    intended = graph_from_proto(g.proto, g.params_array(), "acts", lrelu="intended")
    (out_runtime,) = nnbridge.run(runtime, feeds).values()
    (out_intended,) = nnbridge.run(intended, feeds).values()
    np.testing.assert_allclose(out_runtime, -0.1 * 0.25, rtol=1e-6)
    np.testing.assert_allclose(out_intended, -0.3 * 0.25, rtol=1e-6)
    with sg.Graph(name="soft", backend="Reference") as g:
        x = sg.input_data(sg.Tensor(data_layout=sg.NC, tensor_data=np.ones((1, 4), np.float32)))
        sg.nn.mat_mul(x, sg.Tensor(data_layout=sg.NC, tensor_data=np.eye(4, dtype=np.float32)), activation="softmax")
    assert [n.op for n in g.to_ir().nodes] == ["Reorder", "MatMul"]  # no Softmax node


def test_summary_lists_children_output_by_output_as_smaugs_frontend_does():
    """SMAUG's Node.get_children walks the node's output tensors in order and each tensor's
    readers in creation order: the reader of output 1 created first still comes after the
    reader of output 0."""
    from nnbridge.protos.smaug import smaug_graph_pb2 as gpb
    from nnbridge.smaug.summary import summary_text

    graph = gpb.GraphProto(name="g", backend="Reference")
    split = graph.nodes.add(name="split", op=sg.tensor.pb.Split)
    split.output_tensors.add(name="split/output0")
    split.output_tensors.add(name="split/output1")
    for name, index in (("reads_1", 1), ("reads_0", 0)):
        node = graph.nodes.add(name=name, op=sg.tensor.pb.ReLU, parents=["split"], src_tensors_indices=[index])
        node.input_tensors.add(name=f"split/output{index}")
    text = summary_text(graph)
    assert "Name: split (Split)\nParents:\nChildren:reads_0 reads_1 \n" in text


def test_write_graph_takes_a_path_prefix_as_smaugs_does(tmp_path, monkeypatch):
    """SMAUG's write_graph(name): `name` (default the graph's name) + "_topo.pbtxt" / "_params.pb",
    relative to the working directory, even where a directory of that name exists."""
    monkeypatch.chdir(tmp_path)
    (tmp_path / "out").mkdir()
    graph = sg.models.minerva("SMV")
    assert graph.write_graph("out") == (Path("out_topo.pbtxt"), Path("out_params.pb"))
    graph.write_graph()
    graph.write_graph(Path("out") / "mine")
    assert sorted(str(p.relative_to(tmp_path)) for p in tmp_path.rglob("*_*")) == [
        "minerva_smv_params.pb", "minerva_smv_topo.pbtxt", "out/mine_params.pb", "out/mine_topo.pbtxt",
        "out_params.pb", "out_topo.pbtxt"]
    assert (tmp_path / "out_topo.pbtxt").read_bytes() == (tmp_path / "minerva_smv_topo.pbtxt").read_bytes()


def test_a_convolution_whose_filter_channels_differ_from_its_input_is_refused():
    with sg.Graph(name="bad_conv", backend="SMV"):
        x = sg.input_data(sg.Tensor(data_layout=sg.NHWC, tensor_data=np.ones((1, 8, 8, 3), np.float16)))
        w = sg.Tensor(data_layout=sg.NHWC, tensor_data=np.ones((4, 3, 3, 5), np.float16))
        with pytest.raises(InputError, match=r"^conv: the filter has 5 channels but its input .* has 3$"):
            sg.nn.convolution(x, w, stride=[1, 1], padding="same")


def test_a_reference_executable_reads_well_and_reports_every_node():
    exe = nnbridge.compile(sg.models.minerva("Reference").to_ir())
    assert repr(exe).startswith("<reference executable of 'minerva_ref': ") and "inputs ['data']" in repr(exe)
    exe.run({"data": recipe((1, 28, 28, 1), np.float32)})
    assert [row["name"] for row in exe.report.rows] == [node.name for node in exe.graph.nodes]
    assert exe.report.notes == ["per-node times: compile with profile=True"]


def test_a_tensor_made_outside_any_graph_is_stored_unpadded_as_smaug_does_and_said_so_on_smv():
    """SMAUG gives a Tensor the alignment of the graph active when it is made (0 outside any): its
    Data input keeps that alignment and its params entry is not padded. On SMV the real runtime then
    computes it wrong (a convolution) or aborts (a matrix multiply), so nnbridge warns."""
    from nnbridge.base.errors import NNBridgeWarning

    data = np.arange(6, dtype=np.float16).reshape(1, 2, 3)
    outside = sg.Tensor(data_layout=sg.NTC, tensor_data=data)
    with sg.Graph(name="g", backend="SMV") as g:
        inside = sg.Tensor(data_layout=sg.NTC, tensor_data=data)
        with pytest.warns(NNBridgeWarning, match=r"^Data node 'data': .* has alignment 0 \(made outside any graph\)"):
            sg.input_data(outside)
        sg.input_data(inside)
    first, second = g.proto.nodes
    assert [first.input_tensors[0].shape.alignment, first.output_tensors[0].shape.alignment] == [0, 8]
    assert [second.input_tensors[0].shape.alignment, second.output_tensors[0].shape.alignment] == [8, 8]
    entries = g.params_array().data_array
    assert [len(e.half_data) for e in entries] == [3, 8]  # 6 fp16 values in 3 words; 2 rows padded to 8


def test_check_never_agrees_on_an_smv_file_whose_convolution_reads_an_unpadded_tensor(tmp_path):
    """The real SMV runtime miscomputes a convolution over a tensor stored unpadded: nnbridge's SMV
    simulation must not call such a file's result right (it is undefined there, and the note says why)."""
    import warnings

    import nnbridge
    from nnbridge.base.errors import NNBridgeWarning

    rng = np.random.default_rng(0)
    x = sg.Tensor(data_layout=sg.NHWC, tensor_data=rng.uniform(-1, 1, (1, 4, 4, 3)).astype(np.float16))
    w = sg.Tensor(data_layout=sg.NHWC, tensor_data=rng.uniform(-1, 1, (4, 3, 3, 3)).astype(np.float16))
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", NNBridgeWarning)
        with sg.Graph(name="unpadded", backend="SMV") as g:
            sg.nn.convolution(sg.input_data(x), w, stride=[1, 1], padding="same", activation=None, name="conv")
    g.write_graph(str(tmp_path / "unpadded"))
    result = nnbridge.check(tmp_path / "unpadded_topo.pbtxt", backend="smv")
    assert not result.ok
    assert any("stored unpadded (alignment 0, 3 values a row) where SMV reads rows padded to 8" in n
               for n in result.notes), result.notes
