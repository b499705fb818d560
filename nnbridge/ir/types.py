"""Tensor types: element type, shape (static or symbolic) and layout.

Layout is first-class because SMAUG and the simulators need it and the layout
pass rewrites it; ONNX itself has no notion of it (everything there is "NCHW").
"""

from __future__ import annotations

import enum
import math
from dataclasses import dataclass, replace
from functools import cached_property

from .dtypes import DType

Dim = int | str | None  # int: static; str: symbolic (as in ONNX); None: unknown
Shape = tuple[Dim, ...]


class DimLetters(enum.Enum):
    """An enum whose members spell tensor dimensions, a letter each (N batch, C channels, H and W
    height and width, T time): a member made by ``enum.auto()`` has its name as its value, so
    ``member.value.index("C")`` is the channel axis and ``member.has("H")`` asks for a dimension."""

    @staticmethod
    def _generate_next_value_(name: str, start: int, count: int, last_values: list) -> str:
        return name

    def has(self, letter: str) -> bool:
        return letter in self.value


class Layout(DimLetters):
    NCHW = enum.auto()
    NHWC = enum.auto()
    NC = enum.auto()
    CN = enum.auto()
    NCT = enum.auto()
    NTC = enum.auto()
    N = enum.auto()
    X = enum.auto()  # any: layout does not matter (scalars, shape tensors, ...)
    UNKNOWN = "?"

    @classmethod
    def default_for_rank(cls, rank: int | None) -> Layout:
        """ONNX tensors are channels-first; this is what an import assumes."""
        return {1: cls.N, 2: cls.NC, 3: cls.NCT, 4: cls.NCHW}.get(rank or -1, cls.X)


class TypeKind(enum.Enum):
    TENSOR = "tensor"
    SEQUENCE = "sequence"
    OPTIONAL = "optional"


@dataclass(frozen=True)
class TensorType:
    """The type of a Value. Sequences and optionals wrap an element type."""

    dtype: DType | None = None
    shape: Shape | None = None
    layout: Layout = Layout.UNKNOWN
    kind: TypeKind = TypeKind.TENSOR
    elem: TensorType | None = None  # for SEQUENCE / OPTIONAL

    @property
    def rank(self) -> int | None:
        return None if self.shape is None else len(self.shape)

    # computed once per type: passes ask these of every value, many times
    @cached_property
    def is_static(self) -> bool:
        return self.shape is not None and all(isinstance(d, int) for d in self.shape)

    @cached_property
    def numel(self) -> int | None:
        if not self.is_static:
            return None
        return math.prod(self.shape)  # type: ignore[arg-type]

    @cached_property
    def nbytes(self) -> int | None:
        n = self.numel
        return None if n is None or self.dtype is None else n * self.dtype.itemsize

    def with_shape(self, shape: Shape | None) -> TensorType:
        return replace(self, shape=None if shape is None else tuple(shape))

    def with_layout(self, layout: Layout) -> TensorType:
        return replace(self, layout=layout)

    def with_dtype(self, dtype: DType | None) -> TensorType:
        return replace(self, dtype=dtype)

    def __str__(self) -> str:
        if self.kind is not TypeKind.TENSOR:
            return f"{self.kind.value}<{self.elem if self.elem else '?'}>"
        dt = self.dtype.short if self.dtype else "?"
        if self.shape is None:
            return f"{dt}[...]"
        dims = ",".join("?" if d is None else str(d) for d in self.shape)
        lay = "" if self.layout in (Layout.UNKNOWN, Layout.X) else f" {self.layout.value}"
        return f"{dt}[{dims}]{lay}"
