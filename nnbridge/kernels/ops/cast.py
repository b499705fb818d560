"""Cast and CastLike between every IR element type, strings included.

ml_dtypes does the bit-level work for bfloat16, float8, int4/uint4 and
float4e2m1 (round to nearest even, wrap-around for 4-bit integers, saturation
for float4e2m1, matching ONNX's test data). What it does not do is the ONNX
``saturate`` rule for float8: with ``saturate=1`` out-of-range values and ±inf
become ±max of the target, so they are clipped before the conversion.
``round_mode`` only concerns float8e8m0, a type the IR does not have (the
loader refuses such models), so it never reaches these kernels.
"""

from __future__ import annotations

import ml_dtypes
import numpy as np

from ...ir import DType, Node
from ..registry import kernel

_STRING = np.dtype(object)


def _target_of(code) -> DType | None:
    try:
        return DType.from_onnx(int(code))
    except (TypeError, ValueError):
        return None


def _check_pair(src: DType | None, dst: DType | None) -> str | None:
    if dst is None:
        return "target element type is not supported by the IR"
    if dst is DType.FLOAT8E8M0:
        return "casting to float8e8m0 (its round_mode rules) is not implemented"
    if DType.STRING in (src, dst) and DType.BOOL in (src, dst):
        return "casts between bool and string are undefined in ONNX"
    if DType.STRING in (src, dst) and (src in (DType.COMPLEX64, DType.COMPLEX128) or
                                       dst in (DType.COMPLEX64, DType.COMPLEX128)):
        return "casts between complex and string are not implemented"
    return None


def _check_cast(node: Node, *, to) -> str | None:
    src = node.inputs[0].type.dtype if node.inputs and node.inputs[0] is not None else None
    return _check_pair(src, _target_of(to))


def _check_castlike(node: Node) -> str | None:
    src = node.inputs[0].type.dtype if node.inputs[0] is not None else None
    like = node.inputs[1].type.dtype if len(node.inputs) > 1 and node.inputs[1] is not None else None
    if like is None:
        return None  # decided at run time from the array
    return _check_pair(src, like)


def cast_array(x: np.ndarray, target: np.dtype, saturate: bool = True) -> np.ndarray:
    """``x`` converted to ``target`` following the ONNX Cast rules."""
    x = np.asarray(x)
    if x.dtype == target:
        return x.copy()
    if target == _STRING:
        return _to_string(x)
    if x.dtype == _STRING or x.dtype.kind in "US":
        x = _parse_numbers(x, target)
        if x.dtype == target:
            return x
    if target == np.bool_:
        return x.astype(np.float64) != 0 if _is_exotic(x.dtype) else x.astype(np.bool_)
    if _is_exotic(x.dtype) and _is_exotic(target):
        x = x.astype(np.float32)  # exotic → exotic goes through float32, which holds every such value
    if target.type in _FLOAT8_LIMITS and saturate:
        limit = _FLOAT8_LIMITS[target.type]
        wide = x.astype(np.float32) if x.dtype.kind not in "f" or x.dtype.itemsize < 4 else x
        x = np.clip(wide, -limit, limit)  # also maps ±inf to ±max; NaN stays NaN
    # ONNX leaves NaN, ±inf and out-of-range floats cast to integers undefined; numpy gives x86's
    # "integer indefinite" (the type's minimum), as onnxruntime does, and is told not to warn
    with np.errstate(invalid="ignore"):
        return x.astype(target)


def _is_exotic(dtype: np.dtype) -> bool:
    return dtype.type in _EXOTIC


_FLOAT8_LIMITS = {
    t.type: float(ml_dtypes.finfo(t).max)
    for t in (np.dtype(ml_dtypes.float8_e4m3fn), np.dtype(ml_dtypes.float8_e4m3fnuz),
              np.dtype(ml_dtypes.float8_e5m2), np.dtype(ml_dtypes.float8_e5m2fnuz))
}
_FLOAT_EXOTIC = {ml_dtypes.bfloat16, ml_dtypes.float4_e2m1fn, *_FLOAT8_LIMITS}
_EXOTIC = _FLOAT_EXOTIC | {ml_dtypes.int4, ml_dtypes.uint4}


def _to_string(x: np.ndarray) -> np.ndarray:
    """Plain decimal text: eight significant digits for floats (as onnxruntime prints them,
    so that ``nnbridge check`` agrees), INF/-INF/NaN for the special values, digits for integers."""
    if x.dtype.kind == "f" or _is_exotic(x.dtype):
        wide = x.astype(np.float64)
        text = np.char.mod("%.8g", wide).astype(object)
        text[np.isposinf(wide)] = "INF"
        text[np.isneginf(wide)] = "-INF"
        text[np.isnan(wide)] = "NaN"
        return text
    return x.astype(str).astype(object)


def _parse_numbers(x: np.ndarray, target: np.dtype) -> np.ndarray:
    """Numeric text (plain, scientific, INF/NaN in any case) → int64 for integer targets (exact),
    float64 otherwise; the caller converts further with the usual rules (float8 saturation...)."""
    text = np.char.strip(np.asarray(x, dtype=object).astype(str))
    if target.kind in "iu" or target.type in (ml_dtypes.int4, ml_dtypes.uint4):
        try:
            return text.astype(np.int64)
        except ValueError:  # '100.5' → 100: parse as float, then truncate
            return text.astype(np.float64).astype(np.int64)
    return text.astype(np.float64)


@kernel("Cast", check=_check_cast)
def cast(ctx, x, *, saturate=1, to):
    return cast_array(x, DType.from_onnx(to).numpy, bool(saturate))


@kernel("CastLike", check=_check_castlike)
def cast_like(ctx, x, like, *, saturate=1):
    return cast_array(x, np.asarray(like).dtype, bool(saturate))


def _check_bitcast(node: Node, *, to) -> str | None:
    src = node.inputs[0].type.dtype if node.inputs[0] is not None else None
    dst = _target_of(to)
    if dst is None or DType.STRING in (src, dst):
        return "BitCast needs two non-string element types known to the IR"
    if src is not None and src.numpy.itemsize != dst.numpy.itemsize:
        return f"{src.short} and {dst.short} differ in bit width"
    return None


@kernel("BitCast", check=_check_bitcast)
def bit_cast(ctx, x, *, to):
    """Same bytes, new type (numpy views are little-endian on every platform we run on)."""
    return np.asarray(x, order="C").view(DType.from_onnx(to).numpy)
