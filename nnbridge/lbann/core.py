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
from collections.abc import Iterable, Iterator, Mapping, Sequence
from pathlib import Path
from typing import Any

import numpy as np
from google.protobuf.message import Message

from ..base.errors import InputError
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
        elif field.is_repeated:  # any iterable (a generator, a range, numpy values), or one value
            values = [value] if isinstance(value, (str, bytes, Mapping)) or not isinstance(value, Iterable) \
                else list(value)
            if field.message_type is not None:
                for item in values:
                    target.add().CopyFrom(_as_message(item))
            else:  # numpy scalars (np.nditer(a, order='F') yields 0-d arrays) as Python numbers
                target.extend(v.tolist() if isinstance(v, (np.ndarray, np.generic)) else v for v in values)
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
    """One item or any iterable of them (a list, a generator, dict values) as a list."""
    if value is None:
        return []
    return list(value) if isinstance(value, Iterable) and not isinstance(value, (str, bytes, Mapping)) else [value]


def _kept(fields: Mapping[str, Any]) -> dict[str, Any]:
    """Field values as given, one-shot iterators (generators) read once into lists."""
    return {k: list(v) if isinstance(v, Iterator) else v for k, v in fields.items()}


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
    """Base of every layer class; subclasses set ``kind`` (the ``layer_type`` member).

    As in LBANN's frontend, parents come first (``Add(x, y)``, or a list, or ``parents=``),
    ``weights=`` takes weights objects, ``device=`` / ``hint_layer=`` / ``data_layout=`` /
    ``datatype=`` / ``parallel_strategy=`` are the common layer fields, and every other keyword is
    a field of the layer's own message (scalars are accepted for repeated fields)."""

    kind = ""
    _common = ("data_layout", "device_allocation", "datatype", "parallel_strategy")

    def __init__(self, *parents: Layer | Sequence[Layer], name: str | None = None,
                 weights: Weights | Sequence[Weights] = (), device: str | None = None,
                 hint_layer: Layer | str | None = None, **fields: Any):
        self.name = name or f"{type(self).__name__.lower()}{next(_ids)}"
        given = [*parents, *_as_list(fields.pop("parents", None))]
        self.parents: list[Layer] = [p for item in given for p in _as_list(item)]
        self.children: list[Layer] = []
        parents, self.parents = self.parents, []
        self.add_parent(parents)
        self.weights: list[Weights] = _as_list(weights)
        fields = _kept(fields)
        self.common = {k: fields.pop(k) for k in self._common if k in fields}
        if device is not None:
            self.common["device_allocation"] = device
        if hint_layer is not None:
            self.common["hint_layer"] = hint_layer.name if isinstance(hint_layer, Layer) else hint_layer
        self.fields = fields
        self.order = next(_ids)

    def add_parent(self, parent: Layer | Sequence[Layer]) -> None:
        """This layer reads ``parent`` (one layer or several) after the parents it has."""
        for p in _as_list(parent):
            if not isinstance(p, Layer):
                raise InputError(f"layer '{self.name}': parents must be layers, got {type(p).__name__}")
            self.parents.append(p)
            p.children.append(self)

    def add_child(self, child: Layer | Sequence[Layer]) -> None:
        for c in _as_list(child):
            c.add_parent(self)

    def __call__(self, parent: Layer | Sequence[Layer]) -> None:
        """``layer(parent)``: LBANN's shorthand for ``add_parent`` (it returns nothing, as LBANN's)."""
        self.add_parent(parent)

    def export_proto(self, within: set[int] | None = None) -> lbann_pb2.Layer:
        """The layer message; ``within`` (ids of the model's layers) limits the children listed."""
        proto = lbann_pb2.Layer(name=self.name)
        proto.parents.extend(p.name for p in self.parents)
        proto.children.extend(c.name for c in self.children if within is None or id(c) in within)
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
        self.fields = _kept(fields)

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
    """``L2WeightRegularization(weights=…, scale=…)`` (LBANN's frontend) or ``scale_factor=``;
    no weights means every weights object of the model."""

    def __init__(self, scale_factor: float | None = None, weights: Weights | Sequence[Weights] = (), *,
                 scale: float | None = None):
        self.scale_factor = scale if scale is not None else (1.0 if scale_factor is None else scale_factor)
        self.weights = _as_list(weights)


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
    """Every layer connected to ``layers``, parents before children, in the order LBANN's frontend
    lists them (a depth-first walk from the roots, which a first depth-first search finds), so a
    model written here lists its layers as LBANN's own files do."""
    roots: list[Layer] = []
    seen: set[int] = set()
    todo = _as_list(layers)
    while todo:
        layer = todo.pop()
        if id(layer) not in seen:
            seen.add(id(layer))
            todo += layer.parents + layer.children
            if not layer.parents:
                roots.append(layer)
    order: list[Layer] = []
    placed: set[int] = set()
    while roots:  # a layer is taken once its last parent is placed (that parent pushes it again)
        layer = roots.pop()
        if id(layer) not in placed and all(id(p) in placed for p in layer.parents):
            placed.add(id(layer))
            order.append(layer)
            roots += layer.children
    if len(order) != len(seen):
        raise InputError("the layer graph has a cycle (a layer is its own ancestor)")
    return order


class Model:
    """``Model(epochs, layers=…, objective_function=…, metrics=…, callbacks=…)`` as in LBANN's
    frontend (``Model(layers, …)`` works too); ``layers`` reaches every connected layer."""

    def __init__(self, epochs: int | Layer | Iterable[Layer] | None = None, layers: Any = None,
                 objective_function: Any = None, metrics: Sequence[Metric] = (), callbacks: Sequence[Any] = (),
                 *, name: str | None = None, weights: Sequence[Weights] = (), summary_dir: str | None = None):
        if epochs is not None and not isinstance(epochs, int):  # Model(layers, …)
            if layers is not None:
                raise InputError("Model takes the epochs first: Model(epochs, layers=…, objective_function=…)")
            epochs, layers = 0, epochs
        if layers is None:
            raise InputError("Model needs its layers: Model(epochs, layers=traverse_layer_graph(inputs))")
        self.layers = traverse_layer_graph(layers)
        if objective_function is not None and not isinstance(objective_function, ObjectiveFunction):
            objective_function = ObjectiveFunction(objective_function)
        self.objective_function = objective_function
        self.metrics, self.callbacks = list(metrics), list(callbacks)
        self.name, self.epochs, self.summary_dir = name, epochs or 0, summary_dir
        found: dict[str, Weights] = {}
        for w in [*weights, *(w for layer in self.layers for w in layer.weights)]:
            if found.setdefault(w.name, w) is not w:
                raise InputError(f"two different weights objects are named '{w.name}'")
        self.weights = list(found.values())

    def export_proto(self) -> lbann_pb2.Model:
        proto = lbann_pb2.Model(num_epochs=self.epochs)
        assign(proto, {"name": self.name})
        if self.summary_dir:
            proto.summarizer.dir = self.summary_dir
        proto.objective_function.SetInParent()  # LBANN's frontend writes one, empty when not given
        if self.objective_function is not None:
            proto.objective_function.CopyFrom(self.objective_function.export_proto())
        proto.metric.extend(m.export_proto() for m in self.metrics)
        within = {id(layer) for layer in self.layers}
        proto.layer.extend(layer.export_proto(within) for layer in self.layers)
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
        name = self.name or "model"
        return build_graph(pb, source=f"model '{name}'", base_dir=Path(base_dir or Path.cwd()),
                           input_shapes=input_shapes, batch_size=batch_size,
                           header=Header(inputs=self.input_dims()), name=name)

    def save(self, path: str | os.PathLike, input_shapes: Mapping[str, Sequence[int]] | None = None, *,
             batch_size: int = 1, **options: Any) -> Path:
        """Export to any format nnbridge writes (chosen by ``path``: .onnx, _topo.pbtxt, .prototext)."""
        from ..converters import save_model

        save_model(self.to_graph(input_shapes, batch_size=batch_size), path, **options)
        return Path(path)


class BatchedIterativeOptimizer:
    """LBANN's default training algorithm (mini-batch descent with each weights object's own
    optimizer), stopped after ``num_iterations`` mini-batches, ``epoch_count`` epochs or
    ``max_seconds`` (the last one given: the message keeps one criterion)."""

    def __init__(self, name: str, num_iterations: int = 0, epoch_count: int = 0, max_seconds: float = 0.0):
        self.name, self.num_iterations, self.epoch_count, self.max_seconds = name, num_iterations, epoch_count, \
            max_seconds

    def export_proto(self) -> lbann_pb2.TrainingAlgorithm:
        sgd = lbann_pb2.SGD()
        stop = sgd.stopping_criteria
        for field, value in (("max_batches", self.num_iterations), ("max_epochs", self.epoch_count),
                             ("max_seconds", self.max_seconds)):
            if value > 0:
                setattr(stop, field, value)
        algorithm = lbann_pb2.TrainingAlgorithm(name=self.name)
        algorithm.parameters.Pack(sgd)
        return algorithm


class KFAC:
    """LBANN's Kronecker-factored approximate curvature (K-FAC): its first-order algorithm's
    gradients preconditioned by per-layer Kronecker factors; ``kfac_args`` are fields of LBANN's
    ``KFAC`` message (damping_act="1e-30", compute_interval=1, …), as LBANN's frontend takes them.
    nnbridge writes and reads it; ``nnbridge train`` does not train with it (it says so)."""

    def __init__(self, name: str, first_order_optimizer: BatchedIterativeOptimizer, **kfac_args: Any):
        if not isinstance(first_order_optimizer, BatchedIterativeOptimizer):
            raise InputError(f"KFAC '{name}': first_order_optimizer is a BatchedIterativeOptimizer, not "
                             f"{type(first_order_optimizer).__name__}")
        self.name, self.first_order_optimizer = name, first_order_optimizer
        self.kfac_args = kfac_args
        self._message()  # an unknown argument fails here, naming the message's fields

    def _message(self) -> lbann_pb2.KFAC:
        params = assign(lbann_pb2.KFAC(), self.kfac_args)
        self.first_order_optimizer.export_proto().parameters.Unpack(params.sgd)
        return params

    def export_proto(self) -> lbann_pb2.TrainingAlgorithm:
        algorithm = lbann_pb2.TrainingAlgorithm(name=self.name)
        algorithm.parameters.Pack(self._message())
        return algorithm


class Trainer:
    def __init__(self, mini_batch_size: int = 1, name: str | None = None, random_seed: int | None = None,
                 serialize_io: bool | None = None, training_algo: Any = None, callbacks: Any = ()):
        self.mini_batch_size, self.name, self.random_seed = mini_batch_size, name, random_seed
        self.serialize_io, self.training_algo, self.callbacks = serialize_io, training_algo, _as_list(callbacks)

    def export_proto(self) -> lbann_pb2.Trainer:
        proto = lbann_pb2.Trainer(mini_batch_size=self.mini_batch_size)
        assign(proto, {"name": self.name, "random_seed": self.random_seed, "serialize_io": self.serialize_io})
        if self.training_algo is not None:
            proto.training_algorithm.CopyFrom(self.training_algo.export_proto())
        proto.callback.extend(c.export_proto() for c in self.callbacks)
        return proto


def save_prototext(filename: str | os.PathLike, *, model: Model, trainer: Trainer | None = None,
                   optimizer: Any = None, data_reader: Any = None, lbann_version: str = "0.104") -> Path:
    """Write an experiment prototext (LBANN's ``lbann.proto.save_prototext``), atomically;
    ``data_reader`` is an ``lbann_pb2.DataReader`` message (or has ``export_proto``)."""
    from ..base.fileio import atomic_write
    from ..converters.lbann import textio

    pb = lbann_pb2.LbannPB(model=model.export_proto(), trainer=(trainer or Trainer()).export_proto())
    if optimizer is not None:
        pb.optimizer.CopyFrom(optimizer.export_proto())
    else:
        pb.optimizer.no_optimizer.SetInParent()
    if data_reader is not None:
        pb.data_reader.CopyFrom(_as_message(data_reader))
    header = textio.Header(inputs=model.input_dims())
    with atomic_write(filename, "w") as fh:
        fh.write(textio.format_header(lbann_version, header) + textio.to_text(pb))
    return Path(filename)
