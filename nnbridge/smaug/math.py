"""Elementwise ops in SMAUG's frontend style; broadcasts are materialised with Repeat nodes."""

from __future__ import annotations

from ..protos.smaug import smaug_types_pb2 as pb
from .graph import Tensor, graph_of
from .tensor import broadcast_inputs


def _binary(op: int, a: Tensor, b: Tensor, name: str, data_type: int | None = None) -> Tensor:
    if list(a.shape.dims) != list(b.shape.dims):
        a, b = broadcast_inputs(a, b, name)
    return graph_of(a, b).add_node(name, op, [a, b], [list(a.shape.dims)], a.shape.layout,
                                   data_type if data_type is not None else a.data_type)[0]


def add(tensor_a: Tensor, tensor_b: Tensor, name: str = "add") -> Tensor:
    return _binary(pb.EltwiseAdd, tensor_a, tensor_b, name)


def mul(tensor_a: Tensor, tensor_b: Tensor, name: str = "mul") -> Tensor:
    return _binary(pb.EltwiseMul, tensor_a, tensor_b, name)


def less(tensor_a: Tensor, tensor_b: Tensor, name: str = "less") -> Tensor:
    return _binary(pb.Less, tensor_a, tensor_b, name, pb.Bool)


def less_equal(tensor_a: Tensor, tensor_b: Tensor, name: str = "less_equal") -> Tensor:
    return _binary(pb.LessEqual, tensor_a, tensor_b, name, pb.Bool)


def greater(tensor_a: Tensor, tensor_b: Tensor, name: str = "great") -> Tensor:
    """a > b. The default node name is "great", as in SMAUG's frontend."""
    return _binary(pb.Greater, tensor_a, tensor_b, name, pb.Bool)


def greater_equal(tensor_a: Tensor, tensor_b: Tensor, name: str = "great_equal") -> Tensor:
    """a >= b. The default node name is "great_equal", as in SMAUG's frontend."""
    return _binary(pb.GreaterEqual, tensor_a, tensor_b, name, pb.Bool)
