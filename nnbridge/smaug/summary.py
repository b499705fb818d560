"""SMAUG's ``print_summary()`` text (specs/smaug-format.md §8), byte for byte."""

from __future__ import annotations

from ..base.errors import FormatError
from ..protos.smaug import smaug_graph_pb2 as gpb
from ..protos.smaug import smaug_tensor_pb2 as tpb
from ..protos.smaug import smaug_types_pb2 as pb

RULE_DOUBLE = "=" * 65
RULE = "-" * 65


def tensor_line(t: tpb.TensorProto) -> str:
    dims = "[" + ", ".join(str(d) for d in t.shape.dims) + "]"
    return (f"  {t.name} {pb.DataType.Name(t.data_type)} {dims} "
            f"{pb.DataLayout.Name(t.shape.layout)} alignment({t.shape.alignment})")


def summary_text(graph: gpb.GraphProto) -> str:
    """The summary of a GraphProto: nodes in creation order; a node's children listed as SMAUG's
    frontend does, output tensor by output tensor, each tensor's readers in creation order."""
    readers: dict[tuple[str, int], list[str]] = {}
    outputs: dict[str, int] = {}
    for node in graph.nodes:
        outputs[node.name] = len(node.output_tensors)
        for parent, index in zip(node.parents, node.src_tensors_indices):
            readers.setdefault((parent, index), []).append(node.name)
    children = {name: [c for k in range(max(count, 1)) for c in readers.get((name, k), [])]
                for name, count in outputs.items()}
    lines = [RULE_DOUBLE, f"      Summary of the network: {graph.name} ({graph.backend})", RULE_DOUBLE,
             f"Host memory access policy: {pb.HostMemoryAccessPolicy.Name(graph.mem_policy)}.", RULE]
    for node in graph.nodes:
        lines.append(f"Name: {node.name} ({pb.OpType.Name(node.op)})")
        lines.append("Parents:" + "".join(f"{p} " for p in node.parents))
        lines.append("Children:" + "".join(f"{c} " for c in children.get(node.name, [])))
        lines.append("Input tensors:")
        lines.extend(tensor_line(t) for t in node.input_tensors)
        lines.append("Output tensors:")
        lines.extend(tensor_line(t) for t in node.output_tensors)
        lines.append(RULE)
    return "\n".join(lines) + "\n"


def file_summary(path) -> str:
    """The summary of a ``_topo.pbtxt`` file (for ``nnbridge summary`` on SMAUG models)."""
    from ..converters.smaug import read_topology
    from ..converters.smaug.files import model_paths

    topology = model_paths(path)[0]
    try:
        return summary_text(read_topology(topology))
    except ValueError as exc:  # an op code, data type or layout no enum names: "Enum OpType has no name ..."
        raise FormatError(f"{topology}: {exc}") from None
