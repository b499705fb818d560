"""Linear algebra: Gemm, MatMul (batched, 1-D), MatMulInteger, QLinearMatMul, Einsum, Det.

Everything goes to BLAS through ``np.matmul`` in the input dtype (fp16 is computed in fp32 and
cast back); integer products are computed exactly in float64 or int64. A two-operand Einsum is
one batched matmul between transposes (numpy's own einsum runs batched contractions in its C
loop, not BLAS, and searches a path on every call); other equations go to
``np.einsum(optimize=True)``.
"""

from __future__ import annotations

import math
from functools import lru_cache

import numpy as np

from ...ir import DType, Node
from .. import parallel
from ..parallel import DOT_MIN_WORK, dot
from ..registry import kernel
from ._common import static_shape
from ._windows import FLOATS, WITH_BF16, compute_dtype
from .conv import requantize

INTS = frozenset({DType.INT32, DType.INT64, DType.UINT32, DType.UINT64})
_F32 = np.dtype(np.float32)
QUANT = frozenset({DType.UINT8, DType.INT8})


def _check_gemm(node: Node, *, alpha=1.0, beta=1.0) -> str | None:
    a = node.input(0)
    if a is not None and a.type.dtype in INTS:
        for name, value in (("alpha", float(alpha)), ("beta", float(beta))):
            if not value.is_integer():
                return f"integer Gemm with {name}={value} is not implemented"
    return None


def _prepare_gemm(node: Node, consts: tuple, *, alpha=1.0, beta=1.0, transA=0, transB=0):
    """A float32 ``Gemm`` of constant B (and C) without scaling (a linear layer, a classifier's
    head): the product and the bias as the kernel computes them, its dtype work and transposes done
    once (4 µs a call on a small transformer's rows, half of it that work); the kernel for
    another dtype or rank."""
    b, c = consts[1], consts[2] if len(consts) > 2 else None
    if (b is None or b.dtype != _F32 or b.ndim != 2 or transA or float(alpha) != 1.0
            or (len(node.inputs) > 2 and node.inputs[2] is not None and (c is None or c.dtype != _F32))):
        return None
    if c is not None and float(beta) != 1.0:
        return None
    weight, bias = (b.T if transB else b), c
    attrs = {"alpha": alpha, "beta": beta, "transA": transA, "transB": transB}

    def run(ctx, a, b, c=None):
        if a.dtype != _F32 or a.ndim != 2:
            return gemm(ctx, a, b, c, **attrs)
        y = dot(a, weight, np.matmul)
        if bias is not None:
            y += bias
        return y

    return run


@kernel("Gemm", dtypes=WITH_BF16 | INTS, check=_check_gemm, prepare=_prepare_gemm)
def gemm(ctx, a, b, c=None, *, alpha=1.0, beta=1.0, transA=0, transB=0):
    dt = compute_dtype(a.dtype)
    a_ = a.astype(dt, copy=False)
    b_ = b.astype(dt, copy=False)
    if transA:
        a_ = a_.T
    if transB:
        b_ = b_.T
    y = dot(a_, b_, np.matmul)
    if alpha != 1.0:
        y *= dt.type(alpha)
    if c is not None and beta != 0:
        c_ = c.astype(dt, copy=False)
        y += c_ if beta == 1.0 else c_ * dt.type(beta)  # y is a new array of the broadcast shape
    return y.astype(a.dtype, copy=False)


def matmul_nd(a: np.ndarray, b: np.ndarray) -> np.ndarray:
    """np.matmul, except that a stack of rows times one matrix is a single GEMM
    (numpy would call BLAS once per leading index with a few rows each)."""
    if a.ndim > 2 and b.ndim == 2:
        return dot(a.reshape(-1, a.shape[-1]), b, np.matmul).reshape(*a.shape[:-1], b.shape[1])
    return dot(a, b, np.matmul) if a.ndim == 2 else parallel.matmul(a, b)


def _prepare_matmul(node: Node, consts: tuple):
    """A float32 ``MatMul`` of static shapes too small for ``dot``'s blocks at any thread count
    (``DOT_MIN_WORK``; a small transformer's projections and attention products): numpy's product
    as the kernel makes it, its rank and dtype work done once (1.5 of a 16×32·32×64 product's 4.4 µs
    here); the kernel for other shapes or dtypes."""
    sa, sb = static_shape(node, 0), static_shape(node, 1)
    if (sa is None or sb is None or len(sa) < 2 or len(sb) < 2 or node.inputs[0].type.dtype != DType.FLOAT32
            or node.inputs[1].type.dtype != DType.FLOAT32):
        return None
    if len(sb) == 2:  # a stack of rows times one matrix: one product of the rows (``matmul_nd``)
        rows, out = (math.prod(sa[:-1]), sa[-1]), (*sa[:-1], sb[-1])
    elif len(sa) == len(sb) and sa[:-2] == sb[:-2]:  # a stack of products: numpy's own call
        rows = out = None
    else:
        return None
    if math.prod(sa) * sb[-1] >= DOT_MIN_WORK:
        return None

    def run(ctx, a, b):
        if a.shape != sa or b.shape != sb or a.dtype != _F32 or b.dtype != _F32:
            return matmul(ctx, a, b)
        return np.matmul(a, b) if rows is None else np.matmul(a.reshape(rows), b).reshape(out)

    return run


@kernel("MatMul", dtypes=WITH_BF16 | INTS, prepare=_prepare_matmul)
def matmul(ctx, a, b):
    if a.dtype == b.dtype == _F32:  # computed as it is: no dtype round trip (a small graph's call is a few µs)
        return matmul_nd(a, b)
    dt = compute_dtype(a.dtype)
    return matmul_nd(a.astype(dt, copy=False), b.astype(dt, copy=False)).astype(a.dtype, copy=False)


def _zero_point(zero, rows: bool):
    """Per-tensor scalar, or a per-row (A: shape (M,)) / per-column (B: shape (N,)) vector."""
    if zero is None:
        return np.int64(0)
    z = np.asarray(zero).astype(np.int64)
    if z.ndim >= 1 and z.size > 1 and rows:
        return z.reshape(*z.shape, 1)
    return z


@kernel("MatMulInteger", dtypes=QUANT)
def matmul_integer(ctx, a, b, a_zero=None, b_zero=None):
    a_ = a.astype(np.int64) - _zero_point(a_zero, rows=True)
    b_ = b.astype(np.int64) - _zero_point(b_zero, rows=False)
    return np.matmul(a_, b_).astype(np.int32)


def _scale(scale, rows: bool):
    s = np.asarray(scale, dtype=np.float64)
    return s.reshape(*s.shape, 1) if rows and s.ndim >= 1 and s.size > 1 else s


def _check_qlinear(node: Node) -> str | None:
    zero = node.input(7)
    if zero is not None and zero.type.dtype is not None and zero.type.dtype not in QUANT:
        return f"output type {zero.type.dtype.short} is not implemented"
    return None


@kernel("QLinearMatMul", dtypes=QUANT, check=_check_qlinear)
def qlinear_matmul(ctx, a, a_scale, a_zero, b, b_scale, b_zero, y_scale, y_zero):
    a_ = (a.astype(np.float64) - _zero_point(a_zero, rows=True)) * _scale(a_scale, rows=True)
    b_ = (b.astype(np.float64) - _zero_point(b_zero, rows=False)) * _scale(b_scale, rows=False)
    return requantize(np.matmul(a_, b_), y_scale, y_zero)


@lru_cache(maxsize=256)
def _contraction(equation: str) -> tuple | None:
    """A two-operand equation as one matmul: (letters summed within A alone, within B alone, the
    batch, left, contracted and right letters, the output's letters), or None when it is not
    that simple (an ellipsis, an implicit output, a letter twice in one operand)."""
    if "..." in equation or "->" not in equation:
        return None
    inputs, out = equation.split("->")
    operands = inputs.split(",")
    if len(operands) != 2:
        return None
    a, b = operands
    if any(len(set(term)) != len(term) for term in (a, b, out)) or set(out) - set(a + b):
        return None
    return (a, b, out, _letters(a, (), (b, out)), _letters(b, (), (a, out)), _letters(out, (a, b), ()),
            _letters(out, (a,), (b,)), _letters(a, (b,), (out,)), _letters(out, (b,), (a,)))


def _letters(term: str, within: tuple[str, ...], outside: tuple[str, ...]) -> list[str]:
    """The letters of ``term`` found in every term of ``within`` and in none of ``outside``."""
    return [c for c in term if all(c in t for t in within) and not any(c in t for t in outside)]


def _summed_out(x: np.ndarray, term: str, letters: list[str]) -> tuple[np.ndarray, str]:
    """``x`` summed over ``letters`` (ones only its own operand has), and its term without them."""
    if not letters:
        return x, term
    return x.sum(axis=tuple(term.index(c) for c in letters)), "".join(c for c in term if c not in letters)


def _einsum_matmul(equation: str, x: np.ndarray, y: np.ndarray) -> np.ndarray | None:
    plan = _contraction(equation)
    if plan is None or x.ndim != len(plan[0]) or y.ndim != len(plan[1]):
        return None
    a, b, out, only_a, only_b, batch, left, contracted, right = plan
    x, a = _summed_out(x, a, only_a)
    y, b = _summed_out(y, b, only_b)
    size = {c: n for c, n in zip(a, x.shape)}
    if any(size[c] != n for c, n in zip(b, y.shape) if c in size):
        return None  # a letter of two sizes: let numpy report it
    size.update(zip(b, y.shape))

    def count(letters):
        return math.prod(size[c] for c in letters)  # np.prod of a list: 3 µs a call

    xv = x.transpose([a.index(c) for c in batch + left + contracted])
    yv = y.transpose([b.index(c) for c in batch + contracted + right])
    if count(batch) > 1 and max(len(left), len(contracted), len(right)) <= 1:
        # attention's einsums: BLAS reads each (batch) matrix of the transposed views in place, with
        # its row stride (the reshape below copies both operands: 57 µs against 26-35 per head block)
        def matrix(v: np.ndarray, rows: str, cols: str) -> np.ndarray:
            return v.reshape(*v.shape[:len(batch)], count(rows), count(cols))  # a view: each group ≤ 1 axis

        product = parallel.matmul(matrix(xv, left, contracted), matrix(yv, contracted, right))
    else:
        xm = xv.reshape(count(batch), count(left), count(contracted))
        ym = yv.reshape(count(batch), count(contracted), count(right))
        product = dot(xm[0], ym[0], np.matmul)[None] if xm.shape[0] == 1 else parallel.matmul(xm, ym)
    made = batch + left + right
    result = product.reshape([size[c] for c in made])
    result = result.transpose([made.index(c) for c in out])
    return result if result.flags.c_contiguous else result.copy()


@kernel("Einsum", dtypes=WITH_BF16 | INTS)
def einsum(ctx, *operands, equation):
    dt = compute_dtype(operands[0].dtype)
    equation = equation.replace(" ", "")
    cast = [o.astype(dt, copy=False) for o in operands]
    y = _einsum_matmul(equation, *cast) if len(cast) == 2 and dt.kind == "f" else None
    if y is None:
        y = np.einsum(equation, *cast, optimize=True)
    return np.asarray(y).astype(operands[0].dtype, copy=False)


@kernel("Det", dtypes=FLOATS)
def det(ctx, x):
    dt = compute_dtype(x.dtype)
    return np.asarray(np.linalg.det(x.astype(dt, copy=False))).astype(x.dtype, copy=False)
