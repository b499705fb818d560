"""Matrix products shared over the kernel threads by calling numpy's own OpenBLAS from compiled code.

At more than one thread, numpy's BLAS would run each product on its own pool, whose workers spin
for about a tenth of a second after every call: the kernel threads' next loop then finds the other
core taken, and gains nothing (measured: a two-part loop right after a threaded GEMM took as long
as one part after another). So there is one pool: each product is cut into row or column blocks,
one per kernel thread, and each block is one single-threaded call (``openblas_set_num_threads_local``,
which in numpy's build sets the process's count: set around all of a product's blocks, restored
after) of the same ``cblas_?gemm`` numpy calls, with the
operands' layout flags numpy would pass. A block's values are the whole product's bit for bit: the
float32 GEMM sums each output over K in an order that depends only on where the output sits in
the kernel's tile, so blocks are cut at whole tiles of the kernels this machine's OpenBLAS chose
(``CUTS``, by its core name: rows and columns at 16 for the AVX-512 kernels, as long as every block
is large enough for the kernel the whole product takes, ``SMALL_GEMM``; rows only, at 24, for the
AVX2 ones, whose columns sum differently when cut anywhere, so a product whose rows cannot be cut
evenly is cut by columns at every thread count instead, each block numpy's product of that block,
``COLUMN_BLOCKS``); on a core not measured,
a product is numpy's own call. The float64 GEMM does not keep its sums (measured: some products of 300-400
lines differ when cut), so a float64 product is one call (``tests/reference/test_kernel_threads.py``
holds both).

The same single-threaded call also serves the small convolutions the reference prepares
(``product``, ``columns_product``, ``vector_then_gate``): where ``np.dot`` or ``np.matmul`` would make
one such call per product or group, it is made from compiled code together with the bias and the
activation, the residual sum or the squeeze-excite gate that follows, in the plan's float32 order.

The symbols are those of the OpenBLAS that numpy's wheels bundle (``scipy_cblas_sgemm64_``…);
``READY`` is False when numpy was built against another BLAS, and every product then stays
``np.dot``'s.
"""

from __future__ import annotations

import ctypes
import functools
from pathlib import Path
from typing import NamedTuple

import llvmlite.binding as llvm
import numpy as np
from numba import prange, types

from ..parallel import bounds
from ._core import block_bounds, jit, jit_parallel
from .curves import bias_rows, gate_rows

_SYMBOLS = {"sgemm": "scipy_cblas_sgemm64_", "dgemm": "scipy_cblas_dgemm64_",
            "sgemv": "scipy_cblas_sgemv64_", "dgemv": "scipy_cblas_dgemv64_",
            "local": "openblas_set_num_threads_local", "core": "scipy_openblas_get_corename64_"}


def _bind() -> ctypes.CDLL | None:
    """Make the bundled OpenBLAS's symbols known to numba's linker; None when there is none."""
    libs = Path(np.__file__).parent.parent / "numpy.libs"
    for path in sorted(libs.glob("libscipy_openblas64_*.so")):
        try:
            lib = ctypes.CDLL(str(path))
            addresses = {name: ctypes.cast(getattr(lib, name), ctypes.c_void_p).value for name in _SYMBOLS.values()}
        except (OSError, AttributeError):
            continue
        for name, address in addresses.items():
            llvm.add_symbol(name, address)
        return lib
    return None


class Cuts(NamedTuple):
    """Where a float32 product may be cut with every sum kept: at multiples of ``tile`` rows (and
    columns, when ``columns``); ``small``: the core has small-matrix kernels below ``SMALL_GEMM``."""

    tile: int
    columns: bool
    small: bool


#: by the core name OpenBLAS reports for the kernels it chose (measured: 40 random products of up
#: to 300 lines cut in two and three; the AVX2 kernels' rows in tiles of 24, none of their column
#: cuts, at 4 to 96, kept every sum)
_CUTS = {"SkylakeX": Cuts(16, True, True), "Haswell": Cuts(24, False, False), "Zen": Cuts(24, False, False)}


def _core(lib: ctypes.CDLL) -> str:
    name = lib[_SYMBOLS["core"]]
    name.restype = ctypes.c_char_p
    return name().decode(errors="replace").strip()


_LIB = _bind()
CORE = "" if _LIB is None else _core(_LIB)
CUTS = _CUTS.get(CORE)
READY = CUTS is not None
if READY:
    #: ``one_thread(count)`` sets OpenBLAS's thread count and returns the one it replaces (named
    #: "local", it is the process's in numpy's build: ``_split`` says what follows)
    one_thread = _LIB.openblas_set_num_threads_local
    one_thread.argtypes, one_thread.restype = [ctypes.c_int], ctypes.c_int
_I, _P = types.int64, types.voidptr
_GEMM_ARGS = (types.int32, types.int32, types.int32, _I, _I, _I)
_sgemm = types.ExternalFunction(_SYMBOLS["sgemm"], types.void(*_GEMM_ARGS, types.float32, _P, _I, _P, _I,
                                                                types.float32, _P, _I))
_dgemm = types.ExternalFunction(_SYMBOLS["dgemm"], types.void(*_GEMM_ARGS, types.float64, _P, _I, _P, _I,
                                                                types.float64, _P, _I))
_GEMV_ARGS = (types.int32, types.int32, _I, _I)
_sgemv = types.ExternalFunction(_SYMBOLS["sgemv"], types.void(*_GEMV_ARGS, types.float32, _P, _I, _P, _I,
                                                                types.float32, _P, _I))
_dgemv = types.ExternalFunction(_SYMBOLS["dgemv"], types.void(*_GEMV_ARGS, types.float64, _P, _I, _P, _I,
                                                                types.float64, _P, _I))
_local_threads = types.ExternalFunction(_SYMBOLS["local"], types.int32(types.int32))
_ROW_MAJOR, _NO_TRANS, _TRANS = 101, 111, 112
#: multiply-adds up to which OpenBLAS takes its small-matrix kernels on AVX-512 machines, which sum
#: in another order: a larger product is only cut into blocks that all stay above, so that every
#: block runs the kernel the whole product would (measured: 36 of 400 products of 1-2.4 million
#: multiply-adds differed when cut below). One too small for two such blocks (a mobile network's
#: 1×1 convolutions on 14×14 maps) is instead always cut into blocks below, at every thread count,
#: one thread included: its values are then the small kernels' (each block numpy's product of that
#: block), the same at any thread count, and it runs in half the time on two (measured: 240×40 by
#: 40×196 40 µs as one call, 38 as two blocks in turn, 28 as two on two threads)
SMALL_GEMM = 1_000_000
#: (most K, most multiply-adds): float32 products of two non-transposed operands of at most that
#: inner dimension and size are always cut into blocks below ``SMALL_GEMM`` too, because the small
#: kernels (which do not pack the operands) run them faster than the packing kernel runs the whole
#: (measured at 1 thread, one call against the blocks in turn, and at 2 threads against two blocks
#: above the bound: 384×384 by 384×49 156/137 µs and 83/69; 64×288 by 288×3136 1.17/1.16 ms and
#: 0.59/0.54; 128×64 by 64×3136 505/484 and 268/235; but 128×576 by 576×784 1.11/1.49 ms and
#: 0.60/0.73, and K of 768 and more slower still). Not when ``b``'s rows lie a whole number of KiB
#: apart: the blocks then read them through few cache sets (64×256 by 256×1024 419/585 µs)
SMALL_BLOCKS_FASTER = ((288, 64_000_000), (576, 16_000_000))
#: a product whose rows cannot be cut in two blocks of whole tiles within ``UNEVEN`` times an even
#: cut (BERT's 128 tokens: 72 and 56 rows; a 1×1 convolution's 32 or 64 output channels: 24 and 8,
#: 24 and 40) and that has at least ``COLUMNS_FROM`` columns is cut by columns instead where the
#: core's columns cannot be cut with every sum kept (the AVX2 kernels): always into
#: ``COLUMN_BLOCKS`` blocks, at every thread count, one included (each block numpy's product of
#: that block), so its values are the same at any thread count. Measured at 2 threads, columns
#: against rows: 32×32 by 32×12544 277/384 µs, 64×64 by 64×3136 169/216, 128×768 by 768×3072
#: 3.46/3.93 ms; at 1 thread the two blocks in turn against one call 367/456, 312/306, 6.88/6.85.
#: Fewer columns: slower at 1 thread (112×672 by 672×196 392/331) and at 2 (128×2048 by 2048×64
#: 341/286); rows that cut evenly: slower by columns (512×768 by 768×768 3.94/3.40 ms)
UNEVEN, COLUMNS_FROM, COLUMN_BLOCKS = 1.1, 512, 2
#: rows per block of a matrix-vector product (any cut keeps its sums)
_VECTOR_TILE = 16


@jit
def _block(a, b, c, m0, m1, n0, n1):
    """``c[m0:m1, n0:n1]`` = that block of ``a @ b``, one single-threaded call, each operand read in
    place as numpy's call reads it (transposed when its columns are the contiguous axis)."""
    item = a.itemsize
    trans_a, lda = (_NO_TRANS, a.strides[0] // item) if a.strides[1] == item else (_TRANS, a.strides[1] // item)
    trans_b, ldb = (_NO_TRANS, b.strides[0] // item) if b.strides[1] == item else (_TRANS, b.strides[1] // item)
    k = a.shape[1]
    saved = _local_threads(1)
    if item == 4:
        _sgemm(_ROW_MAJOR, trans_a, trans_b, m1 - m0, n1 - n0, k, np.float32(1), a[m0:].ctypes.data, lda,
               b[:, n0:].ctypes.data, ldb, np.float32(0), c[m0:, n0:].ctypes.data, c.shape[1])
    else:
        _dgemm(_ROW_MAJOR, trans_a, trans_b, m1 - m0, n1 - n0, k, 1.0, a[m0:].ctypes.data, lda,
               b[:, n0:].ctypes.data, ldb, 0.0, c[m0:, n0:].ctypes.data, c.shape[1])
    _local_threads(saved)


#: ``product``'s and ``columns_product``'s ``code`` for no curve (then ``residual``, if any, is
#: added), their ``residual`` when there is none, and the curve parameters then
NO_CURVE, NO_RESIDUAL, ZERO = -1, np.empty((0, 0), np.float32), np.float32(0)


@jit
def _finish(y, bias, residual, code, alpha, beta):
    """A product's rows finished as the plan's steps would: ``curve(y + bias)`` (``curves.bias_rows``)
    for a curve ``code``; else ``y + bias``, then ``+ residual`` when one is given, each sum float32
    in that order (the kernel's ``y += bias``, the Add's ``y + residual``)."""
    if code != NO_CURVE:
        bias_rows(code, y, bias, 0, y.shape[0], alpha, beta)
        return
    for m in range(y.shape[0]):
        b, row = bias[m], y[m]
        for p in range(row.size):
            row[p] += b
        if residual.size:
            other = residual[m]
            for p in range(row.size):
                row[p] += other[p]


@jit
def product(w, x, bias, residual, y, code, alpha, beta):
    """A small 1×1 convolution's result ``y (M, N)`` from ``w (M, K)`` and ``x (K, N)`` (float32,
    each side at least 2, read in place): numpy's single-threaded GEMM call (``_block``, as
    ``np.dot`` makes it below ``DOT_MIN_WORK``), then ``_finish``: one call where the product,
    the bias pass and the activation's or the residual sum's were three from Python."""
    _block(w, x, y, 0, y.shape[0], 0, y.shape[1])
    _finish(y, bias, residual, code, alpha, beta)


@jit
def columns_product(x, index, w, bias, residual, y, code, alpha, beta):
    """A small convolution by columns (``ops/conv_prepared.Columns``) in one call: ``x``'s values
    at ``index (G, K, N)`` (flat positions; ``x.size`` marks padding, read as 0) gathered, group
    g's ``w[g] (M/G, K)`` times them by numpy's single-threaded GEMM call (``np.dot`` for one
    group, ``np.matmul``'s call per item for more), then ``_finish`` on ``y (M, N)``."""
    groups, k, n = index.shape
    flat, taken = x.reshape(x.size), index.reshape(index.size)
    cols = np.empty(index.size, np.float32)
    for i in range(taken.size):
        j = taken[i]
        cols[i] = flat[j] if j < flat.size else np.float32(0)
    cols3 = cols.reshape(groups, k, n)
    rows = w.shape[1]
    for g in range(groups):
        _block(w[g], cols3[g], y[g * rows:(g + 1) * rows], 0, rows, 0, n)
    _finish(y, bias, residual, code, alpha, beta)


@jit
def vector_then_gate(w, h, bias, x, code, alpha, beta):
    """A squeeze-excite's gate, ``x[c] · curve((w @ h)[c] + bias[c])`` for C-contiguous float32 ``w
    (C, K)`` (C at least 2), ``h`` K values and ``x (C, P)``: numpy's single-threaded matrix-vector
    call (``_rows``, as ``np.dot`` makes it), then ``curves.gate_rows``, in one call."""
    raw = np.empty(w.shape[0], np.float32)
    _rows(w, h, raw, 0, w.shape[0])
    y = np.empty_like(x)
    gate_rows(code, x, raw, bias, y, 0, x.shape[0], alpha, beta)
    return y


@jit
def _rows(a, x, y, m0, m1):
    """``y[m0:m1]`` = those rows of ``a`` times the vector ``x``: one single-threaded call of the
    matrix-vector product numpy calls, ``a``'s rows contiguous."""
    item = a.itemsize
    k, lda = a.shape[1], a.strides[0] // item
    saved = _local_threads(1)
    if item == 4:
        _sgemv(_ROW_MAJOR, _NO_TRANS, m1 - m0, k, np.float32(1), a[m0:].ctypes.data, lda, x.ctypes.data,
               x.strides[0] // item, np.float32(0), y[m0:].ctypes.data, y.strides[0] // item)
    else:
        _dgemv(_ROW_MAJOR, _NO_TRANS, m1 - m0, k, 1.0, a[m0:].ctypes.data, lda, x.ctypes.data,
               x.strides[0] // item, 0.0, y[m0:].ctypes.data, y.strides[0] // item)
    _local_threads(saved)


@jit_parallel
def _rows_split(a, x, y, parts):
    """``y = a @ x`` in ``parts`` blocks of rows, one per kernel thread (``_split`` says why the
    thread count is set around them)."""
    saved = _local_threads(1)
    for p in prange(parts):
        lo, hi = block_bounds(y.shape[0], _VECTOR_TILE, parts, p)
        _rows(a, x, y, lo, hi)
    _local_threads(saved)


@jit_parallel
def _split(a, b, c, by_rows, tile, parts):
    """``c = a @ b`` in ``parts`` row (or column) blocks of whole ``tile``s, one per kernel thread.
    The thread count OpenBLAS's "local" call sets is the process's in numpy's build, not the calling
    thread's (measured: another thread reads it back): set around all the blocks, so that no block's
    restore lets another's GEMM start on OpenBLAS's own threads, which cut its columns and change
    its sums (a flaky ulp in ``test_kernel_threads``)."""
    m, n = c.shape
    saved = _local_threads(1)
    for p in prange(parts):
        lo, hi = block_bounds(m if by_rows else n, tile, parts, p)
        if by_rows:
            _block(a, b, c, lo, hi, 0, n)
        else:
            _block(a, b, c, 0, m, lo, hi)
    _local_threads(saved)


@jit_parallel
def _items(a, b, c, parts):
    """``c[i] = a[i] @ b[i]`` for a stack, the items shared over the kernel threads, one call each
    (``_split`` says why the thread count is set around them)."""
    count, m, n = c.shape
    saved = _local_threads(1)
    for p in prange(parts):
        first, last = block_bounds(count, 1, parts, p)
        for i in range(first, last):
            _block(a[i], b[i], c[i], 0, m, 0, n)
    _local_threads(saved)


@jit_parallel
def _items_2(a, b, c, parts):
    """``_items`` over two leading axes."""
    outer, inner, m, n = c.shape
    saved = _local_threads(1)
    for p in prange(parts):
        first, last = block_bounds(outer * inner, 1, parts, p)
        for i in range(first, last):
            _block(a[i // inner, i % inner], b[i // inner, i % inner], c[i // inner, i % inner], 0, m, 0, n)
    _local_threads(saved)


def matmul(a: np.ndarray, b: np.ndarray, parts: int) -> np.ndarray | None:
    """``np.matmul(a, b)`` at one BLAS thread, bit for bit, of two stacks of float32 or float64
    matrices with the same leading axes, their items shared over ``parts`` kernel threads (numpy
    makes one GEMM call per item); None where numpy would not (vector or copied items)."""
    lead = a.shape[:-2]
    m, k = a.shape[-2:]
    n = b.shape[-1]
    if m < 2 or n < 2 or k < 2 or not (_in_place(a) and _in_place(b)) or np.may_share_memory(a, b):
        return None
    c = np.empty((*lead, m, n), a.dtype)
    a3, b3 = _stacked(a), _stacked(b)
    if a3 is not None and b3 is not None:
        _items(a3, b3, c.reshape(-1, m, n), max(1, min(parts, a3.shape[0])))
    elif a.ndim == 4:  # attention's heads: (batch, heads) transposed views that do not flatten
        _items_2(a, b, c, max(1, min(parts, a.shape[0] * a.shape[1])))
    else:
        return None
    return c


def _stacked(x: np.ndarray) -> np.ndarray | None:
    """``x`` as one stack axis and its matrices, a view; None when that would need a copy (the leading
    axes of more than one item do not nest: attention's transposed heads). Checked on the strides, not
    by trying the reshape: a failed view costs 4 µs, a tenth of a head block's products."""
    lead = [(size, stride) for size, stride in zip(x.shape[:-2], x.strides[:-2]) if size != 1]
    if any(outer[1] != inner[0] * inner[1] for outer, inner in zip(lead, lead[1:])):
        return None
    return x.reshape(-1, *x.shape[-2:])


def _in_place(x: np.ndarray) -> bool:
    """numpy's BLAS call reads ``x``'s matrices (its last two axes) where they are (one axis
    contiguous, the other a whole number of elements apart, at least a row or column): no copy first."""
    item = x.itemsize
    rows, cols = x.strides[-2:]
    height, width = x.shape[-2:]
    return ((cols == item and rows >= width * item and rows % item == 0)
            or (rows == item and cols >= height * item and cols % item == 0))


def dot(a: np.ndarray, b: np.ndarray, parts: int) -> np.ndarray | None:
    """``np.dot(a, b)`` at one BLAS thread, bit for bit, of 2-D float32 or float64 matrices of one
    dtype, in ``parts`` blocks over the kernel threads (one part: this thread); None where numpy
    would not make one plain GEMM or matrix-vector call (a copied or shared operand) or where
    blocks would change the sums (``_matrix_vector``)."""
    m, k = a.shape
    n = b.shape[1]
    if k < 2 or min(m, n) < 1 or np.may_share_memory(a, b):
        return None
    if min(m, n) == 1:
        return _matrix_vector(a, b, parts)
    if not (_in_place(a) and _in_place(b)):
        return None
    c = np.empty((m, n), a.dtype)
    by_rows, edge, blocks = _cut(a, b, parts)
    if blocks == 1:  # in this thread: a one-part prange may still wake a worker to run it
        _block(a, b, c, 0, m, 0, n)
    elif parts == 1:  # one thread: the blocks a product is cut into at every thread count, in turn
        edges = bounds(edge, CUTS.tile, blocks)
        for lo, hi in zip(edges, edges[1:]):
            _block(a, b, c, lo, hi, 0, n) if by_rows else _block(a, b, c, 0, m, lo, hi)
    else:
        _split(a, b, c, by_rows, CUTS.tile, blocks)
    return c


def _matrix_vector(a: np.ndarray, b: np.ndarray, parts: int) -> np.ndarray | None:
    """``np.dot(a, b)`` when one side is a single row or column (numpy makes it one matrix-vector
    call), in blocks of the matrix's rows over the kernel threads: each row's sum over K is the same
    in any block (a memory-bound product: a classifier's weights come from memory at twice the
    speed on two cores). Only a C-contiguous matrix (measured: OpenBLAS's other matrix-vector
    kernel sums a row differently when its rows are cut, and numpy's call on a matrix with gaps
    between its rows gave other sums than this one); None for those and for one-line products."""
    m, n = a.shape[0], b.shape[1]
    matrix, vector = (a, b[:, 0]) if n == 1 else (b.T, a[0])
    item = a.itemsize
    rows, cols = matrix.strides
    if (matrix.shape[0] < 2 or cols != item or rows != matrix.shape[1] * item
            or vector.strides[0] <= 0 or vector.strides[0] % item):
        return None
    c = np.empty((m, n), a.dtype)
    out = c[:, 0] if n == 1 else c[0]
    parts = min(parts, -(-matrix.shape[0] // _VECTOR_TILE))
    if parts == 1:
        _rows(matrix, vector, out, 0, matrix.shape[0])
    else:
        _rows_split(matrix, vector, out, parts)
    return c


def _cut(a: np.ndarray, b: np.ndarray, most: int) -> tuple[bool, int, int]:
    """How ``dot`` cuts ``a @ b`` for ``most`` threads: (by rows of ``a``, else by columns of ``b``;
    the length of that side; the number of blocks)."""
    m, k = a.shape
    n = b.shape[1]
    by_rows = m >= n or not CUTS.columns
    if a.itemsize != 4:
        return by_rows, m if by_rows else n, 1
    if not CUTS.columns and n >= COLUMNS_FROM and _rows_uneven(m):
        return False, n, COLUMN_BLOCKS
    # the small kernels take a product of two non-transposed operands whatever its shape, others only
    # for some shapes: a small product with a transposed operand stays one call
    small_ok = CUTS.small and a.strides[1] == b.strides[1] == a.itemsize
    faster = small_ok and b.strides[0] % 1024 != 0 and any(
        k <= most_k and m * n * k <= most_work for most_k, most_work in SMALL_BLOCKS_FASTER)
    edge = m if by_rows else n
    return by_rows, edge, _parts(edge, (n if by_rows else m) * k, most, small_ok, faster)


def cut_alone(a: np.ndarray, b: np.ndarray) -> bool:
    """Whether ``dot`` cuts ``a @ b`` into blocks even at one thread (so that its values are the same
    at every thread count): then a one-thread product goes through ``dot`` too."""
    return _cut(a, b, 1)[2] > 1


@functools.lru_cache(maxsize=1024)
def _rows_uneven(m: int) -> bool:
    """Whether ``m`` rows cut in two at whole tiles leave one block more than ``UNEVEN`` times half."""
    return max(_block_lines(m, 2)) > UNEVEN * m / 2


@functools.lru_cache(maxsize=4096)
def _parts(edge: int, per_line: int, most: int, small_ok: bool, small_faster: bool) -> int:
    """How many blocks of whole tiles (``CUTS``) of an ``edge``-long side (each line ``per_line``
    multiply-adds) to cut a product into for ``most`` threads, every block taking the kernel every
    other cut of it takes at any thread count. A core without small kernels: up to ``most``. Below
    ``SMALL_GEMM``: any number when ``small_ok`` (the small kernels take them all), else one. Above
    it, when ``small_ok`` and the small kernels are faster (``small_faster``) or no two blocks could
    stay above: at least as many blocks as keep each below the bound, at any thread count, one
    included; else the most (≤ ``most``) blocks above it."""
    tiles = -(-edge // CUTS.tile)
    if not CUTS.small:
        return min(most, tiles)
    if edge * per_line <= SMALL_GEMM:
        return min(most, tiles) if small_ok else 1
    if small_ok and (small_faster or min(_block_lines(edge, 2)) * per_line <= SMALL_GEMM):
        for parts in range(2, tiles + 1):
            if max(_block_lines(edge, parts)) * per_line <= SMALL_GEMM:
                return max(parts, min(most, tiles))
    for parts in range(min(most, tiles), 1, -1):
        if min(_block_lines(edge, parts)) * per_line > SMALL_GEMM:
            return parts
    return 1


def _block_lines(edge: int, parts: int) -> list[int]:
    """The lines of each of ``parts`` blocks of an ``edge``-long side, as ``_split`` cuts it."""
    edges = bounds(edge, CUTS.tile, parts)
    return [hi - lo for lo, hi in zip(edges, edges[1:])]
