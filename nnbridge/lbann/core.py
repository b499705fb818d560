"""Layer graph objects in the spirit of LBANN's Python frontend.

A ``Layer`` takes its parents as the first argument and every field of its
LBANN message as a keyword argument; ``Weights`` hold an initializer and an
optimizer; ``Model`` gathers the layer graph with its objective function,
metrics and callbacks. Everything turns into the Era C protobuf messages of
``nnbridge/protos/lbann`` (``export_proto``), so a model built here is written
by the same printer as converted models, and read back into the IR by the same
reader, which is how it reaches ONNX and SMAUG.
"""

from __future__ import annotations

import itertools
import os
from collections.abc import Iterable, Mapping, Sequence
from pathlib import Path
from typing import Any

import numpy as np
from google.protobuf.message import Message

from ..errors import InputError
from ..protos.lbann import lbann_pb2

_WRAPPERS = {"google.protobuf.BoolValue", "google.protobuf.Int64Value", "google.protobuf.UInt64Value",
             "google.protobuf.DoubleValue"}
_ids = itertools.count(1)


def assign(message: Message, fields: Mapping[str, Any]) -> Message:
    """Set message fields from Python values (lists for repeated fields, plain values for wrappers)."""
    by_name = message.DESCRIPTOR.fields_by_name
    for key, value in fields.items():
        if value is None:
            continue
        field = by_name.get(key)
        if field is None:
            raise InputError(f"{message.DESCRIPTOR.name} has no field '{key}'; fields: {', '.join(sorted(by_name))}")
        if isinstance(value, np.ndarray):
            value = value.tolist()
        target = getattr(message, key)
        if field.message_type is not None and field.message_type.full_name in _WRAPPERS:
            target.value = value
        elif field.is_repeated:
            values = value if isinstance(value, (list, tuple)) else [value]
            if field.message_type is not None:
                for item in values:
                    target.add().CopyFrom(_as_message(item))
            else:
                target.extend(values)
        elif isinstance(value, Mapping):
            assign(target, value)
        elif field.message_type is not None:
            target.CopyFrom(_as_message(value))
        else:
            setattr(message, key, value)
    return message


def _as_message(value: Any) -> Message:
    return value.export_proto() if hasattr(value, "export_proto") else value


def _as_list(value: Any) -> list:
    if value is None:
        return []
    return list(value) if isinstance(value, (list, tuple)) else [value]


class Weights:
    """A named weights object: ``Weights(initializer=ValueInitializer(values=…), optimizer=None)``."""

    def __init__(self, initializer: Any = None, optimizer: Any = None, name: str | None = None,
                 datatype: Any = None):
        self.name = name or f"weights{next(_ids)}"
        self.initializer = initializer
        self.optimizer = optimizer
        self.datatype = datatype

    def export_proto(self) -> lbann_pb2.Weights:
        proto = lbann_pb2.Weights(name=self.name)
        if self.initializer is not None:
            proto.initializer.CopyFrom(self.initializer.export_proto())
        if self.optimizer is not None:
            proto.optimizer.CopyFrom(self.optimizer.export_proto())
        if self.datatype is not None:
            proto.datatype = self.datatype
        return proto


class Layer:
    """Base of every layer class; subclasses set ``kind`` (the ``layer_type`` member)."""

    kind = ""
    _common = ("data_layout", "device_allocation", "datatype", "hint_layer")

    def __init__(self, parents: Layer | Sequence[Layer] = (), *, name: str | None = None,
                 weights: Weights | Sequence[Weights] = (), **fields: Any):
        self.name = name or f"{type(self).__name__.lower()}{next(_ids)}"
        self.parents: list[Layer] = _as_list(parents)
        self.children: list[Layer] = []
        for parent in self.parents:
            if not isinstance(parent, Layer):
                raise InputError(f"layer '{self.name}': parents must be layers, got {type(parent).__name__}")
            parent.children.append(self)
        self.weights: list[Weights] = _as_list(weights)
        self.common = {k: fields.pop(k) for k in self._common if k in fields}
        self.fields = fields
        self.order = next(_ids)

    def export_proto(self) -> lbann_pb2.Layer:
        proto = lbann_pb2.Layer(name=self.name)
        proto.parents.extend(p.name for p in self.parents)
        proto.weights.extend(w.name for w in self.weights)
        assign(proto, self.common)
        self._fill(getattr(proto, self.kind))
        return proto

    def _fill(self, params: Message) -> None:
        params.SetInParent()
        assign(params, self.fields)


class OperatorLayer(Layer):
    """``lbann.Sigmoid(x)`` and friends: an ``operator_layer`` with one operator."""

    kind = "operator_layer"
    operator: type[Message] | None = None

    def _fill(self, params: Message) -> None:
        params.SetInParent()
        if self.operator is None:
            assign(params, self.fields)  # raw OperatorLayer(ops=[…])
            return
        params.ops.add().parameters.Pack(assign(self.operator(), self.fields))


class _Message:
    """Wrapper for a oneof member of a container message (initializers, optimizers, callbacks)."""

    container: type[Message]
    member = ""

    def __init__(self, **fields: Any):
        self.fields = fields

    def export_proto(self) -> Message:
        proto = self.container()
        target = getattr(proto, self.member)
        target.SetInParent()
        assign(target, self.fields)
        return proto


class LayerTerm:
    def __init__(self, layer: Layer, scale_factor: float = 1.0):
        self.layer, self.scale_factor = layer, scale_factor


class L2WeightRegularization:
    def __init__(self, scale_factor: float = 1.0, weights: Sequence[Weights] = ()):
        self.scale_factor, self.weights = scale_factor, list(weights)


class ObjectiveFunction:
    """Sum of layer terms (a layer alone means scale 1) and L2 weight regularization."""

    def __init__(self, terms: Layer | LayerTerm | L2WeightRegularization | Sequence = ()):
        self.terms = _as_list(terms)

    def export_proto(self) -> lbann_pb2.ObjectiveFunction:
        proto = lbann_pb2.ObjectiveFunction()
        for term in self.terms:
            if isinstance(term, Layer):
                term = LayerTerm(term)
            if isinstance(term, LayerTerm):
                proto.layer_term.add(scale_factor=term.scale_factor, layer=term.layer.name)
            elif isinstance(term, L2WeightRegularization):
                proto.l2_weight_regularization.add(scale_factor=term.scale_factor,
                                                   weights=[w.name for w in term.weights])
            else:
                raise InputError(f"objective function term of type {type(term).__name__} is not supported")
        return proto


class Metric:
    def __init__(self, layer: Layer, name: str | None = None, unit: str = ""):
        self.layer, self.name, self.unit = layer, name or layer.name, unit

    def export_proto(self) -> lbann_pb2.Metric:
        proto = lbann_pb2.Metric()
        proto.layer_metric.SetInParent()
        assign(proto.layer_metric, {"layer": self.layer.name, "name": self.name, "unit": self.unit})
        return proto


def traverse_layer_graph(layers: Layer | Iterable[Layer]) -> list[Layer]:
    """Every layer connected to ``layers``, in topological order (ties: creation order)."""
    seen: dict[int, Layer] = {}
    stack = _as_list(layers)
    while stack:
        layer = stack.pop()
        if id(layer) not in seen:
            seen[id(layer)] = layer
            stack.extend(layer.parents + layer.children)
    placed: set[int] = set()
    order: list[Layer] = []
    pending = sorted(seen.values(), key=lambda layer: layer.order)
    while pending:
        ready = [layer for layer in pending if all(id(p) in placed for p in layer.parents)]
        if not ready:
            raise InputError(f"the layer graph has a cycle through {[layer.name for layer in pending][:8]}")
        order.append(ready[0])
        placed.add(id(ready[0]))
        pending.remove(ready[0])
    return order


class Model:
    """``Model(layers, objective_function, metrics, callbacks)`` as in LBANN's frontend."""

    def __init__(self, layers: Layer | Iterable[Layer], objective_function: Any = None,
                 metrics: Sequence[Metric] = (), callbacks: Sequence[Any] = (), *, name: str = "model",
                 epochs: int = 0, weights: Sequence[Weights] = ()):
        self.layers = traverse_layer_graph(layers)
        if objective_function is not None and not isinstance(objective_function, ObjectiveFunction):
            objective_function = ObjectiveFunction(objective_function)
        self.objective_function = objective_function
        self.metrics, self.callbacks = list(metrics), list(callbacks)
        self.name, self.epochs = name, epochs
        found: dict[str, Weights] = {}
        for w in [*weights, *(w for layer in self.layers for w in layer.weights)]:
            if found.setdefault(w.name, w) is not w:
                raise InputError(f"two different weights objects are named '{w.name}'")
        self.weights = list(found.values())

    def export_proto(self) -> lbann_pb2.Model:
        proto = lbann_pb2.Model(name=self.name, num_epochs=self.epochs)
        if self.objective_function is not None:
            proto.objective_function.CopyFrom(self.objective_function.export_proto())
        proto.metric.extend(m.export_proto() for m in self.metrics)
        proto.layer.extend(layer.export_proto() for layer in self.layers)
        proto.weights.extend(w.export_proto() for w in self.weights)
        proto.callback.extend(c.export_proto() for c in self.callbacks)
        return proto

    def input_dims(self) -> dict[str, tuple[tuple[int, ...], str]]:
        return {layer.name: (tuple(layer.dims), "float32") for layer in self.layers
                if getattr(layer, "dims", None) is not None}

    def to_graph(self, input_shapes: Mapping[str, Sequence[int]] | None = None, *, batch_size: int = 1,
                 base_dir: str | os.PathLike | None = None):
        """The IR graph of this model (inference: losses and metrics dropped)."""
        from ..converters.lbann import build_graph
        from ..converters.lbann.textio import Header

        pb = lbann_pb2.LbannPB(model=self.export_proto())
        return build_graph(pb, source=f"model '{self.name}'", base_dir=Path(base_dir or Path.cwd()),
                           input_shapes=input_shapes, batch_size=batch_size,
                           header=Header(inputs=self.input_dims()), name=self.name)

    def save(self, path: str | os.PathLike, input_shapes: Mapping[str, Sequence[int]] | None = None, *,
             batch_size: int = 1, **options: Any) -> Path:
        """Export to any format nnbridge writes (chosen by ``path``: .onnx, _topo.pbtxt, .prototext)."""
        from ..converters import save_model

        save_model(self.to_graph(input_shapes, batch_size=batch_size), path, **options)
        return Path(path)


class Trainer:
    def __init__(self, mini_batch_size: int = 1, name: str | None = None, callbacks: Sequence[Any] = (),
                 random_seed: int | None = None):
        self.mini_batch_size, self.name = mini_batch_size, name
        self.callbacks, self.random_seed = list(callbacks), random_seed

    def export_proto(self) -> lbann_pb2.Trainer:
        proto = lbann_pb2.Trainer(mini_batch_size=self.mini_batch_size)
        assign(proto, {"name": self.name, "random_seed": self.random_seed})
        proto.callback.extend(c.export_proto() for c in self.callbacks)
        return proto


def save_prototext(filename: str | os.PathLike, *, model: Model, trainer: Trainer | None = None,
                   optimizer: Any = None, lbann_version: str = "0.104") -> Path:
    """Write an experiment prototext (LBANN's ``lbann.proto.save_prototext``), atomically."""
    from ..converters.lbann import textio
    from ..fileio import atomic_write

    pb = lbann_pb2.LbannPB(model=model.export_proto(), trainer=(trainer or Trainer()).export_proto())
    if optimizer is not None:
        pb.optimizer.CopyFrom(optimizer.export_proto())
    else:
        pb.optimizer.no_optimizer.SetInParent()
    header = textio.Header(inputs=model.input_dims())
    with atomic_write(filename, "w") as fh:
        fh.write(textio.format_header(lbann_version, header) + textio.to_text(pb))
    return Path(filename)
