"""Layer, operator, initializer, optimizer and callback classes generated from the schema.

Like LBANN's own frontend, the classes are not written by hand: one class per
member of ``Layer.layer_type`` (named after its message: ``Convolution``,
``FullyConnected``, ``TensorPermute`` …), one per ``*Operator`` message
(``Sigmoid``, ``Add``, ``Scale`` … building an ``operator_layer``), and one per
initializer, optimizer and callback message. Every schema field is a keyword
argument, so the classes can never drift from ``nnbridge/protos/lbann``.
"""

from __future__ import annotations

from typing import Any

from ..protos.lbann import lbann_pb2
from .core import Layer, OperatorLayer, _Message


class Input(Layer):
    """An input layer; ``dims`` (per sample, no batch dim) is nnbridge's addition, recorded
    in the prototext header because LBANN takes input shapes from its data reader."""

    kind = "input"

    def __init__(self, data_field: str = "samples", *, dims: Any = None, name: str | None = None, **fields: Any):
        super().__init__(name=name, data_field=data_field, **fields)
        self.dims = None if dims is None else tuple(int(d) for d in dims)


def _layer_classes() -> dict[str, type]:
    found: dict[str, type] = {}
    oneof = lbann_pb2.Layer.DESCRIPTOR.oneofs_by_name["layer_type"]
    for field in oneof.fields:
        name = field.message_type.name
        if field.name == "input":
            found[name] = Input
        elif field.name == "operator_layer":
            found[name] = OperatorLayer
        else:
            found[name] = type(name, (Layer,), {"kind": field.name, "__doc__": f"LBANN ``{field.name}`` layer."})
    return found


def _operator_classes(taken: set[str]) -> dict[str, type]:
    found: dict[str, type] = {}
    for name in lbann_pb2.DESCRIPTOR.message_types_by_name:
        short = name.removesuffix("Operator")
        if name.endswith("Operator") and short and short not in taken:
            found[short] = type(short, (OperatorLayer,), {
                "operator": getattr(lbann_pb2, name), "__doc__": f"``operator_layer`` with {name}."})
    return found


def _member_classes(container, oneof: str) -> dict[str, type]:
    found: dict[str, type] = {}
    for field in container.DESCRIPTOR.oneofs_by_name[oneof].fields:
        name = field.message_type.name
        found[name] = type(name, (_Message,), {"container": container, "member": field.name,
                                               "__doc__": f"``{container.DESCRIPTOR.name}.{field.name}``."})
    return found


LAYERS = _layer_classes()
OPERATORS = _operator_classes(set(LAYERS))
INITIALIZERS = _member_classes(lbann_pb2.Initializer, "initializer_type")
OPTIMIZERS = _member_classes(lbann_pb2.Optimizer, "optimizer_type")
CALLBACKS = _member_classes(lbann_pb2.Callback, "callback_type")
ALL = {**LAYERS, **OPERATORS, **INITIALIZERS, **OPTIMIZERS, **CALLBACKS}
