"""Per-operator work and traffic for the performance model: FLOP, weights, activations, buffers.

FLOP convention: 2 per multiply-accumulate (spec §6.1), otherwise the op's FLOP per output
element from the op-traits table (1 for plain elementwise, a few for normalisations);
data-movement ops (Injective) cost no FLOP but still move bytes through PMUs. Buffers are the
*tile-sized* double-buffered staging a stage needs for each streamed input (spec §5.2 step 2b):
a window of rows for convolutions and pools, the whole tensor when the op needs random access
to it (transposes, the dynamic operand of a MatMul).
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field

from ...ir import Flag, Node, PatternKind, Value, op_traits
from ...ir.schema import NNBRIDGE_DOMAIN, TRAINING_DOMAIN


@dataclass(kw_only=True)
class OpCost:
    """Work of one call of an op (all samples of the graph's declared batch).

    ``inputs`` lists the streamed (non-constant) operands as (value name, bytes, on-chip
    buffer bytes); ``outputs`` the results as (value name, bytes). A kernel keeps only the
    edges that cross its boundary: fused edges flow FU-to-FU inside the PCU pipeline.
    """

    flops: float = 0.0
    weight_bytes: int = 0
    inputs: list[tuple[str, int, int]] = field(default_factory=list)
    outputs: list[tuple[str, int]] = field(default_factory=list)
    out_elems: int = 0
    unknown_shapes: int = 0
    link_bytes: float = 0.0  # bytes this socket sends to the others (an AllReduce)
    link_steps: int = 0  # link latencies on its critical path


def numel(value: Value | None) -> int | None:
    if value is None:
        return 0
    return value.type.numel


def value_bytes(value: Value, float_bytes: int) -> int | None:
    n = value.type.numel
    if n is None:
        return None
    dtype = value.type.dtype
    if dtype is None or dtype.is_float:
        return n * float_bytes
    return n * dtype.itemsize


def tile_bytes(value: Value, total: int, window: int) -> int:
    """``window + 1`` rows of a streamed tensor (double-buffered): a row is one (n, h) slice
    of an NCHW tensor, else one vector along the last axis (a token, a matrix row)."""
    shape = [int(d) for d in value.type.shape or ()]
    if len(shape) >= 4:
        rows = shape[0] * shape[2]
    elif len(shape) >= 2:
        rows = math.prod(shape[:-1])
    else:
        rows = 1
    return int(min(total, (window + 1) * total / max(rows, 1)))


def op_cost(node: Node, float_bytes: int) -> OpCost:
    """The cost of ``node``; a Fused node is one kernel whose work is the sum of its body."""
    cost = OpCost()
    for out in node.outputs:
        b = value_bytes(out, float_bytes)
        if b is None:
            cost.unknown_shapes += 1
            continue
        cost.outputs.append((out.name, b))
        cost.out_elems += out.type.numel or 0
    window = _window(node)
    for i, v in enumerate(node.inputs):
        if v is None:
            continue
        b = value_bytes(v, float_bytes)
        if b is None:
            cost.unknown_shapes += 1
        elif v.const is not None:
            cost.weight_bytes += b
        else:
            whole = Flag.WHOLE_INPUT in op_traits(node.op, node.domain).flags or (node.op == "MatMul" and i == 1)
            cost.inputs.append((v.name, b, 2 * b if whole else tile_bytes(v, b, window)))
    body = node.attrs.get("body") if node.op == "Fused" else None
    if body is not None:
        for inner in body.nodes:
            inner_cost = op_cost(inner, float_bytes)
            cost.flops += inner_cost.flops
            cost.weight_bytes += inner_cost.weight_bytes
            cost.link_bytes += inner_cost.link_bytes
            cost.link_steps += inner_cost.link_steps
    else:
        cost.flops = _flops(node, cost.out_elems)
    if node.op == "AllReduce" and node.domain == NNBRIDGE_DOMAIN:
        # reduce-scatter then all-gather over fully connected sockets: each sends 2(N−1)/N of the
        # tensor, in two latency steps
        sockets = int(node.attr("sockets", 1))
        if sockets > 1:
            cost.link_bytes = 2 * (sockets - 1) / sockets * sum(b for _, b in cost.outputs)
            cost.link_steps = 2
    return cost


def _window(node: Node) -> int:
    kernel = node.attrs.get("kernel_shape")  # (no schema default)
    if kernel:
        return int(kernel[0])
    if node.op in ("Conv", "ConvTranspose") and len(node.inputs) > 1 and node.inputs[1] is not None:
        shape = node.inputs[1].type.shape
        if shape and len(shape) > 2 and isinstance(shape[2], int):
            return shape[2]
    return 1


def _flops(node: Node, out_elems: int) -> float:
    op = node.op
    x = node.input(0)
    w = node.input(1)
    if op == "Conv" and w is not None and w.type.is_static:
        macs = out_elems * math.prod(w.type.shape[1:])
        return 2.0 * macs + (out_elems if node.input(2) is not None else 0)
    if op == "ConvTranspose" and w is not None and w.type.is_static and numel(x):
        return 2.0 * (numel(x) or 0) * math.prod(w.type.shape[1:])
    if op in ("MatMul", "Gemm") and x is not None and x.type.shape:
        k = x.type.shape[-1] if not (op == "Gemm" and node.attr("transA", 0)) else x.type.shape[0]
        if isinstance(k, int):
            return 2.0 * out_elems * k + (out_elems if op == "Gemm" and node.input(2) is not None else 0)
    if op in ("MaxPool", "AveragePool", "LpPool"):
        return float(out_elems * math.prod(node.attr("kernel_shape") or [1]))
    if node.domain == TRAINING_DOMAIN and op in _OPTIMIZER_ROLES:
        return _optimizer_flops(node)
    traits = op_traits(op, node.domain)
    pattern = traits.pattern
    if pattern is PatternKind.COMM_REDUCE:
        return float(numel(x) or out_elems)
    if pattern is PatternKind.INJECTIVE:
        return 0.0
    return float(out_elems * traits.flops_per_element)


#: tensors per weight of ONNX's optimizer ops (X, G and the states), after their inputs R and T
_OPTIMIZER_ROLES = {"Momentum": 3, "Adagrad": 3, "Adam": 4}


def _optimizer_flops(node: Node) -> float:
    """One update of every weight, counted from the op's own formulas (onnx's
    ai.onnx.preview.training, as ``kernels/ops/optimizers.py`` computes them): per element,
    weight decay ``g + λx`` 2, and
    Momentum: ``v = αv + βg`` 3 (2 with β = 1), ``x − r·v`` 2 (Nesterov ``x − r(g + αv)`` 4);
    Adam: ``v = αv + (1−α)g`` 3, ``h = βh + (1−β)g²`` 4, ``x − r·v / (√h + ε)`` 4 + √, then
    ``(1 − λ_post)·x`` 1; Adagrad: ``h + g²`` 2, ``x − r·g / (√h + ε)`` 4 + √."""
    op = node.op
    count = (len(node.inputs) - 2) // _OPTIMIZER_ROLES[op]
    weights = sum(numel(v) or 0 for v in node.inputs[2:2 + count])
    sqrt = op_traits("Sqrt").flops_per_element
    decay = 2 if node.attr("norm_coefficient", 0.0) else 0
    if op == "Momentum":
        per = decay + (2 if node.attr("beta", 1.0) == 1.0 else 3) + (4 if node.attr("mode") == "nesterov" else 2)
    elif op == "Adam":
        per = decay + 3 + 4 + 4 + sqrt + (1 if node.attr("norm_coefficient_post", 0.0) else 0)
    else:
        per = decay + 2 + 4 + sqrt
    return float(weights * per)
