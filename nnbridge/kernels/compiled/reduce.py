"""Means, layer, instance and RMS norms of short rows of a float32 array in one compiled call (ReduceMean over
the spatial axes and GlobalAveragePool of the small maps where mobile networks put their
squeeze-excite blocks, LayerNormalization and RMSNormalization of small transformers: numpy's reduction machinery
costs 5-15 µs a call there, against under 1 µs here).

Each row's sum is numpy's own pairwise summation of a contiguous row, term for term: halves split
at a multiple of 8 down to blocks of at most ``BLOCK`` values, each block eight interleaved
partial sums combined as ``((r0 + r1) + (r2 + r3)) + ((r4 + r5) + (r6 + r7))`` then the
remainder, the reduction starting from 0; divided by the row length in
float32 as ``np.mean`` does: bit for bit equal to ``np.mean(x, axis=trailing, keepdims=True)``
(``tests/reference/test_compiled.py``); a norm's other operations are the numpy kernel's, one
by one in float32. Rows longer than ``MEAN_ROW`` (a mean), ``TWO_BLOCKS`` (a softmax's sums) or
``NORM_ROW`` (a norm) stay with numpy, whose vectorised partial sums are faster there.
"""

from __future__ import annotations

import math

import numpy as np
from numba import prange

from ..parallel import CURVE_WORK, share
from ._core import F, block_bounds, inline, jit, jit_parallel
from .ufuncs import handle, in_place_plan, span

#: numpy's PW_BLOCKSIZE: the longest row summed as one block of eight partial sums
BLOCK = 128
#: the layer norm's bias where a node has none
NO_BIAS = np.empty(0, np.float32)
#: the longest row ``trailing_mean`` sums (past it numpy's vectorised partial sums are faster: a
#: 56×56 map 26 against 13 µs, a 12×48 one 3 against 6)
MEAN_ROW = 1024


@inline
def _block_sum(x, s, n):
    """numpy's sum of the ``n`` ≤ ``BLOCK`` values of the flat ``x`` from ``s`` (no initial 0)."""
    if n < 8:
        res = F(0)
        for i in range(n):
            res += x[s + i]
        return res
    r0, r1, r2, r3 = x[s], x[s + 1], x[s + 2], x[s + 3]
    r4, r5, r6, r7 = x[s + 4], x[s + 5], x[s + 6], x[s + 7]
    i = 8
    while i < n - n % 8:
        r0 += x[s + i]
        r1 += x[s + i + 1]
        r2 += x[s + i + 2]
        r3 += x[s + i + 3]
        r4 += x[s + i + 4]
        r5 += x[s + i + 5]
        r6 += x[s + i + 6]
        r7 += x[s + i + 7]
        i += 8
    res = ((r0 + r1) + (r2 + r3)) + ((r4 + r5) + (r6 + r7))
    while i < n:
        res += x[s + i]
        i += 1
    return res


@inline
def _halves(n):
    """Where numpy's pairwise sum splits ``n`` > ``BLOCK`` values: at half, less its remainder by 8."""
    half = n // 2
    return half - half % 8


#: the longest row whose pairwise sum is at most two blocks (each half of a row up to 240 values
#: is at most ``BLOCK``): DeiT's 197-wide attention rows
TWO_BLOCKS = 240


@inline
def _row_sum(x, r, n):
    """numpy's sum of row ``r`` of ``x``, term for term, from its 0: ``n`` values whose pairwise
    sum is one block or two (``n - _halves(n) ≤ BLOCK``: every ``n`` up to ``TWO_BLOCKS``)."""
    if n <= BLOCK:
        return F(0) + _block_sum(x[r], 0, n)
    half = _halves(n)
    return F(0) + (_block_sum(x[r], 0, half) + _block_sum(x[r], half, n - half))


#: the longest row a layer or RMS norm takes (its sums through the tree past ``TWO_BLOCKS``): numpy's
#: eight passes over memory against these three, measured at 1 / 2 threads against numpy's path:
#: BERT's 128 × 768 153 / 96 µs against 226, Whisper's 1500 × 384 722 / 484 against 915; at 8192
#: values a row both take 110 µs, and a row of 65536 one call of numpy's is faster (118 against 129)
NORM_ROW = 8192
#: the deepest split a row can need: each split leaves at most half + 8 values
_DEPTH = 64


@inline
def _pairwise_sum(x, n, pending, partials, depths):
    """numpy's pairwise sum of the ``n`` values of the flat ``x``, its tree walked with a stack
    instead of recursion (numba's cache cannot hold a recursive function: a cached one crashed the
    next process; and a function per level, inlined into each other, put sixteen copies of the
    block sum in one body: 33 CPU-s to compile on a cold cache). Blocks are summed left to right;
    a finished subtree is added to the left sibling waiting on the stack at its depth, so every
    addition is numpy's ``sum(left) + sum(right)``. ``pending`` (``_DEPTH`` × 3: start, length and
    depth of the right halves still to sum), ``partials`` and ``depths`` (``_DEPTH``) are scratch."""
    todo = 0  # right halves waiting in ``pending``
    done = 0  # finished subtrees waiting in ``partials``
    s, length, depth = 0, n, 0
    while True:
        while length > BLOCK:
            half = _halves(length)
            pending[todo, 0], pending[todo, 1], pending[todo, 2] = s + half, length - half, depth + 1
            todo += 1
            length, depth = half, depth + 1
        total = _block_sum(x, s, length)
        while done and depths[done - 1] == depth:
            done -= 1
            total = partials[done] + total
            depth -= 1
        partials[done], depths[done] = total, depth
        done += 1
        if todo == 0:
            return partials[0]
        todo -= 1
        s, length, depth = pending[todo, 0], pending[todo, 1], pending[todo, 2]


@inline
def _tree_scratch(n):
    """``_pairwise_sum``'s scratch (``pending``, ``partials``, ``depths``) for rows of ``n`` values:
    empty where a row is one or two blocks (``_any_row_sum`` then never walks the tree)."""
    depth = 0 if n - _halves(n) <= BLOCK else _DEPTH
    return np.empty((depth, 3), np.int64), np.empty(depth, np.float32), np.empty(depth, np.int64)


@inline
def _any_row_sum(x, r, n, pending, partials, depths):
    """numpy's sum of row ``r`` of ``x`` for any ``n``: a row of one or two blocks (a 14×14 map)
    through ``_row_sum``, a longer one through the tree (scratch from ``_tree_scratch(n)``)."""
    if n - _halves(n) <= BLOCK:
        return _row_sum(x, r, n)
    return F(0) + _pairwise_sum(x[r], n, pending, partials, depths)


@jit
def row_means(x, out):
    """The mean of each row of ``x (R, n)`` into ``out`` (R values), numpy's pairwise sum / n."""
    n = x.shape[1]
    pending, partials, depths = _tree_scratch(n)
    for r in range(x.shape[0]):
        out[r] = _any_row_sum(x, r, n, pending, partials, depths) / F(n)


@jit
def layer_norm_rows(x, scale, bias, epsilon, y, first, last):
    """``kernels/ops/normalization.layer_norm``'s float32 operations on rows ``[first, last)``, in
    its order: the mean (numpy's sum / n), the centred row, the mean of its squares, + ε, 1/√,
    × scale, + bias."""
    n = x.shape[1]
    centered = np.empty((1, n), np.float32)
    pending, partials, depths = _tree_scratch(n)
    for r in range(first, last):
        mean = _any_row_sum(x, r, n, pending, partials, depths) / F(n)
        for i in range(n):
            centered[0, i] = x[r, i] - mean
        for i in range(n):
            y[r, i] = centered[0, i] * centered[0, i]
        variance = _any_row_sum(y, r, n, pending, partials, depths) / F(n) + epsilon
        inv_std = F(1) / np.sqrt(variance)
        if bias.size:
            for i in range(n):
                y[r, i] = centered[0, i] * inv_std * scale[i] + bias[i]
        else:
            for i in range(n):
                y[r, i] = centered[0, i] * inv_std * scale[i]


@jit_parallel
def _layer_norm_split(x, scale, bias, epsilon, y, count, step, parts):
    for p in prange(parts):
        first, last = block_bounds(count, step, parts, p)
        layer_norm_rows(x, scale, bias, epsilon, y, first, last)


def layer_norm_into(x: np.ndarray, scale: np.ndarray, bias: np.ndarray, epsilon: np.float32, y: np.ndarray) -> None:
    """``layer_norm_rows`` over all rows of ``x (R, n)`` into ``y``, shared over the kernel threads."""
    share(x.shape[0], 6 * x.shape[1], layer_norm_rows, _layer_norm_split, x, scale, bias, epsilon, y)


def layer_norm(x: np.ndarray, scale: np.ndarray, bias: np.ndarray | None, axis: int,
               epsilon: np.float32) -> np.ndarray | None:
    """LayerNormalization of C-contiguous float32 ``x`` over its axes from ``axis`` on, with
    float32 ``scale`` and ``bias`` of the normalised axes' shape; None when a row is longer than
    ``NORM_ROW`` or they broadcast."""
    length = math.prod(x.shape[axis:])
    if (length > NORM_ROW or length == 0 or scale.shape != x.shape[axis:]
            or (bias is not None and bias.shape != x.shape[axis:])):
        return None
    y = np.empty_like(x)
    layer_norm_into(x.reshape(-1, length), np.ascontiguousarray(scale).reshape(-1),
                    NO_BIAS if bias is None else np.ascontiguousarray(bias).reshape(-1), epsilon, y.reshape(-1, length))
    return y


@jit
def instance_norm_rows(x, scale, bias, epsilon, y, centered):
    """``kernels/ops/normalization.instance_norm``'s float32 operations on each row of ``x (N·C,
    n)``, in its order: the mean (numpy's pairwise sum / n), the centred row, the mean of its
    squares, + ε, √, the centred row ÷ it, × the row's channel's scale, + its bias."""
    n, channels = x.shape[1], scale.size
    pending = np.empty((_DEPTH, 3), np.int64)
    partials = np.empty(_DEPTH, np.float32)
    depths = np.empty(_DEPTH, np.int64)
    for r in range(x.shape[0]):
        row, out = x[r], y[r]
        mean = (F(0) + _pairwise_sum(row, n, pending, partials, depths)) / F(n)
        for i in range(n):
            centered[i] = row[i] - mean
        for i in range(n):
            out[i] = centered[i] * centered[i]
        root = np.sqrt((F(0) + _pairwise_sum(out, n, pending, partials, depths)) / F(n) + epsilon)
        s, b = scale[r % channels], bias[r % channels]
        for i in range(n):
            out[i] = centered[i] / root * s + b


def instance_norm(x: np.ndarray, scale: np.ndarray, bias: np.ndarray, epsilon: np.float32) -> np.ndarray:
    """InstanceNormalization of C-contiguous float32 ``x (N, C, ...)`` with C float32 scales and biases."""
    rows = x.reshape(x.shape[0] * x.shape[1], -1)
    y = np.empty_like(rows)
    instance_norm_rows(rows, np.ascontiguousarray(scale).reshape(-1), np.ascontiguousarray(bias).reshape(-1),
                       epsilon, y, np.empty(rows.shape[1], np.float32))
    return y.reshape(x.shape)


@jit
def rms_norm_rows(x, scale, epsilon, y, first, last):
    """``kernels/ops/normalization.rms_norm``'s float32 operations on rows ``[first, last)``, in its
    order: the squares, their mean (numpy's sum / n), + ε, √, x ÷ it, × scale."""
    n = x.shape[1]
    pending, partials, depths = _tree_scratch(n)
    for r in range(first, last):
        for i in range(n):
            y[r, i] = x[r, i] * x[r, i]
        root = np.sqrt(_any_row_sum(y, r, n, pending, partials, depths) / F(n) + epsilon)
        for i in range(n):
            y[r, i] = x[r, i] / root * scale[i]


@jit_parallel
def _rms_norm_split(x, scale, epsilon, y, count, step, parts):
    for p in prange(parts):
        first, last = block_bounds(count, step, parts, p)
        rms_norm_rows(x, scale, epsilon, y, first, last)


def rms_norm_into(x: np.ndarray, scale: np.ndarray, epsilon: np.float32, y: np.ndarray) -> None:
    """``rms_norm_rows`` over all rows of ``x (R, n)`` into ``y``, shared over the kernel threads."""
    share(x.shape[0], 4 * x.shape[1], rms_norm_rows, _rms_norm_split, x, scale, epsilon, y)


def rms_norm(x: np.ndarray, scale: np.ndarray, axis: int, epsilon: np.float32) -> np.ndarray | None:
    """RMSNormalization of C-contiguous float32 ``x`` over its axes from ``axis`` on, with float32
    ``scale`` of the normalised axes' shape; None when a row is longer than ``NORM_ROW`` or it broadcasts."""
    length = math.prod(x.shape[axis:])
    if length > NORM_ROW or length == 0 or scale.shape != x.shape[axis:]:
        return None
    y = np.empty_like(x)
    rms_norm_into(x.reshape(-1, length), np.ascontiguousarray(scale).reshape(-1), epsilon, y.reshape(-1, length))
    return y


@jit
def shift_rows(x, out, first, last):
    """``out = x - max(x)`` per row, the max replaced by 0 where it is ±inf or NaN (a NaN anywhere
    makes numpy's max NaN): the softmax's shift, as the numpy kernel computes it. The max is kept in
    eight lanes and NaN in a flag, so the loop vectorises (a select that also took NaN, and stopped
    there, ran one value at a time: 1.1 ns a value); which zero wins a tie of -0 and +0 may differ
    from numpy's, and x - (±0) then differs only in a zero's sign, which exp maps to 1 alike."""
    n = x.shape[1]
    lanes = np.empty(8, np.float32)
    for r in range(first, last):
        row, shifted = x[r], out[r]
        for k in range(8):
            lanes[k] = row[0]
        nan = False
        i = 0
        while i + 8 <= n:
            for k in range(8):
                v = row[i + k]
                lanes[k] = v if v > lanes[k] else lanes[k]
                nan |= v != v
            i += 8
        peak = lanes[0]
        for k in range(1, 8):
            peak = lanes[k] if lanes[k] > peak else peak
        for j in range(i, n):
            v = row[j]
            peak = v if v > peak else peak
            nan |= v != v
        shift = F(0) if nan or not np.isfinite(peak) else peak
        for j in range(n):
            shifted[j] = row[j] - shift


@jit
def divide_by_row_sums(x, first, last):
    """``x /= sum(x)`` on rows ``[first, last)``, each sum numpy's (rows of at most ``TWO_BLOCKS`` values)."""
    n = x.shape[1]
    for r in range(first, last):
        total = _row_sum(x, r, n)
        for i in range(n):
            x[r, i] = x[r, i] / total


#: rows a softmax block shifts, exponentiates and divides while they are in cache
SOFTMAX_ROWS = 16


@jit
def softmax_block(x, out, exp_loop, first, last):
    """Rows ``[first, last)`` of the softmax, ``SOFTMAX_ROWS`` at a time: the shift, numpy's own exp
    loop over those rows in place (``ufuncs.span`` with ``exp_loop``'s plan: its values bit for
    bit), the division."""
    n = out.shape[1]
    exp_plan = in_place_plan(exp_loop, out)
    for start in range(first, last, SOFTMAX_ROWS):
        stop = min(start + SOFTMAX_ROWS, last)
        shift_rows(x, out, start, stop)
        span(exp_plan, start * n, stop * n)
        divide_by_row_sums(out, start, stop)


@jit_parallel
def _softmax_split(x, out, exp_loop, count, step, parts):
    for p in prange(parts):
        first, last = block_bounds(count, step, parts, p)
        softmax_block(x, out, exp_loop, first, last)


def softmax_rows(x: np.ndarray, out: np.ndarray) -> None:
    """``out`` = the softmax of each row of C-contiguous float32 ``x (R, n)`` (n ≤ ``TWO_BLOCKS``):
    the compiled shift, numpy's exp, the compiled division by the row sums, in blocks of rows
    shared over the kernel threads (numpy's ``np.exp`` when its loop is not to be had)."""
    exp_loop = handle(np.exp, x.dtype)
    rows, work = x.shape[0], 2 * x.shape[1]
    if exp_loop is None:  # a numpy without the loops' interface: one thread
        shift_rows(x, out, 0, rows)
        np.exp(out, out=out)
        divide_by_row_sums(out, 0, rows)
    else:
        share(rows, work + CURVE_WORK * x.shape[1], softmax_block, _softmax_split, x, out, exp_loop)


def trailing_mean(x: np.ndarray, axes: int) -> np.ndarray | None:
    """The mean of C-contiguous float32 ``x`` over its last ``axes`` axes, keeping them as 1s;
    None when those axes hold more than ``MEAN_ROW`` values."""
    lead = x.ndim - axes
    length = math.prod(x.shape[lead:])
    if length > MEAN_ROW or length == 0:
        return None
    out = np.empty(x.shape[:lead] + (1,) * axes, np.float32)
    row_means(x.reshape(-1, length), out.reshape(-1))
    return out
