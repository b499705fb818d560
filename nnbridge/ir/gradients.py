"""Reverse-mode rules, one per op, filed into the op-traits table's ``gradient`` slot.

A rule is ``rule(b, node, grads) -> [input gradient or None, ...]``: ``grads`` holds the gradient
of the loss with respect to each output of ``node`` (None where no gradient flows), and ``b`` (the
autodiff pass's builder, ``passes/autodiff.py``) emits the ONNX ops that compute the input
gradients into the training graph. Shapes are static in a training graph, so broadcasting is
undone with sums over axes known when the graph is built. None means "no gradient" (indices,
shapes, labels). A rule may refuse an attribute it does not cover by raising
``b.unsupported(reason)``.
"""

from __future__ import annotations

import math

import numpy as np

from . import gradients_nn  # noqa: F401 - files the normalization and loss rules
from .dtypes import DType
from .gradient_registry import RULES, rule  # noqa: F401 - RULES: where rules are looked up, as before


def _axis(axis: int, rank: int) -> int:
    return axis + rank if axis < 0 else axis


# -- element-wise arithmetic (with broadcasting) ----------------------------------------------------

@rule("Add", "Sum")
def _add(b, node, grads):
    g = grads[0]
    return [b.unbroadcast(g, x) for x in node.inputs]


@rule("Sub")
def _sub(b, node, grads):
    g = grads[0]
    return [b.unbroadcast(g, node.inputs[0]), b.unbroadcast(b.op("Neg", g), node.inputs[1])]


@rule("Mul")
def _mul(b, node, grads):
    g, (x, y) = grads[0], node.inputs
    return [b.unbroadcast(b.op("Mul", g, y, like=g), x), b.unbroadcast(b.op("Mul", g, x, like=g), y)]


@rule("Div")
def _div(b, node, grads):
    g, (x, y), out = grads[0], node.inputs, node.outputs[0]
    gx = b.op("Div", g, y, like=g)
    gy = b.op("Neg", b.op("Mul", gx, out, like=g))  # −g·x/y² = −(g/y)·(x/y)
    return [b.unbroadcast(gx, x), b.unbroadcast(gy, y)]


@rule("Pow")
def _pow(b, node, grads):
    g, (x, p), out = grads[0], node.inputs, node.outputs[0]
    one = b.scalar(1.0, p)
    gx = b.op("Mul", g, b.op("Mul", p, b.op("Pow", x, b.op("Sub", p, one)), like=out), like=g)
    gp = None if b.is_constant(p) else \
        b.unbroadcast(b.op("Mul", g, b.op("Mul", out, b.op("Log", x)), like=g), p)
    return [b.unbroadcast(gx, x), gp]


@rule("Neg")
def _neg(b, node, grads):
    return [b.op("Neg", grads[0])]


@rule("Identity", "Cast")
def _identity(b, node, grads):
    x = node.inputs[0]
    if node.op == "Cast" and not (x.type.dtype and x.type.dtype.is_float):
        return [None]
    g = grads[0]
    return [g if g.type.dtype == x.type.dtype else b.op("Cast", g, attrs={"to": x.type.dtype.onnx}, like=x)]


@rule("Sqrt")
def _sqrt(b, node, grads):
    return [b.op("Div", b.op("Mul", grads[0], b.scalar(0.5, grads[0])), node.outputs[0])]


@rule("Exp")
def _exp(b, node, grads):
    return [b.op("Mul", grads[0], node.outputs[0])]


@rule("Log")
def _log(b, node, grads):
    return [b.op("Div", grads[0], node.inputs[0])]


@rule("Reciprocal")
def _reciprocal(b, node, grads):
    y = node.outputs[0]
    return [b.op("Neg", b.op("Mul", grads[0], b.op("Mul", y, y)))]


@rule("Erf")
def _erf(b, node, grads):
    x = node.inputs[0]
    bell = b.op("Exp", b.op("Neg", b.op("Mul", x, x)))
    return [b.op("Mul", grads[0], b.op("Mul", bell, b.scalar(2 / math.sqrt(math.pi), x)))]


@rule("Abs")
def _abs(b, node, grads):
    return [b.op("Mul", grads[0], b.op("Sign", node.inputs[0]))]


# -- activations ----------------------------------------------------------------------------------

def _where_positive(b, x, then, otherwise):
    return b.op("Where", b.op("Greater", x, b.scalar(0.0, x), like=x, dtype="bool"), then, otherwise, like=then)


@rule("Relu")
def _relu(b, node, grads):
    g = grads[0]
    return [_where_positive(b, node.inputs[0], g, b.scalar(0.0, g))]


@rule("LeakyRelu")
def _leaky_relu(b, node, grads):
    g = grads[0]
    return [_where_positive(b, node.inputs[0], g, b.op("Mul", g, b.scalar(node.attr("alpha", 0.01), g)))]


@rule("Sigmoid")
def _sigmoid(b, node, grads):
    y = node.outputs[0]
    return [b.op("Mul", grads[0], b.op("Mul", y, b.op("Sub", b.scalar(1.0, y), y)))]


@rule("Tanh")
def _tanh(b, node, grads):
    y = node.outputs[0]
    return [b.op("Mul", grads[0], b.op("Sub", b.scalar(1.0, y), b.op("Mul", y, y)))]


@rule("Gelu")
def _gelu(b, node, grads):
    """erf form: Φ(x) + x·φ(x); tanh form: the derivative of 0.5x(1 + tanh(√(2/π)(x + 0.044715x³)))."""
    g, x = grads[0], node.inputs[0]
    c = b.scalar
    if node.attr("approximate", "none") == "tanh":
        k = math.sqrt(2 / math.pi)
        x2 = b.op("Mul", x, x)
        t = b.op("Tanh", b.op("Mul", c(k, x), b.op("Add", x, b.op("Mul", c(0.044715, x), b.op("Mul", x2, x)))))
        dt = b.op("Mul", b.op("Sub", c(1.0, x), b.op("Mul", t, t)),
                  b.op("Mul", c(k, x), b.op("Add", c(1.0, x), b.op("Mul", c(3 * 0.044715, x), x2))))
        d = b.op("Add", b.op("Mul", c(0.5, x), b.op("Add", c(1.0, x), t)), b.op("Mul", c(0.5, x), b.op("Mul", x, dt)))
    else:
        cdf = b.op("Mul", c(0.5, x), b.op("Add", c(1.0, x), b.op("Erf", b.op("Mul", x, c(1 / math.sqrt(2), x)))))
        pdf = b.op("Mul", c(1 / math.sqrt(2 * math.pi), x), b.op("Exp", b.op("Mul", c(-0.5, x), b.op("Mul", x, x))))
        d = b.op("Add", cdf, b.op("Mul", x, pdf))
    return [b.op("Mul", g, d)]


@rule("Softmax")
def _softmax(b, node, grads):
    g, y = grads[0], node.outputs[0]
    axes = b.ints([_axis(node.attr("axis", -1), y.type.rank)])
    dot = b.op("ReduceSum", b.op("Mul", g, y), axes, attrs={"keepdims": 1}, shape=b.kept(y, axes))
    return [b.op("Mul", y, b.op("Sub", g, dot, like=g))]


@rule("LogSoftmax")
def _log_softmax(b, node, grads):
    g, y = grads[0], node.outputs[0]
    axes = b.ints([_axis(node.attr("axis", -1), y.type.rank)])
    total = b.op("ReduceSum", g, axes, attrs={"keepdims": 1}, shape=b.kept(y, axes))
    return [b.op("Sub", g, b.op("Mul", b.op("Exp", y), total, like=g))]


def _between(b, x, low, high, g, strict: bool):
    """``g`` where low < x < high (``strict``) or low ≤ x ≤ high, else 0; a None bound is open."""
    inside = None
    for bound, op in ((low, "Greater" if strict else "GreaterOrEqual"), (high, "Less" if strict else "LessOrEqual")):
        if bound is None:
            continue
        test = b.op(op, x, bound, like=x, dtype="bool")
        inside = test if inside is None else b.op("And", inside, test, like=test)
    return g if inside is None else b.op("Where", inside, g, b.scalar(0.0, g), like=g)


@rule("Clip")
def _clip(b, node, grads):
    """torch.clamp's: the gradient passes where min ≤ x ≤ max."""
    x = node.inputs[0]
    return [_between(b, x, node.input(1), node.input(2), grads[0], strict=False), None, None][:len(node.inputs)]


@rule("HardSigmoid")
def _hard_sigmoid(b, node, grads):
    g, x = grads[0], node.inputs[0]
    alpha, beta = node.attr("alpha", 0.2), node.attr("beta", 0.5)
    line = b.op("Add", b.op("Mul", x, b.scalar(alpha, x)), b.scalar(beta, x))
    return [_between(b, line, b.scalar(0.0, x), b.scalar(1.0, x), b.op("Mul", g, b.scalar(alpha, g)), strict=True)]


@rule("HardSwish")
def _hard_swish(b, node, grads):
    """x·HardSigmoid(x) (α = 1/6, β = ½): 0 below −3, 1 above 3, (2x + 3)/6 between (torch's)."""
    g, x = grads[0], node.inputs[0]
    slope = b.op("Add", b.op("Mul", x, b.scalar(1 / 3, x)), b.scalar(0.5, x))
    above = b.op("Greater", x, b.scalar(3.0, x), like=x, dtype="bool")
    d = b.op("Where", above, b.scalar(1.0, x), slope, like=x)
    return [_between(b, x, b.scalar(-3.0, x), None, b.op("Mul", g, d), strict=True)]


@rule("Elu", "Celu")
def _elu(b, node, grads):
    """x > 0: 1; else α·eˣ = y + α (Elu), e^(x/α) = y/α + 1 (Celu)."""
    g, x, y = grads[0], node.inputs[0], node.outputs[0]
    alpha = node.attr("alpha", 1.0)
    below = b.op("Add", y, b.scalar(alpha, y)) if node.op == "Elu" else \
        b.op("Add", b.op("Mul", y, b.scalar(1 / alpha, y)), b.scalar(1.0, y))
    return [_where_positive(b, x, g, b.op("Mul", g, below))]


@rule("Selu")
def _selu(b, node, grads):
    g, x, y = grads[0], node.inputs[0], node.outputs[0]
    alpha, gamma = node.attr("alpha", 1.67326319217681884765625), node.attr("gamma", 1.05070102214813232421875)
    below = b.op("Add", y, b.scalar(alpha * gamma, y))
    return [_where_positive(b, x, b.op("Mul", g, b.scalar(gamma, g)), b.op("Mul", g, below))]


@rule("Softplus")
def _softplus(b, node, grads):
    return [b.op("Mul", grads[0], b.op("Sigmoid", node.inputs[0]))]


@rule("Softsign")
def _softsign(b, node, grads):
    x = node.inputs[0]
    denominator = b.op("Add", b.scalar(1.0, x), b.op("Abs", x))
    return [b.op("Div", grads[0], b.op("Mul", denominator, denominator))]


@rule("PRelu")
def _prelu(b, node, grads):
    g, (x, slope) = grads[0], node.inputs
    zero = b.scalar(0.0, g)
    gx = _where_positive(b, x, g, b.op("Mul", g, slope, like=g))
    positive = b.op("Greater", x, b.scalar(0.0, x), like=x, dtype="bool")
    gs = b.op("Where", positive, zero, b.op("Mul", g, x, like=g), like=g)
    return [gx, b.unbroadcast(gs, slope)]


@rule("Sin")
def _sin(b, node, grads):
    return [b.op("Mul", grads[0], b.op("Cos", node.inputs[0]))]


@rule("Cos")
def _cos(b, node, grads):
    return [b.op("Neg", b.op("Mul", grads[0], b.op("Sin", node.inputs[0])))]


@rule("Max", "Min")
def _max_min(b, node, grads):
    """Two inputs: the gradient goes to the one chosen (to the first on a tie, as torch's maximum
    splits it equally — ties are rare in training)."""
    if len(node.inputs) != 2:
        b.unsupported(f"{node.op} of {len(node.inputs)} inputs (two are covered)")
    g, (x, y), out = grads[0], node.inputs, node.outputs[0]
    first = b.op("Equal", x, out, like=out, dtype="bool")
    zero = b.scalar(0.0, g)
    return [b.unbroadcast(b.op("Where", first, g, zero, like=g), x),
            b.unbroadcast(b.op("Where", first, zero, g, like=g), y)]


# -- contractions ---------------------------------------------------------------------------------

def _swap_last(b, x):
    rank = x.type.rank
    perm = [*range(rank - 2), rank - 1, rank - 2]
    return b.op("Transpose", x, attrs={"perm": perm}, shape=tuple(x.type.shape[p] for p in perm), like=x)


@rule("MatMul")
def _matmul(b, node, grads):
    g, (x, y) = grads[0], node.inputs
    if x.type.rank < 2 or y.type.rank < 2:
        b.unsupported("MatMul of a vector (rank 1)")
    gx = b.op("MatMul", g, _swap_last(b, y), shape=b.matmul_shape(g, _swap_last(b, y)), like=g)
    gy = b.op("MatMul", _swap_last(b, x), g, shape=b.matmul_shape(_swap_last(b, x), g), like=g)
    return [b.unbroadcast(gx, x), b.unbroadcast(gy, y)]


@rule("Gemm")
def _gemm(b, node, grads):
    g, a, w = grads[0], node.inputs[0], node.inputs[1]
    alpha, beta = node.attr("alpha", 1.0), node.attr("beta", 1.0)
    ta, tb = node.attr("transA", 0), node.attr("transB", 0)
    # each gradient is one MatMul in its input's own layout (A^T·B's dA = B·dY^T, not (dY·B^T)^T):
    # a transposed view would make every later pass over it (the optimizer's) strided
    def t(v):
        return _swap_last(b, v)

    # with Y = a_ · w_ (a_ = Aᵀ when transA, w_ = Bᵀ when transB): dA = dY · w_ᵀ, or w_ · dYᵀ when
    # transA; dB = a_ᵀ · dY, or dYᵀ · a_ when transB
    ga_pair = (t(w) if tb else w, t(g)) if ta else (g, w if tb else t(w))
    gw_pair = (t(g), t(a) if ta else a) if tb else (a if ta else t(a), g)
    ga = b.op("MatMul", *ga_pair, shape=tuple(a.type.shape), like=g)
    gw = b.op("MatMul", *gw_pair, shape=tuple(w.type.shape), like=g)
    if alpha != 1.0:
        ga, gw = b.op("Mul", ga, b.scalar(alpha, ga)), b.op("Mul", gw, b.scalar(alpha, gw))
    gc = None
    if node.input(2) is not None:
        gc = b.unbroadcast(g if beta == 1.0 else b.op("Mul", g, b.scalar(beta, g)), node.inputs[2])
    return [ga, gw, gc]


def _conv_geometry(b, node, x, w):
    spatial = x.type.rank - 2
    if node.attr("auto_pad", "NOTSET") not in ("NOTSET", "VALID"):
        b.unsupported(f"auto_pad {node.attr('auto_pad')} (give explicit pads)")
    strides = list(node.attr("strides", [1] * spatial))
    dilations = list(node.attr("dilations", [1] * spatial))
    pads = list(node.attr("pads", [0] * 2 * spatial))
    return spatial, strides, dilations, pads


@rule("Conv")
def _conv(b, node, grads):
    """dx: the transposed convolution of dy with the same kernel (output padding restores x's size);
    dw: per group, x and dy correlated over the batch — a convolution of x (batch and channels
    swapped) with dy as its kernel, strides and dilations exchanged, cut to the kernel size."""
    g, x, w = grads[0], node.inputs[0], node.inputs[1]
    spatial, strides, dilations, pads = _conv_geometry(b, node, x, w)
    groups = node.attr("group", 1)
    xs, ws, gs = x.type.shape, w.type.shape, g.type.shape
    kernel = ws[2:]
    extra = [xs[2 + i] - ((gs[2 + i] - 1) * strides[i] - pads[i] - pads[spatial + i]
                          + dilations[i] * (kernel[i] - 1) + 1) for i in range(spatial)]
    gx = b.op("ConvTranspose", g, w, attrs={"strides": strides, "dilations": dilations, "pads": pads,
                                            "group": groups, "output_padding": extra}, shape=xs, like=g)
    gw = _conv_kernel_grad(b, x, g, w, strides, dilations, pads, groups)
    gb = None
    if node.input(2) is not None:
        gb = b.op("ReduceSum", g, b.ints([0, *range(2, 2 + spatial)]), attrs={"keepdims": 0}, shape=(ws[0],),
                  like=g)
    return [gx, gw, gb]


@rule("ConvTranspose")
def _conv_transpose(b, node, grads):
    """The adjoint of Conv with the same kernel: dx is that Conv of dy; <y, dy> = <x, Conv(dy, w)>,
    so dw is Conv's kernel gradient with dy as the input and x as the output's gradient."""
    g, x, w = grads[0], node.inputs[0], node.inputs[1]
    if node.attr("output_shape") is not None:
        b.unsupported("ConvTranspose with output_shape (give pads and output_padding)")
    spatial, strides, dilations, pads = _conv_geometry(b, node, x, w)
    groups = node.attr("group", 1)
    gx = b.op("Conv", g, w, attrs={"strides": strides, "dilations": dilations, "pads": pads, "group": groups},
              shape=x.type.shape, like=g)
    gw = _conv_kernel_grad(b, g, x, w, strides, dilations, pads, groups)
    gb = None
    if node.input(2) is not None:
        gb = b.op("ReduceSum", g, b.ints([0, *range(2, 2 + spatial)]), attrs={"keepdims": 0},
                  shape=(g.type.shape[1],), like=g)
    return [gx, gw, gb]


def _conv_kernel_grad(b, x, g, w, strides, dilations, pads, groups):
    """The gradient of Conv(x, w)'s kernel given the output's gradient ``g``."""
    spatial = x.type.rank - 2
    xs, ws, gs = x.type.shape, w.type.shape, g.type.shape
    kernel = ws[2:]
    per_in, per_out = xs[1] // groups, ws[0] // groups
    parts = []
    for k in range(groups):
        xk = b.slice(x, 1, k * per_in, (k + 1) * per_in) if groups > 1 else x
        gk = b.slice(g, 1, k * per_out, (k + 1) * per_out) if groups > 1 else g
        xt = b.op("Transpose", xk, attrs={"perm": [1, 0, *range(2, 2 + spatial)]},
                  shape=(per_in, xs[0], *xs[2:]), like=g)
        gt = b.op("Transpose", gk, attrs={"perm": [1, 0, *range(2, 2 + spatial)]},
                  shape=(per_out, gs[0], *gs[2:]), like=g)
        full = [(xs[2 + i] + pads[i] + pads[spatial + i] - strides[i] * (gs[2 + i] - 1) - 1) // dilations[i] + 1
                for i in range(spatial)]
        corr = b.op("Conv", xt, gt, attrs={"strides": dilations, "dilations": strides, "pads": pads},
                    shape=(per_in, per_out, *full), like=g)
        if list(full) != list(kernel):
            corr = b.op("Slice", corr, b.ints([0] * spatial), b.ints(kernel), b.ints(range(2, 2 + spatial)),
                        shape=(per_in, per_out, *kernel), like=g)
        parts.append(b.op("Transpose", corr, attrs={"perm": [1, 0, *range(2, 2 + spatial)]},
                          shape=(per_out, per_in, *kernel), like=g))
    return parts[0] if groups == 1 else b.op("Concat", *parts, attrs={"axis": 0}, shape=ws, like=g)


# -- pooling --------------------------------------------------------------------------------------

def _pool_geometry(b, node, x):
    spatial = x.type.rank - 2
    if node.attr("auto_pad", "NOTSET") not in ("NOTSET", "VALID") or node.attr("ceil_mode", 0):
        b.unsupported("auto_pad or ceil_mode pooling (give explicit pads)")
    kernel = list(node.attr("kernel_shape"))
    strides = list(node.attr("strides", [1] * spatial))
    pads = list(node.attr("pads", [0] * 2 * spatial))
    if any(d != 1 for d in node.attr("dilations", [1] * spatial)):
        b.unsupported("dilated pooling")
    return spatial, kernel, strides, pads


@rule("AveragePool")
def _average_pool(b, node, grads):
    """Each output spreads its gradient evenly over its window: a transposed depthwise convolution
    of dy / (window counts) with a kernel of ones."""
    g, x = grads[0], node.inputs[0]
    spatial, kernel, strides, pads = _pool_geometry(b, node, x)
    xs, gs = x.type.shape, g.type.shape
    channels = xs[1]
    if node.attr("count_include_pad", 0):
        counts = np.full(gs[2:], float(math.prod(kernel)))
    else:
        inside = np.zeros([xs[2 + i] + pads[i] + pads[spatial + i] for i in range(spatial)])
        inside[tuple(slice(pads[i], pads[i] + xs[2 + i]) for i in range(spatial))] = 1
        counts = np.zeros(gs[2:])
        for index in np.ndindex(*gs[2:]):
            window = tuple(slice(index[i] * strides[i], index[i] * strides[i] + kernel[i]) for i in range(spatial))
            counts[index] = inside[window].sum()
    scaled = b.op("Div", g, b.const(counts.astype(b.numpy_dtype(g))))
    ones = b.const(np.ones((channels, 1, *kernel), b.numpy_dtype(g)))
    extra = [xs[2 + i] - ((gs[2 + i] - 1) * strides[i] - pads[i] - pads[spatial + i] + kernel[i])
             for i in range(spatial)]
    return [b.op("ConvTranspose", scaled, ones, attrs={"strides": strides, "pads": pads, "group": channels,
                                                       "output_padding": extra}, shape=xs, like=g)]


@rule("MaxPool")
def _max_pool(b, node, grads):
    """Each output's gradient goes to the input element it took (MaxPool's Indices output)."""
    g, x = grads[0], node.inputs[0]
    _, kernel, strides, _ = _pool_geometry(b, node, x)
    if node.attr("storage_order", 0):
        b.unsupported("column-major storage_order")
    indices = b.optional_output(node, 1, g.type.shape, "int64")
    numel = math.prod(x.type.shape)
    flat_g = b.op("Reshape", g, b.ints([-1]), shape=(math.prod(g.type.shape),), like=g)
    flat_i = b.op("Reshape", indices, b.ints([-1]), shape=(math.prod(g.type.shape),), like=indices)
    zeros = b.const(np.zeros(numel, b.numpy_dtype(g)))
    apart = all(s >= k for s, k in zip(strides, kernel))  # windows apart: each input taken once at most
    spread = b.op("ScatterElements", zeros, flat_i, flat_g, attrs={"axis": 0, "reduction": "none" if apart else "add"},
                  shape=(numel,), like=g)
    return [b.op("Reshape", spread, b.ints(x.type.shape), shape=x.type.shape, like=g)]


@rule("GlobalAveragePool")
def _global_average_pool(b, node, grads):
    g, x = grads[0], node.inputs[0]
    n = math.prod(x.type.shape[2:])
    return [b.op("Expand", b.op("Div", g, b.scalar(float(n), g)), b.ints(x.type.shape), shape=x.type.shape, like=g)]


@rule("GlobalMaxPool")
def _global_max_pool(b, node, grads):
    g, x, y = grads[0], node.inputs[0], node.outputs[0]
    hit = b.op("Equal", x, y, like=x, dtype="bool")
    return [b.op("Where", hit, b.op("Expand", g, b.ints(x.type.shape), shape=x.type.shape, like=g),
                 b.scalar(0.0, x), like=x)]


# -- reductions -----------------------------------------------------------------------------------

def _reduced_axes(b, node) -> list[int]:
    x = node.inputs[0]
    rank = x.type.rank
    given = b.constant(node.input(1)) if len(node.inputs) > 1 else node.attr("axes")
    if given is None or len(np.asarray(given).reshape(-1)) == 0:
        if node.attr("noop_with_empty_axes", 0):
            return []
        return list(range(rank))
    return sorted(_axis(int(a), rank) for a in np.asarray(given).reshape(-1))


@rule("ReduceSum", "ReduceMean")
def _reduce(b, node, grads):
    g, x = grads[0], node.inputs[0]
    axes = _reduced_axes(b, node)
    kept = tuple(1 if i in axes else d for i, d in enumerate(x.type.shape))
    g = b.op("Reshape", g, b.ints(kept), shape=kept, like=g)
    if node.op == "ReduceMean":
        g = b.op("Div", g, b.scalar(float(math.prod(x.type.shape[a] for a in axes)), g))
    return [b.op("Expand", g, b.ints(x.type.shape), shape=x.type.shape, like=g), None]


# -- tensor shuffles ------------------------------------------------------------------------------

@rule("Reshape", "Flatten", "Squeeze", "Unsqueeze")
def _reshape(b, node, grads):
    x = node.inputs[0]
    return [b.op("Reshape", grads[0], b.ints(x.type.shape), shape=x.type.shape, like=grads[0]),
            *([None] * (len(node.inputs) - 1))]


@rule("Transpose")
def _transpose(b, node, grads):
    x = node.inputs[0]
    perm = list(node.attr("perm", list(range(x.type.rank))[::-1]))
    inverse = [perm.index(i) for i in range(len(perm))]
    return [b.op("Transpose", grads[0], attrs={"perm": inverse}, shape=x.type.shape, like=grads[0])]


@rule("Concat")
def _concat(b, node, grads):
    g = grads[0]
    axis = _axis(node.attr("axis"), g.type.rank)
    start, result = 0, []
    for x in node.inputs:
        size = x.type.shape[axis]
        result.append(b.slice(g, axis, start, start + size))
        start += size
    return result


@rule("Split")
def _split(b, node, grads):
    x = node.inputs[0]
    axis = _axis(node.attr("axis", 0), x.type.rank)
    parts = [g if g is not None else b.zeros_like(out) for g, out in zip(grads, node.outputs)]
    return [b.op("Concat", *parts, attrs={"axis": axis}, shape=x.type.shape, like=x), None]


@rule("Slice")
def _slice(b, node, grads):
    """Steps of 1: the gradient padded back to the input's size with zeros."""
    g, x = grads[0], node.inputs[0]
    rank = x.type.rank
    starts, ends = b.constant(node.input(1)), b.constant(node.input(2))
    axes = b.constant(node.input(3)) if node.input(3) is not None else np.arange(len(starts))
    steps = b.constant(node.input(4)) if node.input(4) is not None else np.ones(len(starts), np.int64)
    if starts is None or ends is None or axes is None or steps is None:
        b.unsupported("Slice with computed starts/ends")
    if any(int(s) != 1 for s in steps):
        b.unsupported("Slice with steps other than 1")
    before, after = [0] * rank, [0] * rank
    for start, end, axis in zip(starts, ends, axes):
        axis, size = _axis(int(axis), rank), x.type.shape[_axis(int(axis), rank)]
        start = min(max(int(start) + size if int(start) < 0 else int(start), 0), size)
        end = min(max(int(end) + size if int(end) < 0 else int(end), 0), size)
        before[axis], after[axis] = start, size - max(end, start)
    return [b.op("Pad", g, b.ints(before + after), shape=x.type.shape, like=g), *([None] * (len(node.inputs) - 1))]


@rule("Pad")
def _pad(b, node, grads):
    """Constant mode with non-negative pads: the gradient sliced back to the input."""
    g, x = grads[0], node.inputs[0]
    pads, mode = b.constant(node.input(1)), node.attr("mode", "constant")
    if isinstance(mode, bytes):
        mode = mode.decode()
    if pads is None or mode != "constant" or (node.input(3) is not None and b.constant(node.input(3)) is None):
        b.unsupported("Pad other than constant mode with constant pads")
    rank = x.type.rank
    axes = [_axis(int(a), rank) for a in b.constant(node.input(3))] if node.input(3) is not None else list(range(rank))
    pads = [int(p) for p in pads]
    if any(p < 0 for p in pads):
        b.unsupported("Pad with negative pads")
    starts = pads[:len(axes)]
    ends = [start + x.type.shape[a] for start, a in zip(starts, axes)]
    out = b.op("Slice", g, b.ints(starts), b.ints(ends), b.ints(axes), shape=x.type.shape, like=g)
    return [out, *([None] * (len(node.inputs) - 1))]


def _nearest_source(mode: str, rounding: str, size: int, scale: int) -> np.ndarray:
    """The input index each output index of a nearest Resize reads, by ONNX's formulas."""
    i = np.arange(size * scale, dtype=np.float64)
    if mode == "asymmetric":
        x = i / scale
    elif mode in ("half_pixel", "pytorch_half_pixel"):
        x = (i + 0.5) / scale - 0.5
    else:
        return np.full(len(i), -1)
    picks = {"floor": np.floor(x), "ceil": np.ceil(x), "round_prefer_floor": np.ceil(x - 0.5),
             "round_prefer_ceil": np.floor(x + 0.5)}
    return np.clip(picks.get(rounding, np.full(len(i), -1.0)), -1, size - 1).astype(np.int64)


@rule("Resize")
def _resize(b, node, grads):
    """Nearest upsampling by whole factors where output i reads input ⌊i / s⌋ (torch's
    nn.Upsample): each input element gathers the gradient of its s₁×s₂… block."""
    g, x = grads[0], node.inputs[0]
    mode = node.attr("mode", "nearest")
    mode = mode.decode() if isinstance(mode, bytes) else mode
    where = node.attr("coordinate_transformation_mode", "half_pixel")
    where = where.decode() if isinstance(where, bytes) else where
    rounding = node.attr("nearest_mode", "round_prefer_floor")
    rounding = rounding.decode() if isinstance(rounding, bytes) else rounding
    xs, ys = tuple(x.type.shape), tuple(g.type.shape)
    factors = [o // i if i and o % i == 0 else 0 for i, o in zip(xs, ys)]
    if mode != "nearest" or 0 in factors or any(
            f > 1 and not np.array_equal(_nearest_source(where, rounding, n, f), np.arange(n * f) // f)
            for n, f in zip(xs, factors)):
        b.unsupported("Resize other than nearest upsampling by whole factors (each output reads ⌊i / s⌋)")
    split, summed_axes = [], []  # each upsampled axis n·f split into (n, f); the f axes summed
    for n, f in zip(xs, factors):
        split.append(n)
        if f > 1:
            summed_axes.append(len(split))
            split.append(f)
    blocks = b.op("Reshape", g, b.ints(split), shape=tuple(split), like=g)
    kept = tuple(1 if i in summed_axes else d for i, d in enumerate(split))
    out = b.op("ReduceSum", blocks, b.ints(summed_axes), attrs={"keepdims": 1}, shape=kept, like=g) \
        if summed_axes else blocks
    return [b.op("Reshape", out, b.ints(xs), shape=xs, like=g), *([None] * (len(node.inputs) - 1))]


@rule("Gather")
def _gather(b, node, grads):
    """The gathered slices' gradients added into a zero tensor (an embedding's rows along axis 0;
    another axis is moved to the front and back)."""
    g, (table, index) = grads[0], node.inputs
    rank = table.type.rank
    axis = _axis(node.attr("axis", 0), rank)
    shape = tuple(table.type.shape)
    picked = b.constant(index)
    if picked is not None and picked.ndim == 0:  # one slice (attention's q, k, v): padded back in place
        return [_slice_padded_back(b, g, axis, int(picked) % shape[axis], shape), None]
    if axis:  # g has index's dims where the table had its axis: move those, and the axis, to the front
        lead = index.type.rank
        perm = [*range(axis, axis + lead), *range(axis), *range(axis + lead, g.type.rank)]
        g = b.op("Transpose", g, attrs={"perm": perm}, shape=tuple(g.type.shape[p] for p in perm), like=g)
        shape = (shape[axis], *shape[:axis], *shape[axis + 1:])
    count = math.prod(index.type.shape)
    rows = b.op("Reshape", index, b.ints([count, 1]), shape=(count, 1), like=index)
    rows = b.op("Cast", rows, attrs={"to": DType.INT64.onnx}, shape=(count, 1), dtype="int64")
    flat = b.op("Reshape", g, b.ints([count, *shape[1:]]), shape=(count, *shape[1:]), like=g)
    zeros = b.const(np.zeros(shape, b.numpy_dtype(g)))
    out = b.op("ScatterND", zeros, rows, flat, attrs={"reduction": "add"}, shape=shape, like=g)
    if axis:
        back = [*range(1, axis + 1), 0, *range(axis + 1, rank)]
        out = b.op("Transpose", out, attrs={"perm": back}, shape=tuple(table.type.shape), like=g)
    return [out, None]


def _slice_padded_back(b, g, axis: int, at: int, shape: tuple):
    """The gradient of taking slice ``at`` of ``axis`` out of a tensor of ``shape``: ``g`` with that
    axis restored and zeros padded around it (no scatter)."""
    one = (*shape[:axis], 1, *shape[axis + 1:])
    pads = [0] * (2 * len(shape))
    pads[axis], pads[len(shape) + axis] = at, shape[axis] - 1 - at
    return b.op("Pad", b.op("Unsqueeze", g, b.ints([axis]), shape=one, like=g), b.ints(pads), shape=shape, like=g)


@rule("GatherElements")
def _gather_elements(b, node, grads):
    """Each gathered element's gradient added back where it was read (ScatterElements with add)."""
    g, (data, index) = grads[0], node.inputs
    axis = _axis(node.attr("axis", 0), data.type.rank)
    out = b.op("ScatterElements", b.zeros_like(data), index, g, attrs={"axis": axis, "reduction": "add"},
               shape=tuple(data.type.shape), like=g)
    return [out, None]


@rule("Expand")
def _expand(b, node, grads):
    return [b.unbroadcast(grads[0], node.inputs[0]), None]


@rule("Where")
def _where(b, node, grads):
    g, (cond, x, y) = grads[0], node.inputs
    zeros = b.scalar(0.0, g)  # Where broadcasts it
    return [None, b.unbroadcast(b.op("Where", cond, g, zeros, like=g), x),
            b.unbroadcast(b.op("Where", cond, zeros, g, like=g), y)]


# -- no gradient through these ------------------------------------------------------------------

@rule("Shape", "Size", "ArgMax", "ArgMin", "Equal", "Greater", "Less", "GreaterOrEqual", "LessOrEqual", "Not",
      "And", "Or", "Floor", "Ceil", "Round", "Sign", "ConstantOfShape", "RandomUniformLike", "RandomNormalLike",
      "OneHot", "NonZero", "Range")
def _constant_result(b, node, grads):
    return [None] * len(node.inputs)
