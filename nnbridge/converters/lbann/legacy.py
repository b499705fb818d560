"""Era A (LBANN ≤ v0.99) → Era C messages, so one reader serves both eras.

Era A differs in syntax, not meaning (specs/lbann-format.md §11.2): lists are
space-separated strings, layer kinds are plain fields, convolutions use
``num_output_channels``/``conv_dims_i`` …, ``has_bias`` defaults to false,
initializers sit directly in ``weights``, ``mini_batch_size`` lives in ``model``,
and one ``input`` layer feeds its children (in order) samples and labels.
Only what the graph needs is carried over (layers, weights, mini-batch size).
"""

from __future__ import annotations

from google.protobuf.message import Message

from ...errors import FormatError
from ...protos.lbann import lbann_pb2, lbann_v099_pb2

#: Era A layer kinds that keep their name and have no fields to translate.
_SAME = {"relu": "relu", "softmax": "softmax", "identity": "identity", "split": "split", "sum": "sum",
         "hadamard": "hadamard", "log_softmax": "log_softmax", "cross_entropy": "cross_entropy",
         "mean_squared_error": "mean_squared_error", "categorical_accuracy": "categorical_accuracy"}
#: Era A activation/math layers that are operators in Era C.
_OPERATORS = {"sigmoid": "SigmoidOperator", "tanh": "TanhOperator", "add": "AddOperator",
              "multiply": "MultiplyOperator"}
_INPUT_FIELDS = ("samples", "labels")
_INITIALIZERS = ("constant_initializer", "uniform_initializer", "normal_initializer",
                 "glorot_normal_initializer", "glorot_uniform_initializer", "he_normal_initializer",
                 "he_uniform_initializer", "lecun_normal_initializer", "lecun_uniform_initializer")


def split_list(text: str) -> list[str]:
    return text.split()


def ints(text: str, source: str, what: str) -> list[int]:
    try:
        return [int(t) for t in text.split()]
    except ValueError:
        raise FormatError(f"{source}: {what} '{text}' is not a list of integers") from None


def upgrade(old: lbann_v099_pb2.LbannPB, source: str) -> lbann_pb2.LbannPB:
    new = lbann_pb2.LbannPB()
    new.trainer.mini_batch_size = old.model.mini_batch_size
    new.model.name = old.model.name
    new.model.num_epochs = old.model.num_epochs
    layers = list(old.model.layer)
    input_children = _input_children(layers, source)
    for layer in layers:
        if layer.name in input_children or layer.HasField("input"):
            continue  # replaced by Era C input layers below
        new.model.layer.append(_upgrade_layer(layer, source))
    for layer in layers:
        if layer.HasField("input"):
            for field_name, child in zip(_INPUT_FIELDS, _children(layer, layers)):
                new.model.layer.add(name=child).input.data_field = field_name
    for w in old.model.weights:
        new.model.weights.append(_upgrade_weights(w, source))
    return new


def _children(layer, layers) -> list[str]:
    if layer.children.strip():
        return split_list(layer.children)
    return [other.name for other in layers if layer.name in split_list(other.parents)]


def _input_children(layers, source: str) -> set[str]:
    """Era A input children (``split`` layers fed by the input alone) become Era C input layers."""
    by_name = {layer.name: layer for layer in layers}
    found = set()
    for layer in layers:
        if layer.HasField("input"):
            for child in _children(layer, layers)[: len(_INPUT_FIELDS)]:
                c = by_name.get(child)
                if c is None or not c.HasField("split") or split_list(c.parents) != [layer.name]:
                    raise FormatError(f"{source}: layer '{child}': an Era A input layer's children must be "
                                      f"split layers fed by it alone")
                found.add(child)
    return found


def _kind(layer: Message) -> str:
    kinds = [f.name for f, _ in layer.ListFields() if f.message_type is not None and f.name != "motif_layer"]
    if len(kinds) != 1:
        what = "no layer type" if not kinds else f"several layer types ({', '.join(kinds)})"
        raise FormatError(f"layer '{layer.name}' has {what}")
    return kinds[0]


def _upgrade_layer(old: Message, source: str) -> Message:
    new = lbann_pb2.Layer(name=old.name)
    new.parents.extend(split_list(old.parents))
    new.children.extend(split_list(old.children))
    new.weights.extend(split_list(old.weights))
    new.data_layout = old.data_layout
    new.device_allocation = old.device_allocation
    kind = _kind(old)
    params = getattr(old, kind)
    where = f"{source}: layer '{old.name}'"
    if kind in _SAME:
        getattr(new, _SAME[kind]).SetInParent()
    elif kind in _OPERATORS:
        new.operator_layer.ops.add().parameters.Pack(getattr(lbann_pb2, _OPERATORS[kind])())
    elif kind in ("convolution", "deconvolution"):
        _upgrade_conv(params, getattr(new, kind), where)
    elif kind == "pooling":
        p = new.pooling
        p.pool_mode, p.num_dims, p.has_vectors = params.pool_mode, params.num_dims, params.has_vectors
        p.pool_dims_i, p.pool_pads_i, p.pool_strides_i = params.pool_dims_i, params.pool_pads_i, params.pool_strides_i
        p.pool_dims.extend(ints(params.pool_dims, where, "pool_dims"))
        p.pool_pads.extend(ints(params.pool_pads, where, "pool_pads"))
        p.pool_strides.extend(ints(params.pool_strides, where, "pool_strides"))
    elif kind == "fully_connected":
        fc = new.fully_connected
        fc.num_neurons, fc.has_bias, fc.transpose = params.num_neurons, params.has_bias, params.transpose
    elif kind == "batch_normalization":
        bn = new.batch_normalization
        bn.decay, bn.epsilon = params.decay, params.epsilon
    elif kind == "local_response_normalization":
        new.local_response_normalization.CopyFrom(lbann_pb2.Layer.LocalResponseNormalization(
            window_width=params.window_width, lrn_alpha=params.lrn_alpha, lrn_beta=params.lrn_beta,
            lrn_k=params.lrn_k))
    elif kind == "dropout":
        new.dropout.keep_prob = params.keep_prob
    elif kind == "elu":
        new.elu.alpha = params.alpha
    elif kind == "leaky_relu":
        new.leaky_relu.negative_slope = params.negative_slope
    elif kind == "concatenation":
        new.concatenation.axis = params.axis
    elif kind == "slice":
        new.slice.axis = params.axis
        new.slice.slice_points.extend(ints(params.slice_points, where, "slice_points"))
    elif kind == "reshape":
        new.reshape.dims.extend(ints(params.dims, where, "dims"))
    elif kind == "top_k_categorical_accuracy":
        new.top_k_categorical_accuracy.k = params.k
    else:  # pragma: no cover - every Era A kind in the schema is handled above
        raise FormatError(f"{where}: Era A layer type '{kind}' is not supported")
    return new


def _upgrade_conv(old: Message, new: Message, where: str) -> None:
    new.num_dims = old.num_dims
    new.out_channels = old.num_output_channels
    if old.has_vectors:
        new.kernel_size.extend(ints(old.conv_dims, where, "conv_dims"))
        new.padding.extend(ints(old.conv_pads, where, "conv_pads"))
        new.stride.extend(ints(old.conv_strides, where, "conv_strides"))
        new.dilation.extend(ints(old.conv_dilations, where, "conv_dilations"))
    else:
        new.kernel_size.append(old.conv_dims_i)
        new.padding.append(old.conv_pads_i)
        new.stride.append(old.conv_strides_i or 1)
        new.dilation.append(old.conv_dilations_i or 1)
    if old.num_groups:
        new.groups.value = old.num_groups
    new.has_bias.value = old.has_bias  # Era A: omitted means no bias (Era C: unset means true)


def _upgrade_weights(old: Message, source: str) -> Message:
    new = lbann_pb2.Weights(name=old.name)
    if old.HasField("value_initializer"):
        try:
            values = [float(v) for v in old.value_initializer.values.split()]
        except ValueError:
            raise FormatError(f"{source}: weights '{old.name}': value_initializer values are not numbers") from None
        new.initializer.value_initializer.values.extend(values)
    for name in _INITIALIZERS:
        if old.HasField(name):
            target = getattr(new.initializer, name)
            target.SetInParent()
            for f, v in getattr(old, name).ListFields():
                setattr(target, f.name, v)
    if old.HasField("optimizer") and not old.optimizer.ListFields():
        new.optimizer.no_optimizer.SetInParent()
    return new
