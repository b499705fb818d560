"""Recurrent layers: RNN, GRU (both linear_before_reset forms) and LSTM (peepholes, input_forget).

All directions, ``sequence_lens`` (finished sequences keep their state and emit
zeros), initial states, ``clip``, the ``activations`` attribute with
alpha/beta, and both layouts. The input projection of every time step is one
matmul; the loop runs over time steps only.
"""

from __future__ import annotations

from collections.abc import Callable

import numpy as np

from ....ir import Node
from ..registry import kernel
from ._windows import FLOATS, compute_dtype


def _sigmoid(x):
    e = np.exp(-np.abs(x))
    return np.where(x >= 0, 1 / (1 + e), e / (1 + e))


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


def _directions(node: Node) -> int:
    return 2 if node.attr("direction", "forward") == "bidirectional" else 1


def _activation_names(node: Node) -> list[str] | None:
    """The explicit ``activations`` attribute (the schema default is per-op and applied here instead)."""
    names = node.attrs.get("activations")
    if not names:
        return None
    return [n.decode() if isinstance(n, bytes) else str(n) for n in names]


def _check_rnn(node: Node) -> str | None:
    direction = node.attr("direction", "forward")
    if direction not in ("forward", "reverse", "bidirectional"):
        return f"direction={direction} is not implemented"
    names = _activation_names(node)
    if names:
        unknown = [n for n in names if n.lower() not in _ACTIVATIONS]
        if unknown:
            return f"activations {unknown} are not implemented"
        if len(names) != len(_DEFAULTS[node.op]) * _directions(node):
            return f"{len(names)} activations do not match the direction"
    if int(node.attr("layout", 0)) not in (0, 1):
        return f"layout={node.attr('layout')} is not implemented"
    return None


def _activation_fns(ctx) -> list[list[Callable]]:
    """Activation functions per direction; alpha/beta lists are consumed in order by those that take them."""
    op = ctx.node.op
    dirs = _directions(ctx.node)
    names = _activation_names(ctx.node) or _DEFAULTS[op] * dirs
    if len(names) == len(_DEFAULTS[op]):
        names = names * dirs
    alphas = list(ctx.attr("activation_alpha", None) or [])
    betas = list(ctx.attr("activation_beta", None) or [])
    fns = []
    for name in names:
        fn, alpha, beta = _ACTIVATIONS[name.lower()]
        a = alphas.pop(0) if alpha is not None and alphas else alpha
        b = betas.pop(0) if beta is not None and betas else beta
        fns.append(lambda x, fn=fn, a=a, b=b: fn(x, a, b))
    per = len(_DEFAULTS[op])
    return [fns[d * per:(d + 1) * per] for d in range(dirs)]


class Recurrence:
    """Common plumbing: layout, per-direction weights, masks for sequence_lens, output assembly."""

    def __init__(self, ctx, x, w, r, b, seq_lens, initial):
        self.ctx = ctx
        self.layout = int(ctx.attr("layout", 0))
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
        self.clip = ctx.attr("clip", None)
        self.acts = _activation_fns(ctx)
        direction = ctx.attr("direction", "forward")
        self.reverse = [direction == "reverse"] if self.dirs == 1 else [False, True]

    def state(self, given, d: int) -> np.ndarray:
        if given is None:
            return np.zeros((self.batch, self.hidden), self.dtype)
        given = given.astype(self.dtype, copy=False)
        return (given[:, d] if self.layout else given[d]).copy()

    def clipped(self, x: np.ndarray) -> np.ndarray:
        return x if self.clip is None else np.clip(x, -self.clip, self.clip)

    def projected(self, d: int) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
        """(X @ W^T + Wb for all steps, R^T, Rb) of direction d."""
        g = self.w.shape[1]
        xw = self.x @ self.w[d].T + self.b[d, :g]
        return xw, self.r[d].T, self.b[d, g:]

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


def _run(rec: Recurrence, cell, states0, d: int):
    """Run ``cell(xw_t, states, d) -> states`` over time; state 0 is h. Returns (Y of this direction, finals)."""
    xw, rt, rb = rec.projected(d)
    states = states0
    y = np.zeros((rec.seq, rec.batch, rec.hidden), rec.dtype)
    for t, active in rec.steps(d):
        new = cell(xw[t], states, rt, rb, d)
        states = [np.where(active, n, s) for n, s in zip(new, states)]
        y[t] = np.where(active, states[0], 0)
    return y, states


@kernel("RNN", dtypes=FLOATS, check=_check_rnn)
def rnn(ctx, x, w, r, b=None, seq_lens=None, initial_h=None):
    rec = Recurrence(ctx, x, w, r, b, seq_lens, initial_h)

    def cell(xw, states, rt, rb, d):
        return [rec.acts[d][0](rec.clipped(xw + states[0] @ rt + rb))]

    results = [_run(rec, cell, [rec.state(initial_h, d)], d) for d in range(rec.dirs)]
    return rec.outputs([y for y, _ in results], [s for _, s in results], x.dtype)


@kernel("GRU", dtypes=FLOATS, check=_check_rnn)
def gru(ctx, x, w, r, b=None, seq_lens=None, initial_h=None):
    rec = Recurrence(ctx, x, w, r, b, seq_lens, initial_h)
    hdim = rec.hidden
    before_reset = bool(ctx.attr("linear_before_reset", 0))

    def cell(xw, states, rt, rb, d):
        f, g = rec.acts[d]
        h = states[0]
        hz = h @ rt[:, :2 * hdim] + rb[:2 * hdim]
        z = f(rec.clipped(xw[:, :hdim] + hz[:, :hdim]))
        reset = f(rec.clipped(xw[:, hdim:2 * hdim] + hz[:, hdim:]))
        if before_reset:
            cand = xw[:, 2 * hdim:] + reset * (h @ rt[:, 2 * hdim:] + rb[2 * hdim:])
        else:
            cand = xw[:, 2 * hdim:] + (reset * h) @ rt[:, 2 * hdim:] + rb[2 * hdim:]
        return [(1 - z) * g(rec.clipped(cand)) + z * h]

    results = [_run(rec, cell, [rec.state(initial_h, d)], d) for d in range(rec.dirs)]
    return rec.outputs([y for y, _ in results], [s for _, s in results], x.dtype)


@kernel("LSTM", dtypes=FLOATS, check=_check_rnn)
def lstm(ctx, x, w, r, b=None, seq_lens=None, initial_h=None, initial_c=None, peepholes=None):
    rec = Recurrence(ctx, x, w, r, b, seq_lens, initial_h)
    hdim = rec.hidden
    couple = bool(ctx.attr("input_forget", 0))
    p = (peepholes.astype(rec.dtype, copy=False) if peepholes is not None
         else np.zeros((rec.dirs, 3 * hdim), rec.dtype))

    def cell(xw, states, rt, rb, d):
        f, g, h_act = rec.acts[d]
        h, c = states
        pre = xw + h @ rt + rb  # gate order i, o, f, c
        pi, po, pf = p[d, :hdim], p[d, hdim:2 * hdim], p[d, 2 * hdim:]
        i = f(rec.clipped(pre[:, :hdim] + pi * c))
        forget = 1 - i if couple else f(rec.clipped(pre[:, 2 * hdim:3 * hdim] + pf * c))
        cand = g(rec.clipped(pre[:, 3 * hdim:]))
        c_new = forget * c + i * cand
        o = f(rec.clipped(pre[:, hdim:2 * hdim] + po * c_new))
        return [o * h_act(c_new), c_new]

    results = [_run(rec, cell, [rec.state(initial_h, d), rec.state(initial_c, d)], d) for d in range(rec.dirs)]
    return rec.outputs([y for y, _ in results], [s for _, s in results], x.dtype)
