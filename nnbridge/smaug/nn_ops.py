"""Neural-network ops in SMAUG's frontend style: convolution, pooling, mat_mul, batch_norm, activations.

Layout-checking ops convert their inputs to the backend's layouts (Reference: NCHW activations and
kernels, ``[in, out]`` CN FC weights; SMV: NHWC and ``[out, in]`` NC), as SMAUG's frontend does.
"""

from __future__ import annotations

from ..base.errors import InputError
from ..converters.smaug import layouts
from ..converters.smaug.export_ops import fill_act_params
from ..protos.smaug import smaug_node_pb2 as npb
from ..protos.smaug import smaug_types_pb2 as pb
from .graph import Tensor, graph_of

#: activation name → (OpType, its parameters and the frontend's defaults, §6.2)
ACTIVATIONS = {
    "relu": (pb.ReLU, {}), "lrelu": (pb.LReLU, {"slope": 0.2}), "elu": (pb.ELU, {"alpha": 0.1}),
    "selu": (pb.SELU, {"alpha": 1.6733, "lambda_param": 1.0507}), "tanh": (pb.Tanh, {}),
    "hard_tanh": (pb.HardTanh, {"min": -1.0, "max": 1.0}), "sigmoid": (pb.Sigmoid, {}),
    "softmax": (pb.Softmax, {}),
}


def activation_params(name: str, params: dict | None, fused: bool) -> npb.ActivationParams:
    """``act_params`` of an activation; the parameter message is always written (the runtime has no defaults)."""
    if name not in ACTIVATIONS:
        raise InputError(f"unknown activation '{name}'; choose from {', '.join(ACTIVATIONS)}")
    op, defaults = ACTIVATIONS[name]
    unknown = sorted(set(params or {}) - set(defaults))
    if unknown:
        raise InputError(f"activation '{name}' has no parameter '{unknown[0]}'"
                         + (f"; it takes {', '.join(defaults)}" if defaults else ""))
    values = {**defaults, **(params or {})}
    act = npb.ActivationParams()
    # the frontend names its parameters after the proto fields; the converter after ONNX's
    fill_act_params(act, op, {"alpha": values.get("slope", values.get("alpha")), "gamma": values.get("lambda_param"),
                              "min": values.get("min"), "max": values.get("max")}, fused)
    return act


def _params(activation: str | None, activation_params_: dict | None) -> npb.Params:
    params = npb.Params()
    if activation is not None:
        params.act_params.CopyFrom(activation_params(activation, activation_params_, fused=True))
    return params


def _spatial(t: Tensor) -> tuple[int, int, int]:
    """(rows, cols, channels) indices of a 4-D tensor in its layout."""
    if t.shape.layout == pb.NCHW:
        return 2, 3, 1
    if t.shape.layout == pb.NHWC:
        return 1, 2, 3
    raise InputError(f"{t}: expected a 4-D NCHW or NHWC tensor")


def convolution(input_tensor: Tensor, filter_tensor: Tensor, stride, padding: str, activation: str | None = None,
                activation_params: dict | None = None, name: str = "conv") -> Tensor:
    """2-D convolution (no bias); ``padding`` is "same" (SMAUG's rule) or "valid"."""
    g = graph_of(input_tensor, filter_tensor)
    if padding not in ("same", "valid"):
        raise InputError(f"{name}: padding must be 'same' or 'valid', not '{padding}'")
    x, w = g.to_layouts(pb.Convolution3d, [input_tensor, filter_tensor])
    rows, cols, chans = _spatial(x)
    if x.dims(chans) != w.dims(chans):
        raise InputError(f"{name}: the filter has {w.dims(chans)} channels but its input {x} has {x.dims(chans)}")
    pads = (w.dims(rows) - 1, w.dims(cols) - 1) if padding == "same" else (0, 0)
    out_rows = layouts.conv_out(x.dims(rows), w.dims(rows), stride[0], pads[0])
    out_cols = layouts.conv_out(x.dims(cols), w.dims(cols), stride[1], pads[1])
    n, filters = x.dims(0), w.dims(0)
    dims = [n, filters, out_rows, out_cols] if x.shape.layout == pb.NCHW else [n, out_rows, out_cols, filters]
    params = _params(activation, activation_params)
    params.conv_params.padding = pb.SamePadding if padding == "same" else pb.ValidPadding
    params.conv_params.stride.extend(stride)
    return g.add_node(name, pb.Convolution3d, [x, w], [dims], x.shape.layout, params=params)[0]


def _pool(op: int, input_tensor: Tensor, pool_size, stride, name: str) -> Tensor:
    g = graph_of(input_tensor)
    (x,) = g.to_layouts(op, [input_tensor])
    rows, cols, _ = _spatial(x)
    out_rows = (x.dims(rows) - pool_size[0]) // stride[0] + 1
    out_cols = (x.dims(cols) - pool_size[1]) // stride[1] + 1
    d = list(x.shape.dims)
    dims = [d[0], d[1], out_rows, out_cols] if x.shape.layout == pb.NCHW else [d[0], out_rows, out_cols, d[3]]
    params = npb.Params()
    params.pool_params.stride.extend(stride)
    params.pool_params.pool_size.extend(pool_size)
    return g.add_node(name, op, [x], [dims], x.shape.layout, params=params)[0]


def max_pool(input_tensor: Tensor, pool_size, stride, name: str = "max_pool") -> Tensor:
    return _pool(pb.MaxPooling, input_tensor, pool_size, stride, name)


def avg_pool(input_tensor: Tensor, pool_size, stride, name: str = "avg_pool") -> Tensor:
    """Average pooling (both runtimes implement it; SMAUG's frontend has no wrapper)."""
    return _pool(pb.AveragePooling, input_tensor, pool_size, stride, name)


def mat_mul(input_tensor: Tensor, weight_tensor: Tensor, activation: str | None = None,
            activation_params: dict | None = None, name: str = "mat_mul") -> Tensor:
    """Inner product ``x · Wᵀ`` (no bias); a 4-D input is flattened in its storage order."""
    g = graph_of(input_tensor, weight_tensor)
    x, w = g.to_layouts(pb.InnerProduct, [input_tensor, weight_tensor])
    act_index, neuron_index = (1, 0) if w.shape.layout == pb.NC else (0, 1)
    if len(x.shape.dims) != 2 or len(w.shape.dims) != 2 or x.dims(1) != w.dims(act_index):
        raise InputError(f"{name}: cannot multiply {x} by weights {w}")
    return g.add_node(name, pb.InnerProduct, [x, w], [[x.dims(0), w.dims(neuron_index)]], pb.NC,
                      params=_params(activation, activation_params))[0]


def batch_norm(input_tensor: Tensor, mean_tensor: Tensor, var_tensor: Tensor, gamma_tensor: Tensor,
               beta_tensor: Tensor, activation: str | None = None, activation_params: dict | None = None,
               name: str = "batch_norm") -> Tensor:
    """``(x − mean) · var · gamma + beta``; ``var`` must already be 1/sqrt(σ² + ε) (SMAUG's convention)."""
    stats = [mean_tensor, var_tensor, gamma_tensor, beta_tensor]
    g = graph_of(input_tensor, *stats)
    if any(len(t.shape.dims) != 2 for t in stats):
        raise InputError(f"{name}: mean, var, gamma and beta must be 2-D [1, C] tensors")
    post_fc = len(input_tensor.shape.dims) == 2
    x = input_tensor if post_fc else g.to_layouts(pb.BatchNorm, [input_tensor])[0]
    return g.add_node(name, pb.BatchNorm, [x, *stats], [list(x.shape.dims)], pb.NC if post_fc else x.shape.layout,
                      params=_params(activation, activation_params))[0]


def _standalone(kind: str, input_tensor: Tensor, name: str, params: dict | None = None) -> Tensor:
    g = graph_of(input_tensor)
    op, defaults = ACTIVATIONS[kind]
    x = g.to_layouts(op, [input_tensor])[0] if op == pb.Softmax else input_tensor
    node_params = None
    if defaults:
        node_params = npb.Params()
        node_params.act_params.CopyFrom(activation_params(kind, params, fused=False))
    return g.add_node(name, op, [x], [list(x.shape.dims)], pb.X, params=node_params)[0]


def relu(input_tensor: Tensor, name: str = "relu") -> Tensor:
    return _standalone("relu", input_tensor, name)


def lrelu(input_tensor: Tensor, slope: float = 0.2, name: str = "lrelu") -> Tensor:
    """Leaky ReLU. Note: SMAUG's runtime ignores a standalone node's slope and uses 0.1 (quirk Q1)."""
    return _standalone("lrelu", input_tensor, name, {"slope": slope})


def elu(input_tensor: Tensor, alpha: float = 0.1, name: str = "relu") -> Tensor:
    """ELU. The default node name is "relu", as in SMAUG's frontend (so files match its own)."""
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


#: activation name → the op building it standalone (what ``LSTM(activation=...)`` applies)
ACTIVATION_OPS = {"relu": relu, "lrelu": lrelu, "elu": elu, "selu": selu, "tanh": tanh, "hard_tanh": hard_tanh,
                  "sigmoid": sigmoid, "softmax": softmax}
