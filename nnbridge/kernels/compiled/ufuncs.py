"""numpy's own elementwise loops shared over the kernel threads.

An elementwise numpy operator (``np.tanh``, ``np.exp``, ``np.add``…) runs on one core. Its inner
loop is a C function numpy hands out for exactly this use (``ufunc._resolve_dtypes_and_context``
and ``_get_strided_loop``, numpy's interface for compilers such as numba; the capsule's layout is
numpy's "1.24 ufunc call info"); this module calls that function from compiled code on blocks of
the operands, one block per kernel thread. Each element is computed by the same loop numpy calls
on the whole array, so the values are numpy's bit for bit (elementwise loops do not depend on an
element's neighbours; ``tests/reference/test_kernel_threads.py`` checks every op that comes here on
random blocks). Operands are read as rows of one output shape (R, N) with a byte stride per row
and per element: the same shape, a scalar, a row repeated (a bias), a column repeated (a
per-row statistic); anything else stays numpy's own call.
"""

from __future__ import annotations

import ctypes
import math

import numpy as np
from llvmlite import ir
from numba import prange, types
from numba.extending import intrinsic

from ._core import block_bounds, jit, jit_parallel

#: elements per block edge: blocks start a whole number of cache lines after the operands do
ALIGN = 16


@intrinsic
def _call_loop(typingctx, address, context, data, dims, strides, auxdata):
    """``address(context, data, dims, strides, auxdata)``: numpy's strided-loop signature, every
    argument a pointer passed as an integer."""
    def codegen(cgctx, builder, signature, args):
        pointer = ir.IntType(8).as_pointer()
        function = ir.FunctionType(ir.IntType(32), [pointer] * 5)
        loop = builder.inttoptr(args[0], function.as_pointer())
        return builder.call(loop, [builder.inttoptr(a, pointer) for a in args[1:]])
    return types.int32(*[types.int64] * 6), codegen


@jit
def span(plan, first, last):
    """Elements ``[first, last)`` of the (R, width) output in row order, one loop call per row
    piece. ``plan`` (int64): loop, context, auxdata, width, operand count k, then k base addresses,
    k row strides and k element strides in bytes (operand ``i``'s element (row, column) is at
    ``base + row·row_stride + column·stride``)."""
    loop, context, auxdata, width, count = plan[0], plan[1], plan[2], plan[3], plan[4]
    bases, row_strides, strides = plan[5:5 + count], plan[5 + count:5 + 2 * count], plan[5 + 2 * count:]
    data = np.empty(count, np.int64)
    dims = np.empty(1, np.int64)
    i = first
    while i < last:
        row, column = i // width, i % width
        length = min(width - column, last - i)
        for k in range(count):
            data[k] = bases[k] + row * row_strides[k] + column * strides[k]
        dims[0] = length
        _call_loop(loop, context, data.ctypes.data, dims.ctypes.data, strides.ctypes.data, auxdata)
        i += length


@jit_parallel
def span_split(plan, total, count, step, parts):
    """``span`` over ``count`` blocks of ``ALIGN`` elements (``total`` in all) in ``parts`` parts."""
    for p in prange(parts):
        first, last = block_bounds(count, step, parts, p)
        span(plan, first * ALIGN, min(total, last * ALIGN))


class _CallInfo(ctypes.Structure):
    _fields_ = [("loop", ctypes.c_void_p), ("context", ctypes.c_void_p), ("auxdata", ctypes.c_void_p),
                ("requires_pyapi", ctypes.c_bool), ("no_floatingpoint_errors", ctypes.c_bool)]


_capsule_pointer = ctypes.pythonapi.PyCapsule_GetPointer
_capsule_pointer.restype, _capsule_pointer.argtypes = ctypes.c_void_p, [ctypes.py_object, ctypes.c_char_p]
_capsule_name = ctypes.pythonapi.PyCapsule_GetName
_capsule_name.restype, _capsule_name.argtypes = ctypes.c_char_p, [ctypes.py_object]

#: (ufunc, input dtypes) → (output dtype, loop, context, auxdata, capsule kept alive for them), or
#: None when numpy would cast an input first or the loop is not a float one (an integer loop may
#: raise a Python error: a negative power)
_LOOPS: dict[tuple, tuple | None] = {}


def strided_loop(fn: np.ufunc, inputs: tuple[np.dtype, ...]) -> tuple | None:
    """numpy's inner loop of ``fn`` for inputs of exactly the dtypes ``inputs``, and its output's dtype."""
    key = (fn, inputs)
    if key not in _LOOPS:
        _LOOPS[key] = _resolve(fn, inputs)
    return _LOOPS[key]


def _resolve(fn: np.ufunc, inputs: tuple[np.dtype, ...]) -> tuple | None:
    try:
        dtypes = fn.resolve_dtypes((*inputs, None))
        if dtypes[:-1] != inputs or any(d.kind != "f" or not d.isbuiltin for d in dtypes):
            return None
        _, capsule = fn._resolve_dtypes_and_context(dtypes)
        fn._get_strided_loop(capsule)
    except (TypeError, ValueError, AttributeError):  # no loop for these types, or another numpy's interface
        return None
    info = _CallInfo.from_address(_capsule_pointer(capsule, _capsule_name(capsule)))
    if info.requires_pyapi or not info.loop:
        return None
    return dtypes[-1], info.loop, info.context or 0, info.auxdata or 0, capsule


def _rows(shape: tuple[int, ...], operands: tuple[np.ndarray, ...]) -> tuple[int, list[tuple[int, int]]] | None:
    """Every operand broadcast to ``shape`` read as rows of one width: (the width, each operand's
    (row stride, element stride) in bytes), the rows the widest trailing block of axes every
    operand walks with one stride (a per-channel scale ``(C, 1, 1)`` of a ``(1, C, H, W)`` map:
    rows of H·W, the scale's element stride 0); None when the rows do not lie a fixed stride apart."""
    kept = [i for i, size in enumerate(shape) if size != 1]
    sizes = [shape[i] for i in kept]
    strides = []
    for a in operands:
        lead = len(shape) - a.ndim
        full = [0] * lead + [0 if size == 1 else stride for size, stride in zip(a.shape, a.strides)]
        strides.append([full[i] for i in kept])
    k = len(sizes) - 1
    while k > 0 and all(st[k - 1] == st[k] * sizes[k] for st in strides):
        k -= 1
    width = math.prod(sizes[k:])
    layouts = []
    for st in strides:
        rows = list(zip(sizes[:k], st[:k]))
        if any(outer[1] != inner[0] * inner[1] for outer, inner in zip(rows, rows[1:])):
            return None
        layouts.append((rows[-1][1] if rows else 0, st[-1] if st else 0))
    return width, layouts


#: (ufunc, dtype) → ``handle``'s (loop, context, auxdata), or None
_HANDLES: dict[tuple, np.ndarray | None] = {}


def handle(fn: np.ufunc, dtype: np.dtype) -> np.ndarray | None:
    """numpy's loop of ``fn`` on operands all of ``dtype`` as (loop, context, auxdata) for
    ``in_place_plan``, or None (``strided_loop`` has none)."""
    key = (fn, dtype)
    if key not in _HANDLES:
        loop = strided_loop(fn, (dtype,) * fn.nin)
        _HANDLES[key] = None if loop is None or loop[0] != dtype else np.array(loop[1:4], np.int64)
    return _HANDLES[key]


@jit
def in_place_plan(loop, out):
    """``span``'s plan for the one-input loop ``handle`` gave over C-contiguous ``out`` in place, as
    one flat row (made in compiled code: reading an address from Python costs a microsecond)."""
    plan = np.empty(11, np.int64)
    plan[0], plan[1], plan[2] = loop[0], loop[1], loop[2]
    plan[3], plan[4] = out.size, 2
    plan[5] = plan[6] = out.ctypes.data
    plan[7] = plan[8] = 0
    plan[9] = plan[10] = out.itemsize
    return plan


def make_plan(loop: tuple, width: int, bases: list[int], layouts: list[tuple[int, int]]) -> np.ndarray:
    """``span``'s plan: ``strided_loop``'s loop over rows of ``width`` elements, operand ``i`` at address
    ``bases[i]`` with (row stride, element stride) ``layouts[i]`` in bytes."""
    return np.array([*loop[1:4], width, len(bases), *bases, *(row for row, _ in layouts),
                     *(step for _, step in layouts)], np.int64)


def apply(fn: np.ufunc, inputs: tuple[np.ndarray, ...], out: np.ndarray | None, work: float,
          run) -> np.ndarray | None:
    """``fn(*inputs, out=out)`` with numpy's own loop (``work`` multiply-adds' worth an element),
    ``run(count, work_per_item, serial, twin, *args)`` sharing its blocks (``parallel.split``); None
    when numpy's call has to do it: a cast, an overlap, a layout these rows cannot describe. Kept to
    a few µs of Python: the ops that come here take 30 µs and more."""
    head = inputs[0].shape
    shape = head if all(a.shape == head for a in inputs) else np.broadcast_shapes(*(a.shape for a in inputs))
    if not shape or shape[-1] == 0:
        return None
    loop = strided_loop(fn, tuple(a.dtype for a in inputs))
    if loop is None:
        return None
    if out is None:
        out = np.empty(shape, loop[0])
    elif out.dtype != loop[0] or out.shape != shape or not out.flags.c_contiguous or any(
            np.may_share_memory(out, a) and not (a.ctypes.data == out.ctypes.data and a.strides == out.strides)
            for a in inputs):
        return None
    total = out.size
    operands = (*inputs, out)
    rows = _rows(shape, operands)
    if rows is None:
        return None
    width, layouts = rows
    plan = make_plan(loop, width, [a.ctypes.data for a in operands], layouts)
    run(-(-total // ALIGN), ALIGN * work, lambda first, last: span(plan, first * ALIGN, min(total, last * ALIGN)),
        span_split, plan, total)
    return out
