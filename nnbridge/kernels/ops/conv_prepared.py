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


def _one_gemm(rows: int, inner: int, columns: int, total: int) -> bool:
    """numpy makes this float32 product (``rows × inner`` by ``inner × columns`` per group, ``total``
    multiply-adds) as single-threaded GEMM calls: every side at least 2, below ``DOT_MIN_WORK``."""
    return min(rows, inner, columns) >= 2 and total < DOT_MIN_WORK


class _OneCall:
    """What ``Pointwise`` and ``Columns`` share: with numba in and numpy's OpenBLAS bound, a product
    numpy makes as single-threaded GEMM calls runs with its bias and the activation or residual sum
    that follows in one compiled call (``compiled/blas.py``: the same GEMM calls, then the float32
    steps in the plan's order, bit for bit), where they were three calls from Python."""

    __slots__ = ()

    def _joint(self, x: np.ndarray, epilogue=None, residual: np.ndarray | None = None) -> np.ndarray | None:
        """The convolution of ``x`` finished in one compiled call (``blas._finish``: the bias, then the
        curve of ``epilogue``, a ``curves.Epilogue``, or the ``residual`` sum), or None (another shape
        or dtype, no bias, numba off or not in yet, no bound OpenBLAS)."""
        blas = compiled.loaded("blas") if self.one_gemm and self.bias is not None else None
        if blas is None or not blas.READY or x.shape != self.shape or x.dtype != _F32:
            return None
        y = np.empty(self.flat, np.float32)
        curve = (blas.NO_CURVE, blas.ZERO, blas.ZERO) if epilogue is None else (
            epilogue.code, epilogue.alpha, epilogue.beta)
        self._compiled(blas, np.ascontiguousarray(x), self.bias.reshape(-1),
                       blas.NO_RESIDUAL if residual is None else residual, y, *curve)
        return y.reshape(self.out)

    def with_residual(self) -> KernelFn | None:
        """``(ctx, x, w, b, r) -> conv(x) + r``: the product, its bias and a residual sum of the
        output's shape in one compiled call (``_Biased`` in the plan runs it); None from the
        callable (another shape, dtype or layout, numba off): the plan adds it itself."""
        if not self.one_gemm or self.bias is None:
            return None

        def run(ctx, x, w, b, r):
            if type(r) is not np.ndarray or r.dtype != _F32 or r.shape != self.out or not r.flags.c_contiguous:
                return None
            return self._joint(x, residual=r.reshape(self.flat))

        return run


class Pointwise(_OneCall):
    """A 1×1 convolution of one float32 image, stride 1 and no pads: one matrix product of the
    weights ``(M, C)`` and the image ``(C, H·W)``, then the bias (the kernel's own path)."""

    __slots__ = ("kernel", "attrs", "shape", "weights", "bias", "rows", "out", "flat", "one_gemm")

    def __init__(self, kernel: KernelFn, attrs: dict[str, Any], shape: tuple[int, ...], w: np.ndarray,
                 b: np.ndarray | None, out: list[int]):
        m, c = w.shape[:2]
        self.kernel, self.attrs, self.shape = kernel, attrs, shape
        self.weights = w.reshape(m, c)
        self.bias = None if b is None else b.astype(np.float32, copy=False).reshape(m, 1)
        self.rows = (c, -1)
        self.out = (1, m, *out)
        pixels = math.prod(out)
        self.flat, self.one_gemm = (m, pixels), _one_gemm(m, c, pixels, m * c * pixels)

    def _compiled(self, blas, x, bias, residual, y, code, alpha, beta) -> None:
        blas.product(self.weights, x.reshape(self.rows), bias, residual, y, code, alpha, beta)

    def __call__(self, ctx, x, w, b=None):
        if x.shape != self.shape or x.dtype != _F32:
            return self.kernel(ctx, x, w, b, **self.attrs)
        y = self._joint(x)
        if y is not None:
            return y
        y = dot(self.weights, x.reshape(self.rows))  # matmul's product, its ufunc overhead left out
        if self.bias is not None:
            y += self.bias
        return y.reshape(self.out)

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

        def run(ctx, x, w, b=None):
            if x.shape != self.shape or x.dtype != _F32 or compiled.disabled():
                return None
            y = self._joint(x, epilogue)
            if y is not None:
                return y
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


class Columns(_OneCall):
    """A float32 convolution of one image on a small map (a patch embedding, a downsampling, a
    grouped or a 1-D convolution): its columns gathered through an index made once, then one
    matrix product per group with the weights and the bias (the kernel's own path, ``conv_nd``'s
    small columns), without the kernel's per-call geometry and index lookups."""

    __slots__ = ("kernel", "attrs", "shape", "index", "weights", "bias", "out", "grouped", "flat", "one_gemm")

    def __init__(self, kernel: KernelFn, attrs: dict[str, Any], shape: tuple[int, ...], index: np.ndarray,
                 w: np.ndarray, b: np.ndarray | None, out: list[int]):
        m, (group, k, pixels) = w.shape[0], index.shape
        self.kernel, self.attrs, self.shape = kernel, attrs, shape
        self.index = index[0] if group == 1 else index  # one group: a plain 2-D product, as the kernel's
        self.weights = w.reshape(m, -1) if group == 1 else w.reshape(group, m // group, -1)
        self.grouped = (index, w.reshape(group, m // group, -1))  # the compiled call's operands
        self.bias = None if b is None else b.astype(np.float32, copy=False).reshape(m, 1)
        self.out = (1, m, *out)
        self.flat, self.one_gemm = (m, pixels), _one_gemm(m // group, k, pixels, m * k * pixels)

    def _compiled(self, blas, x, bias, residual, y, code, alpha, beta) -> None:
        blas.columns_product(x, *self.grouped, bias, residual, y, code, alpha, beta)

    def _product(self, x: np.ndarray) -> np.ndarray:
        product = dot if self.weights.ndim == 2 else np.matmul
        return product(self.weights, gather(x, self.index, 0)).reshape(self.out[1], -1)

    def __call__(self, ctx, x, w, b=None):
        if x.shape != self.shape or x.dtype != _F32:
            return self.kernel(ctx, x, w, b, **self.attrs)
        y = self._joint(x)
        if y is not None:
            return y
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
            y = self._joint(x, epilogue[0])
            if y is not None:
                return y
            return epilogue[0].bias_and_curve(self._product(x), bias).reshape(self.out)

        return run


class Direct:
    """A float32 one-group 2-D convolution the kernel runs through the compiled direct loops (a
    stem on a large map): ``grouped_conv2d`` called with the geometry worked out once (the kernel's
    choosing was 11 of the OCR classifier's 40 µs stem); the kernel for another shape or dtype, or
    before numba is in."""

    __slots__ = ("kernel", "attrs", "shape", "weights", "bias", "geometry")

    def __init__(self, kernel: KernelFn, attrs: dict[str, Any], shape: tuple[int, ...], w: np.ndarray,
                 b: np.ndarray | None, window: Window):
        strides, dilations, begin, _, out, _ = window
        self.kernel, self.attrs, self.shape = kernel, attrs, shape
        self.weights, self.bias = np.ascontiguousarray(w), b
        self.geometry = (strides, dilations, begin, out)

    def __call__(self, ctx, x, w, b=None):
        fast = compiled.loaded("conv")
        if fast is None or x.shape != self.shape or x.dtype != _F32:
            return self.kernel(ctx, x, w, b, **self.attrs)
        return fast.grouped_conv2d(x, self.weights, self.bias, *self.geometry)


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
                 direct: Callable[..., bool], node: Node, consts: tuple, *, auto_pad: str, dilations, group: int, pads,
                 strides) -> KernelFn | None:
    """The prepared callable of a float32 ``Conv`` node of constant weights and bias and a static
    input shape, when it is a 1×1 convolution of one image, a depthwise 2-D one, one the kernel
    runs through its small columns or a one-group 2-D one it runs through the direct loops; else
    None (the kernel runs). ``window`` is the kernel's geometry function, ``column_path`` gives the
    kernel's column index for a shape, or None, ``direct`` says whether it takes the direct loops."""
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
    if group == 1 and min(geometry[2]) >= 0 and direct(shape, w, geometry[4]):
        return Direct(kernel, attrs, shape, w, b, geometry)
    if group == 1 or not group == shape[1] == w.shape[0] or w.shape[1] != 1 or min(geometry[2]) < 0:
        return None
    fast = compiled.load("conv")  # a depthwise convolution runs the compiled loops anyway
    if fast is None:
        return None
    return Depthwise(kernel, attrs, shape, fast.depthwise_taps(np.ascontiguousarray(w)), b, geometry,
                     (w.shape[2], w.shape[3]), fast.small_depthwise(shape, w.shape, geometry[4]))
