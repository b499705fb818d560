"""nnbridge's own ops (domain ``nnbridge``): their schemas and traits, shared by converters,
passes and backends. Each op documents its semantics and its ONNX export. The training ops (domain
``nnbridge.training``) exist only in training graphs; a writer keeps them as custom-domain ops.
"""

from __future__ import annotations

from .ops import Flag, OpTraits, register_op
from .schema import NNBRIDGE_DOMAIN, NNBRIDGE_TRAINING_DOMAIN, OpSchema, PatternKind

#: Reorder(x) {perm, src_layout, dst_layout}: a layout change (a transpose whose
#: meaning is "same tensor, other layout"); exports to ONNX Transpose.
REORDER = register_op(OpTraits(
    "Reorder", NNBRIDGE_DOMAIN, PatternKind.INJECTIVE, flags=frozenset({Flag.WHOLE_INPUT}),
    schema=OpSchema("Reorder", NNBRIDGE_DOMAIN, 1, 1, 1, 1,
                    {"perm": None, "src_layout": None, "dst_layout": None}, frozenset({"perm"}),
                    "layout change (exports to Transpose)"),
)).schema

#: Repeat(x) {multiples}: SMAUG's broadcast materialisation; exports to ONNX Tile.
REPEAT = register_op(OpTraits(
    "Repeat", NNBRIDGE_DOMAIN, PatternKind.INJECTIVE,
    schema=OpSchema("Repeat", NNBRIDGE_DOMAIN, 1, 1, 1, 1, {"multiples": None}, frozenset({"multiples"}),
                    "SMAUG Repeat (exports to Tile)"),
)).schema

#: Switch(data, pred) -> (if_false, if_true): SMAUG's control-flow switch. The IR computes both
#: branches of a conditional, so both outputs are ``data``; the ``Where`` that joins the branches
#: (SMAUG's Merge) picks one. Kept as an op (never folded) so that a SMAUG file's switches are
#: written back where they were; exports to ONNX as two Identity nodes.
SWITCH = register_op(OpTraits(
    "Switch", NNBRIDGE_DOMAIN, PatternKind.OPAQUE, flags=frozenset({Flag.NO_FOLD}),
    schema=OpSchema("Switch", NNBRIDGE_DOMAIN, 2, 2, 2, 2, {}, frozenset(),
                    "SMAUG Switch: both outputs are the data (exports to two Identity nodes)"),
)).schema

#: Fused(inputs…) {body: Graph, kind: str}: a fused group that a backend runs as one
#: kernel; the body's inputs bind positionally; exports by inlining the body.
FUSED = register_op(OpTraits(
    "Fused", NNBRIDGE_DOMAIN, PatternKind.OPAQUE,
    schema=OpSchema("Fused", NNBRIDGE_DOMAIN, 0, 2**31, 1, 2**31, {"body": None, "kind": "", "anchor": ""},
                    frozenset({"body"}), "fused group (exports inlined)"),
)).schema

#: AllReduce(x) {sockets}: the sum of x over the tensor-parallel sockets of a multi-socket model
#: (zoo/llm.py); one socket's graph computes with its own partial sum (the others are not
#: simulated), and the RDU model prices the exchange on the inter-socket links. Exports to Identity.
ALL_REDUCE = register_op(OpTraits(
    "AllReduce", NNBRIDGE_DOMAIN, PatternKind.OPAQUE, flags=frozenset({Flag.NO_FOLD}),
    schema=OpSchema("AllReduce", NNBRIDGE_DOMAIN, 1, 1, 1, 1, {"sockets": None}, frozenset({"sockets"}),
                    "sum over tensor-parallel sockets (exports to Identity)"),
)).schema

# -- training (domain ``nnbridge.training``): what the training form writes, never a file format ---------

#: BatchNormTraining(X, scale, B, input_mean, input_var) {epsilon, momentum, unbiased}
#: -> (Y, running_mean, running_var, saved_inv_std): BatchNorm in training mode as one kernel. Y
#: normalizes X with the batch's per-channel mean and biased variance (over axes 0, 2, …); the
#: running statistics move by ``momentum`` (ONNX's: new = old·momentum + batch·(1 − momentum))
#: towards the batch's mean and its biased variance, or with ``unbiased`` its unbiased one
#: (n / (n − 1) times: torch's); 1 / √(var + ε) is kept for the backward op.
BATCH_NORM_TRAINING = register_op(OpTraits(
    "BatchNormTraining", NNBRIDGE_TRAINING_DOMAIN, PatternKind.OPAQUE, flops_per_element=7,
    flags=frozenset({Flag.WHOLE_INPUT}),
    schema=OpSchema("BatchNormTraining", NNBRIDGE_TRAINING_DOMAIN, 5, 5, 4, 4,
                    {"epsilon": 1e-5, "momentum": 0.9, "unbiased": 0}, frozenset(),
                    "BatchNorm on the batch's statistics, updating the running ones (training form)"),
)).schema

#: BatchNormTrainingGrad(dY, X, scale, saved_inv_std) -> (dX, dscale, dB): the gradients of
#: BatchNormTraining's Y with respect to X (through the batch statistics), scale and B; the batch
#: mean is taken again from X.
BATCH_NORM_TRAINING_GRAD = register_op(OpTraits(
    "BatchNormTrainingGrad", NNBRIDGE_TRAINING_DOMAIN, PatternKind.OPAQUE, flops_per_element=8,
    flags=frozenset({Flag.WHOLE_INPUT}),
    schema=OpSchema("BatchNormTrainingGrad", NNBRIDGE_TRAINING_DOMAIN, 4, 4, 3, 3, {}, frozenset(),
                    "the gradients of BatchNormTraining's output (dX, dscale, dB)"),
)).schema

#: LayerNormalizationGrad(dY, X, scale) {axis, epsilon} -> (dX, dscale, dB): the gradients of ONNX's
#: LayerNormalization (scale and B of the normalized shape) with respect to X (through the row
#: statistics, taken again from X), scale and B.
LAYER_NORM_GRAD = register_op(OpTraits(
    "LayerNormalizationGrad", NNBRIDGE_TRAINING_DOMAIN, PatternKind.OPAQUE, flops_per_element=10,
    flags=frozenset({Flag.WHOLE_INPUT}),
    schema=OpSchema("LayerNormalizationGrad", NNBRIDGE_TRAINING_DOMAIN, 3, 3, 3, 3, {"axis": -1, "epsilon": 1e-5},
                    frozenset(), "the gradients of LayerNormalization's output (dX, dscale, dB)"),
)).schema
