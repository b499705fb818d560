"""Tensor ops in SMAUG's frontend style: reorder, flatten, concat, split, reshape, repeat, padding."""

from __future__ import annotations

import numpy as np

from ..errors import InputError
from ..protos.smaug import smaug_types_pb2 as pb
from .graph import Tensor, graph_of, reorder_tensor


def reorder(input_tensor: Tensor, target_layout: int, name: str = "reorder") -> Tensor:
    """Layout change (NCHW↔NHWC, NTC↔NCT, NC↔CN) or flatten (4-D → NC, storage order kept)."""
    g = graph_of(input_tensor)
    t = g.operand(input_tensor)
    return reorder_tensor(g, t, target_layout, name)


def flatten(input_tensor: Tensor, name: str = "reorder") -> Tensor:
    return reorder(input_tensor, pb.NC, name)


def concat(input_tensors: list[Tensor], axis: int, name: str = "concat") -> Tensor:
    g = graph_of(*input_tensors)
    ts = [g.operand(t) for t in input_tensors]
    dims = list(ts[0].dims)
    dims[axis] = sum(t.dims[axis] for t in ts)
    node, (out,) = g.add_node(pb.Concat, name, ts, [(dims, ts[0].data_layout)])
    node.params.concat_params.concat_axis = axis
    return out


def split(input_tensor: Tensor, num_or_size_splits, axis: int = 0, name: str = "split") -> list[Tensor]:
    g = graph_of(input_tensor)
    t = g.operand(input_tensor)
    if isinstance(num_or_size_splits, int):
        if t.dims[axis] % num_or_size_splits:
            raise InputError(f"{name}: dim {t.dims[axis]} does not split into {num_or_size_splits}")
        sizes = [t.dims[axis] // num_or_size_splits] * num_or_size_splits
    else:
        sizes = [int(s) for s in num_or_size_splits]
    outputs = []
    for s in sizes:
        dims = list(t.dims)
        dims[axis] = s
        outputs.append((dims, t.data_layout))
    node, outs = g.add_node(pb.Split, name, [t], outputs)
    node.params.split_params.split_axis = axis
    return outs


def reshape(input_tensor: Tensor, shape, layout: int, name: str = "reshape") -> Tensor:
    g = graph_of(input_tensor)
    t = g.operand(input_tensor)
    if int(np.prod(shape)) != int(np.prod(t.dims)):
        raise InputError(f"{name}: cannot reshape {t.dims} to {list(shape)}")
    return g.add_node(pb.Reshape, name, [t], [([int(d) for d in shape], layout)])[1][0]


def repeat(input_tensor: Tensor, multiples, name: str = "repeat") -> Tensor:
    g = graph_of(input_tensor)
    t = g.operand(input_tensor)
    dims = [d * int(m) for d, m in zip(t.dims, multiples)]
    return g.add_node(pb.Repeat, name, [t], [(dims, t.data_layout)])[1][0]


def padding(input_tensor: Tensor, padding_size, name: str = "padding") -> Tensor:
    """Zero padding; ``padding_size`` = [d0_begin, d0_end, d1_begin, d1_end, …] in layout order."""
    g = graph_of(input_tensor)
    t = g.operand(input_tensor)
    sizes = [int(p) for p in padding_size]
    dims = [d + sizes[2 * i] + sizes[2 * i + 1] for i, d in enumerate(t.dims)]
    node, (out,) = g.add_node(pb.Padding, name, [t], [(dims, t.data_layout)])
    node.params.padding_params.padding_size.extend(sizes)
    return out
