"""The whole recurrence of one direction of an RNN, GRU or LSTM in one compiled call.

The caller projects every time step's input with one matrix product (BLAS) before the call, both
biases included where they add outside a gate's product; the loop here runs over time, and per
step makes the recurrent product ``h·Rᵀ`` (four batch rows at a time, sharing each loaded row of
R), the gates (the float32 curves of ``_core``, default activations: sigmoid for gates, tanh for
candidates and outputs), the clip, peepholes, coupled input/forget gates and ``sequence_lens``
(a finished sequence keeps its state and emits zeros). ``h`` and ``c`` come in as the initial
states and leave as the final ones.

The recurrent products are summed in k order with fused multiply-adds, as BLAS sums the numpy
kernel's in an order and with fusions of its own: the two agree within the bound of
``tests/reference/test_compiled.py``.
"""

from __future__ import annotations

import numpy as np
from numba import njit

from ._core import F, inline, jit, sigmoid32, tanh32

# the recurrent products may fuse each multiply-add (as BLAS does); nothing else here may
_products = njit(cache=True, nogil=True, error_model="numpy", fastmath={"contract"})


@_products
def _recurrent(h, rt, first, width, rows, out):
    """``out[b, j] = Σₖ h[b, k]·rt[k, first + j]`` for the batch rows ``rows`` (a list of indices)
    and ``j < width``, in k order: four batch rows and four k per pass over the output rows, so
    that each loaded row of Rᵀ serves sixteen multiply-adds."""
    hidden = h.shape[1]
    count = rows.size
    i = 0
    while i + 4 <= count:
        b0, b1, b2, b3 = rows[i], rows[i + 1], rows[i + 2], rows[i + 3]
        o0, o1, o2, o3 = out[b0], out[b1], out[b2], out[b3]
        for j in range(width):
            o0[j] = F(0)
            o1[j] = F(0)
            o2[j] = F(0)
            o3[j] = F(0)
        k = 0
        while k < hidden:
            step = min(4, hidden - k)
            if step < 4:  # the last few: one k at a time
                a0, a1, a2, a3 = h[b0, k], h[b1, k], h[b2, k], h[b3, k]
                r = rt[k, first:first + width]
                for j in range(width):
                    o0[j] += a0 * r[j]
                    o1[j] += a1 * r[j]
                    o2[j] += a2 * r[j]
                    o3[j] += a3 * r[j]
                k += 1
                continue
            r0, r1 = rt[k, first:first + width], rt[k + 1, first:first + width]
            r2, r3 = rt[k + 2, first:first + width], rt[k + 3, first:first + width]
            a00, a01, a02, a03 = h[b0, k], h[b0, k + 1], h[b0, k + 2], h[b0, k + 3]
            a10, a11, a12, a13 = h[b1, k], h[b1, k + 1], h[b1, k + 2], h[b1, k + 3]
            a20, a21, a22, a23 = h[b2, k], h[b2, k + 1], h[b2, k + 2], h[b2, k + 3]
            a30, a31, a32, a33 = h[b3, k], h[b3, k + 1], h[b3, k + 2], h[b3, k + 3]
            for j in range(width):
                o0[j] = (((o0[j] + a00 * r0[j]) + a01 * r1[j]) + a02 * r2[j]) + a03 * r3[j]
                o1[j] = (((o1[j] + a10 * r0[j]) + a11 * r1[j]) + a12 * r2[j]) + a13 * r3[j]
                o2[j] = (((o2[j] + a20 * r0[j]) + a21 * r1[j]) + a22 * r2[j]) + a23 * r3[j]
                o3[j] = (((o3[j] + a30 * r0[j]) + a31 * r1[j]) + a32 * r2[j]) + a33 * r3[j]
            k += 4
        i += 4
    while i < count:
        o = out[rows[i]]
        hb = h[rows[i]]
        for j in range(width):
            o[j] = F(0)
        for k in range(hidden):
            a = hb[k]
            r = rt[k, first:first + width]
            for j in range(width):
                o[j] += a * r[j]
        i += 1


@inline
def _clip(x, clip):
    return min(max(x, -clip), clip) if clip > F(0) else x


@jit
def _active(t, lens, y):
    """The batch rows still inside their sequence at step t; rows past their end emit zeros."""
    rows = np.empty(lens.size, np.int64)
    count = 0
    for b in range(lens.size):
        if t < lens[b]:
            rows[count] = b
            count += 1
        else:
            y[t, b, :] = 0
    return rows[:count]


@jit
def lstm(xw, rt, peep, h, c, y, lens, reverse, clip, couple):
    """LSTM, gate order i, o, f, c (ONNX): ``xw (seq, batch, 4H)``, ``rt (H, 4H)`` (Rᵀ), ``peep``
    the three peephole vectors (3H) or none, ``h, c (batch, H)``, ``y (seq, batch, H)``;
    ``clip`` ≤ 0 for none; ``couple``: the forget gate is 1 - input (``input_forget``)."""
    seq, batch = xw.shape[0], xw.shape[1]
    hidden = h.shape[1]
    pre = np.empty((batch, 4 * hidden), np.float32)
    peeps = peep.size > 0
    if not peeps:
        peep = np.zeros(3 * hidden, np.float32)
    p_i, p_o, p_f = peep[:hidden], peep[hidden:2 * hidden], peep[2 * hidden:]
    for step in range(seq):
        t = seq - 1 - step if reverse else step
        rows = _active(t, lens, y)
        _recurrent(h, rt, 0, 4 * hidden, rows, pre)
        for b in rows:
            g, x, hb, cb, out = pre[b], xw[t, b], h[b], c[b], y[t, b]
            for k in range(hidden):  # branch-free: LLVM vectorises it, curves included
                ci = cb[k]
                i = g[k] + x[k]
                i = sigmoid32(_clip(i + p_i[k] * ci if peeps else i, clip))
                f = g[2 * hidden + k] + x[2 * hidden + k]
                f = sigmoid32(_clip(f + p_f[k] * ci if peeps else f, clip))
                f = F(1) - i if couple else f
                cand = tanh32(_clip(g[3 * hidden + k] + x[3 * hidden + k], clip))
                cn = f * ci + i * cand
                o = g[hidden + k] + x[hidden + k]
                o = sigmoid32(_clip(o + p_o[k] * cn if peeps else o, clip))
                cb[k] = cn
                hb[k] = o * tanh32(cn)
                out[k] = hb[k]


@jit
def gru(xw, rt, rbh, h, y, lens, reverse, clip, before_reset):
    """GRU, gate order z, r, h (ONNX): ``xw (seq, batch, 3H)`` (the candidate's recurrent bias
    ``rbh`` (H) included in xw unless ``before_reset``), ``rt (H, 3H)`` (Rᵀ), ``h (batch, H)``,
    ``y (seq, batch, H)``. ``before_reset``: the candidate is ``tanh(xw + r ⊙ (h·Rhᵀ + Rbh))``,
    else ``tanh(xw + (r ⊙ h)·Rhᵀ)``."""
    seq, batch = xw.shape[0], xw.shape[1]
    hidden = h.shape[1]
    pre = np.empty((batch, 3 * hidden), np.float32)
    reset = np.empty((batch, hidden), np.float32)
    cand = np.empty((batch, hidden), np.float32)
    for step in range(seq):
        t = seq - 1 - step if reverse else step
        rows = _active(t, lens, y)
        _recurrent(h, rt, 0, (3 if before_reset else 2) * hidden, rows, pre)
        for b in rows:
            for k in range(hidden):
                gate = sigmoid32(_clip(pre[b, hidden + k] + xw[t, b, hidden + k], clip))
                if before_reset:
                    cand[b, k] = gate * (pre[b, 2 * hidden + k] + rbh[k])
                else:
                    reset[b, k] = gate * h[b, k]
        if not before_reset:
            _recurrent(reset, rt, 2 * hidden, hidden, rows, cand)
        for b in rows:
            for k in range(hidden):
                z = sigmoid32(_clip(pre[b, k] + xw[t, b, k], clip))
                g = tanh32(_clip(cand[b, k] + xw[t, b, 2 * hidden + k], clip))
                h[b, k] = g + z * (h[b, k] - g)  # (1 - z)·g + z·h
                y[t, b, k] = h[b, k]


@jit
def rnn(xw, rt, h, y, lens, reverse, clip):
    """Simple RNN with tanh: ``xw (seq, batch, H)``, ``rt (H, H)`` (Rᵀ), ``h (batch, H)``,
    ``y (seq, batch, H)``."""
    seq, batch = xw.shape[0], xw.shape[1]
    hidden = h.shape[1]
    pre = np.empty((batch, hidden), np.float32)
    for step in range(seq):
        t = seq - 1 - step if reverse else step
        rows = _active(t, lens, y)
        _recurrent(h, rt, 0, hidden, rows, pre)
        for b in rows:
            for k in range(hidden):
                h[b, k] = tanh32(_clip(xw[t, b, k] + pre[b, k], clip))
                y[t, b, k] = h[b, k]
