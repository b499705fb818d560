"""Accelerated operators as the SMV tiling optimizers see them: pure shapes.

The backend lowers IR nodes to these (``lowering.py``); tests and the
calibration build them directly from the spec's tables. Activation shapes are
NHWC ``(N, H, W, C)`` or NC ``(N, C)``; conv weights are ``[K, kH, kW, C]`` and
FC weights ``[K, Cin]`` (SMAUG's native SMV layouts).
"""

from __future__ import annotations

import math
from dataclasses import dataclass

Shape = tuple[int, ...]


@dataclass(kw_only=True, frozen=True)
class ConvLayer:
    name: str
    input: Shape  # N, H, W, C
    kernels: int
    kh: int
    kw: int
    stride_h: int = 1
    stride_w: int = 1
    same: bool = True  # SMAUG SamePadding (total k-1, extra on top/left) vs ValidPadding

    @property
    def pads(self) -> tuple[int, int, int, int]:
        """(top, bottom, left, right) per SMAUG's "same" rule (smaug-format §6.4)."""
        if not self.same:
            return 0, 0, 0, 0
        top, left = math.ceil((self.kh - 1) / 2), math.ceil((self.kw - 1) / 2)
        return top, self.kh - 1 - top, left, self.kw - 1 - left

    @property
    def weights(self) -> Shape:
        return (self.kernels, self.kh, self.kw, self.input[3])

    @property
    def output(self) -> Shape:
        n, h, w, _ = self.input
        ph, pw = (self.kh - 1, self.kw - 1) if self.same else (0, 0)
        return (n, (h - self.kh + ph) // self.stride_h + 1, (w - self.kw + pw) // self.stride_w + 1, self.kernels)

    @property
    def macs(self) -> int:
        n, ho, wo, k = self.output
        return n * ho * wo * k * self.kh * self.kw * self.input[3]


@dataclass(frozen=True)
class FCLayer:
    name: str
    batch: int
    inputs: int
    neurons: int

    @property
    def input(self) -> Shape:
        return (self.batch, self.inputs)

    @property
    def weights(self) -> Shape:
        return (self.neurons, self.inputs)

    @property
    def output(self) -> Shape:
        return (self.batch, self.neurons)

    @property
    def macs(self) -> int:
        return self.batch * self.inputs * self.neurons


@dataclass(kw_only=True, frozen=True)
class PoolLayer:
    name: str
    input: Shape
    ph: int
    pw: int
    stride_h: int
    stride_w: int
    kind: str = "max"  # or "avg"

    @property
    def output(self) -> Shape:
        n, h, w, c = self.input
        return (n, (h - self.ph) // self.stride_h + 1, (w - self.pw) // self.stride_w + 1, c)

    @property
    def macs(self) -> int:
        return 0


class _ShapeKept:
    """A vector-unit operator: its output has its input's shape, and it does no multiply-accumulates
    on the PE arrays."""

    input: Shape

    @property
    def output(self) -> Shape:
        return self.input

    @property
    def macs(self) -> int:
        return 0


@dataclass(frozen=True)
class BNLayer(_ShapeKept):
    """Batch norm (also a bias carrier): post-conv for 4-D, post-FC for 2-D inputs."""

    name: str
    input: Shape

    @property
    def weights(self) -> Shape:
        return (4, self.input[-1])


@dataclass(frozen=True)
class VectorLayer(_ShapeKept):
    """Unary activations, element-wise binaries and comparisons: flat 8-wide vectors."""

    name: str
    input: Shape
    arity: int = 1
    kind: str = "relu"


@dataclass(frozen=True)
class SoftmaxLayer(_ShapeKept):
    """Softmax over the last axis of a ``(rows, classes)`` input, each row alone."""

    name: str
    input: Shape


Layer = ConvLayer | FCLayer | PoolLayer | BNLayer | VectorLayer | SoftmaxLayer
