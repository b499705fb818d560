"""nnbridge's intermediate representation (imports neither converters nor backends)."""

from . import nnbridge_ops  # noqa: F401 - registers the nnbridge-domain schemas
from .dtypes import DType
from .graph import Graph, Node, Value
from .passes import PassManager, register_pass, run_passes
from .printer import format_graph
from .schema import IR_OPSET, NNBRIDGE_DOMAIN, OpSchema, PatternKind, get_schema, register_schema
from .types import Layout, TensorType, TypeKind

__all__ = [
    "DType", "Graph", "Node", "Value", "PassManager", "register_pass", "run_passes",
    "format_graph", "IR_OPSET", "NNBRIDGE_DOMAIN", "OpSchema", "PatternKind", "get_schema",
    "register_schema", "Layout", "TensorType", "TypeKind",
]
