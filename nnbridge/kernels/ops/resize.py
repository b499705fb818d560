"""Resize (the loader upgrades the old Upsample to it): nearest / linear / cubic, every coordinate transformation mode.

Interpolation is separable, so each resized axis is one gather of a few taps
per output position (an ``(out, taps)`` index table) and a weighted sum. Tap
weights follow the ONNX definition: linear/cubic kernels around the source
coordinate, edge-clamped neighbours, optional antialias (kernel widened by
1/scale when downscaling) and exclude_outside renormalization.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from ...ir import DType, Node
from ..registry import kernel
from ._windows import WITH_BF16, compute_dtype

_COORD_MODES = ("half_pixel", "half_pixel_symmetric", "pytorch_half_pixel", "align_corners", "asymmetric",
                "tf_crop_and_resize")
_NEAREST_MODES = ("round_prefer_floor", "round_prefer_ceil", "floor", "ceil")
NEAREST_TYPES = WITH_BF16 | {DType.INT8, DType.UINT8, DType.INT16, DType.UINT16, DType.INT32, DType.INT64}


@dataclass(frozen=True)
class ResizeAttrs:
    """A Resize node's attributes, as its kernel was given them (the helpers below read these)."""

    antialias: int
    axes: list[int] | None
    coordinate_transformation_mode: str
    cubic_coeff_a: float
    exclude_outside: int
    extrapolation_value: float
    keep_aspect_ratio_policy: str
    mode: str
    nearest_mode: str


def _check_resize(node: Node, *, coordinate_transformation_mode="half_pixel", keep_aspect_ratio_policy="stretch",
                  mode="nearest", nearest_mode="round_prefer_floor") -> str | None:
    if mode not in ("nearest", "linear", "cubic"):
        return f"mode={mode} is not implemented"
    if coordinate_transformation_mode not in _COORD_MODES:
        return f"coordinate_transformation_mode={coordinate_transformation_mode} is not implemented"
    if nearest_mode not in _NEAREST_MODES:
        return f"nearest_mode={nearest_mode} is not implemented"
    if keep_aspect_ratio_policy not in ("stretch", "not_larger", "not_smaller"):
        return f"keep_aspect_ratio_policy={keep_aspect_ratio_policy} is not implemented"
    x = node.input(0)
    if mode != "nearest" and x is not None and x.type.dtype is not None and x.type.dtype not in WITH_BF16:
        return f"{mode} interpolation of {x.type.dtype.short} is not implemented"
    return None


def _source_coords(mode: str, out_len: int, scale: float, in_len: int, roi: tuple[float, float] | None):
    """Source coordinate of every output index, and the mask of extrapolated ones (tf_crop_and_resize)."""
    y = np.arange(out_len, dtype=np.float64)
    out_width = scale * in_len
    if mode == "align_corners":
        return (np.zeros(out_len) if out_width == 1 else y * (in_len - 1) / (out_width - 1)), None
    if mode == "asymmetric":
        return y / scale, None
    if mode == "pytorch_half_pixel":
        return (np.full(out_len, -0.5) if out_width == 1 else (y + 0.5) / scale - 0.5), None
    if mode == "half_pixel_symmetric":
        offset = in_len / 2 * (1 - out_len / out_width)
        return offset + (y + 0.5) / scale - 0.5, None
    if mode == "tf_crop_and_resize":
        lo, hi = roi if roi is not None else (0.0, 1.0)
        if out_width == 1:
            x = np.full(out_len, (hi - lo) * (in_len - 1) / 2)
        else:
            x = y * (hi - lo) * (in_len - 1) / (out_width - 1)
        x = x + lo * (in_len - 1)
        return x, (x < 0) | (x > in_len - 1)
    return (y + 0.5) / scale - 0.5, None  # half_pixel


def _cubic(t: np.ndarray, a: float) -> np.ndarray:
    t = np.abs(t)
    near = ((a + 2) * t - (a + 3)) * t * t + 1
    far = ((a * t - 5 * a) * t + 8 * a) * t - 4 * a
    return np.where(t <= 1, near, np.where(t < 2, far, 0.0))


def _taps(attrs: ResizeAttrs, x: np.ndarray, scale: float, in_len: int) -> tuple[np.ndarray, np.ndarray | None]:
    """(indices (out, taps), weights (out, taps) or None for nearest)."""
    mode = attrs.mode
    if mode == "nearest":
        nearest = attrs.nearest_mode
        floor = np.floor(x)
        frac = x - floor
        if nearest == "floor":
            idx = floor
        elif nearest == "ceil":
            idx = np.ceil(x)
        elif nearest == "round_prefer_ceil":
            idx = np.where(frac >= 0.5, floor + 1, floor)
        else:
            idx = np.where(frac > 0.5, floor + 1, floor)
        return np.clip(idx, 0, in_len - 1).astype(np.intp)[:, None], None
    # base: the neighbour left of x (an integral x counts as ratio 1 from x-1, as ONNX defines it)
    base = np.floor(x)
    base = np.where(base == x, x - 1, base)
    ratio = x - base
    antialias = bool(attrs.antialias)
    s = min(scale, 1.0) if antialias else 1.0
    radius = 1 if mode == "linear" else 2
    start = int(np.floor(-radius / s) + 1)
    offsets = np.arange(start, 2 - start)
    args = (offsets[None, :] - ratio[:, None]) * s
    if mode == "linear":
        w = np.clip(1 - np.abs(args), 0, 1)
    else:
        w = _cubic(args, float(attrs.cubic_coeff_a))
    if antialias:
        w = w / w.sum(axis=1, keepdims=True)
    idx = base[:, None].astype(np.int64) + offsets[None, :]
    if attrs.exclude_outside:
        w = np.where((idx < 0) | (idx >= in_len), 0.0, w)
        total = w.sum(axis=1, keepdims=True)
        w = w / np.where(total == 0, 1.0, total)
    return np.clip(idx, 0, in_len - 1).astype(np.intp), w


def _resize_axis(attrs: ResizeAttrs, data: np.ndarray, axis: int, scale: float, out_len: int, roi) -> np.ndarray:
    x, outside = _source_coords(attrs.coordinate_transformation_mode, out_len, scale, data.shape[axis], roi)
    idx, w = _taps(attrs, x, scale, data.shape[axis])
    if w is None:
        result = np.take(data, idx[:, 0], axis=axis)
    else:
        gathered = np.take(data, idx, axis=axis)  # (..., out, taps, ...)
        shape = (1,) * axis + w.shape + (1,) * (data.ndim - axis - 1)
        result = (gathered * w.astype(data.dtype).reshape(shape)).sum(axis=axis + 1)
    if outside is not None and outside.any():
        mask = outside.reshape((1,) * axis + (out_len,) + (1,) * (data.ndim - axis - 1))
        result = np.where(mask, np.asarray(attrs.extrapolation_value).astype(data.dtype), result)
    return result


def _plan(attrs: ResizeAttrs, x: np.ndarray, roi, scales, sizes) -> tuple[list[float], list[int], list | None]:
    """Per-axis (scale, output size, roi) following ONNX: sizes win over scales; aspect-ratio policies."""
    rank = x.ndim
    axes = [a % rank for a in (attrs.axes or range(rank))]
    scale_all, size_all = [1.0] * rank, list(x.shape)
    if sizes is not None and np.asarray(sizes).size:
        given = [int(v) for v in np.asarray(sizes).reshape(-1)]
        for a, v in zip(axes, given):
            scale_all[a] = v / x.shape[a]
            size_all[a] = v
        policy = attrs.keep_aspect_ratio_policy
        if policy != "stretch":
            pick = min if policy == "not_larger" else max
            common = pick(scale_all[a] for a in axes)
            for a in axes:
                scale_all[a] = common
                size_all[a] = int(common * x.shape[a] + 0.5)
    else:
        given_scales = [float(v) for v in np.asarray(scales).reshape(-1)]
        for a, v in zip(axes, given_scales):
            scale_all[a] = v
            size_all[a] = int(np.floor(v * x.shape[a]))
    rois = None
    if roi is not None and np.asarray(roi).size:
        r = [float(v) for v in np.asarray(roi).reshape(-1)]
        n = len(r) // 2
        rois = [None] * rank
        for i, a in enumerate(axes if n == len(axes) else range(rank)):
            rois[a] = (r[i], r[n + i])
    return scale_all, size_all, rois


def resize(attrs: ResizeAttrs, x: np.ndarray, roi, scales, sizes) -> np.ndarray:
    scale_all, size_all, rois = _plan(attrs, x, roi, scales, sizes)
    nearest = attrs.mode == "nearest"
    data = x if nearest else x.astype(compute_dtype(x.dtype), copy=False)
    crop = attrs.coordinate_transformation_mode == "tf_crop_and_resize"
    for axis in range(x.ndim):
        axis_roi = rois[axis] if rois is not None else None
        identity_roi = axis_roi is None or axis_roi == (0.0, 1.0)
        if scale_all[axis] == 1.0 and size_all[axis] == data.shape[axis] and (identity_roi or not crop):
            continue
        data = _resize_axis(attrs, data, axis, scale_all[axis], size_all[axis], axis_roi)
    return data.astype(x.dtype, copy=False)


@kernel("Resize", dtypes=NEAREST_TYPES, check=_check_resize)
def resize_kernel(ctx, x, roi=None, scales=None, sizes=None, *, antialias=0, axes=None,
                  coordinate_transformation_mode="half_pixel", cubic_coeff_a=-0.75, exclude_outside=0,
                  extrapolation_value=0.0, keep_aspect_ratio_policy="stretch", mode="nearest",
                  nearest_mode="round_prefer_floor"):
    attrs = ResizeAttrs(antialias=antialias, axes=axes, coordinate_transformation_mode=coordinate_transformation_mode,
                        cubic_coeff_a=cubic_coeff_a, exclude_outside=exclude_outside,
                        extrapolation_value=extrapolation_value, keep_aspect_ratio_policy=keep_aspect_ratio_policy,
                        mode=mode, nearest_mode=nearest_mode)
    return resize(attrs, x, roi, scales, sizes)
