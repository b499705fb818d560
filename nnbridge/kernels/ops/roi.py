"""RoiAlign: bilinear samples on a regular grid inside each bin of each region, averaged or maxed.

The loop runs over regions only (each has its own sampling grid size); within
a region, bilinear interpolation is separable, so all bins, samples and
channels are one gather and one weighted reduction.
"""

from __future__ import annotations

import math

import numpy as np

from ...ir import Node
from ..registry import kernel
from ._windows import FLOATS, compute_dtype


def _check_roi_align(node: Node, *, coordinate_transformation_mode="half_pixel", mode="avg") -> str | None:
    if mode not in ("avg", "max"):
        return f"mode={mode} is not implemented"
    coord = coordinate_transformation_mode
    return None if coord in ("half_pixel", "output_half_pixel") else f"coordinate_transformation_mode={coord}"


def _axis_taps(start: float, bin_size: float, bins: int, grid: int, size: int):
    """Two (index, weight) corner taps per sample along one axis; samples outside [-1, size] weigh 0."""
    pos = start + np.arange(bins)[:, None] * bin_size + (np.arange(grid)[None, :] + 0.5) * bin_size / grid
    pos = pos.reshape(-1)
    inside = (pos >= -1.0) & (pos <= size)
    pos = np.maximum(pos, 0)
    low = np.floor(pos).astype(np.int64)
    at_edge = low >= size - 1
    low = np.where(at_edge, size - 1, low)
    high = np.where(at_edge, size - 1, low + 1)
    frac = np.where(at_edge, 0.0, pos - low)
    return np.stack([low, high], 1), np.stack([1 - frac, frac], 1) * inside[:, None]


@kernel("RoiAlign", dtypes=FLOATS, check=_check_roi_align)
def roi_align(ctx, x, rois, batch_indices, *, coordinate_transformation_mode="half_pixel", mode="avg",
              output_height=1, output_width=1, sampling_ratio=0, spatial_scale=1.0):
    dt = compute_dtype(x.dtype)
    out_h, out_w = int(output_height), int(output_width)
    ratio = int(sampling_ratio)
    scale = float(spatial_scale)
    half_pixel = coordinate_transformation_mode == "half_pixel"
    use_max = mode == "max"
    h, w = x.shape[2:]
    xc = x.astype(dt, copy=False)
    out = np.empty((rois.shape[0], x.shape[1], out_h, out_w), dt)
    shift = 0.5 if half_pixel else 0.0
    for r, (box, b) in enumerate(zip(rois.astype(np.float64), batch_indices.reshape(-1))):
        x0, y0, x1, y1 = box * scale - shift
        roi_w, roi_h = x1 - x0, y1 - y0
        if not half_pixel:
            roi_w, roi_h = max(roi_w, 1.0), max(roi_h, 1.0)
        grid_h = ratio if ratio > 0 else math.ceil(roi_h / out_h)
        grid_w = ratio if ratio > 0 else math.ceil(roi_w / out_w)
        if grid_h <= 0 or grid_w <= 0:  # an empty region has no samples
            out[r] = 0
            continue
        yi, wy = _axis_taps(y0, roi_h / out_h, out_h, grid_h, h)
        xi, wx = _axis_taps(x0, roi_w / out_w, out_w, grid_w, w)
        picked = xc[int(b)][:, yi[:, :, None, None], xi[None, None, :, :]]  # (C, SY, 2, SX, 2)
        weighted = picked * (wy[:, :, None, None] * wx[None, None, :, :]).astype(dt)
        if use_max:
            per_sample = weighted.max(axis=(2, 4))
            out[r] = per_sample.reshape(-1, out_h, grid_h, out_w, grid_w).max(axis=(2, 4))
        else:
            per_sample = weighted.sum(axis=(2, 4))
            total = per_sample.reshape(-1, out_h, grid_h, out_w, grid_w).sum(axis=(2, 4))
            out[r] = total / max(grid_h * grid_w, 1)
    return out.astype(x.dtype, copy=False)


def _bin_edges(start: int, length: int, bins: int, size: int) -> list[tuple[int, int]]:
    """[begin, end) of each pooling bin along one axis (Caffe's RoIPool rounding), clipped to the image."""
    step = length / bins
    return [(min(max(math.floor(i * step) + start, 0), size), min(max(math.ceil((i + 1) * step) + start, 0), size))
            for i in range(bins)]


def _round_half_away(v: float) -> int:
    return int(math.floor(abs(v) + 0.5)) * (1 if v >= 0 else -1)


@kernel("MaxRoiPool", dtypes=FLOATS)
def max_roi_pool(ctx, x, rois, *, pooled_shape, spatial_scale=1.0):
    """Max over each bin of each region; loops over regions and bin rows/columns only."""
    pooled_h, pooled_w = (int(v) for v in pooled_shape)
    scale = np.float32(spatial_scale)
    h, w = x.shape[2:]
    out = np.zeros((rois.shape[0], x.shape[1], pooled_h, pooled_w), x.dtype)
    for r, roi in enumerate(rois.astype(np.float32)):
        # region corners are scaled in fp32, as the common C++ implementations do (4.4999998 rounds down)
        x0, y0, x1, y1 = (_round_half_away(float(v * scale)) for v in roi[1:5])
        rows = _bin_edges(y0, max(y1 - y0 + 1, 1), pooled_h, h)
        cols = _bin_edges(x0, max(x1 - x0 + 1, 1), pooled_w, w)
        image = x[int(roi[0])]
        for i, (top, bottom) in enumerate(rows):
            if bottom <= top:
                continue
            band = image[:, top:bottom].max(axis=1)  # (C, W)
            for j, (left, right) in enumerate(cols):
                if right > left:
                    out[r, :, i, j] = band[:, left:right].max(axis=1)
    return out
