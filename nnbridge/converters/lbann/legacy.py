"""Era A (LBANN ≤ v0.99) → Era C messages, so one reader serves both eras.

Era A differs in syntax, not meaning (specs/lbann-format.md §11.2): lists are
space-separated strings, layer kinds are plain fields, convolutions use
``num_output_channels``/``conv_dims_i`` …, ``has_bias`` defaults to false,
initializers sit directly in ``weights``, ``mini_batch_size`` lives in ``model``,
and one ``input`` layer feeds its children (in order) samples and labels.
Only what the graph needs is carried over (layers, weights, mini-batch size).
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass

from google.protobuf.message import Message

from ...base.errors import FormatError
from ...protos.lbann import lbann_pb2, lbann_v099_pb2
from .import_context import reader_slice_points

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


def upgrade(old: lbann_v099_pb2.LbannPB, source: str,
            slice_points: Mapping[str, Sequence[int]] | None = None) -> lbann_pb2.LbannPB:
    """The Era C experiment of an Era A file; ``slice_points`` are what the data reader would give
    (``get_slice_points_from_reader``, ``get_num_neurons_of_slice_from_reader``)."""
    new = lbann_pb2.LbannPB()
    new.trainer.mini_batch_size = old.model.mini_batch_size
    new.model.name = old.model.name
    new.model.num_epochs = old.model.num_epochs
    layers = list(old.model.layer)
    inputs = _input_layers(layers)
    replaced = {name for name, _, _ in inputs.values()}
    fields: dict[str, str] = {}  # data field → the Era C input layer that reads it (the first such)
    for name, field_name, _ in inputs.values():
        fields.setdefault(field_name, name)
    for layer in layers:
        if layer.name in replaced or layer.HasField("input"):
            continue  # replaced by Era C input layers below
        upgraded = _upgrade_layer(layer, source, fields, slice_points)
        for i, parent in enumerate(upgraded.parents):  # read from the input layer: its field's layer
            if (parent, layer.name) in inputs:
                upgraded.parents[i] = inputs[parent, layer.name][0]
        new.model.layer.append(upgraded)
    for name, field_name, _ in inputs.values():
        new.model.layer.add(name=name).input.data_field = field_name
    for w in old.model.weights:
        new.model.weights.append(_upgrade_weights(w, source))
    return new


def _children(layer, layers) -> list[str]:
    if layer.children.strip():
        return split_list(layer.children)
    return [other.name for other in layers if layer.name in split_list(other.parents)]


def _floats(text: str, source: str, what: str) -> list[float]:
    try:
        return [float(t) for t in text.split()]
    except ValueError:
        raise FormatError(f"{source}: {what} '{text}' is not a list of numbers") from None


def _input_layers(layers) -> dict[tuple[str, str], tuple[str, str, str]]:
    """(Era A input layer, child) → (Era C input layer, data field, child): an input layer gives
    its children samples, then labels. A split or identity child fed by it alone becomes the Era
    C input layer of that field; any other child reads a new input layer ``<input>_<field>``."""
    by_name = {layer.name: layer for layer in layers}
    found = {}
    for layer in layers:
        if layer.HasField("input"):
            for field_name, child in zip(_INPUT_FIELDS, _children(layer, layers)):
                c = by_name.get(child)
                passes = c is not None and (c.HasField("split") or c.HasField("identity")) and \
                    split_list(c.parents) == [layer.name]
                found[layer.name, child] = (child if passes else f"{layer.name}_{field_name}", field_name, child)
    return found


def _kind(layer: Message) -> str:
    kinds = [f.name for f, _ in layer.ListFields() if f.message_type is not None and f.name != "motif_layer"]
    if len(kinds) != 1:
        what = "no layer type" if not kinds else f"several layer types ({', '.join(kinds)})"
        raise FormatError(f"layer '{layer.name}' has {what}")
    return kinds[0]


#: Era A layer fields the upgrade carries over (besides the layer type's message)
_LAYER_FIELDS = {"name", "parents", "children", "weights", "data_layout", "device_allocation", "hint_layer",
                 "freeze", "num_neurons_from_data_reader"}
#: Era A fully connected fields that size the layer from the data reader → the input it sizes from
_FROM_READER = {"get_input_dimension_from_reader": "samples", "num_neurons_is_num_labels": "labels"}


def _upgrade_layer(old: Message, source: str, fields: dict[str, str],
                   slice_points: Mapping[str, Sequence[int]] | None) -> Message:
    """One Era A layer as Era C; sizes Era A took from the data reader become a ``hint_layer`` on
    the input layer of that field (LBANN then gives the layer that input's size)."""
    new = lbann_pb2.Layer(name=old.name)
    new.parents.extend(split_list(old.parents))
    new.children.extend(split_list(old.children))
    new.weights.extend(split_list(old.weights))
    new.data_layout = old.data_layout
    new.device_allocation = old.device_allocation
    new.hint_layer, new.freeze = old.hint_layer, old.freeze
    kind = _kind(old)
    params = getattr(old, kind)
    where = f"{source}: layer '{old.name}'"
    extra = [f.name for f, _ in old.ListFields() if f.name not in _LAYER_FIELDS and f.name != kind]
    if extra:
        raise FormatError(f"{where}: Era A field '{extra[0]}' has no Era C equivalent")
    sized_by = _sized_by_reader(old, kind, params, fields, where)
    if sized_by:
        new.hint_layer = fields[sized_by]
    _upgrade_params(kind, params, new, _Upgrade(where, old.hint_layer, bool(sized_by), slice_points))
    return new


def _sized_by_reader(old: Message, kind: str, params: Message, fields: dict[str, str], where: str) -> str | None:
    """The data field an Era A layer takes its size from (v0.99's reader-sized layers), if any."""
    sized_by = ["samples"] if old.num_neurons_from_data_reader else []
    if kind == "fully_connected":
        sized_by += [f for name, f in _FROM_READER.items() if getattr(params, name)]
    if not sized_by:
        return None
    if old.hint_layer or len(sized_by) > 1 or sized_by[0] not in fields:
        raise FormatError(f"{where}: takes its size from the data reader's {sized_by[0]}, which no input "
                          f"layer gives (or it names a hint_layer too)")
    return sized_by[0]


@dataclass(frozen=True)
class _Upgrade:
    """What a layer type's upgrade needs besides its two messages."""

    where: str
    hint_layer: str  # the Era A layer's own
    sized_by_reader: bool
    slice_points: Mapping[str, Sequence[int]] | None


def _upgrade_params(kind: str, params: Message, new: Message, up: _Upgrade) -> None:
    """The layer type's own message, Era A → Era C."""
    if kind in _SAME:
        getattr(new, _SAME[kind]).SetInParent()
    elif kind in _OPERATORS:
        new.operator_layer.ops.add().parameters.Pack(getattr(lbann_pb2, _OPERATORS[kind])())
    elif kind in _UPGRADES:
        _UPGRADES[kind](params, new, up)
    elif kind in _ONE_FIELD:
        setattr(getattr(new, kind), _ONE_FIELD[kind], getattr(params, _ONE_FIELD[kind]))
    elif hasattr(lbann_pb2, _camel(kind) + "Operator"):  # element-wise math: an operator in Era C
        op = getattr(lbann_pb2, _camel(kind) + "Operator")()
        _copy_fields(params, op, up.where)
        new.operator_layer.ops.add().parameters.Pack(op)
    elif kind in lbann_pb2.Layer.DESCRIPTOR.fields_by_name:  # the same layer type, its fields by name
        target = getattr(new, kind)
        target.SetInParent()
        _copy_fields(params, target, up.where)
    else:
        raise FormatError(f"{up.where}: Era A layer type '{kind}' has no Era C equivalent")


def _pooling(params: Message, new: Message, up: _Upgrade) -> None:
    p = new.pooling
    p.pool_mode, p.num_dims, p.has_vectors = params.pool_mode, params.num_dims, params.has_vectors
    p.pool_dims_i, p.pool_pads_i, p.pool_strides_i = params.pool_dims_i, params.pool_pads_i, params.pool_strides_i
    p.pool_dims.extend(ints(params.pool_dims, up.where, "pool_dims"))
    p.pool_pads.extend(ints(params.pool_pads, up.where, "pool_pads"))
    p.pool_strides.extend(ints(params.pool_strides, up.where, "pool_strides"))


def _fully_connected(params: Message, new: Message, up: _Upgrade) -> None:
    fc = new.fully_connected
    fc.num_neurons, fc.has_bias, fc.transpose = params.num_neurons, params.has_bias, params.transpose
    if up.sized_by_reader:  # v0.99 takes the reader's size instead of num_neurons
        fc.num_neurons = 0
    elif params.get_num_neurons_of_slice_from_reader:
        fc.num_neurons = _slices_size(params, up.slice_points, up.where)


def _slice(params: Message, new: Message, up: _Upgrade) -> None:
    if params.get_slice_points_from_reader_bool:
        raise FormatError(f"{up.where}: Era A field 'get_slice_points_from_reader_bool' has no Era C equivalent")
    new.slice.axis = params.axis
    new.slice.slice_points.extend(ints(params.slice_points, up.where, "slice_points"))
    new.slice.get_slice_points_from_reader = _category(params.get_slice_points_from_reader)


def _unpooling(params: Message, new: Message, up: _Upgrade) -> None:
    """Era C pairs an unpooling layer with its pooling layer as its hint_layer."""
    if up.hint_layer and up.hint_layer != params.pooling_layer:
        raise FormatError(f"{up.where}: names pooling_layer '{params.pooling_layer}' and another hint_layer")
    new.unpooling.num_dims = params.num_dims
    new.hint_layer = params.pooling_layer


def _batch_normalization(params: Message, new: Message, up: _Upgrade) -> None:
    new.batch_normalization.decay, new.batch_normalization.epsilon = params.decay, params.epsilon


def _lrn(params: Message, new: Message, up: _Upgrade) -> None:
    new.local_response_normalization.CopyFrom(lbann_pb2.Layer.LocalResponseNormalization(
        window_width=params.window_width, lrn_alpha=params.lrn_alpha, lrn_beta=params.lrn_beta, lrn_k=params.lrn_k))


#: layer types whose one Era A field keeps its name in Era C
_ONE_FIELD = {"dropout": "keep_prob", "elu": "alpha", "leaky_relu": "negative_slope", "concatenation": "axis",
              "top_k_categorical_accuracy": "k"}


#: layer types whose Era C message is built field by field (others: _SAME, _OPERATORS, by name)
_UPGRADES: dict[str, Callable[[Message, Message, _Upgrade], None]] = {
    "convolution": lambda params, new, up: _upgrade_conv(params, new.convolution, up.where),
    "deconvolution": lambda params, new, up: _upgrade_conv(params, new.deconvolution, up.where),
    "pooling": _pooling,
    "fully_connected": _fully_connected,
    "batch_normalization": _batch_normalization,
    "local_response_normalization": _lrn,
    "slice": _slice,
    "reshape": lambda params, new, up: new.reshape.dims.extend(ints(params.dims, up.where, "dims")),
    "unpooling": _unpooling,
}


def _category(name: str) -> str:
    """v0.99's reader hands the independent variables' slice points for both categories
    (src/proto/factories/layer_factory.cpp, get_slice_points_from_reader)."""
    return "independent" if name == "dependent" else name


def _slices_size(params: Message, slice_points: Mapping[str, Sequence[int]] | None, where: str) -> int:
    """v0.99's fully connected size from the reader: the summed sizes of the listed slices
    (slice i spans points i−1 … i)."""
    category = params.get_slice_points_from_reader or "independent"
    points = reader_slice_points(slice_points, _category(category), where, "get_num_neurons_of_slice_from_reader")
    indices = [int(i) for i in params.get_num_neurons_of_slice_from_reader]
    if any(not 0 < i < len(points) for i in indices):
        raise FormatError(f"{where}: get_num_neurons_of_slice_from_reader {indices} names a slice the reader's "
                          f"{len(points)} slice points {points} do not have")
    return sum(points[i] - points[i - 1] for i in indices)


def _camel(kind: str) -> str:
    return "".join(part.capitalize() for part in kind.split("_"))


def _copy_fields(old: Message, new: Message, where: str) -> None:
    """Era A fields into the Era C message's fields of the same name: space-separated lists into
    repeated numbers, plain values into wrappers (``google.protobuf.*Value``)."""
    for field, value in old.ListFields():
        target = new.DESCRIPTOR.fields_by_name.get(field.name)
        if target is None:
            raise FormatError(f"{where}: Era A field '{field.name}' has no Era C equivalent")
        if target.is_repeated and isinstance(value, str):
            floating = target.cpp_type in (target.CPPTYPE_FLOAT, target.CPPTYPE_DOUBLE)
            getattr(new, field.name).extend(_floats(value, where, field.name) if floating else
                                            ints(value, where, field.name))
        elif target.message_type is not None and target.message_type.full_name.startswith("google.protobuf."):
            getattr(new, field.name).value = value
        else:
            setattr(new, field.name, value)


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
