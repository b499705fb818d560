"""Means of short rows of a float32 array in one compiled call (ReduceMean over the spatial axes
and GlobalAveragePool of the small maps where mobile networks put their squeeze-excite blocks:
numpy's reduction machinery costs 5-15 µs a call there, against under 1 µs here).

Each row's sum is numpy's own pairwise summation of a contiguous row of at most ``BLOCK`` values,
term for term (eight interleaved partial sums combined as ``((r0 + r1) + (r2 + r3)) + ((r4 + r5)
+ (r6 + r7))``, then the remainder, the reduction starting from 0), divided by the row length in
float32 as ``np.mean`` does: bit for bit equal to ``np.mean(x, axis=trailing, keepdims=True)``
(``tests/reference/test_compiled.py``). Longer rows stay with numpy, whose vectorised partial
sums are faster there.
"""

from __future__ import annotations

import math

import numpy as np

from ._core import F, jit

#: numpy's PW_BLOCKSIZE: the longest row summed as one block of eight partial sums
BLOCK = 128


@jit
def _row_means(x, out):
    n = x.shape[1]
    for r in range(x.shape[0]):
        if n < 8:
            res = F(0)
            for i in range(n):
                res += x[r, i]
        else:
            r0, r1, r2, r3 = x[r, 0], x[r, 1], x[r, 2], x[r, 3]
            r4, r5, r6, r7 = x[r, 4], x[r, 5], x[r, 6], x[r, 7]
            i = 8
            while i < n - n % 8:
                r0 += x[r, i]
                r1 += x[r, i + 1]
                r2 += x[r, i + 2]
                r3 += x[r, i + 3]
                r4 += x[r, i + 4]
                r5 += x[r, i + 5]
                r6 += x[r, i + 6]
                r7 += x[r, i + 7]
                i += 8
            res = ((r0 + r1) + (r2 + r3)) + ((r4 + r5) + (r6 + r7))
            while i < n:
                res += x[r, i]
                i += 1
        out[r] = (F(0) + res) / F(n)


def trailing_mean(x: np.ndarray, axes: int) -> np.ndarray | None:
    """The mean of C-contiguous float32 ``x`` over its last ``axes`` axes, keeping them as 1s;
    None when those axes hold more than ``BLOCK`` values."""
    lead = x.ndim - axes
    length = math.prod(x.shape[lead:])
    if length > BLOCK or length == 0:
        return None
    out = np.empty(x.shape[:lead] + (1,) * axes, np.float32)
    _row_means(x.reshape(-1, length), out.reshape(-1))
    return out
