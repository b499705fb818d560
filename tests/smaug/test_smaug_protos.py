"""The generated protobuf code matches the .proto sources, and the schema carries SMAUG's numbers."""

from __future__ import annotations

import subprocess
import sys

from nnbridge.protos.smaug import smaug_graph_pb2, smaug_node_pb2, smaug_tensor_pb2, smaug_types_pb2


def test_generated_protos_are_fresh():
    result = subprocess.run([sys.executable, "-m", "nnbridge.protos.generate", "--check"],
                            capture_output=True, text=True)
    assert result.returncode == 0, result.stdout + result.stderr


def test_schema_numbers_follow_the_spec():
    assert smaug_graph_pb2.GraphProto.DESCRIPTOR.full_name == "smaug.GraphProto"
    fields = {f.name: f.number for f in smaug_node_pb2.NodeProto.DESCRIPTOR.fields}
    assert fields == {"name": 1, "op": 2, "parents": 3, "src_tensors_indices": 5, "input_tensors": 6,
                      "output_tensors": 7, "params": 8}
    params = smaug_node_pb2.Params.DESCRIPTOR
    assert params.fields_by_name["act_params"].containing_oneof is None
    assert params.fields_by_name["conv_params"].containing_oneof.name == "value"
    data = {f.name: f.number for f in smaug_tensor_pb2.TensorData.DESCRIPTOR.fields}
    assert data["half_data"] == 2 and data["bool_data"] == 7
    assert smaug_types_pb2.Padding == 29 and smaug_types_pb2.Softmax == 15
    assert smaug_types_pb2.X == 127 and smaug_types_pb2.EndDataLayout == smaug_types_pb2.N == 64
    assert smaug_types_pb2.AllAcpWithDmaForWeights == 4
    assert 3 not in smaug_types_pb2.HostMemoryAccessPolicy.values()
    assert smaug_tensor_pb2.TensorShapeProto.DESCRIPTOR.fields_by_name["alignment"].number == 3
