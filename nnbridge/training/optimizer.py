"""The optimizer as ONNX's training ops (``Momentum`` for SGD, ``Adam`` for Adam and AdamW) over
every weight at once, fed so that it takes torch.optim's step where the user asks for torch's semantics."""

from __future__ import annotations

from typing import Any

import numpy as np

from ..api.compiler import compile as compile_graph
from ..ir import TRAINING_DOMAIN, DType, Graph, TensorType, Value
from .checks import CheckedOnce, check_finite

ADAM_BETAS, ADAM_EPSILON = (0.9, 0.999), 1e-8  # torch.optim.Adam's defaults


def optimizer_roles(kind: str) -> list[str]:
    """The tensor roles of the optimizer op: weights, gradients, then its states."""
    return ["X", "G", "V"] + (["H"] if kind != "sgd" else [])


def optimizer_node(g: Graph, rate: Value, count: Value, tensors: dict[str, list[Value]], kind: str,
                    momentum: float, weight_decay: float, lr: float, nesterov: bool = False,
                    semantics: str = "onnx"):
    """ONNX's Momentum (sgd) or Adam (adam, adamw) op over every weight; outputs the new weights,
    then the new states, typed like them. ``count`` is the number of steps taken before this one;
    the op's T is ``count + 1``, so Adam's bias correction applies from the first step as in torch
    (ONNX's op skips it at T = 0). With torch's semantics Adam adds ε where torch.optim does and
    AdamW decays the weights before the step; with ONNX's, as its Adam op does
    (``norm_coefficient_post`` after the step)."""
    from ..passes.autodiff import Builder

    b = Builder(g, tag="opt")
    step = b.op("Add", count, b.const(np.asarray(1, np.int64)), shape=())
    if kind == "sgd":
        op, attrs = "Momentum", {"alpha": momentum, "beta": 1.0, "norm_coefficient": weight_decay,
                                 "mode": "nesterov" if nesterov else "standard"}
    elif semantics == "onnx":
        decay = {"norm_coefficient": weight_decay} if kind == "adam" else {"norm_coefficient_post": lr * weight_decay}
        op, attrs = "Adam", {"alpha": ADAM_BETAS[0], "beta": ADAM_BETAS[1], "epsilon": ADAM_EPSILON, **decay}
    else:
        op, attrs = "Adam", {"alpha": ADAM_BETAS[0], "beta": ADAM_BETAS[1], "epsilon": ADAM_EPSILON}
        tensors = _torch_adam(b, step, tensors, kind, lr, weight_decay)
    roles = optimizer_roles(kind)
    count_of = len(tensors["X"])
    kept = ["X", *roles[2:]]
    outs = [f"{r}{i}_new" for r in kept for i in range(count_of)]
    node = g.add_node(op, [rate, step, *(v for r in roles for v in tensors[r])], outs, attrs, domain=TRAINING_DOMAIN)
    for out, source in zip(node.outputs, [v for r in kept for v in tensors[r]]):
        out.type = source.type
    return node


def _torch_adam(b: Any, step: Value, tensors: dict[str, list[Value]], kind: str, lr: float,
                weight_decay: float) -> dict[str, list[Value]]:
    """ONNX's Adam op fed so that it takes torch.optim's step. torch adds ε to √v̂ = √v / √(1 − β₂ᵀ),
    the op to √v: the op gets the gradients times s = 1 / √(1 − β₂ᵀ) and keeps its states in that
    scale (rescaled by s / s_prev each step), which moves its ε where torch's is. L2 decay (adam)
    joins the gradient before the scaling; AdamW decays the weights before the step."""
    beta = ADAM_BETAS[1]
    t = b.op("Cast", step, attrs={"to": DType.FLOAT32.onnx}, dtype="float32")

    def scale(power: Value) -> Value:  # 1 / sqrt(max(1 − β^power, tiny)): finite at power 0
        left = b.op("Sub", b.const(np.float32(1)), b.op("Pow", b.const(np.float32(beta)), power))
        return b.op("Reciprocal", b.op("Sqrt", b.op("Max", left, b.const(np.float32(1e-30)))))

    now = scale(t)
    ratio = b.op("Div", now, scale(b.op("Sub", t, b.const(np.float32(1)))))
    ratio2 = b.op("Mul", ratio, ratio)
    xs, gs = tensors["X"], tensors["G"]
    if kind == "adam" and weight_decay:
        gs = [b.op("Add", g, b.op("Mul", x, b.const(np.float32(weight_decay))), like=g) for x, g in zip(xs, gs)]
    if kind == "adamw" and weight_decay:
        xs = [b.op("Mul", x, b.const(np.float32(1 - lr * weight_decay)), like=x) for x in xs]
    return {"X": xs, "G": [b.op("Mul", g, now, like=g) for g in gs],
            "V": [b.op("Mul", v, ratio, like=v) for v in tensors["V"]],
            "H": [b.op("Mul", h, ratio2, like=h) for h in tensors["H"]]}


class Optimizer:
    """One step of ONNX's Momentum (SGD) or Adam op over all weights at once, compiled once."""

    def __init__(self, params: dict[str, np.ndarray], kind: str, momentum: float, weight_decay: float, lr: float,
                 nesterov: bool = False, semantics: str = "onnx"):
        self.lr, self.kind = lr, kind
        g = Graph("optimizer")
        rate = g.add_input("R", TensorType(DType.FLOAT32, ()))
        step = g.add_input("T", TensorType(DType.INT64, ()))
        tensors = {r: [g.add_input(f"{r}{i}", TensorType(DType.from_numpy(a.dtype), a.shape))
                       for i, a in enumerate(params.values())] for r in optimizer_roles(kind)}
        g.outputs[:] = list(optimizer_node(g, rate, step, tensors, kind, momentum, weight_decay, lr, nesterov,
                                            semantics).outputs)
        self.state = {r: [np.zeros_like(a) for a in params.values()] for r in optimizer_roles(kind)[2:]}
        self.exe = compile_graph(g, backend="reference", passes=[])
        self._checked_run = CheckedOnce(self.exe)

    def apply(self, params: dict[str, np.ndarray], grads: list[np.ndarray], t: int) -> None:
        params.update(self.step(params, grads, t))

    def step(self, params: dict[str, np.ndarray], grads: list[np.ndarray], t: int) -> dict[str, np.ndarray]:
        """The new weights after ``t`` steps taken (the optimizer's states move on)."""
        feeds = {"R": np.float32(self.lr), "T": np.int64(t)}
        for i, (array, grad) in enumerate(zip(params.values(), grads)):
            feeds[f"X{i}"], feeds[f"G{i}"] = array, grad
        for role, arrays in self.state.items():
            feeds.update({f"{role}{i}": a for i, a in enumerate(arrays)})
        out = self._checked_run(feeds)
        new = {name: out[f"X{i}_new"] for i, name in enumerate(params)}
        check_finite(new, "the new weight")  # before the states move on: a skipped step leaves no trace
        for role, arrays in self.state.items():
            self.state[role] = [out[f"{role}{i}_new"] for i in range(len(arrays))]
        return new
