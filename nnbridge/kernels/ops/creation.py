"""Ops that create tensors from attributes or shapes: Constant, ConstantOfShape,
Range, EyeLike, OneHot.
"""

from __future__ import annotations

import math

import numpy as np

from ...ir import DType
from ..registry import kernel
from ._common import NUMERIC, axis_of, ints, one_given

#: Constant's attributes, in the order of its keywords → how its Python value becomes an array
_CONSTANT_ATTRS = {
    "value": lambda v: np.asarray(v),
    "sparse_value": lambda v: np.asarray(v),
    "value_float": lambda v: np.array(v, dtype=np.float32),
    "value_floats": lambda v: np.array(v, dtype=np.float32).reshape(-1),
    "value_int": lambda v: np.array(v, dtype=np.int64),
    "value_ints": lambda v: np.array(v, dtype=np.int64).reshape(-1),
    "value_string": lambda v: np.array(v, dtype=object),
    "value_strings": lambda v: np.array(list(v), dtype=object).reshape(-1),
}


def _check_constant(node, *, value=None, sparse_value=None, value_float=None, value_floats=None, value_int=None,
                    value_ints=None, value_string=None, value_strings=None):
    if one_given(_CONSTANT_ATTRS, (value, sparse_value, value_float, value_floats, value_int, value_ints,
                                   value_string, value_strings)) is None:
        return "Constant needs exactly one value attribute"
    if sparse_value is not None and not isinstance(sparse_value, np.ndarray):
        return "sparse_value is not a dense array"
    return None


@kernel("Constant", check=_check_constant)
def constant(ctx, *, value=None, sparse_value=None, value_float=None, value_floats=None, value_int=None,
             value_ints=None, value_string=None, value_strings=None):
    name, given = one_given(_CONSTANT_ATTRS, (value, sparse_value, value_float, value_floats, value_int, value_ints,
                                              value_string, value_strings))
    return _CONSTANT_ATTRS[name](given)


@kernel("ConstantOfShape")
def constant_of_shape(ctx, target, *, value=None):
    value = np.zeros(1, dtype=np.float32) if value is None else np.asarray(value).reshape(-1)
    return np.full(tuple(ints(target)), value[0], dtype=value.dtype)


@kernel("Range", dtypes=NUMERIC)
def range_(ctx, start, limit, delta):
    """``start + i * delta`` for ``i < ceil((limit - start) / delta)``, in the inputs' type."""
    dtype = np.asarray(start).dtype
    start, limit, delta = (np.asarray(v).reshape(-1)[0] for v in (start, limit, delta))
    if dtype.kind in "iu":
        return np.arange(start, limit, delta, dtype=dtype)
    n = max(math.ceil((float(limit) - float(start)) / float(delta)), 0)
    work = np.float32 if dtype.itemsize == 2 else dtype.type  # 16-bit floats cannot count past 256/2048
    steps = np.arange(n, dtype=work)
    return (work(start) + steps * work(delta)).astype(dtype, copy=False)


def _check_eyelike(node):
    rank = node.inputs[0].type.rank
    if rank is not None and rank != 2:
        return f"EyeLike needs a 2-D input, got rank {rank}"
    return None


@kernel("EyeLike", check=_check_eyelike)
def eye_like(ctx, x, *, dtype=None, k=0):
    dtype = x.dtype if dtype is None else DType.from_onnx(dtype).numpy
    return np.eye(x.shape[0], x.shape[1], k=k, dtype=dtype)


@kernel("OneHot")
def one_hot(ctx, indices, depth, values, *, axis=-1):
    """Out-of-range indices give an all-off row; negative ones count from the end."""
    depth = int(np.asarray(depth).reshape(-1)[0])
    off, on = np.asarray(values).reshape(-1)[:2]
    idx = np.asarray(indices).astype(np.int64)
    idx = np.where(idx < 0, idx + depth, idx)
    hot = idx[..., None] == np.arange(depth)
    axis = axis_of(axis, idx.ndim + 1)
    hot = np.moveaxis(hot, -1, axis)
    return np.where(hot, on, off).astype(np.asarray(values).dtype, copy=False)


#: window → cosine-series coefficients a_k of w[n] = sum_k (-1)^k a_k cos(2 pi k n / D)
_WINDOWS = {
    "HannWindow": (0.5, 0.5),
    "HammingWindow": (25 / 46, 21 / 46),
    "BlackmanWindow": (0.42, 0.5, 0.08),
}


def _check_window(node, *, output_datatype=1):
    try:
        dtype = DType.from_onnx(output_datatype)
    except ValueError:
        return f"output_datatype {output_datatype} is not an IR type"
    return None if dtype in NUMERIC - {DType.BFLOAT16} else f"output_datatype {dtype.short} is not implemented"


def _window(coefficients):
    def run(ctx, size, *, output_datatype=1, periodic=1):
        n = int(np.asarray(size).reshape(-1)[0])
        denominator = n if periodic else n - 1
        phase = 2 * np.pi * np.arange(n, dtype=np.float64) / max(denominator, 1)
        out = sum((-1) ** k * a * np.cos(k * phase) for k, a in enumerate(coefficients))
        return np.asarray(out).astype(DType.from_onnx(output_datatype).numpy)

    return run


for _op, _coefficients in _WINDOWS.items():
    kernel(_op, check=_check_window)(_window(_coefficients))
