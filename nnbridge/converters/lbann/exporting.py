"""The state shared by the ONNX-op → LBANN-layer exporters, and their registry.

An exporter is ``fn(ctx, node)``: it appends layers (and weights) through
``ctx`` and binds each IR output value to the LBANN layer that produces it. It
raises ``Inexpressible`` when LBANN cannot express the node; the writer collects
every such node and reports them all in one error.

Shapes go through ``ctx.sample(value)``, which drops the batch dimension and
refuses tensors whose first dim is not the graph's batch (LBANN tensors never
include it, specs/lbann-format.md §7).
"""

from __future__ import annotations

import re
from collections.abc import Callable, Sequence
from dataclasses import dataclass

import numpy as np
from google.protobuf.message import Message

from ...base.registry import Registry
from ...ir import Graph, Node, Value
from ...protos.lbann import lbann_pb2
from .mapping import LBANN_VERSIONS, SINCE_V0104


class Inexpressible(Exception):
    """LBANN cannot express this node (the message says why)."""


Exporter = Callable[["ExportContext", Node], None]
EXPORTERS: Registry[str, Exporter] = Registry("LBANN exporters")


def exporter(*ops: str) -> Callable[[Exporter], Exporter]:
    return EXPORTERS.decorator(*ops)


@dataclass
class WeightsEntry:
    """One LBANN weights object: its (Height, Width) matrix and the array a .npy holds."""

    name: str
    matrix: np.ndarray
    npy: np.ndarray
    frozen: bool = False


_UNSAFE = re.compile(r"\s+")


class ExportContext:
    def __init__(self, graph: Graph, version: str, batch: int | str):
        self.graph = graph
        self.version = version
        self.batch = batch
        self.layers: list[Message] = []
        self.weights: list[WeightsEntry] = []
        self.layer_of: dict[int, str] = {}
        self.absorbed: set[int] = set()
        self._names: set[str] = set()

    # -- versions and names ----------------------------------------------------
    def at_least(self, version: str) -> bool:
        return LBANN_VERSIONS.index(self.version) >= LBANN_VERSIONS.index(version)

    def unique(self, hint: str) -> str:
        base = _UNSAFE.sub("_", hint) or "layer"
        name, i = base, 0
        while name in self._names:
            i += 1
            name = f"{base}_{i}"
        self._names.add(name)
        return name

    # -- shapes and constants --------------------------------------------------
    def sample(self, value: Value) -> tuple[int, ...]:
        """Per-sample dims of an activation (batch dim dropped and checked)."""
        shape = value.type.shape
        if shape is None or not shape or any(not isinstance(d, int) for d in shape[1:]):
            raise Inexpressible(f"'{value.name}' needs a static shape, has {list(shape or [])}")
        if shape[0] != self.batch:
            raise Inexpressible(f"'{value.name}' {list(shape)} does not keep the batch dimension "
                                f"({self.batch}) first; LBANN tensors exclude the batch")
        return tuple(int(d) for d in shape[1:])

    @staticmethod
    def const(value: Value | None) -> np.ndarray | None:
        return None if value is None else value.const

    def need_const(self, value: Value | None, what: str) -> np.ndarray:
        array = self.const(value)
        if array is None:
            raise Inexpressible(f"{what} must be a constant (LBANN carries it as weights)")
        return array

    def sole_consumer(self, value: Value) -> Node | None:
        users = self.graph.consumers(value)
        if len(users) == 1 and not self.graph.is_output(value):
            return users[0]
        return None

    def per_sample_constant(self, array: np.ndarray, dims: Sequence[int]) -> np.ndarray:
        """A constant operand as one sample of ``dims`` (its batch rows must be identical)."""
        array = np.asarray(array, dtype=np.float32)
        full = array.reshape((1,) * (len(dims) + 1 - array.ndim) + array.shape) if array.ndim <= len(dims) + 1 \
            else None
        if full is None:
            raise Inexpressible(f"constant of shape {list(array.shape)} has more dims than the activation")
        if full.shape[0] != 1:
            if not np.all(full == full[:1]):
                raise Inexpressible("constant differs across the batch dimension")
            full = full[:1]
        try:
            return np.broadcast_to(full[0], tuple(dims)).copy()
        except ValueError:
            raise Inexpressible(f"constant of shape {list(array.shape)} does not broadcast to the sample "
                                f"shape {list(dims)}") from None

    # -- layers ----------------------------------------------------------------
    def parent(self, value: Value, dims: Sequence[int] | None = None) -> str:
        """The layer producing ``value``; constants become ``constant``/``weights_layer`` layers."""
        if id(value) in self.layer_of:
            return self.layer_of[id(value)]
        array = self.const(value)
        if array is None:
            raise Inexpressible(f"input '{value.name}' is not produced by any exported layer")
        cache = dims is None
        if dims is None:
            shape = array.shape
            if not shape or shape[0] not in (1, self.batch):
                raise Inexpressible(f"constant '{value.name}' {list(shape)} has no batch dimension")
            dims = shape[1:]
        sample = self.per_sample_constant(array, dims)
        if sample.size and np.all(sample == sample.flat[0]):
            layer, params = self.layer(value.name, [], "constant")
            params.value = float(sample.flat[0])
            params.num_neurons.extend(int(d) for d in dims)
        else:
            layer, params = self.layer(value.name, [], "weights_layer")
            params.dims.extend(int(d) for d in dims)
            layer.weights.append(self.add_weights(layer.name, "weights", sample.reshape(-1, 1), sample,
                                                  frozen=True))
        if cache:
            self.layer_of[id(value)] = layer.name
        return layer.name

    def layer(self, hint: str, parents: Sequence[str], kind: str, output: Value | None = None
              ) -> tuple[Message, Message]:
        """Append a layer of type ``kind``; returns (layer, its type message)."""
        layer = lbann_pb2.Layer(name=self.unique(hint))
        layer.parents.extend(parents)
        params = getattr(layer, kind)
        params.SetInParent()
        self.layers.append(layer)
        if output is not None:
            self.layer_of[id(output)] = layer.name
        return layer, params

    def operator_layer(self, hint: str, parents: Sequence[str], operators: Sequence[Message],
                       output: Value | None = None) -> Message:
        for op in operators:
            name = type(op).DESCRIPTOR.name
            if name in SINCE_V0104 and not self.at_least("0.104"):
                raise Inexpressible(f"{name} needs LBANN v0.104 or later (--lbann-version)")
        layer, params = self.layer(hint, parents, "operator_layer", output)
        for op in operators:
            params.ops.add().parameters.Pack(op)
        return layer

    def operator(self, name: str, **fields) -> Message:
        return getattr(lbann_pb2, name)(**fields)

    def bind(self, value: Value, layer_name: str) -> None:
        self.layer_of[id(value)] = layer_name

    def add_weights(self, layer: str, suffix: str, matrix: np.ndarray, npy: np.ndarray | None = None,
                    frozen: bool = False, source: Value | None = None) -> str:
        """Register a weights object (matrix in LBANN's Height × Width layout); returns its name:
        that of the graph constant ``source`` it comes from (what an LBANN source called it), else
        ``<layer>_<suffix>``."""
        matrix = np.asarray(matrix, dtype=np.float32)
        if matrix.ndim != 2:
            matrix = matrix.reshape(-1, 1)
        named = source is not None and source.name in self.graph.initializers
        name = self.unique(source.name if named else f"{layer}_{suffix}")
        array = matrix if npy is None or matrix.shape[1] != 1 else np.asarray(npy, dtype=np.float32)
        self.weights.append(WeightsEntry(name, matrix, array, frozen))  # laid out as the .npy is written
        return name
