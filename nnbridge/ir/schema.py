"""Op schemas: arity, attribute defaults and fusion pattern kind of every IR op.

Standard ops take arity and attribute defaults from ``onnx.defs`` at the IR opset
(one source of truth, not a copy). nnbridge-domain ops (layout ``Reorder``, fused
groups, SMAUG's ``Repeat`` …) register their own schema with ``register_schema``.
The pattern kinds follow NNVM/TVM (specs/passes.md §1) and drive fusion and the
RDU partitioner.
"""

from __future__ import annotations

import enum
import functools
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

import onnx.defs
from onnx import helper

from ..errors import NNBridgeError

if TYPE_CHECKING:
    from .graph import Node

#: The one ONNX opset whose semantics IR ops follow: the newest that
#: ``onnx.version_converter`` reaches for every test model and that onnxruntime
#: 1.31 (our oracle) still runs, so every exported model can be cross-checked.
IR_OPSET = 26

#: Domain of nnbridge's own ops.
NNBRIDGE_DOMAIN = "nnbridge"


class PatternKind(enum.IntEnum):
    """Relay's TOpPattern values (specs/passes.md §1)."""

    ELEMWISE = 0
    BROADCAST = 1
    INJECTIVE = 2
    COMM_REDUCE = 3
    OUT_ELEMWISE_FUSABLE = 4
    TUPLE = 7
    OPAQUE = 8


_ELEMWISE = """Abs Acos Acosh Asin Asinh Atan Atanh BitwiseNot Cast CastLike Ceil Celu Clip Cos
Cosh Elu Erf Exp Floor Gelu HardSigmoid HardSwish Identity IsInf IsNaN LeakyRelu Log Mish Neg
Not Reciprocal Relu Round Selu Shrink Sigmoid Sign Sin Sinh Softplus Softsign Sqrt Swish Tan
Tanh ThresholdedRelu Dropout""".split()
_BROADCAST = """Add And BitShift BitwiseAnd BitwiseOr BitwiseXor Div Equal Greater GreaterOrEqual
Less LessOrEqual Max Mean Min Mod Mul Or Pow PRelu Sub Sum Where Xor BatchNormalization
Expand""".split()
_INJECTIVE = """Concat DepthToSpace Flatten Gather GatherElements GatherND Pad Reshape Slice
SpaceToDepth Split Squeeze Tile Transpose Unsqueeze Reorder Repeat ReverseSequence Trilu
Compress""".split()
_REDUCE = """ArgMax ArgMin GlobalAveragePool GlobalMaxPool GlobalLpPool ReduceL1 ReduceL2
ReduceLogSum ReduceLogSumExp ReduceMax ReduceMean ReduceMin ReduceProd ReduceSum
ReduceSumSquare""".split()
_OUT_FUSABLE = """Conv ConvTranspose Gemm MatMul MaxPool AveragePool LpPool Softmax LogSoftmax
LayerNormalization InstanceNormalization GroupNormalization LRN Einsum Resize""".split()

PATTERN_KINDS: dict[str, PatternKind] = {
    **{op: PatternKind.ELEMWISE for op in _ELEMWISE},
    **{op: PatternKind.BROADCAST for op in _BROADCAST},
    **{op: PatternKind.INJECTIVE for op in _INJECTIVE},
    **{op: PatternKind.COMM_REDUCE for op in _REDUCE},
    **{op: PatternKind.OUT_ELEMWISE_FUSABLE for op in _OUT_FUSABLE},
}


@dataclass(frozen=True)
class OpSchema:
    name: str
    domain: str = ""
    min_inputs: int = 0
    max_inputs: int = 2**31
    min_outputs: int = 1
    max_outputs: int = 2**31
    attr_defaults: dict[str, Any] = field(default_factory=dict)
    required_attrs: frozenset[str] = frozenset()
    pattern: PatternKind = PatternKind.OPAQUE
    doc: str = ""

    def check_arity(self, node: Node) -> None:
        n_in = len(node.inputs)
        while n_in and node.inputs[n_in - 1] is None:
            n_in -= 1
        if not self.min_inputs <= n_in <= self.max_inputs:
            raise NNBridgeError(
                f"node '{node.name}' ({node.op}) has {n_in} inputs; "
                f"{self.name} takes {self.min_inputs}..{self.max_inputs}"
            )
        if not self.min_outputs <= len(node.outputs) <= self.max_outputs:
            raise NNBridgeError(
                f"node '{node.name}' ({node.op}) has {len(node.outputs)} outputs; "
                f"{self.name} makes {self.min_outputs}..{self.max_outputs}"
            )


_CUSTOM: dict[tuple[str, str], OpSchema] = {}


def register_schema(schema: OpSchema) -> OpSchema:
    """Register a non-ONNX op (normally in the ``nnbridge`` domain)."""
    _CUSTOM[(schema.domain, schema.name)] = schema
    return schema


@functools.cache
def _onnx_schema(op: str, domain: str) -> OpSchema | None:
    try:
        s = onnx.defs.get_schema(op, IR_OPSET, domain)
    except onnx.defs.SchemaError:
        try:  # ops newer than the IR opset, or of other domains (ai.onnx.ml …)
            s = onnx.defs.get_schema(op, domain)
        except onnx.defs.SchemaError:
            return None
    defaults: dict[str, Any] = {}
    required = set()
    for name, a in s.attributes.items():
        if a.required:
            required.add(name)
        elif a.default_value is not None and a.default_value.type != 0:
            defaults[name] = helper.get_attribute_value(a.default_value)
            if isinstance(defaults[name], bytes):
                defaults[name] = defaults[name].decode()
        else:
            defaults[name] = None
    return OpSchema(
        name=op,
        domain=domain,
        min_inputs=s.min_input,
        max_inputs=s.max_input,
        min_outputs=s.min_output,
        max_outputs=s.max_output,
        attr_defaults=defaults,
        required_attrs=frozenset(required),
        pattern=PATTERN_KINDS.get(op, PatternKind.OPAQUE),
        doc=(s.doc or "").strip().split("\n")[0],
    )


def get_schema(op: str, domain: str = "") -> OpSchema | None:
    """The schema of ``op`` (None for ops nobody registered)."""
    domain = "" if domain == "ai.onnx" else domain
    if (domain, op) in _CUSTOM:
        return _CUSTOM[(domain, op)]
    if domain == NNBRIDGE_DOMAIN:
        return None
    return _onnx_schema(op, domain)


def pattern_kind(op: str, domain: str = "") -> PatternKind:
    schema = get_schema(op, domain)
    return schema.pattern if schema is not None else PatternKind.OPAQUE
