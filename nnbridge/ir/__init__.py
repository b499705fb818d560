"""nnbridge's intermediate representation (imports no other nnbridge package)."""

from . import nnbridge_ops  # noqa: F401 - registers the nnbridge-domain schemas
from .dtypes import DType
from .graph import Graph, Node, Value
from .ops import OP_TRAITS, Flag, OpTraits, ShapeRule, op_traits, pattern_kind, register_op
from .printer import format_graph
from .schema import (
    IR_OPSET,
    NNBRIDGE_DOMAIN,
    NNBRIDGE_TRAINING_DOMAIN,
    TRAINING_DOMAIN,
    OpSchema,
    PatternKind,
    get_schema,
    register_schema,
)
from .types import Layout, TensorType, TypeKind

__all__ = [
    "DType", "Graph", "Node", "Value",
    "format_graph", "IR_OPSET", "NNBRIDGE_DOMAIN", "NNBRIDGE_TRAINING_DOMAIN", "TRAINING_DOMAIN", "OpSchema",
    "PatternKind", "get_schema", "register_schema", "Layout", "TensorType", "TypeKind", "OP_TRAITS", "Flag",
    "OpTraits", "ShapeRule", "op_traits", "pattern_kind", "register_op",
]
