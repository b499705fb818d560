"""ONNX reader/writer details: external data both ways, opset normalization, metadata."""

from __future__ import annotations

import numpy as np
import onnx
from onnx import TensorProto, helper

import nnbridge
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
