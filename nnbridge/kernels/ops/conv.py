"""Convolutions: Conv, ConvTranspose, ConvInteger, QLinearConv (1-D/2-D/3-D, groups, dilations, auto_pad).

Conv is im2col over a strided window view plus one batched matmul over the
groups (a 1x1 convolution is a plain matmul); a depthwise convolution (one input
channel per group) is instead one einsum over a channels-last window view, which
avoids copying every tap into columns; ConvTranspose is the adjoint:
one matmul to columns, then a scatter-add per kernel tap (col2im). Float32 2-D convolutions of
few channels per group, and one-group ones of few filters or input channels on large maps, run
the compiled direct loops of ``kernels/compiled/conv.py`` instead (no copy of every tap).
"""

from __future__ import annotations

import functools
import itertools

import numpy as np

from ...ir import DType, Node
from .. import compiled
from ..parallel import alone, dot, matmul
from ..registry import kernel
from ._windows import (
    FLOATS,
    check_auto_pad,
    compute_dtype,
    frozen,
    gather,
    output_sizes,
    pad_spatial,
    padded_positions,
    prod,
    window_extent,
    window_geometry,
    windows,
)
from .conv_prepared import prepare_conv

QUANT = frozenset({DType.UINT8, DType.INT8})
#: a depthwise map of at most this many channels × output pixels is one matmul over its windows
#: (measured: 7×7 taps on 16×8×8 65 µs against 208 µs tap by tap; 16×16×16 157 against 267)
SMALL_DEPTHWISE = 4096
#: a stride-1 2-D depthwise map of at least this many output pixels and at most this many taps
#: runs as flat rows (measured: faster from 28×28 with 3×3 taps; slower on smaller maps, or with
#: 5×5 taps below 56×56, where the per-row paths win)
FLAT_DEPTHWISE_PIXELS = 28 * 28
FLAT_DEPTHWISE_TAPS = 9
#: a one-group 2-D convolution of a kernel larger than 1×1 runs the compiled direct loops (four
#: filters per pass over the map) from this many output pixels, when it has few filters or few input
#: channels (a stem), instead of columns and a matrix product (measured at 1 thread in whole models:
#: ResNet's 64-filter 7×7 stem 4.6 → 3.2 ms, Inception's 4.3 → 3.2; DenseNet's 32-filter 3×3 on
#: 56×56 on par with the compiled im2col, 5.0 → 3.3 against numpy's); at 2 threads the filters split
#: over the kernel threads. More filters stay with columns: ResNet's 64-filter 3×3 on 56×56 took
#: 5.2 ms direct against 3.5, Inception's 192-filter one 9.2 against 7.9
DIRECT_PIXELS = 28 * 28
DIRECT_FILTERS = 32
#: … and from this much work (input pixels × weights): LeNet's stays numpy's and never imports numba
DIRECT_WORK = 1 << 20
#: a one-group 1-D convolution of at most this many input channels and weights (a stem over a
#: signal) runs the compiled loops as one row of the 2-D ones, from the same work
MAX_STEM_CHANNELS = 4
MAX_STEM_WEIGHTS = 16 * 3 * 3 * 3


#: output rows at least this wide take the compiled im2col (measured against numpy's copy of the
#: transposed window view: 2.8× faster at 112×112, 1.2-1.5× at 20×20 to 56×56; slower at 7×7 and
#: 14×14 on the AVX-512 machine, where its per-row work outweighs the copying); narrower ones too
#: when it splits over the kernel threads, where numpy's copy is one thread's (AMD, 2 threads:
#: DenseNet's 128 channels on 14×14 142 against 222 µs, ResNet's 512 on 7×7 175 against 274)
IM2COL_MIN_WIDTH = 16
#: an image's columns of at most this many elements are gathered by one ``take`` through an index
#: kept per input shape and window (measured: a 3-channel 3×3 stride-2 window over 32×32, 6,912
#: columns, 27 µs of padding, window view and transposing copy against 7 µs); larger ones copy
#: through the window view, whose index would cost memory
SMALL_COLUMNS = 1 << 15
#: a grouped convolution (several channels per group) of one image whose columns hold at most this
#: many elements takes them and one batched matrix product instead of the compiled direct loops
#: (measured at 1 thread: RegNet's 4-group 3×3 on 8×8 and 4×4 maps 7 µs against 12-20; a 6-group
#: one on 7×7, 42k elements, on par; 28×28 maps 3.5× slower)
GROUPED_COLUMNS = 1 << 14


def conv_nd(x: np.ndarray, w: np.ndarray, group: int, strides, dilations, begin, end) -> np.ndarray:
    """Cross-correlation of ``x (N, C, *S)`` with ``w (M, C/group, *K)``; computed in x's dtype."""
    n, c = x.shape[:2]
    m = w.shape[0]
    kernel = w.shape[2:]
    rank = len(kernel)
    cg, mg = c // group, m // group
    out = output_sizes(x.shape[2:], kernel, strides, dilations, begin, end)
    pixels = prod(out)
    if all(k == 1 for k in kernel) and all(s == 1 for s in strides) and not any(begin) and not any(end):
        if group == 1 and n == 1:
            return dot(w.reshape(m, c), x.reshape(c, pixels), np.matmul).reshape(n, m, *out)
        y = np.matmul(w.reshape(group, mg, cg), x.reshape(n, group, cg, pixels))  # (N, G, Mg, P)
        return y.reshape(n, m, *out)
    if cg == 1 and group > 1:
        return _depthwise(x, w, strides, dilations, begin, end, out)
    if n == 1 and c * prod(kernel) * pixels <= SMALL_COLUMNS:
        index = _column_index(x.shape, tuple(kernel), tuple(strides), tuple(dilations), tuple(begin), tuple(end),
                              group)
        return _grouped_matmul(w.reshape(group, mg, -1), gather(x, index, 0)).reshape(1, m, *out)
    if n == 1 and rank == 2 and x.dtype == np.float32 and min(begin) >= 0 and (
            out[1] >= IM2COL_MIN_WIDTH or not alone(c * prod(kernel) * pixels)):
        fast = compiled.loaded("conv")  # numba is in: every float32 model's convolutions bring it
        if fast is not None:
            cols = fast.im2col(x[0], kernel, strides, dilations, begin, out).reshape(group, cg * prod(kernel), pixels)
            return _grouped_matmul(w.reshape(group, mg, -1), cols).reshape(1, m, *out)
    xp = pad_spatial(x, begin, end)
    view = windows(xp, out, kernel, strides, dilations)  # (N, C, *out, *K)
    view = view.reshape(n, group, cg, *out, *kernel)
    spatial = tuple(range(3, 3 + rank))
    taps = tuple(range(3 + rank, 3 + 2 * rank))
    if n == 1:
        cols = np.ascontiguousarray(view[0].transpose(0, 1, *(a - 1 for a in taps), *(a - 1 for a in spatial)))
        cols = cols.reshape(group, cg * prod(kernel), pixels)
        return _grouped_matmul(w.reshape(group, mg, -1), cols).reshape(1, m, *out)
    if prod(kernel) > pixels:  # a kernel larger than the output (a training step's kernel gradient):
        # columns with the taps innermost, so the copy reads the input's rows in runs of the kernel width
        rows = np.ascontiguousarray(view.transpose(1, 0, *spatial, 2, *taps))
        rows = rows.reshape(group, n * pixels, cg * prod(kernel))
        y = _grouped_matmul(w.reshape(group, mg, -1), rows.transpose(0, 2, 1)).reshape(group, mg, n, pixels)
        return np.ascontiguousarray(y.transpose(2, 0, 1, 3)).reshape(n, m, *out)
    cols = np.ascontiguousarray(view.transpose(1, 2, *taps, 0, *spatial))
    cols = cols.reshape(group, cg * prod(kernel), n * pixels)
    y = _grouped_matmul(w.reshape(group, mg, -1), cols).reshape(group, mg, n, pixels)
    return np.ascontiguousarray(y.transpose(2, 0, 1, 3)).reshape(n, m, *out)


@functools.lru_cache(maxsize=64)
def _column_index(shape: tuple, kernel: tuple, strides: tuple, dilations: tuple, begin: tuple, end: tuple,
                  group: int) -> np.ndarray:
    """Where each element of one image's columns ``(G, C/G·taps, pixels)`` lies in the image
    flattened, with its size standing for a padded tap: the copy through the window view, made
    once of positions instead of values (read-only: shared by every run and thread)."""
    out = output_sizes(shape[2:], kernel, strides, dilations, begin, end)
    view = windows(padded_positions(shape, begin, end), out, kernel, strides, dilations)[0]  # (C, *out, *K)
    rank = len(kernel)
    index = np.ascontiguousarray(view.transpose(0, *range(1 + rank, 1 + 2 * rank), *range(1, 1 + rank)))
    return frozen(index.reshape(group, -1, prod(view.shape[1:1 + rank])))


def _depthwise(x: np.ndarray, w: np.ndarray, strides, dilations, begin, end, out) -> np.ndarray:
    """Each input channel convolved with its own ``M/C`` filters:
    ``y[n, c·mult + m] = Σ_k x_win[n, c, k] w[c, m, k]``.

    Few channels: one multiply-add per kernel tap over the whole NCHW tensor (long
    contiguous rows), or, when each tap's product is small enough that the per-tap calls
    dominate (ConvNeXt's 7×7 on an 8×8 map: 49 taps), one matmul over the windows. Many
    channels: one einsum over a channels-last window view, whose inner loop runs along the
    channels (measured crossover: about 32 channels).
    """
    n, c = x.shape[:2]
    kernel = w.shape[2:]
    mult = w.shape[0] // c
    if (mult == 1 and len(kernel) == 2 and strides == [1, 1] and prod(kernel) <= FLAT_DEPTHWISE_TAPS
            and prod(out) >= FLAT_DEPTHWISE_PIXELS):
        return _depthwise_flat(x, w, dilations, begin, end, out)
    xp = pad_spatial(x, begin, end)
    if c <= 32 and mult == 1 and c * prod(out) <= SMALL_DEPTHWISE:
        cols = windows(xp, out, kernel, strides, dilations).reshape(n, c, prod(out), prod(kernel))
        return np.matmul(cols, w.reshape(c, prod(kernel), 1)).reshape(n, c, *out)
    if c <= 32 and mult == 1:
        y = np.zeros((n, c, *out), x.dtype)
        term = np.empty_like(y)
        taps = w.reshape(c, -1)
        for k, tap in enumerate(itertools.product(*(range(size) for size in kernel))):
            window = tuple(slice(t * d, t * d + s * (o - 1) + 1, s) for t, d, s, o in zip(tap, dilations, strides, out))
            np.multiply(xp[(slice(None), slice(None)) + window], taps[:, k].reshape(1, c, *[1] * len(out)), out=term)
            y += term
        return y
    rank = len(kernel)
    last = np.ascontiguousarray(np.moveaxis(xp, 1, -1))  # (N, *S, C)
    st = last.strides
    view = np.lib.stride_tricks.as_strided(
        last, shape=(n, *out, *kernel, c),
        strides=(st[0], *(st[1 + i] * strides[i] for i in range(rank)),
                 *(st[1 + i] * dilations[i] for i in range(rank)), st[-1]), writeable=False)
    taps = np.ascontiguousarray(np.moveaxis(w.reshape(c, mult, *kernel), (0, 1), (-2, -1)))  # (*K, C, mult)
    spatial, kern = "hwdHWD"[:rank], "ijkIJK"[:rank]
    y = np.einsum(f"n{spatial}{kern}c,{kern}cm->n{spatial}cm", view, taps)
    return np.ascontiguousarray(np.moveaxis(y.reshape(n, *out, c * mult), -1, 1))


def _depthwise_flat(x: np.ndarray, w: np.ndarray, dilations, begin, end, out) -> np.ndarray:
    """Stride-1 2-D depthwise convolution over each padded channel as one flat row: output pixel
    ``(i, j)`` computed at flat position ``i·Wp + j`` (Wp the padded width) reads tap ``(a, b)``
    at that position plus ``a·dh·Wp + b·dw``, so every tap is one contiguous slice of the row
    and its multiply-add runs over whole channels instead of output rows (1.4-1.7× faster than
    the per-row paths on 28×28 and larger maps). The ``Wp - W_out`` columns computed past each
    row's end are dropped at the end; one spare padded row keeps the last tap's slice inside."""
    n, c = x.shape[:2]
    (kh, kw), (dh, dw), (oh, ow) = w.shape[2:], dilations, out
    xp = np.ascontiguousarray(pad_spatial(x, begin, [end[0] + 1, end[1]]))
    wp = xp.shape[3]
    rows = xp.reshape(n, c, -1)
    length = oh * wp
    taps = w.reshape(c, kh * kw, 1)
    acc = np.empty((n, c, length), x.dtype)
    term = np.empty_like(acc)
    for k, (a, b) in enumerate(itertools.product(range(kh), range(kw))):
        start = a * dh * wp + b * dw
        source = rows[:, :, start:start + length]
        if k == 0:
            np.multiply(source, taps[:, 0], out=acc)
        else:
            np.multiply(source, taps[:, k], out=term)
            acc += term
    return np.ascontiguousarray(acc.reshape(n, c, oh, wp)[..., :ow])


def _grouped_matmul(w: np.ndarray, cols: np.ndarray) -> np.ndarray:
    """(G, Mg, K) @ (G, K, P); one group goes through a plain 2-D GEMM (numpy's batched path is slower,
    and ``np.dot`` makes matmul's product without its ufunc's microsecond of overhead)."""
    if w.shape[0] == 1:
        return dot(w[0], cols[0])[None]
    return matmul(w, cols)


def _check_conv(node: Node, *, auto_pad="NOTSET") -> str | None:
    reason = check_auto_pad(auto_pad)
    if reason:
        return reason
    x, w = node.input(0), node.input(1)
    if x is not None and x.type.rank is not None and x.type.rank < 3:
        return f"input of rank {x.type.rank} (needs N, C and a spatial axis)"
    if w is not None and x is not None and w.type.dtype is not None and w.type.dtype != x.type.dtype \
            and node.op in ("Conv", "ConvTranspose"):
        return "weight dtype differs from input dtype"
    return None


def _bias_shape(rank: int) -> tuple[int, ...]:
    return (1, -1) + (1,) * rank


def _grouped_columns(x_shape: tuple, w: np.ndarray, group: int, out) -> bool:
    """Whether a grouped convolution takes ``conv_nd``'s small columns (``GROUPED_COLUMNS``)."""
    return (group > 1 and w.shape[1] > 1 and x_shape[0] == 1
            and x_shape[1] * prod(w.shape[2:]) * prod(out) <= GROUPED_COLUMNS)


def _direct_one_group(x_shape: tuple, w: np.ndarray, out) -> bool:
    """Whether a one-group convolution of an input of ``x_shape`` is worth the compiled direct loops
    (``DIRECT_PIXELS``)."""
    if w.size * prod(x_shape[2:]) < DIRECT_WORK:
        return False
    if len(x_shape) == 4:
        return (prod(w.shape[2:]) > 1 and prod(out) >= DIRECT_PIXELS
                and (w.shape[0] <= DIRECT_FILTERS or x_shape[1] <= MAX_STEM_CHANNELS))
    return len(x_shape) == 3 and w.size <= MAX_STEM_WEIGHTS and x_shape[1] <= MAX_STEM_CHANNELS


def _compiled_grouped(x: np.ndarray, w: np.ndarray, b, group: int, strides, dilations, begin, end,
                      out=None):
    """A float32 1-D or 2-D depthwise or grouped convolution, or a one-group one on a large map,
    through the compiled loops (bias included), or None where they do not apply or numba is off;
    ``out`` the output size when the caller has it."""
    if x.ndim not in (3, 4):
        return None
    if out is None:
        out = output_sizes(x.shape[2:], w.shape[2:], strides, dilations, begin, end)
    if group == 1 and not _direct_one_group(x.shape, w, out):
        return None  # before loading: a model without one never imports numba
    fast = compiled.load("conv")
    if fast is None or (b is not None and b.dtype != np.float32):
        return None
    one_row = x.ndim == 3  # a 1-D convolution is a 2-D one over a single row
    if one_row:
        x, w, out = x[:, :, None], w[:, :, None], [1, *out]
        strides, dilations, begin = [1, *strides], [1, *dilations], [0, *begin]
    if not fast.handles(x, w, group, begin):
        return None
    y = fast.grouped_conv2d(x, w, b, strides, dilations, begin, out)
    return y[:, :, 0] if one_row else y


def _tuple(values) -> tuple | None:
    return None if values is None else tuple(values)


@functools.lru_cache(maxsize=4096)
def _window(shape: tuple, kernel: tuple, auto_pad: str, dilations, pads, strides) -> tuple:
    """(strides, dilations, pads begin, pads end, output size, a plain matrix product) of a
    convolution window over an input of ``shape``: computed once per shape and attributes (a
    mobile network's small layers spent as long in these few lines as in their arithmetic)."""
    strides, dilations, begin, end, out = window_geometry(shape[2:], kernel, auto_pad, dilations, pads, strides)
    pointwise = (all(k == 1 for k in kernel) and all(s == 1 for s in strides) and not any(begin)
                 and not any(end))
    return strides, dilations, begin, end, out, pointwise


def _column_path(x_shape: tuple, w: np.ndarray, group: int, window: tuple) -> np.ndarray | None:
    """The column index ``conv`` gathers a float32 one-image convolution of ``x_shape`` through
    (``conv_nd``'s small-columns path), or None when it takes another path."""
    strides, dilations, begin, end, out, pointwise = window
    if x_shape[1] != w.shape[1] * group or w.shape[0] % group or (group != 1 and not _grouped_columns(
            x_shape, w, group, out)):
        return None  # a mismatch the kernel itself refuses
    if (pointwise or x_shape[0] != 1 or _direct_one_group(x_shape, w, out) or not prod(x_shape) * prod(out)
            or x_shape[1] * prod(w.shape[2:]) * prod(out) > SMALL_COLUMNS):
        return None
    return _column_index(tuple(x_shape), tuple(w.shape[2:]), tuple(strides), tuple(dilations), tuple(begin),
                         tuple(end), group)


def _prepare_conv(node: Node, consts: tuple, *, auto_pad="NOTSET", dilations=None, group=1, pads=None,
                  strides=None):
    return prepare_conv(conv, _window, _column_path, _direct_one_group, node, consts, auto_pad=auto_pad,
                        dilations=dilations, group=group, pads=pads, strides=strides)


@kernel("Conv", dtypes=FLOATS, check=_check_conv, prepare=_prepare_conv)
def conv(ctx, x, w, b=None, *, auto_pad="NOTSET", dilations=None, group=1, pads=None, strides=None):
    strides, dilations, begin, end, out, pointwise = _window(x.shape, w.shape[2:], auto_pad, _tuple(dilations),
                                                             _tuple(pads), _tuple(strides))
    if pointwise and group == 1 and x.shape[0] == 1 and x.dtype == w.dtype == np.float32:
        # a 1×1 convolution of one image: the matrix product and the bias, as conv_nd and below
        m, c = w.shape[:2]
        y = dot(w.reshape(m, c), x.reshape(c, -1))
        if b is not None:
            y += b.astype(np.float32, copy=False).reshape(m, 1)
        return y.reshape(1, m, *out)
    if (group != 1 and not _grouped_columns(x.shape, w, group, out)) or _direct_one_group(x.shape, w, out):
        y = _compiled_grouped(x, w, b, int(group), strides, dilations, begin, end, out)
        if y is not None:
            return y
    dt = compute_dtype(x.dtype)
    y = conv_nd(x.astype(dt, copy=False), w.astype(dt, copy=False), int(group), strides, dilations, begin, end)
    if b is not None:
        y += b.astype(dt, copy=False).reshape(_bias_shape(x.ndim - 2))
    return y.astype(x.dtype, copy=False)


def _integer_conv(x, x_zero, w, w_zero, group: int, window: dict) -> np.ndarray:
    """Exact integer convolution (float64 holds every int8 product sum of realistic size)."""
    xf = x.astype(np.float64) - (0 if x_zero is None else np.float64(np.asarray(x_zero).reshape(-1)[0]))
    wf = w.astype(np.float64)
    if w_zero is not None:
        wz = np.asarray(w_zero, dtype=np.float64)
        wf = wf - (wz.reshape((-1,) + (1,) * (w.ndim - 1)) if wz.size > 1 else wz.reshape(-1)[0])
    strides, dilations, begin, end, _ = window_geometry(x.shape[2:], w.shape[2:], **window)
    return conv_nd(xf, wf, int(group), strides, dilations, begin, end)


@kernel("ConvInteger", dtypes=QUANT, check=_check_conv)
def conv_integer(ctx, x, w, x_zero=None, w_zero=None, *, auto_pad="NOTSET", dilations=None, group=1, pads=None,
                 strides=None):
    window = {"auto_pad": auto_pad, "dilations": dilations, "pads": pads, "strides": strides}
    return np.rint(_integer_conv(x, x_zero, w, w_zero, group, window)).astype(np.int32)


def requantize(real: np.ndarray, y_scale, y_zero) -> np.ndarray:
    """Round half to even and saturate to the zero point's integer type (ONNX QuantizeLinear rules)."""
    dtype = np.asarray(y_zero).dtype if y_zero is not None else np.dtype(np.uint8)
    info = np.iinfo(dtype)
    zero = 0 if y_zero is None else np.asarray(y_zero, dtype=np.float64)
    q = np.rint(real / np.asarray(y_scale, dtype=np.float64)) + zero
    return np.clip(q, info.min, info.max).astype(dtype)


@kernel("QLinearConv", dtypes=QUANT, check=_check_conv)
def qlinear_conv(ctx, x, x_scale, x_zero, w, w_scale, w_zero, y_scale, y_zero, b=None, *, auto_pad="NOTSET",
                 dilations=None, group=1, pads=None, strides=None):
    window = {"auto_pad": auto_pad, "dilations": dilations, "pads": pads, "strides": strides}
    acc = _integer_conv(x, x_zero, w, w_zero, group, window)
    rank = x.ndim - 2
    if b is not None:
        acc = acc + b.astype(np.float64).reshape(_bias_shape(rank))
    scale = np.float64(np.asarray(x_scale).reshape(-1)[0]) * np.asarray(w_scale, dtype=np.float64).reshape(
        _bias_shape(rank) if np.asarray(w_scale).size > 1 else ())
    return requantize(acc * scale, y_scale, y_zero)


@kernel("ConvTranspose", dtypes=FLOATS, check=_check_conv)
def conv_transpose(ctx, x, w, b=None, *, auto_pad="NOTSET", dilations=None, group=1, output_padding=None,
                   output_shape=None, pads=None, strides=None):
    dt = compute_dtype(x.dtype)
    xc, wc = x.astype(dt, copy=False), w.astype(dt, copy=False)
    n, c = x.shape[:2]
    sizes = x.shape[2:]
    rank = len(sizes)
    group = int(group)
    kernel_ = w.shape[2:]
    cg, mg = c // group, w.shape[1]
    strides = list(strides or [1] * rank)
    dilations = list(dilations or [1] * rank)
    out_pad = list(output_padding or [0] * rank)
    full = [s * (i - 1) + window_extent(k, d) for s, i, k, d in zip(strides, sizes, kernel_, dilations)]
    begin, out = _transpose_geometry(sizes, full, strides, out_pad, auto_pad, output_shape, pads)
    if all(s == 1 for s in strides):
        y = _unit_stride_transpose(xc, wc, group, dilations, begin, out)
        if y is not None:
            if b is not None:
                y += b.astype(dt, copy=False).reshape(_bias_shape(rank))
            return y.astype(x.dtype, copy=False)

    # columns: (G, Mg*K, N*P) = W_g^T @ x_g
    pixels = prod(sizes)
    xg = xc.reshape(n, group, cg, pixels).transpose(1, 2, 0, 3).reshape(group, cg, n * pixels)
    cols = np.matmul(wc.reshape(group, cg, mg * prod(kernel_)).transpose(0, 2, 1), xg)
    cols = cols.reshape(group, mg, *kernel_, n, *sizes)
    acc = np.zeros((group, mg, n, *full), dtype=dt)
    for tap in itertools.product(*(range(k) for k in kernel_)):
        region = tuple(slice(t * d, t * d + s * (i - 1) + 1, s) for t, d, s, i in zip(tap, dilations, strides, sizes))
        acc[(slice(None), slice(None), slice(None)) + region] += cols[(slice(None), slice(None)) + tap]
    # crop the pads / extend with zeros (output_padding, larger output_shape)
    y = np.zeros((group, mg, n, *out), dtype=dt)
    src, dst = [], []
    for b0, o, f in zip(begin, out, full):
        lo, hi = max(b0, 0), min(b0 + o, f)
        src.append(slice(lo, max(hi, lo)))
        dst.append(slice(lo - b0, lo - b0 + max(hi - lo, 0)))
    y[(slice(None),) * 3 + tuple(dst)] = acc[(slice(None),) * 3 + tuple(src)]
    y = np.ascontiguousarray(np.moveaxis(y, 2, 0)).reshape(n, group * mg, *out)
    if b is not None:
        y += b.astype(dt, copy=False).reshape(_bias_shape(rank))
    return y.astype(x.dtype, copy=False)


def _unit_stride_transpose(x, w, group: int, dilations, begin, out) -> np.ndarray | None:
    """A stride-1 ConvTranspose is the convolution of ``x`` with the spatially flipped kernel, its
    in and out channels swapped per group, padded by the kernel's extent less the crop (im2col and
    one product instead of adding columns tap by tap: a convolution's input gradient in training).
    None when the crop exceeds that padding (the general path handles it)."""
    kernel_ = w.shape[2:]
    rank = len(kernel_)
    reach = [d * (k - 1) for d, k in zip(dilations, kernel_)]
    full = [i + r for i, r in zip(x.shape[2:], reach)]
    pad_begin = [r - b0 for r, b0 in zip(reach, begin)]
    pad_end = [r - (f - b0 - o) for r, f, b0, o in zip(reach, full, begin, out)]
    if min(pad_begin + pad_end) < 0:
        return None
    c, mg = w.shape[:2]
    flipped = w[(slice(None), slice(None)) + (slice(None, None, -1),) * rank]
    swapped = flipped.reshape(group, c // group, mg, *kernel_).swapaxes(1, 2).reshape(group * mg, c // group, *kernel_)
    return conv_nd(x, np.ascontiguousarray(swapped), group, [1] * rank, list(dilations), pad_begin, pad_end)


def _transpose_geometry(sizes, full, strides, out_pad, auto_pad: str, output_shape, pads
                        ) -> tuple[list[int], list[int]]:
    """(crop begin, output size) per axis from pads / output_shape / auto_pad."""
    rank = len(sizes)
    if output_shape is not None:
        output_shape = list(output_shape)[-rank:]
    elif auto_pad in ("SAME_UPPER", "SAME_LOWER"):
        output_shape = [i * s for i, s in zip(sizes, strides)]
    if output_shape is not None:
        begin = []
        for f, op, o in zip(full, out_pad, output_shape):
            total = f + op - o
            begin.append(total // 2 if auto_pad == "SAME_UPPER" else total - total // 2)
        return begin, output_shape
    pads = list(pads or [0] * (2 * rank)) if auto_pad != "VALID" else [0] * (2 * rank)
    out = [f + op - pads[i] - pads[rank + i] for i, (f, op) in enumerate(zip(full, out_pad))]
    return pads[:rank], out


def _check_deform(node: Node) -> str | None:
    x = node.input(0)
    if x is not None and x.type.rank is not None and x.type.rank != 4:
        return f"{x.type.rank - 2}-D deformable convolution is not implemented (2-D only)"
    return None


def _bilinear_zeros(image: np.ndarray, py: np.ndarray, px: np.ndarray) -> np.ndarray:
    """Sample ``image (N, G, Cg, H, W)`` at real positions ``(N, G, *out)``; corners outside read 0.

    Returns ``(N, G, *out, Cg)``.
    """
    n, g, _, h, w = image.shape
    y0, x0 = np.floor(py), np.floor(px)
    ly, lx = py - y0, px - x0
    y0, x0 = y0.astype(np.int64), x0.astype(np.int64)
    lead = (np.arange(n).reshape(-1, 1, 1, 1), np.arange(g).reshape(1, -1, 1, 1))
    out = 0
    for yi, wy in ((y0, 1 - ly), (y0 + 1, ly)):
        for xi, wx in ((x0, 1 - lx), (x0 + 1, lx)):
            valid = (yi >= 0) & (yi < h) & (xi >= 0) & (xi < w)
            picked = image[lead[0], lead[1], :, np.clip(yi, 0, h - 1), np.clip(xi, 0, w - 1)]
            out = out + picked * (wy * wx * valid)[..., None]
    return out


@kernel("DeformConv", dtypes=FLOATS, check=_check_deform)
def deform_conv(ctx, x, w, offset, b=None, mask=None, *, dilations=None, group=1, offset_group=1, pads=None,
                strides=None):
    """Each kernel tap samples the input bilinearly at its offset position; then one grouped matmul."""
    dt = compute_dtype(x.dtype)
    n, c, h, wd = x.shape
    m, cg = w.shape[:2]
    kh, kw = w.shape[2:]
    group = int(group)
    off_groups = int(offset_group)
    strides = list(strides or [1, 1])
    dilations = list(dilations or [1, 1])
    pads = list(pads or [0, 0, 0, 0])
    oh, ow = offset.shape[2:]
    offsets = offset.astype(dt, copy=False).reshape(n, off_groups, kh, kw, 2, oh, ow)
    masks = (mask.astype(dt, copy=False).reshape(n, off_groups, kh, kw, oh, ow) if mask is not None
             else np.ones((n, off_groups, kh, kw, oh, ow), dt))
    image = x.astype(dt, copy=False).reshape(n, off_groups, c // off_groups, h, wd)
    base_y = (np.arange(oh) * strides[0] - pads[0]).reshape(-1, 1)
    base_x = (np.arange(ow) * strides[1] - pads[1]).reshape(1, -1)
    cols = np.empty((n, c, kh * kw, oh, ow), dt)
    for i, j in itertools.product(range(kh), range(kw)):
        py = base_y + i * dilations[0] + offsets[:, :, i, j, 0]
        px = base_x + j * dilations[1] + offsets[:, :, i, j, 1]
        sampled = _bilinear_zeros(image, py, px) * masks[:, :, i, j, ..., None]  # (N, G, OH, OW, Cg)
        cols[:, :, i * kw + j] = np.moveaxis(sampled, -1, 2).reshape(n, c, oh, ow)
    cols = cols.reshape(n, group, cg * kh * kw, oh * ow).transpose(1, 2, 0, 3).reshape(group, cg * kh * kw, -1)
    y = np.matmul(w.astype(dt, copy=False).reshape(group, m // group, -1), cols)
    y = np.ascontiguousarray(y.reshape(m, n, oh, ow).transpose(1, 0, 2, 3))
    if b is not None:
        y += b.astype(dt, copy=False).reshape(1, -1, 1, 1)
    return y.astype(x.dtype, copy=False)
