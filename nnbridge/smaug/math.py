"""Elementwise ops in SMAUG's frontend style; broadcasts are materialised with Repeat nodes."""

from __future__ import annotations

from ..errors import InputError
from ..protos.smaug import smaug_types_pb2 as pb
from .graph import Tensor, graph_of
from .tensor import repeat


def _binary(op: int, a: Tensor, b: Tensor, name: str, data_type: int | None = None) -> Tensor:
    g = graph_of(a, b)
    a, b = g.operand(a), g.operand(b)
    if len(a.dims) != len(b.dims):
        raise InputError(f"{name}: operands of rank {len(a.dims)} and {len(b.dims)}")
    dims = [max(x, y) for x, y in zip(a.dims, b.dims)]
    if a.dims != dims:
        a = repeat(a, [d // x for d, x in zip(dims, a.dims)])
    if b.dims != dims:
        b = repeat(b, [d // x for d, x in zip(dims, b.dims)])
    return g.add_node(op, name, [a, b], [(dims, a.data_layout)], data_type=data_type)[1][0]


def add(tensor_a: Tensor, tensor_b: Tensor, name: str = "add") -> Tensor:
    return _binary(pb.EltwiseAdd, tensor_a, tensor_b, name)


def mul(tensor_a: Tensor, tensor_b: Tensor, name: str = "mul") -> Tensor:
    return _binary(pb.EltwiseMul, tensor_a, tensor_b, name)


def less(tensor_a: Tensor, tensor_b: Tensor, name: str = "less") -> Tensor:
    return _binary(pb.Less, tensor_a, tensor_b, name, pb.Bool)


def less_equal(tensor_a: Tensor, tensor_b: Tensor, name: str = "less_equal") -> Tensor:
    return _binary(pb.LessEqual, tensor_a, tensor_b, name, pb.Bool)


def greater(tensor_a: Tensor, tensor_b: Tensor, name: str = "greater") -> Tensor:
    return _binary(pb.Greater, tensor_a, tensor_b, name, pb.Bool)


def greater_equal(tensor_a: Tensor, tensor_b: Tensor, name: str = "greater_equal") -> Tensor:
    return _binary(pb.GreaterEqual, tensor_a, tensor_b, name, pb.Bool)
