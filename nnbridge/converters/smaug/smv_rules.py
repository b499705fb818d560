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

Kernels, too: the softmax and post-FC batch-norm kernels compute whole 8-value vectors of a
row only, the post-FC batch norm addresses rows after the first wrongly, Padding aborts and
depthwise convolution is an empty function. nnbridge's writer never emits these forms; the
reader records them in files it loads, so the SMV simulator reproduces them.

A tensor stored unpadded (alignment 0: SMAUG's frontend writes a Tensor made outside any graph so)
is read by SMV's convolution and matrix-multiply kernels as padded rows: wrong values or an abort.

Values, last: SMV stores every tensor in fp16, so a file whose stored input drives a value past
fp16's largest finite number (65504) makes the real runtime compute inf and then NaN
(:func:`fp16_overflow`).
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping

import numpy as np

from ...base.errors import Unsupported
from ...base.smaug_runtime import ALIGN, padded, repeat_copies
from ...ir import Graph, Node
from ...kernels import Plan
from ...passes import run_passes
from ...protos.smaug import smaug_graph_pb2 as gpb
from ...protos.smaug import smaug_node_pb2 as npb
from ...protos.smaug import smaug_types_pb2 as pb


def hazards(graph: gpb.GraphProto) -> list[Unsupported]:
    """Every node of an SMV topology that the real runtime computes differently from what the file
    means (or cannot run), with the reason."""
    clean: dict[tuple[str, int], bool] = {}  # (node, output) → are its padding lanes written?
    unpadded = {node.name: node.input_tensors[0] for node in graph.nodes if _stored_unpadded(node)}
    found = []
    for node in graph.nodes:
        inputs = [(p, i) for p, i in zip(node.parents, node.src_tensors_indices)]
        reason = _corrupts(node)
        if reason:
            found.append(Unsupported(pb.OpType.Name(node.op), node.name, reason))
        misread = next((unpadded[p] for p in node.parents if p in unpadded), None)
        if node.op in (pb.Convolution3d, pb.InnerProduct) and misread is not None:
            found.append(Unsupported(pb.OpType.Name(node.op), node.name, (
                f"it reads '{misread.name}', stored unpadded (alignment 0, {misread.shape.dims[-1]} values a row) "
                f"where SMV reads rows padded to {padded(misread.shape.dims[-1])}: the real runtime computes it "
                "wrong or aborts (make the Tensor inside `with sg.Graph(...)`)")))
        if node.op in (pb.Convolution3d, pb.InnerProduct) and inputs and not clean.get(inputs[0], True):
            x = node.input_tensors[0]
            found.append(Unsupported(pb.OpType.Name(node.op), node.name, (
                f"it multiplies the alignment lanes of '{x.name}' ({x.shape.dims[-1]} values padded to "
                f"{padded(x.shape.dims[-1])}), which '{node.parents[0]}' leaves uninitialised on SMV")))
        for k, out in enumerate(node.output_tensors):
            clean[(node.name, k)] = _writes_padding(node, out, [clean.get(i, True) for i in inputs])
    return found


def _stored_unpadded(node: npb.NodeProto) -> bool:
    """A Data node whose stored tensor is unpadded (alignment 0, as SMAUG's frontend writes a Tensor
    made outside any graph) while SMV reads its rows padded to 8."""
    if node.op != pb.Data or not node.input_tensors:
        return False
    dims = node.input_tensors[0].shape.dims
    return node.input_tensors[0].shape.alignment == 0 and bool(dims) and dims[-1] % ALIGN != 0


def _corrupts(node: npb.NodeProto) -> str:
    """Why the SMV runtime computes this node wrong (or cannot run it), or "" if it does not."""
    if not node.input_tensors or not node.output_tensors:
        return ""  # a node the exporter left half-written is already refused with its reason
    rule = _CORRUPTION_RULES.get(node.op)
    return rule(node) if rule is not None else ""


def _softmax_rows(node: npb.NodeProto) -> str:
    """SMV's softmax normalises whole 8-value vectors of a row only."""
    out = node.output_tensors[0].shape.dims
    if out and out[-1] % ALIGN:
        return (f"SMV's softmax normalises the first {out[-1] // ALIGN * ALIGN} of each row's {out[-1]} values; "
                f"the other {out[-1] % ALIGN} keep what its scratchpad held")
    return ""


def _post_fc_batch_norm(node: npb.NodeProto) -> str:
    """The post-FC kernel computes whole vectors of the parameters' width (which may exceed the
    row's) and addresses rows after the first wrongly."""
    out = node.output_tensors[0].shape.dims
    if len(out) != 2 or len(node.input_tensors) <= 1:
        return ""
    done = node.input_tensors[1].shape.dims[-1] // ALIGN * ALIGN
    if done < out[-1]:
        return (f"SMV's post-FC batch norm computes the first {done} of each row's {out[-1]} values; "
                f"the other {out[-1] - done} keep what its scratchpad held")
    if out[0] > 1:
        return ("SMV's post-FC batch norm reads rows after the first at a stride of the whole tensor: "
                "they keep what its scratchpad held")
    return ""


def _concat_overrun(node: npb.NodeProto) -> str:
    """A Concat along the last axis copies each input as whole padded rows."""
    if node.params.concat_params.concat_axis != len(node.output_tensors[0].shape.dims) - 1:
        return ""
    total = padded(node.output_tensors[0].shape.dims[-1])
    offset = 0
    for t in node.input_tensors:
        width = t.shape.dims[-1]
        if offset + padded(width) > total:
            return (f"on SMV a Concat along the last axis copies whole padded rows: '{t.name}' "
                    f"({width} values padded to {padded(width)}) at offset {offset} overruns the "
                    f"{total}-value output row")
        offset += width
    return ""


def _repeat_overrun(node: npb.NodeProto) -> str:
    """A Repeat along the last axis copies padded rows (its doubling copies overrun)."""
    x, y = node.input_tensors[0].shape.dims, node.output_tensors[0].shape.dims
    for offset, width in repeat_copies(x[-1], y[-1]):
        if offset + padded(width) > padded(y[-1]):
            return (f"on SMV a Repeat along the last axis copies whole padded rows: {width} values "
                    f"(padded to {padded(width)}) copied to offset {offset} overrun the {padded(y[-1])}-value "
                    f"output row")
    return ""


def _reshape_scramble(node: npb.NodeProto) -> str:
    """A Reshape between equally, non-zero padded tensors of different row widths copies raw storage."""
    x, y = node.input_tensors[0].shape.dims, node.output_tensors[0].shape.dims
    if x and y and x[-1] != y[-1] and padded(x[-1]) - x[-1] == padded(y[-1]) - y[-1] != 0:
        return (f"on SMV a Reshape between tensors with the same padding copies the raw storage: "
                f"{list(x)} → {list(y)} would scramble the values")
    return ""


_CORRUPTION_RULES = {
    pb.Softmax: _softmax_rows,
    pb.BatchNorm: _post_fc_batch_norm,
    pb.Padding: lambda _: "SMAUG's Padding aborts on SMV (it fills an fp16 tensor through a float32 path)",
    pb.ConvolutionDepthwise: lambda _: "SMAUG's depthwise convolution does nothing on SMV: its output is never written",
    pb.Concat: _concat_overrun,
    pb.Repeat: _repeat_overrun,
    pb.Reshape: _reshape_scramble,
}


def _writes_padding(node: npb.NodeProto, out: npb.TensorProto, inputs_clean: list[bool]) -> bool:
    """Are the padding lanes of this output written with values derived from written memory?"""
    if out.shape.dims and out.shape.dims[-1] % ALIGN == 0:
        return True
    if node.op in (pb.Reorder,):
        return False
    if node.op == pb.Reshape:
        x = node.input_tensors[0].shape.dims
        if not x or not out.shape.dims:  # a scalar has no rows to pad
            return all(inputs_clean)
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


FP16_MAX = float(np.finfo(np.float16).max)


def fp16_overflow(graph: Graph, stored: Mapping[str, np.ndarray],
                  data: Iterable[tuple[str, np.ndarray]]) -> list[Unsupported]:
    """The first value that leaves fp16's range: among the ``data`` the params file stores, else
    when ``graph`` runs (in float32, ONNX's layouts) on the network inputs the file stores. Its
    consumers only inherit the inf/NaN, so one entry is enough."""
    for name, array in data:
        peak = _peak(array)
        if peak > FP16_MAX:
            return [Unsupported("Data", name, f"it holds {peak:.3g}, beyond fp16's largest finite {FP16_MAX:.0f}")]
    found: list[Unsupported] = []

    def watch(node: Node, outputs: tuple) -> None:
        if found:
            return
        for value, array in zip(node.outputs, outputs):
            peak = _peak(array)
            if peak > FP16_MAX:
                found.append(Unsupported(node.op, node.name, (
                    f"its output '{value.name}' reaches {peak:.3g} on the stored input, beyond fp16's largest "
                    f"finite {FP16_MAX:.0f}: SMV stores fp16, so the real runtime computes inf/NaN from here "
                    f"(write for --smaug-backend Reference, which stores fp32, or store another input with "
                    f"--smaug-input)")))
                return

    if any(v.name not in stored for v in graph.inputs):
        return []
    runnable = graph.copy()  # the kernels compute ONNX's (NCHW) layouts
    run_passes(runnable, ["layout-nchw", "cancel-transposes", "eliminate", "infer-shapes"])
    feeds = {v.name: np.asarray(stored[v.name]).astype(v.type.dtype.numpy if v.type.dtype else np.float32)
             for v in runnable.inputs}
    Plan(runnable).execute(feeds, observe=watch)
    return found


def _peak(array: object) -> float:
    """The largest finite-or-not magnitude of a float array (0 for anything else)."""
    if not isinstance(array, np.ndarray) or array.dtype.kind != "f" or not array.size:
        return 0.0
    with np.errstate(invalid="ignore"):
        return float(np.nanmax(np.abs(array))) if not np.isnan(array).all() else 0.0
