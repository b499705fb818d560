"""Tensor ops in SMAUG's frontend style: reorder, flatten, concat, split, reshape, expand_dims, squeeze,
repeat, stack, unstack, padding, broadcast_inputs."""

from __future__ import annotations

import warnings

import numpy as np

from ..base.errors import InputError, NNBridgeWarning
from ..protos.smaug import smaug_node_pb2 as npb
from ..protos.smaug import smaug_types_pb2 as pb
from .graph import Tensor, graph_of, reorder_tensor


def _dims(t: Tensor) -> list[int]:
    return list(t.shape.dims)


def reorder(input_tensor: Tensor, target_layout: int, name: str = "reorder") -> Tensor:
    """Layout change (NCHW↔NHWC, NTC↔NCT, NC↔CN) or flatten (4-D → NC, storage order kept)."""
    return reorder_tensor(graph_of(input_tensor), input_tensor, target_layout, name)


def flatten(input_tensor: Tensor, name: str = "flatten") -> Tensor:
    if len(input_tensor.shape.dims) != 4:
        raise InputError(f"{name}: flatten takes a 4-D tensor, not {input_tensor}")
    return reorder(input_tensor, pb.NC, name)


def concat(input_tensors: list[Tensor], axis: int = 0, name: str = "concat") -> Tensor:
    rest = [np.delete(_dims(t), axis).tolist() for t in input_tensors]
    if any(r != rest[0] for r in rest):
        raise InputError(f"{name}: tensors {input_tensors} differ outside axis {axis}")
    dims = _dims(input_tensors[0])
    dims[axis] = sum(t.dims(axis) for t in input_tensors)
    params = npb.Params()
    params.concat_params.concat_axis = axis
    g = graph_of(*input_tensors)
    return g.add_node(name, pb.Concat, list(input_tensors), [dims], input_tensors[0].shape.layout, params=params)[0]


def split(input_tensor: Tensor, num_or_size_splits, axis: int = 0, name: str = "split") -> list[Tensor]:
    """Split along ``axis`` into equal parts (an int) or parts of the given sizes (a list). A split into
    one part is no node: the input itself is returned (with a warning, as SMAUG's frontend does)."""
    dim = input_tensor.dims(axis)
    if isinstance(num_or_size_splits, list):
        sizes = [int(s) for s in num_or_size_splits]
    else:
        if dim % num_or_size_splits:
            raise InputError(f"{name}: dim {dim} of {input_tensor} does not split into {num_or_size_splits}")
        sizes = [dim // num_or_size_splits] * num_or_size_splits
    if sum(sizes) != dim:
        raise InputError(f"{name}: sizes {sizes} do not add up to dim {dim} of {input_tensor}")
    if sizes == [1]:
        warnings.warn(f"{name}: a split into one part is no operator; the input is returned", NNBridgeWarning,
                      stacklevel=2)
        return [input_tensor]
    outputs = []
    for s in sizes:
        dims = _dims(input_tensor)
        dims[axis] = s
        outputs.append(dims)
    params = npb.Params()
    params.split_params.split_axis = axis
    g = graph_of(input_tensor)
    return g.add_node(name, pb.Split, [input_tensor], outputs, input_tensor.shape.layout, params=params)


def reshape(input_tensor: Tensor, shape, layout: int, name: str = "reshape") -> Tensor:
    if int(np.prod(shape)) != int(np.prod(_dims(input_tensor))):
        raise InputError(f"{name}: cannot reshape {input_tensor} to {list(shape)}")
    return graph_of(input_tensor).add_node(name, pb.Reshape, [input_tensor], [[int(d) for d in shape]], layout)[0]


def expand_dims(input_tensor: Tensor, axis: int = 0, name: str = "expand_dims") -> Tensor:
    """NC → NTC (``axis`` 1) or NCT (``axis`` 2) with a new dimension of size 1."""
    if input_tensor.shape.layout != pb.NC or axis not in (1, 2):
        raise InputError(f"{name}: only an NC tensor expands (at axis 1 or 2), not {input_tensor} at axis {axis}")
    dims = np.insert(_dims(input_tensor), axis, 1).tolist()
    return reshape(input_tensor, dims, pb.NCT if axis == 2 else pb.NTC, name)


def squeeze(input_tensor: Tensor, axis: int, name: str = "squeeze") -> Tensor:
    """NTC/NCT → NC without dimension ``axis``."""
    if input_tensor.shape.layout not in (pb.NTC, pb.NCT):
        raise InputError(f"{name}: only an NTC or NCT tensor squeezes to NC, not {input_tensor}")
    return reshape(input_tensor, np.delete(_dims(input_tensor), axis).tolist(), pb.NC, name)


def repeat(input_tensor: Tensor, multiples, name: str = "repeat") -> Tensor:
    if len(multiples) != len(input_tensor.shape.dims):
        raise InputError(f"{name}: {len(multiples)} multiples for the {len(input_tensor.shape.dims)} dims of "
                         f"{input_tensor}")
    dims = [d * int(m) for d, m in zip(_dims(input_tensor), multiples)]
    return graph_of(input_tensor).add_node(name, pb.Repeat, [input_tensor], [dims], input_tensor.shape.layout)[0]


def stack(input_tensor: Tensor, multiple: int, axis: int, name: str = "stack") -> Tensor:
    """Expand dimension ``axis`` and repeat it ``multiple`` times."""
    out = expand_dims(input_tensor, axis, name=name + ":expand_dims")
    multiples = [1] * len(out.shape.dims)
    multiples[axis] = multiple
    return repeat(out, multiples, name=name + ":repeat")


def unstack(input_tensor: Tensor, axis: int, name: str = "unstack") -> list[Tensor]:
    """The slices along ``axis``, that dimension squeezed out."""
    parts = split(input_tensor, input_tensor.dims(axis), axis, name=name + ":split")
    return [squeeze(t, axis, name=name + ":squeeze") for t in parts]


def broadcast_inputs(tensor_a: Tensor, tensor_b: Tensor, name: str = "broadcast_inputs") -> tuple[Tensor, Tensor]:
    """NumPy broadcasting of two same-rank tensors, materialised with Repeat nodes."""
    a, b = _dims(tensor_a), _dims(tensor_b)
    if len(a) != len(b):
        raise InputError(f"{name}: cannot broadcast {tensor_a} and {tensor_b} (ranks differ)")
    if any(x != y and 1 not in (x, y) for x, y in zip(a, b)):
        raise InputError(f"{name}: cannot broadcast {tensor_a} and {tensor_b}")
    multiples_a = [y if x == 1 and y != 1 else 1 for x, y in zip(a, b)]
    multiples_b = [x if y == 1 and x != 1 else 1 for x, y in zip(a, b)]
    if any(m != 1 for m in multiples_a):
        tensor_a = repeat(tensor_a, multiples_a, name=name + ":repeat_a")
    if any(m != 1 for m in multiples_b):
        tensor_b = repeat(tensor_b, multiples_b, name=name + ":repeat_b")
    return tensor_a, tensor_b


def padding(input_tensor: Tensor, padding_size, name: str = "padding") -> Tensor:
    """Zero padding; ``padding_size`` = [d0_begin, d0_end, d1_begin, d1_end, …] in layout order."""
    dims = _dims(input_tensor)
    sizes = [int(p) for p in padding_size]
    if len(sizes) != 2 * len(dims):
        raise InputError(f"{name}: padding_size needs {2 * len(dims)} values for {input_tensor}, not {len(sizes)}")
    out = [d + sizes[2 * i] + sizes[2 * i + 1] for i, d in enumerate(dims)]
    params = npb.Params()
    params.padding_params.padding_size.extend(sizes)
    g = graph_of(input_tensor)
    return g.add_node(name, pb.Padding, [input_tensor], [out], input_tensor.shape.layout, params=params)[0]
