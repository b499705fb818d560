"""IR → simulator steps: which operators SMV accelerates (spec §3) and as what.

Each IR node becomes one ``Step``: an accelerated operator (one or more tiling
layers, e.g. a conv plus the batch-norm that carries its bias, as SMAUG's
converter expresses a bias) or a CPU operator run by the reference kernels.
SMAUG fuses activations into the producing conv/FC/BN kernel (``act_params``);
``fuse_activations`` redoes that. A node SMV cannot accelerate falls back to
the CPU with the reason recorded.
"""

from __future__ import annotations

import dataclasses
import math
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

from ...base.errors import ShapeError
from ...base.registry import Registry
from ...ir import DType, Layout
from .flatten import FlatGraph, FlatNode
from .layers import BNLayer, ConvLayer, FCLayer, Layer, PoolLayer, SoftmaxLayer, VectorLayer
from .tiling.common import ceil_to
from .tiling.pool import channel_group

FLOATS = {DType.FLOAT32, DType.FLOAT16, DType.FLOAT64, DType.BFLOAT16}
ACTIVATIONS = {"Relu", "LeakyRelu", "Elu", "Selu", "Tanh", "Sigmoid", "Clip"}
COMPARISONS = {"Less": "less", "LessOrEqual": "less_equal", "Greater": "greater", "GreaterOrEqual": "greater_equal"}
FUSING_FAMILIES = {"conv", "fc", "bn"}


@dataclass(kw_only=True)
class Step:
    name: str
    op: str  # label shown in reports, e.g. "Conv+Relu"
    family: str  # conv | fc | pool | bn | vector | softmax | cpu
    fn: FlatNode
    inputs: list[str | None]
    outputs: list[str]
    layers: list[Layer] = field(default_factory=list)
    params: dict[str, Any] = field(default_factory=dict)
    reason: str = ""  # why a CPU step is not accelerated
    deviation: str = ""  # how SMAUG computes this node differently from ONNX
    plans: list[Any] = field(default_factory=list)  # one TilingPlan per layer

    @property
    def on_accelerator(self) -> bool:
        return self.family != "cpu"

    @property
    def reads_leftovers(self) -> bool:
        """A SMAUG file form whose result holds what earlier kernels left in the scratchpads (the
        softmax and post-FC batch-norm row tails, ``scratchpads``). What is left depends on how
        every earlier operator ran, so a graph holding one runs every operator on its whole batch,
        as SMAUG's runtime does, which the simulator then reproduces."""
        return bool(self.deviation) and self.family in ("softmax", "bn")


class Lowering:
    """Shape and attribute helpers shared by the per-op lowerers."""

    def __init__(self, flat: FlatGraph):
        self.flat = flat

    def shape(self, name: str | None) -> tuple[int, ...] | None:
        if name is None or name not in self.flat.types:
            return None
        t = self.flat.types[name]
        if t.shape is None or not all(isinstance(d, int) for d in t.shape):
            const = self.flat.consts.get(name)
            return tuple(const.shape) if const is not None else None
        return tuple(t.shape)

    def is_float(self, name: str | None) -> bool:
        if name is None:
            return False
        t = self.flat.types.get(name)
        if t is not None and t.dtype is not None:
            return t.dtype in FLOATS
        const = self.flat.consts.get(name)
        return const is not None and const.dtype.kind == "f"

    def nhwc(self, name: str) -> bool:
        t = self.flat.types.get(name)
        return t is not None and t.layout is Layout.NHWC

    def to_nhwc(self, name: str, shape: tuple[int, ...]) -> tuple[int, ...]:
        return shape if self.nhwc(name) else (shape[0], shape[2], shape[3], shape[1])


Lowerer = Callable[[FlatNode, Lowering], "Step | str"]
LOWERERS: Registry[str, Lowerer] = Registry("SMV lowerers")


def lowers(*ops: str) -> Callable[[Lowerer], Lowerer]:
    return LOWERERS.decorator(*ops)


def _step(fn: FlatNode, family: str, layers: list[Layer], **params: Any) -> Step:
    return Step(name=fn.name, op=fn.op, family=family, fn=fn, inputs=list(fn.inputs), outputs=list(fn.outputs),
                layers=layers, params=params)


def _spatial_pads(fn: FlatNode, h: int, w: int, kh: int, kw: int, sh: int, sw: int) -> tuple[int, int, int, int]:
    """(top, bottom, left, right) of an ONNX Conv/Pool node."""
    auto = fn.node.attr("auto_pad", "NOTSET")
    if isinstance(auto, bytes):
        auto = auto.decode()
    if auto in ("SAME_UPPER", "SAME_LOWER"):
        out = []
        for size, k, s in ((h, kh, sh), (w, kw, sw)):
            total = max((math.ceil(size / s) - 1) * s + k - size, 0)
            small, big = total // 2, total - total // 2
            out.append((small, big) if auto == "SAME_UPPER" else (big, small))
        return out[0][0], out[0][1], out[1][0], out[1][1]
    if auto == "VALID":
        return 0, 0, 0, 0
    pads = list(fn.node.attr("pads") or [0, 0, 0, 0])
    return pads[0], pads[2], pads[1], pads[3]


@lowers("Conv")
def _conv(fn: FlatNode, lw: Lowering) -> Step | str:
    x, w = fn.inputs[0], fn.inputs[1]
    xs, ws = lw.shape(x), lw.shape(w)
    if xs is None or ws is None or len(xs) != 4:
        return "only 2-D convolutions with static shapes"
    if not lw.is_float(x):
        return "not a floating-point tensor"
    if fn.node.attr("group", 1) != 1:
        return "grouped/depthwise convolution (SMAUG's SMV depthwise conv is a no-op, quirk Q10)"
    if any(d != 1 for d in fn.node.attr("dilations") or [1, 1]):
        return "dilated convolution (SMAUG has no dilation, quirk Q7)"
    if len(xs) != 4 or len(ws) != 4:
        return "not a 2-D convolution (SMV convolves 4-D tensors)"
    n, h, wd, c = lw.to_nhwc(x, xs)
    k, kh, kw = (ws[0], ws[1], ws[2]) if lw.nhwc(w) else (ws[0], ws[2], ws[3])
    sh, sw = (list(fn.node.attr("strides") or [1, 1]) + [1, 1])[:2]
    top, bottom, left, right = _spatial_pads(fn, h, wd, kh, kw, sh, sw)
    same = ConvLayer(name="", input=(n, h, wd, c), kernels=k, kh=kh, kw=kw, stride_h=sh, stride_w=sw, same=True).pads
    explicit = None
    if (top, bottom, left, right) == (0, 0, 0, 0):
        is_same = False
    elif (top, bottom, left, right) == same:
        is_same = True
    else:  # SMAUG expresses other padding with a CPU Padding node and a valid conv
        explicit, is_same = (top, bottom, left, right), False
        h, wd = h + top + bottom, wd + left + right
    layers: list[Layer] = [ConvLayer(name=fn.name, input=(n, h, wd, c), kernels=k, kh=kh, kw=kw, stride_h=sh,
                                     stride_w=sw, same=is_same)]
    bias = fn.inputs[2] if len(fn.inputs) > 2 else None
    if bias is not None:
        layers.append(BNLayer(fn.name + "/bias", layers[0].output))
    return _step(fn, "conv", layers, pad=explicit, bias=bias, act=None)


def _fc_step(fn: FlatNode, lw: Lowering, a: str, b: str, trans_b: bool, bias: str | None) -> Step | str:
    sa, sb = lw.shape(a), lw.shape(b)
    if sa is None or sb is None or len(sb) != 2 or len(sa) < 2:
        return "needs a 2-D weight and static shapes"
    if not (lw.is_float(a) and lw.is_float(b)):
        return "not a floating-point tensor"
    neurons, inputs = (sb[0], sb[1]) if trans_b else (sb[1], sb[0])
    if sa[-1] != inputs:
        return f"input features {sa[-1]} != weight features {inputs}"
    batch = math.prod(sa[:-1])
    layers: list[Layer] = [FCLayer(fn.name, batch, inputs, neurons)]
    if bias is not None:
        bshape = lw.shape(bias)
        if bshape is None or math.prod(bshape) != neurons:
            return "bias that is not one value per neuron"
        layers.append(BNLayer(fn.name + "/bias", (batch, neurons)))
    return _step(fn, "fc", layers, weights=b, trans_b=trans_b, bias=bias, act=None)


@lowers("Gemm")
def _gemm(fn: FlatNode, lw: Lowering) -> Step | str:
    node = fn.node
    if node.attr("transA", 0) or node.attr("alpha", 1.0) != 1.0 or node.attr("beta", 1.0) != 1.0:
        return "Gemm with transA/alpha/beta (InnerProduct has none)"
    if len(lw.shape(fn.inputs[0]) or ()) != 2:
        return "Gemm input is not 2-D"
    bias = fn.inputs[2] if len(fn.inputs) > 2 else None
    return _fc_step(fn, lw, fn.inputs[0], fn.inputs[1], bool(node.attr("transB", 0)), bias)


@lowers("MatMul")
def _matmul(fn: FlatNode, lw: Lowering) -> Step | str:
    return _fc_step(fn, lw, fn.inputs[0], fn.inputs[1], False, None)


@lowers("MaxPool", "AveragePool")
def _pool(fn: FlatNode, lw: Lowering) -> Step | str:
    x = fn.inputs[0]
    xs = lw.shape(x)
    node = fn.node
    if xs is None or len(xs) != 4 or not lw.is_float(x):
        return "only 2-D floating-point pooling with static shapes"
    if len(fn.outputs) > 1 and fn.outputs[1]:
        return "MaxPool indices output"
    kh, kw = node.attr("kernel_shape")
    sh, sw = (list(node.attr("strides") or [1, 1]) + [1, 1])[:2]
    n, h, w, c = lw.to_nhwc(x, xs)
    pads = _spatial_pads(fn, h, w, kh, kw, sh, sw)
    kind = "max" if fn.op == "MaxPool" else "avg"
    if node.attr("ceil_mode", 0) or (any(pads) and kind == "avg" and not node.attr("count_include_pad", 0)):
        return "ceil-mode pooling or padding left out of the average (SMAUG pools valid windows only, quirk Q7)"
    if any(d != 1 for d in node.attr("dilations") or [1, 1]):
        return "dilated pooling"
    top, bottom, left, right = pads  # SMAUG pads on the CPU, then pools valid windows
    layer = PoolLayer(name=fn.name, input=(n, h + top + bottom, w + left + right, c), ph=kh, pw=kw, stride_h=sh,
                      stride_w=sw, kind=kind)
    return _step(fn, "pool", [layer], kind=kind, pad=pads if any(pads) else None)


@lowers("GlobalAveragePool", "GlobalMaxPool")
def _global_pool(fn: FlatNode, lw: Lowering) -> Step | str:
    x = fn.inputs[0]
    xs = lw.shape(x)
    if xs is None or len(xs) != 4 or not lw.is_float(x):
        return "only 2-D floating-point pooling with static shapes"
    n, h, w, c = lw.to_nhwc(x, xs)
    kind = "max" if fn.op == "GlobalMaxPool" else "avg"
    return _step(fn, "pool", [PoolLayer(name=fn.name, input=(n, h, w, c), ph=h, pw=w, stride_h=1, stride_w=1,
                                        kind=kind)], kind=kind)


@lowers("BatchNormalization")
def _batch_norm(fn: FlatNode, lw: Lowering) -> Step | str:
    x = fn.inputs[0]
    xs = lw.shape(x)
    if xs is None or len(xs) not in (2, 4) or not lw.is_float(x):
        return "batch norm on a tensor that is neither NC nor 4-D"
    if fn.node.attr("training_mode", 0) or len([o for o in fn.outputs if o]) > 1:
        return "training-mode batch norm"
    shape = lw.to_nhwc(x, xs) if len(xs) == 4 else xs
    return _step(fn, "bn", [BNLayer(fn.name, shape)], act=None)


@lowers(*ACTIVATIONS)
def _activation(fn: FlatNode, lw: Lowering) -> Step | str:
    x = fn.inputs[0]
    xs = lw.shape(x)
    if xs is None or not lw.is_float(x):
        return "activation on a non-float or dynamic tensor"
    if fn.op == "Clip":
        for bound in fn.inputs[1:]:
            if bound is not None and bound not in lw.flat.consts:
                return "Clip with non-constant bounds"
    return _step(fn, "vector", [VectorLayer(fn.name, xs or (1,), 1, fn.op)], unary=True)


@lowers("Add", "Mul", *COMPARISONS)
def _binary(fn: FlatNode, lw: Lowering) -> Step | str:
    a, b = fn.inputs[0], fn.inputs[1]
    sa, sb, so = lw.shape(a), lw.shape(b), lw.shape(fn.outputs[0])
    if sa is None or sb is None or so is None or not (lw.is_float(a) and lw.is_float(b)):
        return "element-wise op on non-float or dynamic tensors"
    repeat = [name for name, s in ((a, sa), (b, sb)) if tuple(s) != tuple(so)]
    return _step(fn, "vector", [VectorLayer(fn.name, so or (1,), 2, fn.op)], repeat=repeat)


@lowers("Softmax")
def _softmax(fn: FlatNode, lw: Lowering) -> Step | str:
    x = fn.inputs[0]
    xs = lw.shape(x)
    if xs is None or not lw.is_float(x) or len(xs) < 1:
        return "softmax on a non-float or dynamic tensor"
    axis = fn.node.attr("axis", -1)
    if axis not in (-1, len(xs) - 1):
        return "softmax not over the last axis (SMAUG: per row of an NC tensor)"
    if ceil_to(xs[-1], 8) > 16384:
        return "a softmax row longer than one scratchpad (quirk Q12)"
    return _step(fn, "softmax", [SoftmaxLayer(fn.name, (math.prod(xs[:-1]), xs[-1]))])


def pool_groups(layer: PoolLayer, planner: Callable[[Layer], Any]) -> list[Layer]:
    """A pooling layer as the SMAUG writer emits it: channel groups where SMAUG's pooling tiler
    would pair input and output tiles inconsistently (tiling.pool.channel_group)."""
    n, h, w, c = layer.input
    group = channel_group(layer, planner)
    return [dataclasses.replace(layer, input=(n, h, w, group)) for _ in range(c // group)]


#: ops whose SMAUG deviations leave values nothing wrote (uninitialised alignment lanes read by a
#: kernel, depthwise convolution's empty function): simulated as NaN
UNDEFINED_WHEN_DEVIANT = {"Conv", "MatMul", "Gemm"}


def lower(flat: FlatGraph, cpu_refusal: Callable[[FlatNode], str | None],
          planner: Callable[[Layer], Any], deviations: dict[str, str] | None = None) -> tuple[list[Step], list[tuple]]:
    """Steps in execution order (each accelerated step with its tiling ``plans``), and
    (node, reason) for what neither SMV nor the CPU fallback can run. ``deviations``: node →
    how the real SMAUG runtime computes that node of the file differently (it is reproduced)."""
    lw = Lowering(flat)
    deviations = deviations or {}
    steps: list[Step] = []
    unsupported: list[tuple] = []
    for fn in flat.nodes:
        if fn.name in deviations and fn.op == "Pad":
            unsupported.append((fn, deviations[fn.name]))
            continue
        lowerer = LOWERERS.get(fn.op) if fn.domain == "" else None
        empty = any(flat.types[v].numel == 0 for v in (*fn.inputs, *fn.outputs) if v and v in flat.types)
        result: Step | str = ("an empty tensor (SMV kernels need at least one element)" if empty
                              else lowerer(fn, lw) if lowerer else "no SMV kernel")
        if isinstance(result, Step):
            try:  # SMAUG runs the operator on SMV or not at all: a tiler failure stops the runtime
                if result.family == "pool":
                    result.layers = pool_groups(result.layers[0], planner)
                result.plans = [planner(layer) for layer in result.layers]
            except ShapeError as exc:
                unsupported.append((fn, f"SMAUG's SMV tiler cannot run this shape: {exc}"))
                continue
        if isinstance(result, str):
            refusal = cpu_refusal(fn)
            if refusal is not None:
                unsupported.append((fn, refusal))
                continue
            result = Step(name=fn.name, op=fn.op, family="cpu", fn=fn, inputs=list(fn.inputs),
                          outputs=list(fn.outputs), reason=result)
        if fn.name in deviations:
            result.deviation = deviations[fn.name]
            result.params["undefined"] = fn.op in UNDEFINED_WHEN_DEVIANT
        steps.append(result)
    return fuse_activations(steps, flat), unsupported


def fuse_activations(steps: list[Step], flat: FlatGraph) -> list[Step]:
    """Fold an activation into the conv/FC/BN that produces its only input (SMAUG act_params)."""
    users: dict[str, int] = {}
    for s in steps:
        for name in s.inputs:
            if name is not None:
                users[name] = users.get(name, 0) + 1
    by_output = {s.outputs[0]: s for s in steps if s.outputs}
    fused: set[int] = set()
    for s in steps:
        if not s.params.get("unary"):
            continue
        producer = by_output.get(s.inputs[0])
        if (producer is None or producer.family not in FUSING_FAMILIES or producer.params.get("act") is not None
                or users.get(s.inputs[0]) != 1 or s.inputs[0] in flat.outputs):
            continue
        producer.params["act"] = s.fn
        producer.op = f"{producer.op}+{s.op}"
        producer.outputs = list(s.outputs)
        fused.add(id(s))
    return [s for s in steps if id(s) not in fused]
