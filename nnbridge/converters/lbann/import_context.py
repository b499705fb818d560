"""What an LBANN layer importer (``import_ops``) works with: :class:`ImportContext` emits IR
nodes and reads the layer's weights; :class:`Tensor` is one layer output with per-sample dims."""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np

from ...base.errors import FormatError, ShapeError
from ...ir import DType, Graph, Layout, TensorType, Value
from .weights import WeightSpec, read_matrix

#: the data reader's variable groups a layer may take slice points from (``get_slice_points_from_reader``)
READER_SLICE_CATEGORIES = ("independent", "dependent")


def reader_slice_points(given: Mapping[str, Sequence[int]] | None, category: str, where: str, field: str
                        ) -> list[int]:
    """The slice points LBANN's data reader would give for ``category`` (its JAG reader: the sizes
    of its variable groups), as the user gave them (``lbann_slice_points``); nnbridge reads no data
    reader, so without them the layer is refused, naming the field and the option."""
    if category not in READER_SLICE_CATEGORIES:
        raise FormatError(f"{where}: {field} '{category}': LBANN's readers give 'independent' or 'dependent' "
                          f"slice points")
    points = (given or {}).get(category)
    if points is None:
        raise FormatError(f"{where}: {field} '{category}': its size comes from LBANN's data reader, which nnbridge "
                          f"does not read; give the reader's slice points with --lbann-slice-points "
                          f"{category}=0,N1,N2,… (API lbann_slice_points={{'{category}': [...]}})")
    return [int(p) for p in points]


class UsedFields:
    """A layer's parameter message that records which fields the importer reads, so that a set
    field no importer looks at is reported rather than silently ignored."""

    __slots__ = ("message", "read")

    def __init__(self, message: Any):
        object.__setattr__(self, "message", message)
        object.__setattr__(self, "read", set())

    def __getattr__(self, name: str) -> Any:
        if name in self.message.DESCRIPTOR.fields_by_name:
            self.read.add(name)
        return getattr(self.message, name)

    def HasField(self, name: str) -> bool:  # noqa: N802 - protobuf's name
        self.read.add(name)
        return self.message.HasField(name)

    def WhichOneof(self, oneof: str) -> str | None:  # noqa: N802 - protobuf's name
        self.read.update(f.name for f in self.message.DESCRIPTOR.oneofs_by_name[oneof].fields)
        return self.message.WhichOneof(oneof)

    def unread(self) -> list[str]:
        return [field.name for field, _ in self.message.ListFields() if field.name not in self.read]


@dataclass
class Tensor:
    """A layer output during import: its IR value and its per-sample dims."""

    value: Value
    dims: tuple[int, ...]


class ImportContext:
    """What a layer importer may use: node emission, constants, the layer's weights."""

    def __init__(self, graph: Graph, batch: int, weights: dict[str, Any], base_dir: Path, source: str,
                 any_path: bool = False, slice_points: Mapping[str, Sequence[int]] | None = None):
        self.graph = graph
        self.batch = batch
        self._weights = weights
        self.base_dir = base_dir
        self.any_path = any_path  # numpy_initializer files may lie outside base_dir (trusted file)
        self.source = source
        self.slice_points = slice_points  # what the data reader would give (lbann_slice_points)
        self.layer: Any = None  # the layer being imported
        self.hint: tuple[int, ...] | None = None  # dims of the layer's hint_layer, if it names one
        self._specs: dict[str, WeightSpec] = {}  # weights name → the matrix a layer set it up as
        self.imported: dict[str, tuple[Any, list[Tensor]]] = {}  # layer name → (its message, its inputs)

    def type_of(self, dims: Sequence[int], dtype: DType = DType.FLOAT32) -> TensorType:
        shape = (self.batch, *dims)
        return TensorType(dtype, shape, Layout.default_for_rank(len(shape)))

    def emit(self, op: str, inputs: Sequence[Tensor | Value | None], dims: Sequence[int],
             attrs: dict[str, Any] | None = None, *, final: bool = False, dtype: DType = DType.FLOAT32) -> Tensor:
        """One IR node; ``final`` names its output after the layer (the layer's result)."""
        name = self.layer.name
        out = self.graph.add_value(name, self.type_of(dims, dtype), exact=True) if final else \
            self.graph.add_value(f"{name}_{op.lower()}", self.type_of(dims, dtype))
        ins = [i.value if isinstance(i, Tensor) else i for i in inputs]
        self.graph.add_node(op, ins, [out], attrs or {}, name=name)
        return Tensor(out, tuple(int(d) for d in dims))

    def follow_hint(self, outputs: list[Tensor]) -> list[Tensor]:
        """LBANN gives a layer with a ``hint_layer`` that layer's output dims (Layer::setup_dims).
        Layers that size themselves from the hint took it already; any other output of the same
        size is viewed with the hint's dims, and a different size is a contradiction."""
        if self.hint is None:
            return outputs
        result = []
        for out in outputs:
            if out.dims != self.hint:
                if math.prod(out.dims) != math.prod(self.hint):
                    raise ShapeError(f"{self.where()}: its output has {list(out.dims)} but its hint_layer "
                                     f"'{self.layer.hint_layer}' gives {list(self.hint)}")
                out = self.emit("Reshape", [out, self.ints((self.batch, *self.hint), "hint_shape")], self.hint)
            result.append(out)
        return result

    def emit_many(self, op: str, inputs: Sequence[Tensor | Value | None],
                  outputs: Sequence[tuple[Sequence[int], DType]], attrs: dict[str, Any] | None = None
                  ) -> list[Tensor]:
        """One IR node with several outputs (per-sample dims and type of each)."""
        name = self.layer.name
        outs = [self.graph.add_value(f"{name}_{op.lower()}", self.type_of(dims, dtype)) for dims, dtype in outputs]
        ins = [i.value if isinstance(i, Tensor) else i for i in inputs]
        self.graph.add_node(op, ins, outs, attrs or {}, name=name)
        return [Tensor(out, tuple(int(d) for d in dims)) for out, (dims, _) in zip(outs, outputs)]

    def const(self, array: np.ndarray, hint: str, *, slot: int | None = None) -> Value:
        """A constant of the current layer; ``slot`` k marks it as the layer's k-th weights object,
        named after it when the layer names one (so an LBANN → LBANN round trip keeps the names
        that objective functions and callbacks refer to)."""
        names = list(self.layer.weights)
        name = names[slot] if slot is not None and slot < len(names) else f"{self.layer.name}_{hint}"
        return self.graph.add_initializer(name, np.asarray(array))

    def ints(self, values: Sequence[int], hint: str) -> Value:
        return self.const(np.asarray(values, dtype=np.int64), hint)

    def where(self) -> str:
        return f"{self.source}: layer '{self.layer.name}'"

    def weights(self, slot: int, suffix: str, height: int, width: int = 1,
                fans: tuple[int, int] = (1, 1), default: str = "he_normal") -> np.ndarray:
        """Matrix ``slot`` of the current layer (its ``weights:`` name, else LBANN's default name)."""
        names = list(self.layer.weights)
        if slot < len(names):
            name = names[slot]
            if name not in self._weights:
                raise FormatError(f"{self.where()} uses weights '{name}', which the model does not define")
        else:
            name = f"{self.layer.name}_{suffix}"
        spec = WeightSpec(name, int(height), int(width), fans, default)
        self._specs.setdefault(name, spec)
        return read_matrix(self._weights.get(name), spec, self.base_dir, self.source, any_path=self.any_path)

    def matrix_of(self, name: str) -> np.ndarray | None:
        """Weights ``name`` as the matrix a layer imported earlier set it up as (None: no layer did)."""
        spec = self._specs.get(name)
        return None if spec is None else read_matrix(self._weights.get(name), spec, self.base_dir, self.source,
                                                     any_path=self.any_path)
