"""Reverse-mode autodiff on the IR: the gradient of a scalar loss with respect to chosen values,
built node by node from the rules in the op-traits table (``ir/gradients.py``), as NNVM's Gradient
pass does. The backward graph is ordinary IR — ONNX ops, plus nnbridge's fused normalization
gradients (domain ``nnbridge.training``, ``ir/nnbridge_ops.py``), which the reference backend and
the RDU run.

``training_form`` first rewrites what behaves differently in training: BatchNormalization becomes
one fused BatchNormTraining (the batch's statistics, the updated running statistics);
LayerNormalization with a broadcast scale or bias is spelled out in primitive ops (otherwise its
rule's one LayerNormalizationGrad is the backward); Dropout multiplies by a mask the caller feeds
each step (so a seeded loop repeats exactly). Shapes must be static: a training graph is built for
one batch size.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field

import numpy as np

from ..base.errors import InputError, NNBridgeError, Unsupported, UnsupportedOpError
from ..ir import NNBRIDGE_TRAINING_DOMAIN, DType, Graph, Node, TensorType, Value, op_traits
from ..ir.gradients_nn import layer_norm_fusable

#: graph metadata: JSON {value name: "bwd" | "opt"} for the values a training program's backward
#: pass and optimizer compute (the others are forward) — how a compiler types its sections
PHASES_KEY = "training.phases"
#: graph metadata: JSON {output name: tensor name} — after a step of a training program, each of
#: these outputs is the new value of that tensor (weights, optimizer states, batch-norm statistics)
UPDATES_KEY = "training.updates"
#: graph metadata: JSON {input name: drop ratio} — the Dropout mask inputs of a training program,
#: fed each step with ones kept at probability 1 − ratio (a forward-only run feeds 1 − ratio: no drop)
MASKS_KEY = "training.masks"


class _NoRule(Exception):
    """A rule met an attribute it does not cover (the reason names it)."""


class Builder:
    """What a gradient rule (``ir/gradients.py``) or a decomposition (``ir/decompositions.py``)
    emits nodes with; ``tag`` ends the names of what it adds."""

    def __init__(self, graph: Graph, tag: str = "grad"):
        self.graph = graph
        self.tag = tag
        self.created: list = []  # the nodes emitted, in order

    def uses(self, value: Value | None) -> int:
        """How many nodes (and graph outputs) read ``value`` now."""
        if value is None:
            return 0
        return len(self.graph.consumers(value)) + sum(v is value for v in self.graph.outputs)

    # -- constants and types --------------------------------------------------------------------
    def unsupported(self, reason: str) -> None:
        raise _NoRule(reason)

    @staticmethod
    def numpy_dtype(value: Value) -> np.dtype:
        return value.type.dtype.numpy

    @staticmethod
    def constant(value: Value | None) -> np.ndarray | None:
        return None if value is None else value.const

    def is_constant(self, value: Value) -> bool:
        return value.const is not None

    def const(self, array: np.ndarray) -> Value:
        return self.graph.add_initializer(f"{self.tag}_const", np.asarray(array))

    def ints(self, values) -> Value:
        return self.const(np.asarray([int(v) for v in values], np.int64))

    def scalar(self, value: float, like: Value) -> Value:
        return self.const(np.asarray(value, dtype=self.numpy_dtype(like)))

    def zeros_like(self, value: Value) -> Value:
        return self.const(np.zeros(value.type.shape, self.numpy_dtype(value)))

    # -- nodes ----------------------------------------------------------------------------------
    def op(self, op: str, *inputs: Value | None, attrs: dict | None = None, like: Value | None = None,
           shape: tuple | None = None, dtype: str | None = None, outputs: list | None = None, domain: str = ""):
        """One node; its output type is ``dtype`` (or ``like``'s, or the first input's) with
        ``shape`` (or ``like``'s, or the broadcast of the inputs'). ``outputs`` lists (shape,
        dtype) per output for a node with several; then a list of values is returned."""
        first = like or next(v for v in inputs if v is not None)
        specs = outputs or [(shape, dtype)]
        values = []
        for out_shape, out_dtype in specs:
            if out_shape is None:
                out_shape = like.type.shape if like is not None else \
                    tuple(np.broadcast_shapes(*(tuple(v.type.shape) for v in inputs if v is not None)))
            kind = DType.from_numpy(np.dtype(out_dtype)) if out_dtype else first.type.dtype
            values.append(self.graph.add_value(f"{op.lower()}_{self.tag}", TensorType(kind, tuple(out_shape))))
        self.created.append(self.graph.add_node(op, list(inputs), values, attrs or {}, name=f"{op.lower()}_{self.tag}",
                                                domain=domain))
        return values if outputs else values[0]

    def optional_output(self, node: Node, index: int, shape: tuple, dtype: str) -> Value:
        """Output ``index`` of a forward ``node``, declared now if the model left it out (MaxPool's
        Indices): the backward reads what the forward pass computed instead of recomputing it."""
        present = node.outputs[index] if index < len(node.outputs) else None
        if present is not None and present.name:
            return present
        if index > len(node.outputs):
            raise NNBridgeError(f"node '{node.name}' ({node.op}) lacks outputs before #{index}")
        value = self.graph.add_value(f"{node.name}_out{index}", TensorType(DType.from_numpy(np.dtype(dtype)),
                                                                            tuple(shape)))
        value.producer = node
        if present is None:
            node.outputs.append(value)
        else:
            node.outputs[index] = value
        return value

    def kept(self, value: Value, axes: Value) -> tuple[int, ...]:
        reduced = {int(a) % value.type.rank for a in axes.const}
        return tuple(1 if i in reduced else d for i, d in enumerate(value.type.shape))

    @staticmethod
    def matmul_shape(a: Value, b: Value) -> tuple[int, ...]:
        batch = np.broadcast_shapes(tuple(a.type.shape[:-2]), tuple(b.type.shape[:-2]))
        return (*batch, a.type.shape[-2], b.type.shape[-1])

    def slice(self, value: Value, axis: int, start: int, end: int) -> Value:
        shape = list(value.type.shape)
        shape[axis] = end - start
        return self.op("Slice", value, self.ints([start]), self.ints([end]), self.ints([axis]), shape=tuple(shape),
                       like=value)

    def unbroadcast(self, grad: Value | None, target: Value) -> Value | None:
        """``grad`` summed over the axes along which ``target`` was broadcast, in its shape."""
        if grad is None:
            return None
        gs, ts = tuple(grad.type.shape), tuple(target.type.shape)
        if gs == ts:
            return grad
        lead = len(gs) - len(ts)
        axes = [*range(lead), *(lead + i for i, d in enumerate(ts) if d == 1 and gs[lead + i] != 1)]
        if axes:
            kept = tuple(1 if i in axes else d for i, d in enumerate(gs))
            grad = self.op("ReduceSum", grad, self.ints(axes), attrs={"keepdims": 1}, shape=kept, like=grad)
        return self.op("Reshape", grad, self.ints(ts), shape=ts, like=grad)


def _needs_static(graph: Graph) -> None:
    loose = [v.name for v in graph.values.values() if v.type.shape is not None and not v.type.is_static]
    if loose or any(v.type.shape is None for v in graph.inputs):
        raise InputError(f"graph '{graph.name}': gradients need static shapes; pin the inputs (--input-shape, "
                         f"--dim) — dynamic: {', '.join(loose[:5]) or 'inputs'}")


def gradients(graph: Graph, loss: Value, wrt: list[Value]) -> dict[str, Value]:
    """Add to ``graph`` the gradient of the scalar ``loss`` with respect to each of ``wrt``;
    returns {name: gradient value}. Every node on the way without a rule is reported at once."""
    _needs_static(graph)
    if math.prod(loss.type.shape) != 1:
        raise InputError(f"the loss '{loss.name}' has shape {list(loss.type.shape)}; it must be one number")
    reaches, on_path = _between(graph, loss, wrt)
    b = Builder(graph)
    grads: dict[int, Value] = {id(loss): b.const(np.ones(loss.type.shape, b.numpy_dtype(loss)))}
    missing: list[Unsupported] = []
    for node in on_path:  # already in reverse topological order
        out_grads = [grads.get(id(o)) for o in node.outputs]
        if any(g is not None for g in out_grads):
            _accumulate(b, grads, node.inputs, _input_gradients(b, node, out_grads, missing), reaches)
    if missing:
        raise UnsupportedOpError("gradients", missing)
    return {value.name: b.op("Identity", grads.get(id(value)) or b.zeros_like(value), like=value) for value in wrt}


def _between(graph: Graph, loss: Value, wrt: list[Value]) -> tuple[set[int], list[Node]]:
    """The values that depend on some of ``wrt`` (by id), and the nodes between ``wrt`` and the
    loss in reverse topological order. A subgraph's captured values count as inputs: an If or Loop
    on the path is refused, never skipped."""
    reaches = {id(v) for v in wrt}
    path: list[Node] = []
    reads = {id(node): [v for v in (*node.inputs, *node.captured()) if v is not None] for node in graph.nodes}
    for node in graph.nodes:
        if any(id(v) in reaches for v in reads[id(node)]):
            reaches.update(id(o) for o in node.outputs)
            path.append(node)
    needed = {id(loss)}  # values the loss depends on
    on_path = []
    for node in reversed(path):
        if any(id(o) in needed for o in node.outputs):
            needed.update(id(v) for v in reads[id(node)])
            on_path.append(node)
    return reaches, on_path


def _input_gradients(b: Builder, node: Node, out_grads: list[Value | None],
                     missing: list[Unsupported]) -> list[Value | None]:
    """The gradients of ``node``'s inputs by its op's rule; a node without one (or whose rule
    refuses an input) joins ``missing`` and gets zero stand-ins, so that the nodes before it are
    visited (and reported) too."""
    rule = op_traits(node.op, node.domain).gradient
    try:
        if rule is None:
            raise _NoRule("")
        return rule(b, node, out_grads)
    except _NoRule as exc:
        reason = f"no gradient for {exc}" if str(exc) else "no gradient rule"
        missing.append(Unsupported(node.op, node.name, reason, node.domain))
        return [b.zeros_like(v) if v is not None and v.type.is_static else None for v in node.inputs]


def _accumulate(b: Builder, grads: dict[int, Value], inputs: list[Value | None], in_grads: list[Value | None],
                reaches: set[int]) -> None:
    """Add each input's gradient to what it already has (a value read twice gets the sum), for the
    inputs that depend on a value differentiated against."""
    for value, grad in zip(inputs, in_grads):
        if value is None or grad is None or id(value) not in reaches:
            continue
        previous = grads.get(id(value))
        grads[id(value)] = grad if previous is None else b.op("Add", previous, grad, like=value)


@dataclass
class TrainingForm:
    """What ``training_form`` changed: Dropout mask inputs (name → drop ratio) and the running
    statistics BatchNormalization updates (state name → its new value)."""

    masks: dict[str, float] = field(default_factory=dict)
    updates: dict[str, Value] = field(default_factory=dict)


def training_form(graph: Graph, *, unbiased_running_var: bool = False) -> TrainingForm:
    """Rewrite ``graph`` in place for training (see the module docstring). BatchNormalization's
    running variance follows the batch's biased variance as ONNX defines it, or the unbiased one
    (n / (n − 1) times it) as torch keeps it with ``unbiased_running_var``."""
    form = TrainingForm()
    for node in list(graph.nodes):
        if node.op == "BatchNormalization" and not node.domain:
            _batch_norm_for_training(graph, node, form, unbiased_running_var)
        elif node.op == "LayerNormalization" and not node.domain:
            _layer_norm_for_training(graph, node)
        elif node.op == "Dropout" and not node.domain:
            _dropout_with_mask(graph, node, form)
        elif node.op in ("LSTM", "GRU") and not node.domain and _plain_recurrence(node):
            _recurrence_unrolled(graph, node)
    return form


def _replace(graph: Graph, node: Node, result: Value) -> None:
    old = node.outputs[0]
    graph.remove_node(node)
    graph.replace_uses(old, result)
    if graph.is_output(old):
        graph.outputs[:] = [result if v is old else v for v in graph.outputs]


def _normalize(b: Builder, x: Value, axes: list[int], epsilon: float) -> Value:
    """(x − mean) / sqrt(var + eps) over ``axes`` (the biased variance)."""
    kept = tuple(1 if i in axes else d for i, d in enumerate(x.type.shape))
    ax = b.ints(axes)
    mean = b.op("ReduceMean", x, ax, attrs={"keepdims": 1}, shape=kept, like=x)
    centred = b.op("Sub", x, mean, like=x)
    var = b.op("ReduceMean", b.op("Mul", centred, centred, like=x), ax, attrs={"keepdims": 1}, shape=kept, like=x)
    std = b.op("Sqrt", b.op("Add", var, b.scalar(epsilon, x), like=var), like=var)
    return b.op("Div", centred, std, like=x)


def _batch_norm_for_training(graph: Graph, node: Node, form: TrainingForm, unbiased: bool) -> None:
    """One fused BatchNormTraining node (``ir/nnbridge_ops.py``); its rule's BatchNormTrainingGrad is
    the backward."""
    b = Builder(graph)
    x, scale, bias, mean, var = node.inputs[:5]
    for state in (mean, var):
        if state.producer is not None:
            raise InputError(f"BatchNormalization '{node.name}': its running statistic '{state.name}' is computed, "
                             f"not a stored tensor; training updates stored running statistics only")
    if any(graph.consumers(o) or graph.is_output(o) for o in node.outputs[1:]):
        raise InputError(f"BatchNormalization '{node.name}': its running-statistics outputs are read by the graph; "
                         f"training computes them itself")
    channel = (mean.type.shape, mean.type.dtype.numpy)
    y, new_mean, new_var, _ = b.op(
        "BatchNormTraining", x, scale, bias, mean, var, domain=NNBRIDGE_TRAINING_DOMAIN,
        attrs={"epsilon": node.attr("epsilon", 1e-5), "momentum": node.attr("momentum", 0.9),
               "unbiased": int(unbiased)},
        outputs=[(x.type.shape, None), channel, channel, channel])
    form.updates[mean.name], form.updates[var.name] = new_mean, new_var
    _replace(graph, node, y)


def _layer_norm_for_training(graph: Graph, node: Node) -> None:
    """Kept as it is when its rule's LayerNormalizationGrad covers it (scale and bias of the
    normalized shape); spelled out in primitive ops otherwise."""
    if any(graph.consumers(o) or graph.is_output(o) for o in node.outputs[1:]):
        raise InputError(f"LayerNormalization '{node.name}': its Mean/InvStdDev outputs are not trainable")
    if not layer_norm_fusable(node):
        _layer_norm_spelled_out(graph, node)


def _layer_norm_spelled_out(graph: Graph, node: Node) -> None:
    b = Builder(graph)
    x, scale = node.inputs[0], node.inputs[1]
    rank = x.type.rank
    axis = node.attr("axis", -1) % rank
    normed = _normalize(b, x, list(range(axis, rank)), node.attr("epsilon", 1e-5))
    y = b.op("Mul", normed, scale, like=x)
    if node.input(2) is not None:
        y = b.op("Add", y, node.inputs[2], like=x)
    if any(graph.consumers(o) or graph.is_output(o) for o in node.outputs[1:]):
        raise InputError(f"LayerNormalization '{node.name}': its Mean/InvStdDev outputs are not trainable")
    _replace(graph, node, y)


def _plain_recurrence(node: Node) -> bool:
    """An LSTM/GRU the unrolled form covers: one forward direction, layout 0, the default
    activations, no clip, peepholes, sequence lengths or coupled input-forget gate (others stay
    as they are, and gradients name them)."""
    return (node.attr("direction", "forward") in ("forward", b"forward") and not node.attr("layout", 0)
            and node.attr("activations") is None and node.attr("clip") is None and not node.attr("input_forget", 0)
            and node.input(4) is None and node.input(7) is None
            and all(v is None or v.type.is_static for v in node.inputs))


def _recurrence_unrolled(graph: Graph, node: Node) -> None:
    """LSTM or GRU spelled out step by step in MatMul, Sigmoid and Tanh (the sequence length is
    static in a training graph), so that their gradients follow from those ops' rules. ONNX's gate
    orders: LSTM i, o, f, c; GRU z, r, h (``linear_before_reset`` as the node says)."""
    b = Builder(graph, tag="rnn")
    x, w, r = node.inputs[:3]
    steps, batch, _ = x.type.shape
    hidden = node.attr("hidden_size")
    lstm = node.op == "LSTM"
    gates = 4 if lstm else 3
    width = gates * hidden

    def matrix(v: Value, cols: int) -> Value:  # (1, G·H, cols) → its transpose (cols, G·H)
        flat = b.op("Reshape", v, b.ints([width, cols]), shape=(width, cols), like=v)
        return b.op("Transpose", flat, attrs={"perm": [1, 0]}, shape=(cols, width), like=v)

    def cut(v: Value, k: int, part: int = hidden) -> Value:  # columns k·part … (k+1)·part of (N, ·)
        return b.slice(v, 1, k * part, (k + 1) * part)

    wt, rt = matrix(w, x.type.shape[2]), matrix(r, hidden)
    bias = node.input(3)
    if bias is not None:
        flat = b.op("Reshape", bias, b.ints([2 * width]), shape=(2 * width,), like=bias)
        wb, rb = b.slice(flat, 0, 0, width), b.slice(flat, 0, width, 2 * width)
    xw = b.op("MatMul", x, wt, shape=(steps, batch, width), like=x)
    if bias is not None:
        xw = b.op("Add", xw, wb, like=xw)

    def state(index: int) -> Value:
        given = node.input(index)
        if given is None:
            return b.const(np.zeros((batch, hidden), b.numpy_dtype(x)))
        return b.op("Reshape", given, b.ints([batch, hidden]), shape=(batch, hidden), like=given)

    h, c = state(5), state(6) if lstm else None
    ys = []
    for t in range(steps):
        xt = b.op("Reshape", b.slice(xw, 0, t, t + 1), b.ints([batch, width]), shape=(batch, width), like=xw)
        hr = b.op("MatMul", h, rt, shape=(batch, width), like=h)
        if bias is not None:
            hr = b.op("Add", hr, rb, like=hr)
        if lstm:
            pre = b.op("Add", xt, hr, like=xt)
            i, o, f = (b.op("Sigmoid", cut(pre, k)) for k in range(3))
            c = b.op("Add", b.op("Mul", f, c), b.op("Mul", i, b.op("Tanh", cut(pre, 3))))
            h = b.op("Mul", o, b.op("Tanh", c))
        else:
            z, reset = (b.op("Sigmoid", b.op("Add", cut(xt, k), cut(hr, k))) for k in range(2))
            if node.attr("linear_before_reset", 0):
                recurrent = b.op("Mul", reset, cut(hr, 2))
            else:
                rh = b.op("MatMul", b.op("Mul", reset, h), b.slice(rt, 1, 2 * hidden, 3 * hidden),
                          shape=(batch, hidden), like=h)
                recurrent = rh if bias is None else b.op("Add", rh, b.slice(rb, 0, 2 * hidden, 3 * hidden))
            candidate = b.op("Tanh", b.op("Add", cut(xt, 2), recurrent))
            h = b.op("Add", b.op("Mul", b.op("Sub", b.scalar(1.0, z), z), candidate), b.op("Mul", z, h))
        ys.append(b.op("Reshape", h, b.ints([1, 1, batch, hidden]), shape=(1, 1, batch, hidden), like=h))
    results = [b.op("Concat", *ys, attrs={"axis": 0}, shape=(steps, 1, batch, hidden), like=h),
               b.op("Reshape", h, b.ints([1, batch, hidden]), shape=(1, batch, hidden), like=h)]
    if lstm:
        results.append(b.op("Reshape", c, b.ints([1, batch, hidden]), shape=(1, batch, hidden), like=c))
    olds = list(node.outputs)
    graph.remove_node(node)
    for old, new in zip(olds, results):
        graph.replace_uses(old, new)
        if graph.is_output(old):
            graph.outputs[:] = [new if v is old else v for v in graph.outputs]


def _dropout_with_mask(graph: Graph, node: Node, form: TrainingForm) -> None:
    b = Builder(graph)
    x = node.inputs[0]
    ratio = b.constant(node.input(1))
    ratio = 0.5 if ratio is None else float(np.asarray(ratio).reshape(-1)[0])
    if ratio == 0.0:
        _replace(graph, node, x)
        return
    mask = graph.add_input(graph.unique_name(f"{node.name}_mask"), TensorType(x.type.dtype, x.type.shape))
    form.masks[mask.name] = ratio
    kept = b.op("Mul", x, mask, like=x)
    _replace(graph, node, b.op("Mul", kept, b.scalar(1.0 / (1.0 - ratio), x), like=x))
