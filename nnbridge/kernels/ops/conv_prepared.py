"""Convolutions prepared when the plan is built (``@kernel("Conv", prepare=...)``): a mobile
network's convolutions on 7×7 to 14×14 maps (and the OCR classifier's on 1×6) cost more in the
kernel's prologue (the window's geometry, the path's choice, the weights' layout) and in separate
bias and activation passes than in their arithmetic.

A prepared convolution has its geometry worked out and its weights laid out once, for the static
input shape the IR gives; a call with another shape or dtype, or with numba switched off since,
runs the kernel. Its results are the kernel's bit for bit: the same matrix product (numpy's) or
the same compiled depthwise loops. ``with_epilogue`` gives the callable the reference plan runs
when an activation alone reads the convolution's result (``kernels/evaluator.py``): the bias and
the activation in one compiled pass over the result (a 1×1 convolution) or in the depthwise
loops' output loop, each value the one the convolution then the activation's own pass give.
"""

from __future__ import annotations

import math
from collections.abc import Callable
from typing import Any

import numpy as np

from ...ir import DType, Node
from .. import compiled
from ..parallel import DOT_MIN_WORK, alone, dot
from ..registry import KernelFn
from ._common import all_constant, static_shape
from ._windows import gather

_F32 = np.dtype(np.float32)
_NONE = np.empty(0, np.float32)
#: the geometry ``conv``'s ``_window`` gives: strides, dilations, pads begin, pads end, output size,
#: a plain matrix product
Window = tuple[list[int], list[int], list[int], list[int], list[int], bool]


class Pointwise:
    """A 1×1 convolution of one float32 image, stride 1 and no pads: one matrix product of the
    weights ``(M, C)`` and the image ``(C, H·W)``, then the bias (the kernel's own path)."""

    __slots__ = ("kernel", "attrs", "shape", "weights", "bias", "rows", "out")

    def __init__(self, kernel: KernelFn, attrs: dict[str, Any], shape: tuple[int, ...], w: np.ndarray,
                 b: np.ndarray | None, out: list[int]):
        m, c = w.shape[:2]
        self.kernel, self.attrs, self.shape = kernel, attrs, shape
        self.weights = w.reshape(m, c)
        self.bias = None if b is None else b.astype(np.float32, copy=False).reshape(m, 1)
        self.rows = (c, -1)
        self.out = (1, m, *out)

    def __call__(self, ctx, x, w, b=None):
        if x.shape != self.shape or x.dtype != _F32:
            return self.kernel(ctx, x, w, b, **self.attrs)
        y = dot(self.weights, x.reshape(self.rows))  # matmul's product, its ufunc overhead left out
        if self.bias is not None:
            y += self.bias
        return y.reshape(self.out)

    def _joint(self, name: str) -> Callable | None:
        """``compiled/blas.py``'s ``name`` when this product is one GEMM call of np.dot's (below
        ``DOT_MIN_WORK``, every side at least 2) and numpy's OpenBLAS is bound, else None."""
        m, c = self.weights.shape
        pixels = math.prod(self.out[2:])
        blas = compiled.load("blas") if min(m, c, pixels) >= 2 and m * c * pixels < DOT_MIN_WORK else None
        return getattr(blas, name) if blas is not None and blas.READY else None

    def with_residual(self) -> KernelFn | None:
        """``(ctx, x, w, b, r) -> conv(x) + r``: the product, its bias and a residual sum of the
        output's shape in one compiled call (``_Biased`` in the plan runs it); None from the
        callable (another shape, dtype or layout, numba off): the plan adds it itself."""
        joint = self._joint("product_bias_residual") if self.bias is not None else None
        if joint is None:
            return None
        bias, (m, _), out = self.bias.reshape(-1), self.weights.shape, self.out

        def run(ctx, x, w, b, r):
            if (x.shape != self.shape or x.dtype != _F32 or type(r) is not np.ndarray or r.dtype != _F32
                    or r.shape != out or not r.flags.c_contiguous or compiled.disabled()):
                return None
            y = np.empty((m, r.size // m), np.float32)
            joint(self.weights, np.ascontiguousarray(x).reshape(self.rows), bias, r.reshape(m, -1), y)
            return y.reshape(out)

        return run

    def with_epilogue(self, curve: str, alpha: np.float32, beta: np.float32) -> KernelFn | None:
        """The convolution, then its bias and the activation ``curve`` in one compiled pass; the
        callable returns None (the plan then runs the activation's pass) when numba is off."""
        if self.bias is None:
            return None
        bias = self.bias.reshape(-1)
        fast = compiled.load("curves")
        if fast is None:
            return None
        epilogue = fast.Epilogue(curve, alpha, beta)
        m, pixels = self.weights.shape[0], math.prod(self.out[2:])
        joint = self._joint("product_then_curve")

        def run(ctx, x, w, b=None):
            if x.shape != self.shape or x.dtype != _F32 or compiled.disabled():
                return None
            if joint is not None:  # np.dot's own GEMM call, the bias and the curve: one compiled call
                y = np.empty((m, pixels), np.float32)
                joint(self.weights, np.ascontiguousarray(x).reshape(self.rows), bias, y, epilogue.code,
                      epilogue.alpha, epilogue.beta)
                return y.reshape(self.out)
            y = dot(self.weights, x.reshape(self.rows))
            epilogue.bias_and_curve(y, bias)
            return y.reshape(self.out)

        return run


    def gated(self, curve: str, alpha: np.float32, beta: np.float32) -> KernelFn | None:
        """A squeeze-excite's gate, ``(ctx, h, w, b, x) -> x · curve(conv(h))``: this convolution of
        a 1×1 map ``h`` (its bias, then the activation ``curve``) and the ``Mul`` that scales the
        block's map ``x (1, M, H, W)`` by it, in one compiled pass over ``x`` (the values the three
        steps give); None from the callable (another shape or layout, numba off): the plan runs
        the steps."""
        if self.bias is None or self.out[2:] != (1, 1):
            return None
        bias, channels = self.bias.reshape(-1), self.out[1]
        fast = compiled.load("curves")
        if fast is None:
            return None
        epilogue = fast.Epilogue(curve, alpha, beta)
        m, c = self.weights.shape
        blas = compiled.load("blas") if m >= 2 and c >= 2 and m * c < DOT_MIN_WORK else None
        joint = blas.vector_then_gate if blas is not None and blas.READY else None
        per_value = fast.COST[fast.CODES["relu32"]]  # the gate's work a value, as ``Epilogue.gate`` counts it

        def run(ctx, h, w, b, x):
            if (h.shape != self.shape or h.dtype != _F32 or type(x) is not np.ndarray or x.dtype != _F32
                    or x.ndim != 4 or x.shape[:2] != (1, channels) or not x.flags.c_contiguous or compiled.disabled()):
                return None
            if joint is not None and alone(per_value * x.size):  # one thread's: the product and gate in one call
                return joint(self.weights, np.ascontiguousarray(h).reshape(-1), bias, x.reshape(channels, -1),
                             epilogue.code, epilogue.alpha, epilogue.beta).reshape(x.shape)
            raw = dot(self.weights, h.reshape(self.rows))
            return epilogue.gate(x.reshape(channels, -1), raw.reshape(-1), bias).reshape(x.shape)

        return run


class Columns:
    """A float32 convolution of one image on a small map (a patch embedding, a downsampling, a
    grouped or a 1-D convolution): its columns gathered through an index made once, then one
    matrix product per group with the weights and the bias (the kernel's own path, ``conv_nd``'s
    small columns), without the kernel's per-call geometry and index lookups."""

    __slots__ = ("kernel", "attrs", "shape", "index", "weights", "bias", "out")

    def __init__(self, kernel: KernelFn, attrs: dict[str, Any], shape: tuple[int, ...], index: np.ndarray,
                 w: np.ndarray, b: np.ndarray | None, out: list[int]):
        m, group = w.shape[0], index.shape[0]
        self.kernel, self.attrs, self.shape = kernel, attrs, shape
        self.index = index[0] if group == 1 else index  # one group: a plain 2-D product, as the kernel's
        self.weights = w.reshape(m, -1) if group == 1 else w.reshape(group, m // group, -1)
        self.bias = None if b is None else b.astype(np.float32, copy=False).reshape(m, 1)
        self.out = (1, m, *out)

    def _product(self, x: np.ndarray) -> np.ndarray:
        product = dot if self.weights.ndim == 2 else np.matmul
        return product(self.weights, gather(x, self.index, 0)).reshape(self.out[1], -1)

    def __call__(self, ctx, x, w, b=None):
        if x.shape != self.shape or x.dtype != _F32:
            return self.kernel(ctx, x, w, b, **self.attrs)
        y = self._product(x)
        if self.bias is not None:
            y += self.bias
        return y.reshape(self.out)

    def with_epilogue(self, curve: str, alpha: np.float32, beta: np.float32) -> KernelFn | None:
        """The convolution, then its bias and the activation ``curve`` in one compiled pass, once
        another kernel has brought numba in (a LeNet never imports it); until then, or with numba
        off, the callable returns None and the plan runs the activation's pass."""
        if self.bias is None:
            return None
        bias, epilogue = self.bias.reshape(-1), []

        def run(ctx, x, w, b=None):
            fast = compiled.loaded("curves")
            if fast is None or x.shape != self.shape or x.dtype != _F32:
                return None
            if not epilogue:
                epilogue.append(fast.Epilogue(curve, alpha, beta))
            return epilogue[0].bias_and_curve(self._product(x), bias).reshape(self.out)

        return run


class Depthwise:
    """A float32 depthwise convolution of one channel multiplier through the compiled loops
    (``compiled/conv.py``'s ``depthwise``): its taps laid out once, and, for a map small enough for
    one call of the channels-last loops, that call's arguments (its dispatch was a microsecond of a
    7 µs OCR-classifier convolution)."""

    __slots__ = ("kernel", "attrs", "shape", "taps", "bias", "out", "geometry", "small")

    def __init__(self, kernel: KernelFn, attrs: dict[str, Any], shape: tuple[int, ...], taps: np.ndarray,
                 b: np.ndarray | None, window: Window, kernel_size: tuple[int, int], small: bool):
        strides, dilations, begin, _, out, _ = window
        self.kernel, self.attrs, self.shape, self.taps = kernel, attrs, shape, taps
        self.bias = _NONE if b is None else np.ascontiguousarray(b, np.float32).reshape(-1)
        self.out = (shape[0], shape[1], *out)
        self.geometry = (begin, strides, dilations, kernel_size)
        self.small = (*begin, *strides, *dilations, *kernel_size) if small else None

    def _run(self, ctx, x, w, b, code: int, alpha: np.float32, beta: np.float32):
        fast = compiled.load("conv")
        if fast is None or x.shape != self.shape or x.dtype != _F32:
            return None
        y = np.empty(self.out, np.float32)
        if self.small is not None:
            fast.depthwise_small_taps(np.ascontiguousarray(x), self.taps, self.bias, y, *self.small, code, alpha, beta)
        else:
            fast.depthwise(np.ascontiguousarray(x), self.taps, self.bias, y, *self.geometry, code, alpha, beta)
        return y

    def __call__(self, ctx, x, w, b=None):
        y = self._run(ctx, x, w, b, -1, np.float32(0), np.float32(0))
        return self.kernel(ctx, x, w, b, **self.attrs) if y is None else y

    def with_epilogue(self, curve: str, alpha: np.float32, beta: np.float32) -> KernelFn | None:
        """The convolution with the activation ``curve`` applied in its output loop (None from the
        callable: the plan runs the activation's pass)."""
        fast = compiled.load("curves")
        if fast is None:
            return None
        code = fast.CODES[curve]
        return lambda ctx, x, w, b=None: self._run(ctx, x, w, b, code, alpha, beta)


def prepare_conv(kernel: KernelFn, window: Callable[..., Window], column_path: Callable[..., np.ndarray | None],
                 node: Node, consts: tuple, *, auto_pad: str, dilations, group: int, pads, strides) -> KernelFn | None:
    """The prepared callable of a float32 ``Conv`` node of constant weights and bias and a static
    input shape, when it is a 1×1 convolution of one image, a depthwise 2-D one or one the kernel
    runs through its small columns; else None (the kernel runs). ``window`` is the kernel's
    geometry function, ``column_path`` gives the kernel's column index for a shape, or None."""
    shape = static_shape(node, 0)
    w, b = consts[1], consts[2] if len(consts) > 2 else None
    if (shape is None or len(shape) not in (3, 4) or node.inputs[0].type.dtype != DType.FLOAT32
            or not all_constant(node, consts) or w.dtype != _F32 or w.ndim != len(shape)
            or (b is not None and b.dtype != _F32)):
        return None
    tup = (lambda v: None if v is None else tuple(v))
    geometry = window(shape, w.shape[2:], auto_pad, tup(dilations), tup(pads), tup(strides))
    attrs = {"auto_pad": auto_pad, "dilations": dilations, "group": group, "pads": pads, "strides": strides}
    index = column_path(shape, w, group, geometry)
    if index is not None:
        return Columns(kernel, attrs, shape, index, w, b, geometry[4])
    if len(shape) != 4:
        return None
    if geometry[5] and group == 1 and shape[0] == 1:
        return Pointwise(kernel, attrs, shape, w, b, geometry[4])
    if group == 1 or not group == shape[1] == w.shape[0] or w.shape[1] != 1 or min(geometry[2]) < 0:
        return None
    fast = compiled.load("conv")  # a depthwise convolution runs the compiled loops anyway
    if fast is None:
        return None
    return Depthwise(kernel, attrs, shape, fast.depthwise_taps(np.ascontiguousarray(w)), b, geometry,
                     (w.shape[2], w.shape[3]), fast.small_depthwise(shape, w.shape, geometry[4]))
