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


def smaug_core_modules(root) -> None:
    """SMAUG's own generated modules, as its build makes them: smaug/core/{types,tensor,node,graph}.proto
    (package ``smaug``, the same symbols as nnbridge's copy) compiled to ``smaug.core.*_pb2``."""
    from pathlib import Path

    from grpc_tools import protoc

    source = Path(smaug_types_pb2.__file__).parent
    core = root / "smaug" / "core"
    core.mkdir(parents=True)
    for name in ("types", "tensor", "node", "graph"):
        text = (source / f"smaug_{name}.proto").read_text()
        for other in ("types", "tensor", "node"):
            text = text.replace(f'import "smaug_{other}.proto";', f'import "smaug/core/{other}.proto";')
        (core / f"{name}.proto").write_text(text)
    for package in (root / "smaug", core):
        (package / "__init__.py").write_text("")
    files = [f"smaug/core/{n}.proto" for n in ("types", "tensor", "node", "graph")]
    assert protoc.main(["protoc", f"-I{root}", f"--python_out={root}", *files]) == 0


def test_smaugs_own_generated_modules_coexist_with_nnbridge(tmp_path, shared_data):
    """``import smaug.core.graph_pb2`` and ``import nnbridge`` in one process, in either order, both
    reading the same file (nnbridge keeps its descriptors in a private pool)."""
    smaug_core_modules(tmp_path)
    topo = shared_data / "smaug" / "minerva" / "minerva_smv_topo.pbtxt"
    script = """
import sys
from google.protobuf import text_format
first, second = sys.argv[1:3]
__import__(first); __import__(second)
import nnbridge
from smaug.core import graph_pb2, types_pb2
theirs = text_format.Parse(open(sys.argv[3]).read(), graph_pb2.GraphProto())
ours = nnbridge.load(sys.argv[3])
assert theirs.nodes[-1].op == types_pb2.InnerProduct and ours.outputs[0].name == "mat_mul_3/output0"
print("ok", len(theirs.nodes))
"""
    for order in (["smaug.core.graph_pb2", "nnbridge"], ["nnbridge", "smaug.core.graph_pb2"]):
        result = subprocess.run([sys.executable, "-c", script, *order, str(topo)], capture_output=True, text=True,
                                env={"PYTHONPATH": f"{tmp_path}"}, cwd=tmp_path)
        assert result.returncode == 0 and result.stdout.startswith("ok 10"), result.stderr[-500:]
