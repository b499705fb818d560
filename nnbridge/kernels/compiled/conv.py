"""Grouped and depthwise 2-D convolution as direct loops (numba), in two layouts.

**Planes** (large maps). A stride-s convolution reads input row ``oh·s + kh·d`` (padded
coordinates); writing ``kh·d = q·s + a`` (0 ≤ a < s), that is row ``oh + q`` of *phase plane*
``a`` (every s-th padded row from row a). ``_channel_phases`` splits a padded channel into
``sh × sw`` phase planes once, and then every kernel tap, for every stride and dilation, is one
contiguous run of a flattened plane: output position ``p = oh·Wq + ow`` (Wq the planes' width)
reads ``p + q_h·Wq + q_w``. The multiply-adds run along those runs (long, contiguous,
vectorised); ``Wq - OW`` columns past each output row are computed and dropped.

**Channels last** (small maps, many channels, depthwise). The padded input is ``(Hp, Wp, C)``
and the loops run along the channels, so a 7×7 map of 1,152 channels is 1,152-long vector runs
instead of 7-long rows.

Either way each output value is the sum over the input channels of its group, then kernel rows,
then columns, the first term assigned and each next one added (a multiply, then an add: no fused
multiply-add), exactly the order of the numpy depthwise path that runs stride-1 maps as flat
rows. Taps are added four per pass over the accumulator (the same additions in the same order,
fewer loads and stores); a grouped convolution of several channels per group also computes four
filters per pass (``_conv_four``), so each load of the input feeds sixteen multiply-adds.

Inner loops index with unsigned integers and make no array views: numba checks a signed index
for wrap-around (which turns a contiguous load into a gather) and counts references to views.
"""

from __future__ import annotations

import numpy as np
from numba import prange

from ..parallel import least_work, split, threads
from ._core import block_bounds, jit, jit_parallel
from .curves import overwrite

#: output positions per pass over the taps (whole output rows): the accumulator stays in cache
CHUNK = 1024
#: the four accumulators of ``_conv_four`` lie this many floats apart, modulo 1,024 (4 KiB): rows
#: whose addresses agree in their low 12 bits stall each other's loads and stores (4K aliasing),
#: which made the time hang on the map's width (measured at 1 thread: a 3-channel 3×3 stem of 16
#: filters on 112×112 341 µs with 2,048-position rows, 221 with 1,024, 187-189 with either padded;
#: DenseNet's 128-channel 3×3 on 56×56 5.44 → 2.54 ms; a 7×7 stem of 64 filters 3.02 → 2.67)
ROW_SKEW = 272
#: float32 lanes of the widest vectors (AVX-512); runs are rounded up to a multiple
LANES = 16
_U = np.uint64


@jit
def _conv_group(planes, phases, wq, tap_plane, tap_offset, w, bias, y, first, last, acc):
    """Output planes ``[first, last)`` of ``y (N·M, OH, OW)``, all of one group, from the phase
    planes of that group's input channels (``planes (C/group·phases, Hq·wq)``, ``phases`` per
    channel) and ``w (M, C/group, KH·KW)``; tap k reads plane ``tap_plane[k]`` of its channel
    from ``tap_offset[k]`` on; ``bias`` holds M values or none."""
    outs, cg, kk = w.shape
    oh, ow = y.shape[1], y.shape[2]
    rows = (acc.size - LANES) // wq
    total = cg * kk
    for p in range(first, last):
        m = p % outs
        for r0 in range(0, oh, rows):
            size = _U((min(rows, oh - r0) * wq + LANES - 1) // LANES * LANES)
            start = r0 * wq
            # the first tap assigns, then taps four at a time, then the last ones one at a time
            p0, o0 = tap_plane[0], _U(start + tap_offset[0])
            w0 = w[m, 0, 0]
            for t in range(size):
                acc[t] = w0 * planes[p0, o0 + t]
            k = 1
            while k + 4 <= total:
                p0, o0 = (k // kk) * phases + tap_plane[k % kk], _U(start + tap_offset[k % kk])
                p1, o1 = ((k + 1) // kk) * phases + tap_plane[(k + 1) % kk], _U(start + tap_offset[(k + 1) % kk])
                p2, o2 = ((k + 2) // kk) * phases + tap_plane[(k + 2) % kk], _U(start + tap_offset[(k + 2) % kk])
                p3, o3 = ((k + 3) // kk) * phases + tap_plane[(k + 3) % kk], _U(start + tap_offset[(k + 3) % kk])
                w0, w1 = w[m, k // kk, k % kk], w[m, (k + 1) // kk, (k + 1) % kk]
                w2, w3 = w[m, (k + 2) // kk, (k + 2) % kk], w[m, (k + 3) // kk, (k + 3) % kk]
                for t in range(size):
                    acc[t] = ((((acc[t] + w0 * planes[p0, o0 + t]) + w1 * planes[p1, o1 + t])
                               + w2 * planes[p2, o2 + t]) + w3 * planes[p3, o3 + t])
                k += 4
            while k < total:
                p0, o0 = (k // kk) * phases + tap_plane[k % kk], _U(start + tap_offset[k % kk])
                w0 = w[m, k // kk, k % kk]
                for t in range(size):
                    acc[t] += w0 * planes[p0, o0 + t]
                k += 1
            for i in range(min(rows, oh - r0)):
                src = _U(i * wq)
                if bias.size:
                    b = bias[m]
                    for j in range(_U(ow)):
                        y[p, r0 + i, j] = acc[src + j] + b
                else:
                    for j in range(_U(ow)):
                        y[p, r0 + i, j] = acc[src + j]


@jit
def _conv_four(flat, tap_at, w, bias, y, p, m, wq, acc, rows):
    """Output planes ``p … p+3`` of ``y`` (filters ``m … m+3`` of ``w (M, K)``) from the flattened
    phase planes ``flat``: term k of every output reads ``flat`` from ``tap_at[k]`` plus its position.
    Four filters share each load of the input, and each output's terms are added in the order of
    ``_conv_group`` (the first assigned, then one by one), so the two agree bit for bit. ``rows``
    output rows per pass: the accumulators ``acc`` are longer rows (``ROW_SKEW``)."""
    total = w.shape[1]
    oh, ow = y.shape[1], y.shape[2]
    a0, a1, a2, a3 = acc[0], acc[1], acc[2], acc[3]
    for r0 in range(0, oh, rows):
        size = _U((min(rows, oh - r0) * wq + LANES - 1) // LANES * LANES)
        start = _U(r0 * wq)
        o = start + _U(tap_at[0])
        w0, w1, w2, w3 = w[m, 0], w[m + 1, 0], w[m + 2, 0], w[m + 3, 0]
        for t in range(size):
            v = flat[o + t]
            a0[t] = w0 * v
            a1[t] = w1 * v
            a2[t] = w2 * v
            a3[t] = w3 * v
        k = 1
        while k + 4 <= total:  # four terms per pass: four loads of the input, one of each sum
            o0, o1, o2, o3 = start + _U(tap_at[k]), start + _U(tap_at[k + 1]), start + _U(tap_at[k + 2]), \
                start + _U(tap_at[k + 3])
            w00, w01, w02, w03 = w[m, k], w[m, k + 1], w[m, k + 2], w[m, k + 3]
            w10, w11, w12, w13 = w[m + 1, k], w[m + 1, k + 1], w[m + 1, k + 2], w[m + 1, k + 3]
            w20, w21, w22, w23 = w[m + 2, k], w[m + 2, k + 1], w[m + 2, k + 2], w[m + 2, k + 3]
            w30, w31, w32, w33 = w[m + 3, k], w[m + 3, k + 1], w[m + 3, k + 2], w[m + 3, k + 3]
            for t in range(size):
                v0, v1, v2, v3 = flat[o0 + t], flat[o1 + t], flat[o2 + t], flat[o3 + t]
                a0[t] = (((a0[t] + w00 * v0) + w01 * v1) + w02 * v2) + w03 * v3
                a1[t] = (((a1[t] + w10 * v0) + w11 * v1) + w12 * v2) + w13 * v3
                a2[t] = (((a2[t] + w20 * v0) + w21 * v1) + w22 * v2) + w23 * v3
                a3[t] = (((a3[t] + w30 * v0) + w31 * v1) + w32 * v2) + w33 * v3
            k += 4
        while k < total:
            o = start + _U(tap_at[k])
            w0, w1, w2, w3 = w[m, k], w[m + 1, k], w[m + 2, k], w[m + 3, k]
            for t in range(size):
                v = flat[o + t]
                a0[t] += w0 * v
                a1[t] += w1 * v
                a2[t] += w2 * v
                a3[t] += w3 * v
            k += 1
        for f in range(4):
            b = bias[m + f] if bias.size else np.float32(0)
            a = acc[f]
            for i in range(min(rows, oh - r0)):
                src = _U(i * wq)
                out = y[p + f, r0 + i]
                if bias.size:
                    for j in range(_U(ow)):
                        out[j] = a[src + j] + b
                else:
                    for j in range(_U(ow)):
                        out[j] = a[src + j]


@jit
def grouped_planes(x, w, bias, y, first, last, group, parts, top, left, sh, sw, dh, dw):
    """Units ``[first, last)`` (of ``N·group·parts``: each group's filters in ``parts`` runs of
    whole fours, so that one group can be split over threads) of a 2-D convolution in planes layout:
    ``x (N·C, H, W)``, ``w (M, C/group, KH, KW)``, ``y (N·M, OH, OW)``; ``bias`` M values or none."""
    outs, cg, kh_, kw_ = w.shape
    channels = x.shape[0] // (y.shape[0] // outs)
    mg = outs // group
    oh, ow = y.shape[1], y.shape[2]
    wq = ow + (kw_ - 1) * dw // sw  # the plane columns the taps reach
    hq = oh + (kh_ - 1) * dh // sh + 1  # the rows they reach, and a spare for the dropped columns
    tap_plane = np.empty(kh_ * kw_, np.int64)
    tap_offset = np.empty(kh_ * kw_, np.int64)
    for kh in range(kh_):
        for kw in range(kw_):
            tap_plane[kh * kw_ + kw] = ((kh * dh) % sh) * sw + (kw * dw) % sw
            tap_offset[kh * kw_ + kw] = ((kh * dh) // sh) * wq + (kw * dw) // sw
    # runs are rounded up to whole vectors (no scalar remainder loop): zeros past the planes' end
    planes = np.zeros((cg * sh * sw, hq * wq + LANES), np.float32)
    rows = max(1, min(oh, CHUNK // wq))  # output rows per pass over the taps
    acc = np.empty(rows * wq + LANES, np.float32)
    block = np.empty((4, acc.size + (ROW_SKEW - acc.size) % 1024), np.float32)
    taps = w.reshape(outs, cg, kh_ * kw_)
    flat_taps = w.reshape(outs, cg * kh_ * kw_)
    tap_at = np.empty(cg * kh_ * kw_, np.int64)  # term k's start in the flattened planes
    for ci in range(cg):
        for k in range(kh_ * kw_):
            tap_at[ci * kh_ * kw_ + k] = (ci * sh * sw + tap_plane[k]) * planes.shape[1] + tap_offset[k]
    flat = planes.reshape(planes.size)
    height, width = x.shape[1], x.shape[2]
    x_flat = x.reshape(x.size)
    share = -(-mg // (4 * parts)) * 4  # filters per part, whole fours
    for unit in range(first, last):
        n, g, part = unit // (group * parts), unit // parts % group, unit % parts
        lo, hi = min(part * share, mg), min((part + 1) * share, mg)
        if lo == hi:
            continue
        q = n * channels + g * cg
        for ci in range(cg):
            _channel_phases(x_flat, (q + ci) * height * width, height, width, flat, ci * sh * sw * planes.shape[1],
                            planes.shape[1], hq, wq, top, left, sh, sw)
        p = n * outs + g * mg
        four = lo + (hi - lo) // 4 * 4 if cg > 1 else lo
        for f in range(lo, four, 4):
            _conv_four(flat, tap_at, flat_taps, bias, y, p + f, g * mg + f, wq, block, rows)
        _conv_group(planes, sh * sw, wq, tap_plane, tap_offset, taps, bias, y, p + four, p + hi, acc)


@jit_parallel
def _grouped_planes_split(x, w, bias, y, group, parts_per_group, top, left, sh, sw, dh, dw, count, step, parts):
    for p in prange(parts):
        first, last = block_bounds(count, step, parts, p)
        grouped_planes(x, w, bias, y, first, last, group, parts_per_group, top, left, sh, sw, dh, dw)


@jit
def _depthwise_pixels(x, tap_row, tap_col, w, y, first, last, sh, sw):
    """Output pixels ``[first, last)`` of a depthwise convolution in channels-last layout:
    ``x (Hp, Wp, C)`` padded, ``w (KH·KW, C)``, ``y (OH, OW, C)``; tap k reads row
    ``oh·sh + tap_row[k]`` and column ``ow·sw + tap_col[k]``."""
    c = _U(x.shape[2])
    ow = y.shape[1]
    total = w.shape[0]
    for pix in range(first, last):
        i, j = pix // ow, pix % ow
        acc = y[i, j]
        r0, c0 = i * sh + tap_row[0], j * sw + tap_col[0]
        for t in range(c):
            acc[t] = w[0, t] * x[r0, c0, t]
        k = 1
        while k + 4 <= total:
            r0, c0 = i * sh + tap_row[k], j * sw + tap_col[k]
            r1, c1 = i * sh + tap_row[k + 1], j * sw + tap_col[k + 1]
            r2, c2 = i * sh + tap_row[k + 2], j * sw + tap_col[k + 2]
            r3, c3 = i * sh + tap_row[k + 3], j * sw + tap_col[k + 3]
            for t in range(c):
                acc[t] = ((((acc[t] + w[k, t] * x[r0, c0, t]) + w[k + 1, t] * x[r1, c1, t])
                           + w[k + 2, t] * x[r2, c2, t]) + w[k + 3, t] * x[r3, c3, t])
            k += 4
        while k < total:
            r0, c0 = i * sh + tap_row[k], j * sw + tap_col[k]
            for t in range(c):
                acc[t] += w[k, t] * x[r0, c0, t]
            k += 1


@jit
def _tap_offsets(kh_, kw_, dh, dw):
    """(row, column) offset of each kernel tap, in kernel order, for the channels-last loops."""
    tap_row = np.empty(kh_ * kw_, np.int64)
    tap_col = np.empty(kh_ * kw_, np.int64)
    for kh in range(kh_):
        for kw in range(kw_):
            tap_row[kh * kw_ + kw] = kh * dh
            tap_col[kh * kw_ + kw] = kw * dw
    return tap_row, tap_col


@jit
def _channel_phases(xf, base, height, width, planes, start, plane_len, hq, wq, top, left, sh, sw):
    """The phase planes of one channel (``xf[base:]``, ``height × width``), padded (``top`` rows and
    ``left`` columns before), into the flat ``planes``: plane ``a·sw + b`` from ``start + (a·sw +
    b)·plane_len`` on holds padded rows ``a, a+sh, …`` and columns ``b, b+sw, …`` (plane column j
    reads input column ``j·sw + b - left``). Only the inside is written: ``planes`` must start as
    zeros, and since every channel's inside is the same positions, its padding stays zero from one
    channel to the next (filling it again was half the time of a 14×14 map's planes). Flat indices,
    no views (a view per row cost more than a small map's arithmetic)."""
    for a in range(sh):
        i0 = max(0, (top - a + sh - 1) // sh)  # the plane rows that read inside the input
        i1 = min(hq, (height - 1 - a + top) // sh + 1)
        if sw == 2:
            _pair_phases(xf, base - left + (a - top) * width, width, planes, start + a * 2 * plane_len, plane_len,
                         wq, left, i0, i1, sh)
            continue
        for b in range(sw):
            first = start + (a * sw + b) * plane_len
            lo = min(max(0, (left - b + sw - 1) // sw), wq)  # plane columns reading inside the row
            hi = max(min(wq, (width - 1 - b + left) // sw + 1), lo)
            for i in range(i0, i1):
                src, run = _U(base + (i * sh + a - top) * width + lo * sw + b - left), _U(first + i * wq + lo)
                if sw == 1:
                    for j in range(_U(hi - lo)):
                        planes[run + j] = xf[src + j]
                else:
                    step = _U(sw)
                    for j in range(_U(hi - lo)):
                        planes[run + j] = xf[src + j * step]


@jit
def _pair_phases(xf, row0, width, planes, first, plane_len, wq, left, i0, i1, sh):
    """Plane rows ``[i0, i1)`` of the two column phases of a stride-2 row phase (its planes from
    ``first`` on), each input row read once as column pairs (1.1-1.5× faster than two strided
    passes); plane row i reads input row ``xf[row0 + i·sh·width:]``, from column ``-left`` on."""
    lo0, hi0 = min(max(0, (left + 1) // 2), wq), min(wq, (width - 1 + left) // 2 + 1)
    lo1, hi1 = min(max(0, left // 2), wq), min(wq, (width - 2 + left) // 2 + 1)
    lo, hi = max(lo0, lo1), min(hi0, hi1)  # the columns both phases read inside the row
    for i in range(i0, i1):
        row, d0 = row0 + i * sh * width, first + i * wq
        d1 = d0 + plane_len
        for j in range(lo0, lo):
            planes[d0 + j] = xf[row + 2 * j]
        for j in range(lo1, lo):
            planes[d1 + j] = xf[row + 2 * j + 1]
        if hi > lo:
            src, e0, e1 = _U(row + 2 * lo), _U(d0 + lo), _U(d1 + lo)
            for j in range(_U(hi - lo)):
                planes[e0 + j] = xf[src + _U(2) * j]
                planes[e1 + j] = xf[src + _U(2) * j + _U(1)]
        for j in range(max(hi, lo0), hi0):
            planes[d0 + j] = xf[row + 2 * j]
        for j in range(max(hi, lo1), hi1):
            planes[d1 + j] = xf[row + 2 * j + 1]


@jit
def depthwise_planes(x, taps, bias, y, first, last, top, left, sh, sw, dh, dw, kh_, kw_, code, alpha, beta):
    """Images-and-channels ``[first, last)`` (of ``N·C``) of a depthwise convolution in planes
    layout, one channel at a time (its phase planes and accumulator stay in the L1 cache): ``x (N,
    C, H, W)``, ``taps (KH·KW, C)`` (``depthwise_taps``), ``y (N, C, OH, OW)``, ``bias`` C values or
    none, then the curve ``code`` of ``curves.CODES`` on each output (-1: none). Each output is
    the first tap's product, then each next one added, then the bias, then the curve: the values of
    the other loops here and of the convolution then its activation's own pass."""
    c, height, width = x.shape[1], x.shape[2], x.shape[3]
    oh, ow = y.shape[2], y.shape[3]
    wq = ow + (kw_ - 1) * dw // sw
    hq = oh + (kh_ - 1) * dh // sh + 1
    size = _U((oh * wq + LANES - 1) // LANES * LANES)  # whole vectors: zeros past the planes' end
    plane_len = hq * wq + LANES
    planes = np.zeros(sh * sw * plane_len, np.float32)
    acc = np.empty(size, np.float32)
    total = kh_ * kw_
    tap_at = np.empty(total, np.int64)
    for a in range(kh_):
        for b in range(kw_):
            tap_at[a * kw_ + b] = ((((a * dh) % sh) * sw + (b * dw) % sw) * plane_len
                                   + ((a * dh) // sh) * wq + (b * dw) // sw)
    xf, yf = x.reshape(x.size), y.reshape(y.size)
    for unit in range(first, last):
        q = unit % c
        _channel_phases(xf, unit * height * width, height, width, planes, 0, plane_len, hq, wq, top, left, sh, sw)
        o0, w0 = _U(tap_at[0]), taps[0, q]
        for t in range(size):
            acc[t] = w0 * planes[o0 + t]
        k = 1
        while k + 4 <= total:
            o0, o1, o2, o3 = _U(tap_at[k]), _U(tap_at[k + 1]), _U(tap_at[k + 2]), _U(tap_at[k + 3])
            w0, w1, w2, w3 = taps[k, q], taps[k + 1, q], taps[k + 2, q], taps[k + 3, q]
            for t in range(size):
                acc[t] = ((((acc[t] + w0 * planes[o0 + t]) + w1 * planes[o1 + t]) + w2 * planes[o2 + t])
                          + w3 * planes[o3 + t])
            k += 4
        while k < total:
            o0, w0 = _U(tap_at[k]), taps[k, q]
            for t in range(size):
                acc[t] += w0 * planes[o0 + t]
            k += 1
        out = unit * oh * ow
        b = bias[q] if bias.size else np.float32(0)
        for i in range(oh):
            src, dest = _U(i * wq), _U(out + i * ow)
            if bias.size:
                for j in range(_U(ow)):
                    yf[dest + j] = acc[src + j] + b
            else:
                for j in range(_U(ow)):
                    yf[dest + j] = acc[src + j]
        if code >= 0:  # a call of its own: inline, the curve's branch stays in the loop (0.9 ns a value)
            overwrite(code, yf, out, out + oh * ow, alpha, beta)


@jit_parallel
def _depthwise_planes_split(x, taps, bias, y, top, left, sh, sw, dh, dw, kh_, kw_, code, alpha, beta, count, step,
                            parts):
    for p in prange(parts):
        first, last = block_bounds(count, step, parts, p)
        depthwise_planes(x, taps, bias, y, first, last, top, left, sh, sw, dh, dw, kh_, kw_, code, alpha, beta)


@jit
def depthwise_taps(w):
    """``w (C, 1, KH, KW)`` as ``(KH·KW, C)``: the channels-last loops' tap rows."""
    c, kh_, kw_ = w.shape[0], w.shape[2], w.shape[3]
    taps = np.empty((kh_ * kw_, c), np.float32)
    for kh in range(kh_):
        for kw in range(kw_):
            for q in range(c):
                taps[kh * kw_ + kw, q] = w[q, 0, kh, kw]
    return taps


@jit
def depthwise_small_taps(x, taps, bias, y, top, left, sh, sw, dh, dw, kh_, kw_, code, alpha, beta):
    """A whole depthwise convolution of a small map in one call, channels last: ``x (N, C, H, W)``,
    ``taps`` (``depthwise_taps``), ``y (N, C, OH, OW)``, ``bias`` C values or none, then the curve
    ``code`` of ``curves.CODES`` on each output value (-1: none); the padding, the layout changes,
    the bias and the activation done here too (numpy's copies around them cost 15-20 µs, more than
    the arithmetic of a 7×7 map); each value is the one the convolution, then its activation's own
    pass, would give."""
    n_, c, h, wd = x.shape
    oh, ow = y.shape[2], y.shape[3]
    hp, wp = (oh - 1) * sh + (kh_ - 1) * dh + 1, (ow - 1) * sw + (kw_ - 1) * dw + 1
    padded = np.zeros((hp, wp, c), np.float32)
    tap_row, tap_col = _tap_offsets(kh_, kw_, dh, dw)
    last = np.empty((oh, ow, c), np.float32)
    rows, cols = min(h, hp - top), min(wd, wp - left)
    for n in range(n_):
        for i in range(rows):
            for j in range(cols):
                for q in range(c):
                    padded[top + i, left + j, q] = x[n, q, i, j]
        _depthwise_pixels(padded, tap_row, tap_col, taps, last, 0, oh * ow, sh, sw)
        if bias.size:
            _add_bias(last.reshape(oh * ow, c), bias)
        if code >= 0:
            overwrite(code, last.reshape(last.size), 0, last.size, alpha, beta)
        for q in range(c):
            for i in range(oh):
                for j in range(ow):
                    y[n, q, i, j] = last[i, j, q]


@jit
def _add_bias(rows, bias):
    """``rows[p] += bias`` for each pixel's channels."""
    c = rows.shape[1]
    for p in range(rows.shape[0]):
        row = rows[p]
        for q in range(c):
            row[q] += bias[q]


@jit
def _im2col_rows(x, cols, first, last, height, width, kh_, kw_, sh, sw, dh, dw, top, left, oh, ow):
    """Rows ``[first, last)`` (of ``C·KH·KW``) of one image's columns, both arrays flat: row
    ``(c·KH + i)·KW + j`` holds input channel c at tap (i, j) for every output pixel, zero where the
    tap reads padding (flat indices, no views: numba counts references to each)."""
    for row in range(first, last):
        c, tap = row // (kh_ * kw_), row % (kh_ * kw_)
        i, j = tap // kw_, tap % kw_
        shift = j * dw - left  # input column of output column q: q·sw + shift
        lo = min(max(0, (-shift + sw - 1) // sw), ow)  # the output columns that read inside the row
        hi = max(min(ow, (width - shift + sw - 1) // sw), lo)
        for r in range(oh):
            src = r * sh + i * dh - top
            dest = (row * oh + r) * ow
            if src < 0 or src >= height:
                for q in range(_U(ow)):
                    cols[_U(dest) + q] = 0
                continue
            start = _U(dest)  # unsigned from here: numba's wrap-around test would make each load a gather
            line = _U((c * height + src) * width + shift + lo * sw)
            step = _U(sw)
            for q in range(_U(lo)):
                cols[start + q] = 0
            run = start + _U(lo)
            for q in range(_U(hi - lo)):
                cols[run + q] = x[line + q * step]
            for q in range(_U(hi), _U(ow)):
                cols[start + q] = 0


@jit_parallel
def _im2col_split(x, cols, height, width, kh_, kw_, sh, sw, dh, dw, top, left, oh, ow, count, step, parts):
    for p in prange(parts):
        first, last = block_bounds(count, step, parts, p)
        _im2col_rows(x, cols, first, last, height, width, kh_, kw_, sh, sw, dh, dw, top, left, oh, ow)


def im2col(x: np.ndarray, kernel, strides, dilations, begin, out) -> np.ndarray:
    """The (C·KH·KW, OH·OW) columns of one float32 image ``x (C, H, W)`` in one pass, the padding
    read as zeros (numpy pads a copy, then copies a 6-axis transposed window view: 2.8× the time
    on a 112×112 map; ``ops/conv.IM2COL_MIN_WIDTH`` says where this wins)."""
    c = x.shape[0]
    (kh, kw), (sh, sw), (dh, dw), (oh, ow) = kernel, strides, dilations, out
    cols = np.empty((c * kh * kw, oh * ow), np.float32)
    flat, out_flat = np.ascontiguousarray(x).reshape(-1), cols.reshape(-1)
    height, width = x.shape[1], x.shape[2]
    split(c * kh * kw, oh * ow,
          lambda lo, hi: _im2col_rows(flat, out_flat, lo, hi, height, width, kh, kw, sh, sw, dh, dw, begin[0], begin[1],
                                      oh, ow),
          _im2col_split, flat, out_flat, height, width, kh, kw, sh, sw, dh, dw, begin[0], begin[1], oh, ow)
    return cols


# -- the calls the numpy kernel makes ------------------------------------------------------------

#: a depthwise map with at most this many output pixels runs channels last, in one call (measured
#: at 1 thread: 2×6 to 7×7 maps of 200 to 576 channels 1.3-2.5× faster than planes; 6×24 and 14×14
#: maps 1.4-1.9× slower, their transposing copies costing more than the arithmetic)
CHANNELS_LAST_PIXELS = 64
#: input channels per group up to which the direct loops (four filters per pass, ``_conv_four``)
#: beat im2col and one matrix product per group (measured at 1 thread, 3×3 taps: 16 per group on
#: 7×7 to 56×56 maps 1.5-3.6× faster, 32 per group 1.1-1.4×, 64 per group 0.9× on a 7×7 map); at 2
#: threads the groups split over the kernel threads, where numpy's batched product of small
#: matrices does not gain
MAX_GROUP_CHANNELS = 32
_NONE = np.empty(0, np.float32)
_ZERO = np.float32(0)


def small_depthwise(x_shape: tuple, w_shape: tuple, out) -> bool:
    """A depthwise convolution whose whole work is one call of the channels-last loops (one thread's)."""
    n, c = x_shape[:2]
    m, cg, kh, kw = w_shape
    pixels = out[0] * out[1]
    return cg == 1 and m == c and pixels <= CHANNELS_LAST_PIXELS and n * c * pixels * kh * kw < least_work()


def depthwise(x: np.ndarray, taps: np.ndarray, bias: np.ndarray, y: np.ndarray, begin, strides, dilations,
              kernel, code: int = -1, alpha: np.float32 = _ZERO, beta: np.float32 = _ZERO) -> None:
    """``y`` = the depthwise convolution of float32 ``x (N, C, H, W)`` (C-contiguous) by ``taps``
    (``depthwise_taps``) with ``bias`` (C values or none) added and the curve ``code`` applied:
    a small map channels last in one call, else planes, the channels shared over the kernel threads."""
    (top, left), (sh, sw), (dh, dw), (kh, kw) = begin, strides, dilations, kernel
    n, c = x.shape[:2]
    oh, ow = y.shape[2], y.shape[3]
    if small_depthwise(x.shape, (c, 1, kh, kw), (oh, ow)):
        depthwise_small_taps(x, taps, bias, y, top, left, sh, sw, dh, dw, kh, kw, code, alpha, beta)
        return
    split(n * c, kh * kw * oh * (ow + kw),
          lambda lo, hi: depthwise_planes(x, taps, bias, y, lo, hi, top, left, sh, sw, dh, dw, kh, kw, code, alpha,
                                          beta),
          _depthwise_planes_split, x, taps, bias, y, top, left, sh, sw, dh, dw, kh, kw, code, alpha, beta)


def handles(x: np.ndarray, w: np.ndarray, group: int, begin) -> bool:
    """Float32 2-D convolutions of one group or few channels per group, and no cropping pads."""
    return (x.dtype == np.float32 and w.dtype == np.float32 and x.ndim == 4
            and (group == 1 or w.shape[1] <= MAX_GROUP_CHANNELS) and min(begin) >= 0)


def grouped_conv2d(x: np.ndarray, w: np.ndarray, bias: np.ndarray | None, strides, dilations, begin,
                   out) -> np.ndarray:
    """``Conv`` of float32 ``x (N, C, H, W)`` and ``w (M, C/group, KH, KW)`` with the bias added,
    for the output size ``out`` (which the end pads decide); shared over the kernel threads."""
    n, c, h, wd = x.shape
    m, cg, kh, kw = w.shape
    (sh, sw), (dh, dw), (oh, ow) = strides, dilations, out
    b = _NONE if bias is None else np.ascontiguousarray(bias, np.float32).reshape(-1)
    if cg == 1 and m == c:
        y = np.empty((n, m, oh, ow), np.float32)
        depthwise(np.ascontiguousarray(x), depthwise_taps(np.ascontiguousarray(w)), b, y, begin, strides, dilations,
                  (kh, kw))
        return y
    x, w = np.ascontiguousarray(x), np.ascontiguousarray(w)
    y = np.empty((n, m, oh, ow), np.float32)
    group = c // cg
    # fewer groups than threads (a one-group convolution): each group's filters in one part per thread
    parts = 1 if n * group >= threads() or m // group < 8 else threads()
    planes, out_planes = x.reshape(n * c, h, wd), y.reshape(n * m, oh, ow)
    split(n * group * parts, (m // group // parts) * cg * kh * kw * oh * (ow + 2),
          lambda lo, hi: grouped_planes(planes, w, b, out_planes, lo, hi, group, parts, begin[0], begin[1], sh, sw, dh,
                                        dw),
          _grouped_planes_split, planes, w, b, out_planes, group, parts, begin[0], begin[1], sh, sw, dh, dw)
    return y
