"""Recurrent layers: RNN, GRU (both linear_before_reset forms) and LSTM (peepholes, input_forget).

All directions, ``sequence_lens`` (finished sequences keep their state and emit
zeros), initial states, ``clip``, the ``activations`` attribute with
alpha/beta, and both layouts. The input projection of every time step (with
both biases) is one matmul; the loop runs over time steps only. With numba and
the default activations in float32, each direction's whole loop is one compiled
call (``compiled/rnn.py``); otherwise one recurrent matmul and a handful of
in-place operators per step, the masking for ``sequence_lens`` skipped when
every sequence is full length.
"""

from __future__ import annotations

from collections.abc import Callable

import numpy as np

from ...ir import Node
from .. import compiled
from ..parallel import grain, run_blocks
from ..registry import kernel
from ._windows import FLOATS, compute_dtype
from .activation import sigmoid as _sigmoid
from .linalg import matmul_nd

_HALF = np.float32(0.5)


def _softplus(x):
    return np.logaddexp(0, x)


# name -> (function of (x, alpha, beta), default alpha, default beta); None marks an unused parameter
_ACTIVATIONS: dict[str, tuple[Callable, float | None, float | None]] = {
    "sigmoid": (lambda x, a, b: _sigmoid(x), None, None),
    "tanh": (lambda x, a, b: np.tanh(x), None, None),
    "relu": (lambda x, a, b: np.maximum(x, 0), None, None),
    "softsign": (lambda x, a, b: x / (1 + np.abs(x)), None, None),
    "softplus": (lambda x, a, b: _softplus(x), None, None),
    "affine": (lambda x, a, b: a * x + b, 1.0, 0.0),
    "leakyrelu": (lambda x, a, b: np.where(x >= 0, x, a * x), 0.01, None),
    "thresholdedrelu": (lambda x, a, b: np.where(x > a, x, 0), 1.0, None),
    "scaledtanh": (lambda x, a, b: a * np.tanh(b * x), 1.0, 1.0),
    "hardsigmoid": (lambda x, a, b: np.clip(a * x + b, 0, 1), 0.2, 0.5),
    "elu": (lambda x, a, b: np.where(x > 0, x, a * np.expm1(np.minimum(x, 0))), 1.0, None),
}

_DEFAULTS = {"RNN": ["Tanh"], "GRU": ["Sigmoid", "Tanh"], "LSTM": ["Sigmoid", "Tanh", "Tanh"]}
_GATES = {"RNN": 1, "GRU": 3, "LSTM": 4}


#: ONNX's RNN schema lists two Tanh as the default of ``activations`` (one per direction of a
#: bidirectional RNN); the kernels apply the per-op default for the node's directions instead
_OWN_DEFAULTS = {"activations": "the default depends on the direction: the kernel applies one Tanh per direction"}


def _directions(direction: str) -> int:
    return 2 if direction == "bidirectional" else 1


def _activation_names(activations) -> list[str] | None:
    """The explicit ``activations`` attribute (the per-op default is applied by the caller)."""
    if not activations:
        return None
    return [n.decode() if isinstance(n, bytes) else str(n) for n in activations]


def _check_rnn(node: Node, *, activations=None, direction="forward", layout=0) -> str | None:
    if direction not in ("forward", "reverse", "bidirectional"):
        return f"direction={direction} is not implemented"
    names = _activation_names(activations)
    if names:
        unknown = [n for n in names if n.lower() not in _ACTIVATIONS]
        if unknown:
            return f"activations {unknown} are not implemented"
        if len(names) != len(_DEFAULTS[node.op]) * _directions(direction):
            return f"{len(names)} activations do not match the direction"
    if int(layout) not in (0, 1):
        return f"layout={layout} is not implemented"
    return None


def _activation_fns(op: str, dirs: int, names: list[str] | None, alphas, betas) -> list[list[Callable]]:
    """Activation functions per direction; alpha/beta lists are consumed in order by those that take them."""
    names = names or _DEFAULTS[op] * dirs
    if len(names) == len(_DEFAULTS[op]):
        names = names * dirs
    alphas = list(alphas or [])
    betas = list(betas or [])
    fns = []
    for name in names:
        fn, alpha, beta = _ACTIVATIONS[name.lower()]
        a = alphas.pop(0) if alpha is not None and alphas else alpha
        b = betas.pop(0) if beta is not None and betas else beta
        fns.append(lambda x, fn=fn, a=a, b=b: fn(x, a, b))
    per = len(_DEFAULTS[op])
    return [fns[d * per:(d + 1) * per] for d in range(dirs)]


class Recurrence:
    """Common plumbing: layout, per-direction weights, masks for sequence_lens, output assembly;
    the attributes every recurrent op has arrive as keywords."""

    def __init__(self, ctx, x, w, r, b, seq_lens, *, activation_alpha, activation_beta, activations, clip,
                 direction: str, layout: int):
        self.ctx = ctx
        self.layout = int(layout)
        self.dtype = compute_dtype(x.dtype)
        xs = x.astype(self.dtype, copy=False)
        self.x = xs.transpose(1, 0, 2) if self.layout else xs  # (seq, batch, input)
        self.seq, self.batch = self.x.shape[:2]
        self.hidden = int(r.shape[-1])
        self.w, self.r = w.astype(self.dtype, copy=False), r.astype(self.dtype, copy=False)
        gates = _GATES[ctx.node.op]
        self.b = (b.astype(self.dtype, copy=False) if b is not None
                  else np.zeros((w.shape[0], 2 * gates * self.hidden), self.dtype))
        self.lens = (np.asarray(seq_lens).astype(np.int64) if seq_lens is not None
                     else np.full(self.batch, self.seq, np.int64))
        self.dirs = w.shape[0]
        self.clip = clip
        names = _activation_names(activations)
        self.acts = _activation_fns(ctx.node.op, _directions(direction), names, activation_alpha, activation_beta)
        self.reverse = [direction == "reverse"] if self.dirs == 1 else [False, True]
        self.default_activations = [n.lower() for n in (names or [])] in ([], [
            a.lower() for a in _DEFAULTS[ctx.node.op] * self.dirs])
        # the common case runs in place: float32, default activations, no clip, full-length sequences
        self.plain = (self.dtype == np.float32 and self.clip is None and bool((self.lens >= self.seq).all())
                      and self.default_activations)

    def order(self, d: int) -> range:
        return range(self.seq - 1, -1, -1) if self.reverse[d] else range(self.seq)

    def state(self, given, d: int) -> np.ndarray:
        if given is None:
            return np.zeros((self.batch, self.hidden), self.dtype)
        given = given.astype(self.dtype, copy=False)
        return (given[:, d] if self.layout else given[d]).copy()

    def clipped(self, x: np.ndarray) -> np.ndarray:
        return x if self.clip is None else np.clip(x, -self.clip, self.clip)

    def projected(self, d: int, split: int | None = None) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
        """(X @ W^T + Wb + Rb for all steps, R^T, Rb) of direction d.

        The recurrent bias is folded into the projection for gates ``< split``
        (all of them by default); GRU's candidate gate under linear_before_reset
        keeps its Rb apart because the reset gate scales it.
        """
        g = self.w.shape[1]
        xw = matmul_nd(np.ascontiguousarray(self.x), self.w[d].T)
        xw += self.b[d, :g]
        rb = self.b[d, g:]
        folded = g if split is None else split
        xw[..., :folded] += rb[:folded]
        return xw, np.ascontiguousarray(self.r[d].T), rb

    def steps(self, d: int):
        """Yield (t, active mask (batch, 1)) in processing order of direction d."""
        order = range(self.seq - 1, -1, -1) if self.reverse[d] else range(self.seq)
        for t in order:
            yield t, (t < self.lens)[:, None]

    def outputs(self, ys: list[np.ndarray], finals: list[list[np.ndarray]], out_dtype):
        """Y (seq, dirs, batch, hidden) and final states, in the node's layout."""
        y = np.stack(ys, axis=1)
        if self.layout:
            y = y.transpose(2, 0, 1, 3)
        states = [np.stack(s, axis=1 if self.layout else 0) for s in zip(*finals)]
        outs = tuple(a.astype(out_dtype, copy=False) for a in (y, *states))
        return outs[:len(self.ctx.node.outputs)]


def _compiled(rec: Recurrence, states: list[list[np.ndarray]], split: int | None = None, **options):
    """Every direction's whole recurrence in one compiled call each (directions on the kernel
    threads), or None where the compiled loops do not apply: numba off, not float32, an
    activation other than the defaults. ``states``: the initial states per direction, updated."""
    fast = compiled.load("rnn")
    if fast is None or rec.dtype != np.float32 or not rec.default_activations:
        return None
    op = rec.ctx.node.op
    loop = {"RNN": fast.rnn, "GRU": fast.gru, "LSTM": fast.lstm}[op]
    lens = np.ascontiguousarray(np.minimum(rec.lens, rec.seq), np.int64)
    clip = np.float32(rec.clip if rec.clip is not None else 0)
    ys = [np.empty((rec.seq, rec.batch, rec.hidden), np.float32) for _ in range(rec.dirs)]

    # the input projections first, each one matrix product over all the kernel threads; then the
    # directions' recurrences side by side
    projections = [rec.projected(d, split) for d in range(rec.dirs)]

    def direction(first: int, last: int) -> None:
        for d in range(first, last):
            xw, r, rb = projections[d]  # r: Rᵀ, the loops run along its rows
            if op == "LSTM":
                peep = options["peepholes"]
                peep = np.ascontiguousarray(peep[d], np.float32) if peep is not None else np.empty(0, np.float32)
                loop(xw, r, peep, *states[d], ys[d], lens, rec.reverse[d], clip, options["couple"])
            elif op == "GRU":
                rbh = np.ascontiguousarray(rb[2 * rec.hidden:], np.float32)
                loop(xw, r, rbh, *states[d], ys[d], lens, rec.reverse[d], clip, options["before_reset"])
            else:
                loop(xw, r, *states[d], ys[d], lens, rec.reverse[d], clip)

    gates = rec.w.shape[1]
    run_blocks(rec.dirs, direction, grain(rec.seq * rec.batch * gates * rec.hidden))
    return [(y, s) for y, s in zip(ys, states)]


def _run(rec: Recurrence, cell, states0, d: int, split: int | None = None):
    """Run ``cell(xw_t, states, rt, rb, d) -> states`` over time; state 0 is h.

    Returns (Y of this direction, final states)."""
    xw, rt, rb = rec.projected(d, split)
    states = states0
    y = np.zeros((rec.seq, rec.batch, rec.hidden), rec.dtype)
    if (rec.lens >= rec.seq).all():
        for t in rec.order(d):
            states = cell(xw[t], states, rt, rb, d)
            y[t] = states[0]
        return y, states
    for t, active in rec.steps(d):
        new = cell(xw[t], states, rt, rb, d)
        states = [np.where(active, n, s) for n, s in zip(new, states)]
        y[t] = np.where(active, states[0], 0)
    return y, states


def _gate_major(rec: Recurrence, d: int, gates: int, split: int | None = None):
    """The plain loops' operands with each gate contiguous: xw (seq, gates, batch, hidden),
    R^T per gate (gates, hidden, hidden), Rb (gates, hidden). A (batch, gates·hidden) row
    layout would make every gate a strided slice, which numpy's ufuncs run 2-3× slower."""
    hdim = rec.hidden
    xw, _, rb = rec.projected(d, split)
    xw = np.ascontiguousarray(xw.reshape(rec.seq, rec.batch, gates, hdim).transpose(0, 2, 1, 3))
    rt = rec.r[d].reshape(gates, hdim, hdim).transpose(0, 2, 1).copy()  # a copy: the loops scale it
    return xw, rt, rb.reshape(gates, hdim)


def _halve_sigmoid_gates(xw: np.ndarray, rt: np.ndarray, count: int) -> None:
    """Scale the first ``count`` gates' projections by 1/2, so that a gate's sigmoid is
    ``(1 + tanh(pre))/2`` on the matmul's result: one tanh over every gate of a step instead of
    a separate sigmoid (the plain loops are bound by per-call overhead: 100-512 element gates)."""
    xw[:, :count] *= _HALF
    rt[:count] *= _HALF


def _gru_plain(rec: Recurrence, d: int, h: np.ndarray):
    """GRU with linear_before_reset in the plain case: one batched matmul and ten in-place operators per step."""
    xw, rt, rb = _gate_major(rec, d, 3, split=2 * rec.hidden)
    _halve_sigmoid_gates(xw, rt, 2)
    y = np.empty((rec.seq, rec.batch, rec.hidden), np.float32)
    hr = np.empty((3, rec.batch, rec.hidden), np.float32)  # gate order z, r, h
    zr, z, reset, cand = hr[:2], hr[0], hr[1], hr[2]
    for t in rec.order(d):
        np.matmul(h, rt, out=hr)
        zr += xw[t, :2]
        np.tanh(zr, out=zr)
        zr *= _HALF
        zr += _HALF
        cand += rb[2]
        cand *= reset
        cand += xw[t, 2]
        np.tanh(cand, out=cand)
        h_new = y[t]  # (1 - z)·cand + z·h == cand + z·(h - cand)
        np.subtract(h, cand, out=h_new)
        h_new *= z
        h_new += cand
        h = h_new
    return y, [h.copy()]


def _lstm_plain(rec: Recurrence, d: int, h: np.ndarray, c: np.ndarray):
    """LSTM without peepholes or input_forget in the plain case: one batched matmul and nine in-place operators."""
    xw, rt, _ = _gate_major(rec, d, 4)
    _halve_sigmoid_gates(xw, rt, 3)
    y = np.empty((rec.seq, rec.batch, rec.hidden), np.float32)
    pre = np.empty((4, rec.batch, rec.hidden), np.float32)  # gate order i, o, f, c
    gates, i, o, forget, cand = pre[:3], pre[0], pre[1], pre[2], pre[3]
    for t in rec.order(d):
        np.matmul(h, rt, out=pre)
        pre += xw[t]
        np.tanh(pre, out=pre)  # the candidate's tanh and the three gates' halved sigmoids in one call
        gates *= _HALF
        gates += _HALF
        c *= forget
        cand *= i
        c += cand
        h = y[t]
        np.tanh(c, out=h)
        h *= o
    return y, [h.copy(), c]


@kernel("RNN", dtypes=FLOATS, check=_check_rnn, own_defaults=_OWN_DEFAULTS)
def rnn(ctx, x, w, r, b=None, seq_lens=None, initial_h=None, *, activation_alpha=None, activation_beta=None,
        activations=None, clip=None, direction="forward", layout=0):
    rec = Recurrence(ctx, x, w, r, b, seq_lens, activation_alpha=activation_alpha, activation_beta=activation_beta,
                     activations=activations, clip=clip, direction=direction, layout=layout)

    def cell(xw, states, rt, rb, d):
        return [rec.acts[d][0](rec.clipped(xw + states[0] @ rt))]

    results = _compiled(rec, [[rec.state(initial_h, d)] for d in range(rec.dirs)])
    if results is None:
        results = [_run(rec, cell, [rec.state(initial_h, d)], d) for d in range(rec.dirs)]
    return rec.outputs([y for y, _ in results], [s for _, s in results], x.dtype)


@kernel("GRU", dtypes=FLOATS, check=_check_rnn)
def gru(ctx, x, w, r, b=None, seq_lens=None, initial_h=None, *, activation_alpha=None, activation_beta=None,
        activations=None, clip=None, direction="forward", layout=0, linear_before_reset=0):
    rec = Recurrence(ctx, x, w, r, b, seq_lens, activation_alpha=activation_alpha, activation_beta=activation_beta,
                     activations=activations, clip=clip, direction=direction, layout=layout)
    hdim = rec.hidden
    before_reset = bool(linear_before_reset)

    def cell(xw, states, rt, rb, d):
        f, g = rec.acts[d]
        h = states[0]
        if before_reset:  # one matmul for all three gates; Rb of the candidate stays inside the reset product
            hr = h @ rt
            zr = hr[:, :2 * hdim]
            cand = hr[:, 2 * hdim:]
            cand += rb[2 * hdim:]
        else:
            zr = h @ rt[:, :2 * hdim]
        zr = f(rec.clipped(zr + xw[:, :2 * hdim]))
        if not before_reset:
            cand = (zr[:, hdim:] * h) @ rt[:, 2 * hdim:]
        z = zr[:, :hdim]
        if before_reset:
            cand *= zr[:, hdim:]
        cand += xw[:, 2 * hdim:]
        cand = g(rec.clipped(cand))
        # (1 - z)·cand + z·h == cand + z·(h - cand)
        h_new = h - cand
        h_new *= z
        h_new += cand
        return [h_new]

    split = 2 * hdim if before_reset else None
    results = _compiled(rec, [[rec.state(initial_h, d)] for d in range(rec.dirs)], split, before_reset=before_reset)
    if results is None and rec.plain and before_reset:
        results = [_gru_plain(rec, d, rec.state(initial_h, d)) for d in range(rec.dirs)]
    if results is None:
        results = [_run(rec, cell, [rec.state(initial_h, d)], d, split) for d in range(rec.dirs)]
    return rec.outputs([y for y, _ in results], [s for _, s in results], x.dtype)


@kernel("LSTM", dtypes=FLOATS, check=_check_rnn)
def lstm(ctx, x, w, r, b=None, seq_lens=None, initial_h=None, initial_c=None, peepholes=None, *,
         activation_alpha=None, activation_beta=None, activations=None, clip=None, direction="forward",
         input_forget=0, layout=0):
    rec = Recurrence(ctx, x, w, r, b, seq_lens, activation_alpha=activation_alpha, activation_beta=activation_beta,
                     activations=activations, clip=clip, direction=direction, layout=layout)
    hdim = rec.hidden
    couple = bool(input_forget)
    p = peepholes.astype(rec.dtype, copy=False) if peepholes is not None else None

    def cell(xw, states, rt, rb, d):
        f, g, h_act = rec.acts[d]
        h, c = states
        pre = h @ rt  # gate order i, o, f, c
        pre += xw
        if p is None and not couple:  # the three sigmoid gates in one call
            gates = f(rec.clipped(pre[:, :3 * hdim]))
            i, o, forget = gates[:, :hdim], gates[:, hdim:2 * hdim], gates[:, 2 * hdim:]
        else:
            pi, po, pf = (p[d, :hdim], p[d, hdim:2 * hdim], p[d, 2 * hdim:]) if p is not None else (0, 0, 0)
            i = f(rec.clipped(pre[:, :hdim] + pi * c))
            forget = 1 - i if couple else f(rec.clipped(pre[:, 2 * hdim:3 * hdim] + pf * c))
        cand = g(rec.clipped(pre[:, 3 * hdim:]))
        c_new = forget * c
        cand *= i
        c_new += cand
        if p is not None or couple:
            o = f(rec.clipped(pre[:, hdim:2 * hdim] + (p[d, hdim:2 * hdim] * c_new if p is not None else 0)))
        h_new = h_act(c_new)
        h_new *= o
        return [h_new, c_new]

    results = _compiled(rec, [[rec.state(initial_h, d), rec.state(initial_c, d)] for d in range(rec.dirs)],
                        peepholes=p, couple=couple)
    if results is None and rec.plain and p is None and not couple:
        results = [_lstm_plain(rec, d, rec.state(initial_h, d), rec.state(initial_c, d)) for d in range(rec.dirs)]
    if results is None:
        results = [_run(rec, cell, [rec.state(initial_h, d), rec.state(initial_c, d)], d) for d in range(rec.dirs)]
    return rec.outputs([y for y, _ in results], [s for _, s in results], x.dtype)
