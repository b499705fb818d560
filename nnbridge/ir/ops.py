"""The op-traits table: what nnbridge knows about each op besides its ONNX schema, in one place.

One row per op: its fusion pattern (Relay's TOpPattern), its shape rule where the output type
follows from the inputs without onnx's inference, its cost (FLOP per output element where no
contraction rule applies), and its flags. The passes (fusion, layout, folding, shape inference),
the cost models and the converters read these traits instead of keeping op lists of their own;
an op absent from the table is opaque, inferred by onnx, 1 FLOP per element, foldable.

Adding an op is one ``register_op(OpTraits(...))`` (plus a kernel, for it to run); the table
below is the same thing for the built-in ops. ``gradient`` and ``decompositions`` are the slots
training and per-target lowering fill.
"""

from __future__ import annotations

import enum
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import Any

from ..base.registry import Registry
from .decompositions import DECOMPOSITIONS
from .gradients import RULES
from .schema import OpSchema, PatternKind, register_schema


class ShapeRule(enum.Enum):
    SAME = "same"            # one input, one output of the input's dtype and shape
    BROADCAST = "broadcast"  # inputs of one dtype, output of that dtype and their broadcast shape
    TRANSPOSE = "transpose"  # one input; its dims permuted by ``perm`` (default: reversed)
    MATMUL = "matmul"        # two inputs of one dtype; numpy's matmul shape (batch dims broadcast)
    INFERRED = "-"           # onnx's shape inference or the op's own rule


class Flag(enum.Enum):
    NO_FOLD = "no-fold"            # never evaluated at compile time (random, control flow)
    WHOLE_INPUT = "whole-input"    # needs random access to its first streamed input (buffered whole)
    LAYOUT_BOUND = "layout-bound"  # elementwise in pattern, but an axis means channels
    KEEPS_INTS = "keeps-ints"      # elementwise op that keeps integer values integral


@dataclass(frozen=True)
class OpTraits:
    op: str
    domain: str = ""
    pattern: PatternKind = PatternKind.OPAQUE
    shape: ShapeRule = ShapeRule.INFERRED
    flops_per_element: float = 1.0
    flags: frozenset[Flag] = frozenset()
    #: input slots laid out like the activation (a conv's weight follows its data): the op computes
    #: "as if NCHW" when its data input is NHWC, so the layout passes can move it between the two
    spatial_slots: tuple[int, ...] = ()
    #: the schema of an op outside ONNX (registered with the traits)
    schema: OpSchema | None = None

    @property
    def foldable(self) -> bool:
        return Flag.NO_FOLD not in self.flags

    @property
    def gradient(self) -> Callable[..., Any] | None:
        """Reverse-mode rule, (node, output gradients) → input gradients (``gradients.RULES``), looked
        up live so a rule registered after the row (or for an op without a row) is found."""
        return RULES.get((self.domain, self.op))

    @property
    def decompositions(self) -> Mapping[str, Callable[..., Any]]:
        """Target name → rewrite of the node into ops the target has (``decompositions.DECOMPOSITIONS``)."""
        return {target: fn for (domain, op, target), fn in DECOMPOSITIONS.items()
                if op == self.op and domain == self.domain}


OP_TRAITS: Registry[tuple[str, str], OpTraits] = Registry("op traits")


def register_op(traits: OpTraits) -> OpTraits:
    """Add an op's row (and its schema, for an op outside ONNX); a second row for an op is an error."""
    if traits.schema is not None:
        register_schema(traits.schema)
    return OP_TRAITS.register((traits.domain, traits.op), traits, origin=_caller())


def op_traits(op: str, domain: str = "") -> OpTraits:
    """The row of ``op`` (the defaults for ops the table does not list)."""
    domain = "" if domain == "ai.onnx" else domain
    found = OP_TRAITS.get((domain, op))
    return found if found is not None else OpTraits(op, domain)


def pattern_kind(op: str, domain: str = "") -> PatternKind:
    return op_traits(op, domain).pattern


def _caller() -> str:
    import sys

    frame = sys._getframe(2)
    return f"{frame.f_globals.get('__name__')}:{frame.f_lineno}"


_PATTERNS = {"elemwise": PatternKind.ELEMWISE, "broadcast": PatternKind.BROADCAST,
             "injective": PatternKind.INJECTIVE, "reduce": PatternKind.COMM_REDUCE,
             "out-fusable": PatternKind.OUT_ELEMWISE_FUSABLE, "opaque": PatternKind.OPAQUE}

#: op, pattern, shape rule, FLOP per output element, flags (``spatial=0,1``: spatial slots)
_TABLE = """
Abs                     elemwise     same       1
Acos                    elemwise     same       1
Acosh                   elemwise     same       1
Asin                    elemwise     same       1
Asinh                   elemwise     same       1
Atan                    elemwise     same       1
Atanh                   elemwise     same       1
BitwiseNot              elemwise     same       1
Cast                    elemwise     -          1      keeps-ints
CastLike                elemwise     -          1      keeps-ints
Ceil                    elemwise     same       1
Celu                    elemwise     same       3
Clip                    elemwise     -          1
Cos                     elemwise     same       1
Cosh                    elemwise     same       1
Dropout                 elemwise     -          1
Elu                     elemwise     same       3
Erf                     elemwise     same       4
Exp                     elemwise     same       2
Floor                   elemwise     same       1
Gelu                    elemwise     same       8
HardSigmoid             elemwise     same       2
HardSwish               elemwise     same       3
Identity                elemwise     same       1      keeps-ints
IsInf                   elemwise     -          1
IsNaN                   elemwise     -          1
LeakyRelu               elemwise     same       1
Log                     elemwise     same       2
Mish                    elemwise     same       6
Neg                     elemwise     same       1
Not                     elemwise     same       1
Reciprocal              elemwise     same       1
Relu                    elemwise     same       1
Round                   elemwise     same       1
Selu                    elemwise     same       3
Shrink                  elemwise     same       1
Sigmoid                 elemwise     same       4
Sign                    elemwise     same       1
Sin                     elemwise     same       1
Sinh                    elemwise     same       1
Softplus                elemwise     same       3
Softsign                elemwise     same       1
Sqrt                    elemwise     same       2
Swish                   elemwise     same       5
Tan                     elemwise     same       1
Tanh                    elemwise     same       4
ThresholdedRelu         elemwise     same       1
Add                     broadcast    broadcast  1
And                     broadcast    broadcast  1
BatchNormalization      broadcast    -          2      layout-bound spatial=0
BitShift                broadcast    broadcast  1
BitwiseAnd              broadcast    broadcast  1
BitwiseOr               broadcast    broadcast  1
BitwiseXor              broadcast    broadcast  1
Div                     broadcast    broadcast  1
Equal                   broadcast    -          1
Expand                  broadcast    -          1      layout-bound
Greater                 broadcast    -          1
GreaterOrEqual          broadcast    -          1
Less                    broadcast    -          1
LessOrEqual             broadcast    -          1
Max                     broadcast    broadcast  1
Mean                    broadcast    broadcast  1
Min                     broadcast    broadcast  1
Mod                     broadcast    broadcast  1
Mul                     broadcast    broadcast  1
Or                      broadcast    broadcast  1
PRelu                   broadcast    broadcast  1
Pow                     broadcast    broadcast  2
Sub                     broadcast    broadcast  1
Sum                     broadcast    broadcast  1
Where                   broadcast    -          1
Xor                     broadcast    broadcast  1
Compress                injective    -          1
Concat                  injective    -          1
DepthToSpace            injective    -          1      whole-input
Flatten                 injective    -          1
Gather                  injective    -          1      whole-input
GatherElements          injective    -          1      whole-input
GatherND                injective    -          1      whole-input
Pad                     injective    -          1
Reshape                 injective    -          1
ReverseSequence         injective    -          1      whole-input
Slice                   injective    -          1
SpaceToDepth            injective    -          1      whole-input
Split                   injective    -          1
Squeeze                 injective    -          1
Tile                    injective    -          1
Transpose               injective    transpose  1      whole-input
Trilu                   injective    -          1
Unsqueeze               injective    -          1
ArgMax                  reduce       -          1
ArgMin                  reduce       -          1
GlobalAveragePool       reduce       -          1            spatial=0
GlobalLpPool            reduce       -          1
GlobalMaxPool           reduce       -          1            spatial=0
ReduceL1                reduce       -          1
ReduceL2                reduce       -          1
ReduceLogSum            reduce       -          1
ReduceLogSumExp         reduce       -          1
ReduceMax               reduce       -          1
ReduceMean              reduce       -          1
ReduceMin               reduce       -          1
ReduceProd              reduce       -          1
ReduceSum               reduce       -          1
ReduceSumSquare         reduce       -          1
AveragePool             out-fusable  -          1            spatial=0
Conv                    out-fusable  -          1            spatial=0,1
ConvTranspose           out-fusable  -          1
Einsum                  out-fusable  -          1      whole-input
Gemm                    out-fusable  -          1
GroupNormalization      out-fusable  -          8
InstanceNormalization   out-fusable  -          8
LRN                     out-fusable  same       1            spatial=0
LayerNormalization      out-fusable  -          8
LogSoftmax              out-fusable  same       6
LpPool                  out-fusable  -          1
MatMul                  out-fusable  matmul     1
MaxPool                 out-fusable  -          1            spatial=0
Resize                  out-fusable  -          1      whole-input
Softmax                 out-fusable  same       5
Bernoulli               opaque       -          1      no-fold
If                      opaque       -          1      no-fold
Loop                    opaque       -          1      no-fold
Multinomial             opaque       -          1      no-fold
RandomNormal            opaque       -          1      no-fold
RandomNormalLike        opaque       -          1      no-fold
RandomUniform           opaque       -          1      no-fold
RandomUniformLike       opaque       -          1      no-fold
Scan                    opaque       -          1      no-fold
"""


def _load_table() -> None:
    """The rows above (an op's gradient and decompositions are found through its row's properties)."""
    for line in _TABLE.strip().splitlines():
        op, pattern, shape, flops, *flags = line.split()
        slots = tuple(int(i) for f in flags if f.startswith("spatial=") for i in f[8:].split(","))
        flags = [f for f in flags if not f.startswith("spatial=")]
        OP_TRAITS.register(("", op), OpTraits(op, "", _PATTERNS[pattern], ShapeRule(shape), float(flops),
                                              frozenset(Flag(f) for f in flags), slots),
                           origin=f"{__name__}._TABLE")


_load_table()
