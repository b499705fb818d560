"""ONNX reader/writer details: external data both ways, opset normalization, metadata."""

from __future__ import annotations

import numpy as np
import onnx
import pytest
from onnx import TensorProto, helper

import nnbridge
import nnbridge.zoo
from nnbridge.base.errors import FormatError
from nnbridge.converters.onnx import save_onnx
from nnbridge.ir import IR_OPSET


def _add_model(opset: int = 13) -> onnx.ModelProto:
    w = helper.make_tensor("w", TensorProto.FLOAT, [256], np.arange(256, dtype=np.float32))
    x = helper.make_tensor_value_info("x", TensorProto.FLOAT, [256])
    y = helper.make_tensor_value_info("y", TensorProto.FLOAT, [256])
    graph = helper.make_graph([helper.make_node("Add", ["x", "w"], ["y"])], "add", [x], [y], [w])
    return helper.make_model(graph, opset_imports=[helper.make_opsetid("", opset)], ir_version=8)


def test_external_data_is_written_and_read_back(tmp_path):
    graph = nnbridge.load(_add_model())
    path = save_onnx(graph, tmp_path / "ext.onnx", external_threshold=512)
    assert (tmp_path / "ext.onnx.data").stat().st_size >= 1024
    loaded = onnx.load(path, load_external_data=False)
    assert loaded.graph.initializer[0].data_location == TensorProto.EXTERNAL
    again = nnbridge.load(path)
    np.testing.assert_array_equal(again.initializers["w"], np.arange(256, dtype=np.float32))
    x = np.ones(256, np.float32)
    np.testing.assert_array_equal(nnbridge.run(path, {"x": x})["y"], x + np.arange(256))


def test_old_opsets_are_upgraded_to_the_ir_opset(tmp_path):
    x = helper.make_tensor_value_info("x", TensorProto.FLOAT, [2, 3])
    y = helper.make_tensor_value_info("y", TensorProto.FLOAT, [3, 2])
    graph = helper.make_graph([helper.make_node("Reshape", ["x"], ["y"], shape=[3, 2])], "old", [x], [y])
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 4)], ir_version=3)
    g = nnbridge.load(model)
    assert g.opset[""] == IR_OPSET
    (reshape,) = [n for n in g.nodes if n.op != "Constant"]
    assert reshape.op == "Reshape" and len(reshape.inputs) == 2  # the attribute became an input
    out = tmp_path / "new.onnx"
    nnbridge.save(g, out)
    assert onnx.load(out).opset_import[0].version == IR_OPSET


def test_metadata_and_names_survive_a_round_trip(tmp_path):
    model = _add_model()
    model.metadata_props.add(key="author", value="nnbridge tests")
    graph = nnbridge.load(model)
    out = tmp_path / "meta.onnx"
    nnbridge.save(graph, out)
    back = onnx.load(out)
    assert {p.key: p.value for p in back.metadata_props} == {"author": "nnbridge tests"}
    assert [n.name for n in back.graph.node] == [n.name for n in graph.nodes]


def _vector_model(nodes, **graph_fields):
    x = helper.make_tensor_value_info("x", TensorProto.FLOAT, [4])
    y = helper.make_tensor_value_info("y", TensorProto.FLOAT, [4])
    functions = graph_fields.pop("functions", [])
    graph = helper.make_graph(nodes, "m", [x], [y], **graph_fields)
    return helper.make_model(graph, functions=functions, ir_version=9,
                             opset_imports=[helper.make_opsetid("", 17), helper.make_opsetid("local", 1)])


def test_a_model_with_a_local_function_is_inlined_and_agrees_with_onnxruntime():
    body = [helper.make_node("Constant", [], ["k"], value=helper.make_tensor("k", TensorProto.FLOAT, [4],
                                                                              [1, 2, 3, 4])),
            helper.make_node("Add", ["a", "k"], ["b"])]
    function = helper.make_function("local", "AddK", ["a"], ["b"], body, [helper.make_opsetid("", 17)])
    model = _vector_model([helper.make_node("AddK", ["x"], ["y"], domain="local")], functions=[function])
    graph = nnbridge.load(model)
    assert [n.op for n in graph.nodes] == ["Constant", "Add"]  # the function body, inlined
    result = nnbridge.check(model)
    assert result.ok and np.array_equal(result.actual["y"], result.inputs["x"] + np.arange(1, 5, dtype=np.float32))


@pytest.mark.parametrize("indices", [[1, 3], [[1], [3]]], ids=["linear", "coordinates"])
def test_a_sparse_initializer_becomes_a_dense_constant(indices):
    values = helper.make_tensor("w", TensorProto.FLOAT, [2], [3.0, 5.0])
    index = np.asarray(indices, np.int64)
    sparse = helper.make_sparse_tensor(values, helper.make_tensor("w_i", TensorProto.INT64, list(index.shape),
                                                                  index.ravel()), [4])
    model = _vector_model([helper.make_node("Add", ["x", "w"], ["y"])], sparse_initializer=[sparse])
    graph = nnbridge.load(model)
    assert np.array_equal(graph.initializers["w"], [0, 3, 0, 5])
    assert nnbridge.check(model).ok


def test_a_sparse_initializer_with_an_index_out_of_range_is_refused():
    values = helper.make_tensor("w", TensorProto.FLOAT, [1], [3.0])
    sparse = helper.make_sparse_tensor(values, helper.make_tensor("w_i", TensorProto.INT64, [1], [9]), [4])
    model = _vector_model([helper.make_node("Add", ["x", "w"], ["y"])], sparse_initializer=[sparse])
    with pytest.raises(FormatError, match="sparse initializer 'w'"):
        nnbridge.load(model)


@pytest.mark.parametrize("name", ["lenet5", "resnet_tiny", "lstm_small"])
def test_onnx_written_at_an_older_opset_loads_in_onnxruntime_with_the_same_outputs(tmp_path, cli, name):
    import onnxruntime as ort

    source = tmp_path / "m.onnx"
    onnx.save(nnbridge.zoo.build(name), source)
    code, text = cli("convert", source, tmp_path / "m17.onnx", "--opset", "17")
    assert code == 0, text
    written = onnx.load(tmp_path / "m17.onnx")
    assert {o.version for o in written.opset_import if o.domain in ("", "ai.onnx")} == {17}
    feeds = {i.name: np.random.default_rng(0).standard_normal([d.dim_value for d in i.type.tensor_type.shape.dim])
             .astype(np.float32) for i in written.graph.input}
    runs = [ort.InferenceSession(str(p), providers=["CPUExecutionProvider"]).run(None, feeds)
            for p in (source, tmp_path / "m17.onnx")]
    for a, b in zip(*runs):
        np.testing.assert_allclose(a, b, rtol=1e-5, atol=1e-6)


def test_an_opset_that_cannot_express_the_model_is_one_line_naming_the_op(tmp_path, cli):
    source = tmp_path / "t.onnx"
    onnx.save(nnbridge.zoo.build("transformer_tiny"), source)  # Gelu exists from opset 20
    code, text = cli("convert", source, tmp_path / "t17.onnx", "--opset", "17")
    assert code == 1 and "No Previous Version of Gelu" in text and len(text.strip().splitlines()) == 1
    assert not (tmp_path / "t17.onnx").exists()
    code, text = cli("convert", source, tmp_path / "t.onnx", "--opset", "99")
    assert code == 1 and "outside 7..26" in text
