"""What SMAUG's SMV runtime computes wrong in a topology, found by walking the written file.

SMV tensors pad their last dimension to a multiple of 8 (spec §4.3). SMAUG's CPU-side
operators copy tensors as padded rows, and its kernels read the padding lanes; each
rule below is a consequence of that, observed with the real runtime
(tests/smaug/test_real_runtime.py shows every one):

* a Concat along the last axis copies each input as whole padded rows, so an input whose
  padded row reaches past the output's row overwrites the next row's first values;
* a Repeat along the last axis copies padded rows the same way (its doubling copies overrun);
* a Reshape between tensors with equal, non-zero padding but different last dimensions copies
  the raw storage and scrambles the values;
* Reorder and Flatten write only the values, and so does a Reshape that changes the
  padding: their padding lanes hold whatever the memory held, and a Convolution3d or
  InnerProduct multiplies its input's padding lanes (by zero weights, but garbage may be NaN).
"""

from __future__ import annotations

from ...errors import Unsupported
from ...protos.smaug import smaug_graph_pb2 as gpb
from ...protos.smaug import smaug_node_pb2 as npb
from ...protos.smaug import smaug_types_pb2 as pb

ALIGN = 8


def padded(n: int) -> int:
    return -(-n // ALIGN) * ALIGN


def hazards(graph: gpb.GraphProto) -> list[Unsupported]:
    """Every node of an SMV topology that the runtime would compute wrong, with the reason."""
    clean: dict[tuple[str, int], bool] = {}  # (node, output) → are its padding lanes written?
    found = []
    for node in graph.nodes:
        inputs = [(p, i) for p, i in zip(node.parents, node.src_tensors_indices)]
        reason = _corrupts(node)
        if reason:
            found.append(Unsupported(pb.OpType.Name(node.op), node.name, reason))
        if node.op in (pb.Convolution3d, pb.InnerProduct) and inputs and not clean.get(inputs[0], True):
            x = node.input_tensors[0]
            found.append(Unsupported(pb.OpType.Name(node.op), node.name, (
                f"it multiplies the alignment lanes of '{x.name}' ({x.shape.dims[-1]} values padded to "
                f"{padded(x.shape.dims[-1])}), which '{node.parents[0]}' leaves uninitialised on SMV")))
        for k, out in enumerate(node.output_tensors):
            clean[(node.name, k)] = _writes_padding(node, out, [clean.get(i, True) for i in inputs])
    return found


def _corrupts(node: npb.NodeProto) -> str:
    if node.op == pb.Concat and node.params.concat_params.concat_axis == len(node.output_tensors[0].shape.dims) - 1:
        total = padded(node.output_tensors[0].shape.dims[-1])
        offset = 0
        for t in node.input_tensors:
            width = t.shape.dims[-1]
            if offset + padded(width) > total:
                return (f"on SMV a Concat along the last axis copies whole padded rows: '{t.name}' "
                        f"({width} values padded to {padded(width)}) at offset {offset} overruns the "
                        f"{total}-value output row")
            offset += width
    if node.op == pb.Repeat:
        x, y = node.input_tensors[0].shape.dims, node.output_tensors[0].shape.dims
        for offset, width in repeat_copies(x[-1], y[-1]):
            if offset + padded(width) > padded(y[-1]):
                return (f"on SMV a Repeat along the last axis copies whole padded rows: {width} values "
                        f"(padded to {padded(width)}) copied to offset {offset} overrun the {padded(y[-1])}-value "
                        f"output row")
    if node.op == pb.Reshape:
        x, y = node.input_tensors[0].shape.dims, node.output_tensors[0].shape.dims
        if x[-1] != y[-1] and padded(x[-1]) - x[-1] == padded(y[-1]) - y[-1] != 0:
            return (f"on SMV a Reshape between tensors with the same padding copies the raw storage: "
                    f"{list(x)} → {list(y)} would scramble the values")
    return ""


def repeat_copies(width: int, total: int) -> list[tuple[int, int]]:
    """(offset, width) of each copy SMAUG's Repeat makes along the last axis: the filled prefix is
    copied after itself, doubling, then the remainder."""
    copies, offset, block = [], width, width
    while offset + block <= total:
        copies.append((offset, block))
        offset += block
        block *= 2
    if offset < total:
        copies.append((offset, total - offset))
    return copies


def _writes_padding(node: npb.NodeProto, out: npb.TensorProto, inputs_clean: list[bool]) -> bool:
    """Are the padding lanes of this output written with values derived from written memory?"""
    if out.shape.dims and out.shape.dims[-1] % ALIGN == 0:
        return True
    if node.op in (pb.Reorder,):
        return False
    if node.op == pb.Reshape:
        x = node.input_tensors[0].shape.dims
        same = padded(x[-1]) - x[-1] == padded(out.shape.dims[-1]) - out.shape.dims[-1]
        return same and all(inputs_clean)
    if node.op == pb.Concat:
        total, offset = padded(out.shape.dims[-1]), 0
        for t in node.input_tensors[:-1]:
            offset += t.shape.dims[-1]
        last = node.input_tensors[-1].shape.dims[-1] if node.input_tensors else 0
        axis = node.params.concat_params.concat_axis
        covered = axis != len(out.shape.dims) - 1 or offset + padded(last) >= total
        return covered and all(inputs_clean)
    if node.op in (pb.Convolution3d, pb.InnerProduct, pb.Data):
        return True
    return all(inputs_clean)
