"""Neural-network ops in SMAUG's frontend style: convolution, pooling, mat_mul, batch_norm, activations.

Layout-checking ops convert their inputs to the backend's layouts (Reference: NCHW activations and
kernels, ``[in, out]`` CN FC weights; SMV: NHWC and ``[out, in]`` NC), as SMAUG's frontend does.
"""

from __future__ import annotations

from ..converters.smaug import layouts
from ..converters.smaug.export_ops import fill_act_params
from ..errors import InputError
from ..protos.smaug import smaug_node_pb2 as npb
from ..protos.smaug import smaug_types_pb2 as pb
from .graph import Graph, Tensor, graph_of

#: fused/standalone activation name → (OpType, default parameters of the frontend, §6.2)
ACTIVATIONS = {
    "relu": (pb.ReLU, {}), "lrelu": (pb.LReLU, {"slope": 0.2}), "elu": (pb.ELU, {"alpha": 0.1}),
    "selu": (pb.SELU, {"alpha": 1.6733, "lambda_param": 1.0507}), "tanh": (pb.Tanh, {}),
    "hard_tanh": (pb.HardTanh, {"min": -1.0, "max": 1.0}), "sigmoid": (pb.Sigmoid, {}),
    "softmax": (pb.Softmax, {}),
}


def _activation_layout(graph: Graph) -> int:
    return pb.NHWC if graph.backend == "SMV" else pb.NCHW


def set_activation(act: npb.ActivationParams, name: str | None, params: dict | None, fused: bool) -> None:
    """Fill ``act_params``; the parameter message is always written (the runtime has no defaults)."""
    if name is None:
        return
    if name not in ACTIVATIONS:
        raise InputError(f"unknown activation '{name}'; choose from {', '.join(ACTIVATIONS)}")
    op, defaults = ACTIVATIONS[name]
    values = {**defaults, **(params or {})}
    # the frontend names its parameters after the proto fields; the converter after ONNX's
    onnx_names = {"alpha": values.get("slope", values.get("alpha")), "gamma": values.get("lambda_param"),
                  "min": values.get("min"), "max": values.get("max")}
    fill_act_params(act, op, onnx_names, fused)


def convolution(input_tensor: Tensor, filter_tensor: Tensor, stride, padding: str, activation: str | None = None,
                activation_params: dict | None = None, name: str = "conv") -> Tensor:
    """2-D convolution (no bias); ``padding`` is "same" (SMAUG's rule) or "valid"."""
    g = graph_of(input_tensor, filter_tensor)
    layout = _activation_layout(g)
    x = g.to_layout(input_tensor, layout, layout)
    w = g.to_layout(filter_tensor, layout, layout)
    if padding not in ("same", "valid"):
        raise InputError(f"padding must be 'same' or 'valid', not '{padding}'")
    rows, cols = (w.dims[2], w.dims[3]) if layout == pb.NCHW else (w.dims[1], w.dims[2])
    n, h, wd = x.dims[0], *((x.dims[2], x.dims[3]) if layout == pb.NCHW else (x.dims[1], x.dims[2]))
    total = (rows - 1, cols - 1) if padding == "same" else (0, 0)
    ho = layouts.conv_out(h, rows, stride[0], total[0])
    wo = layouts.conv_out(wd, cols, stride[1], total[1])
    dims = [n, w.dims[0], ho, wo] if layout == pb.NCHW else [n, ho, wo, w.dims[0]]
    node, (out,) = g.add_node(pb.Convolution3d, name, [x, w], [(dims, layout)])
    node.params.conv_params.padding = pb.SamePadding if padding == "same" else pb.ValidPadding
    node.params.conv_params.stride.extend(int(s) for s in stride)
    set_activation(node.params.act_params, activation, activation_params, fused=True)
    return out


def _pool(op: int, input_tensor: Tensor, pool_size, stride, name: str) -> Tensor:
    g = graph_of(input_tensor)
    layout = _activation_layout(g)
    x = g.to_layout(input_tensor, layout, layout)
    h, w = (x.dims[2], x.dims[3]) if layout == pb.NCHW else (x.dims[1], x.dims[2])
    ho, wo = (h - pool_size[0]) // stride[0] + 1, (w - pool_size[1]) // stride[1] + 1
    dims = [x.dims[0], x.dims[1], ho, wo] if layout == pb.NCHW else [x.dims[0], ho, wo, x.dims[3]]
    node, (out,) = g.add_node(op, name, [x], [(dims, layout)])
    node.params.pool_params.stride.extend(int(s) for s in stride)
    node.params.pool_params.pool_size.extend(int(s) for s in pool_size)
    return out


def max_pool(input_tensor: Tensor, pool_size, stride, name: str = "max_pool") -> Tensor:
    return _pool(pb.MaxPooling, input_tensor, pool_size, stride, name)


def avg_pool(input_tensor: Tensor, pool_size, stride, name: str = "avg_pool") -> Tensor:
    """Average pooling (both runtimes implement it; SMAUG's frontend has no wrapper)."""
    return _pool(pb.AveragePooling, input_tensor, pool_size, stride, name)


def mat_mul(input_tensor: Tensor, weight_tensor: Tensor, activation: str | None = None,
            activation_params: dict | None = None, name: str = "mat_mul") -> Tensor:
    """Inner product ``x · Wᵀ`` (no bias); a 4-D input is flattened in its storage order."""
    g = graph_of(input_tensor, weight_tensor)
    x = g.to_layout(input_tensor, pb.NC, pb.NC)
    weight_layout = pb.NC if g.backend == "SMV" else pb.CN
    w = g.to_layout(weight_tensor, weight_layout, weight_layout)
    outs = w.dims[0] if w.data_layout == pb.NC else w.dims[1]
    node, (out,) = g.add_node(pb.InnerProduct, name, [x, w], [([x.dims[0], outs], pb.NC)])
    node.params.SetInParent()
    set_activation(node.params.act_params, activation, activation_params, fused=True)
    return out


def batch_norm(input_tensor: Tensor, mean_tensor: Tensor, var_tensor: Tensor, gamma_tensor: Tensor,
               beta_tensor: Tensor, activation: str | None = None, activation_params: dict | None = None,
               name: str = "batch_norm") -> Tensor:
    """``(x − mean) · var · gamma + beta``; ``var`` must already be 1/sqrt(σ² + ε) (SMAUG's convention)."""
    g = graph_of(input_tensor, mean_tensor, var_tensor, gamma_tensor, beta_tensor)
    x = g.operand(input_tensor)
    if len(x.dims) == 4:
        layout = _activation_layout(g)
        x = g.to_layout(x, layout, layout)
        stats = [g.to_layout(t, pb.NC, pb.NC) for t in (mean_tensor, var_tensor, gamma_tensor, beta_tensor)]
    else:
        stats = [g.operand(t) for t in (mean_tensor, var_tensor, gamma_tensor, beta_tensor)]
    node, (out,) = g.add_node(pb.BatchNorm, name, [x, *stats], [(x.dims, x.data_layout)])
    node.params.SetInParent()
    set_activation(node.params.act_params, activation, activation_params, fused=True)
    return out


def _standalone(kind: str, input_tensor: Tensor, name: str, params: dict | None = None) -> Tensor:
    g = graph_of(input_tensor)
    x = g.operand(input_tensor)
    op, defaults = ACTIVATIONS[kind]
    if op == pb.Softmax:
        x = g.to_layout(x, pb.NC, pb.NC)
    node, (out,) = g.add_node(op, name, [x], [(x.dims, x.data_layout)])
    if defaults:
        set_activation(node.params.act_params, kind, params, fused=False)
    return out


def relu(input_tensor: Tensor, name: str = "relu") -> Tensor:
    return _standalone("relu", input_tensor, name)


def lrelu(input_tensor: Tensor, slope: float = 0.2, name: str = "lrelu") -> Tensor:
    """Leaky ReLU. Note: SMAUG's runtime ignores a standalone node's slope and uses 0.1 (quirk Q1)."""
    return _standalone("lrelu", input_tensor, name, {"slope": slope})


def elu(input_tensor: Tensor, alpha: float = 0.1, name: str = "elu") -> Tensor:
    return _standalone("elu", input_tensor, name, {"alpha": alpha})


def selu(input_tensor: Tensor, alpha: float = 1.6733, lambda_param: float = 1.0507, name: str = "selu") -> Tensor:
    return _standalone("selu", input_tensor, name, {"alpha": alpha, "lambda_param": lambda_param})


def tanh(input_tensor: Tensor, name: str = "tanh") -> Tensor:
    return _standalone("tanh", input_tensor, name)


def hard_tanh(input_tensor: Tensor, min: float = -1.0, max: float = 1.0, name: str = "hard_tanh") -> Tensor:  # noqa: A002
    return _standalone("hard_tanh", input_tensor, name, {"min": min, "max": max})


def sigmoid(input_tensor: Tensor, name: str = "sigmoid") -> Tensor:
    return _standalone("sigmoid", input_tensor, name)


def softmax(input_tensor: Tensor, name: str = "softmax") -> Tensor:
    return _standalone("softmax", input_tensor, name)
