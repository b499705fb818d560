"""QuantizeLinear, DequantizeLinear (per-tensor, per-axis, blocked) and DynamicQuantizeLinear.

Scale and zero point are reshaped to broadcast against ``x`` once (and repeated
``block_size`` times along ``axis`` for blocked quantization), so every formula
is a single vectorized expression. Float targets (float8, float4e2m1) reuse the
Cast rules, including float8 ``saturate``.
"""

from __future__ import annotations

import ml_dtypes
import numpy as np

from ...base.errors import KernelError
from ...ir import DType
from ..registry import kernel
from .cast import cast_array

_INT_TARGETS = {np.dtype(t) for t in (np.uint8, np.int8, np.uint16, np.int16, np.int32,
                                      ml_dtypes.int4, ml_dtypes.uint4, ml_dtypes.int2, ml_dtypes.uint2)}
_SUB_BYTE_INTS = (ml_dtypes.int4, ml_dtypes.uint4, ml_dtypes.int2, ml_dtypes.uint2)


def broadcast_param(param: np.ndarray | None, x: np.ndarray, axis: int, block_size: int, what: str):
    """``param`` (scalar, per-axis vector or blocked tensor) shaped to broadcast against ``x``."""
    if param is None or param.ndim == 0 or x.ndim == 0:
        return param
    axis = axis + x.ndim if axis < 0 else axis
    if block_size > 0:
        if param.ndim != x.ndim:
            raise KernelError(f"{what}: blocked quantization needs a parameter of rank {x.ndim}, got {param.ndim}")
        repeated = np.repeat(param, block_size, axis=axis)
        if repeated.shape[axis] < x.shape[axis]:
            raise KernelError(f"{what}: block_size {block_size} × {param.shape[axis]} blocks does not cover "
                              f"axis {axis} of length {x.shape[axis]}")
        return np.take(repeated, np.arange(x.shape[axis]), axis=axis)
    if param.ndim == 1 and param.size == 1:
        return param.reshape(())
    if param.ndim != 1 or param.shape[0] != x.shape[axis]:
        raise KernelError(f"{what}: a per-axis parameter of shape {list(param.shape)} does not match "
                          f"axis {axis} of an input of shape {list(x.shape)}")
    shape = [1] * x.ndim
    shape[axis] = param.shape[0]
    return param.reshape(shape)


def _quantize_target(output_dtype: int, zero_point) -> np.dtype:
    if output_dtype:
        return DType.from_onnx(output_dtype).numpy
    return zero_point.dtype if zero_point is not None else np.dtype(np.uint8)


def _unknown_code(name: str, code: int) -> str | None:
    if code and code not in {d.value for d in DType}:
        return f"{name} {code} is not an element type of the IR"
    return None


def _check_quantize(node, *, output_dtype=0, precision=0) -> str | None:
    return _unknown_code("output_dtype", output_dtype) or _unknown_code("precision", precision)


@kernel("QuantizeLinear", check=_check_quantize)
def quantize_linear(ctx, x, scale, zero_point=None, *, axis=1, block_size=0, output_dtype=0, precision=0,
                    saturate=1):
    target = _quantize_target(output_dtype, zero_point)
    block = block_size
    scale = broadcast_param(scale, x, axis, block, f"node '{ctx.node.name}' scale")
    zero_point = broadcast_param(zero_point, x, axis, block, f"node '{ctx.node.name}' zero point")
    precision = DType.from_onnx(precision).numpy if precision else scale.dtype
    scaled = x.astype(precision) / scale.astype(precision)
    if target in _INT_TARGETS:
        info = ml_dtypes.iinfo(target) if target.type in _SUB_BYTE_INTS else np.iinfo(target)
        q = np.rint(scaled.astype(np.float64))
        if zero_point is not None:
            q = q + zero_point.astype(np.float64)
        return np.clip(q, info.min, info.max).astype(target)
    shifted = scaled.astype(np.float32)
    if zero_point is not None:
        shifted = shifted + zero_point.astype(np.float32)
    return cast_array(shifted, target, bool(saturate))


def _check_dequantize(node, *, output_dtype=0) -> str | None:
    return _unknown_code("output_dtype", output_dtype)


@kernel("DequantizeLinear", check=_check_dequantize)
def dequantize_linear(ctx, x, scale, zero_point=None, *, axis=1, block_size=0, output_dtype=0):
    out = DType.from_onnx(output_dtype).numpy if output_dtype else scale.dtype
    block = block_size
    scale = broadcast_param(scale, x, axis, block, f"node '{ctx.node.name}' scale")
    zero_point = broadcast_param(zero_point, x, axis, block, f"node '{ctx.node.name}' zero point")
    diff = x.astype(np.float64)  # exact for every quantized type, int32 included
    if zero_point is not None:
        diff = diff - zero_point.astype(np.float64)
    return (diff.astype(out) * scale.astype(out)).astype(out, copy=False)


@kernel("DynamicQuantizeLinear", dtypes=[DType.FLOAT32])
def dynamic_quantize_linear(ctx, x):
    """uint8 quantization whose range always includes 0 (so that 0 is exact)."""
    low = min(0.0, float(x.min())) if x.size else 0.0
    high = max(0.0, float(x.max())) if x.size else 0.0
    scale = np.float32((high - low) / 255.0)
    if scale == 0:
        return np.zeros(x.shape, np.uint8), np.array(scale, np.float32), np.array(0, np.uint8)
    zero_point = np.clip(np.rint(-np.float32(low) / scale), 0, 255)
    y = np.clip(np.rint(x / scale) + zero_point, 0, 255).astype(np.uint8)
    return y, np.array(scale, np.float32), np.array(zero_point, np.uint8)
