"""Deterministic example inputs generated from a graph's declared inputs."""

from __future__ import annotations

from collections.abc import Mapping

import numpy as np

from .errors import InputError
from .fileio import check_numel
from .ir import DType, Graph, TypeKind


def concrete_shape(name: str, shape, dims: Mapping[str, int]) -> tuple[int, ...]:
    if shape is None:
        raise InputError(f"input '{name}' has no declared shape; pass it with --input")
    out = []
    for d in shape:
        if isinstance(d, int):
            out.append(d)
        elif isinstance(d, str) and d in dims:
            out.append(int(dims[d]))
        else:
            raise InputError(
                f"input '{name}' has symbolic dim '{d}' in {list(shape)}; set it with --dim {d}=VALUE"
            )
    return tuple(out)


def random_inputs(graph: Graph, seed: int = 0, dims: Mapping[str, int] | None = None,
                  given: Mapping[str, np.ndarray] | None = None) -> dict[str, np.ndarray]:
    """Values for every graph input not in ``given``: N(0,1) floats, small ints, random bools."""
    rng = np.random.default_rng(seed)
    dims = dims or {}
    feeds = dict(given or {})
    for v in graph.inputs:
        if v.name in feeds:
            continue
        if v.type.kind is not TypeKind.TENSOR:
            raise InputError(f"input '{v.name}' is a {v.type.kind.value}; pass it explicitly")
        shape = concrete_shape(v.name, v.type.shape, dims)
        check_numel(shape, f"input '{v.name}'")
        dtype = v.type.dtype or DType.FLOAT32
        if dtype.is_float:
            feeds[v.name] = rng.standard_normal(shape).astype(dtype.numpy)
        elif dtype is DType.BOOL:
            feeds[v.name] = rng.random(shape) < 0.5
        elif dtype.is_int:
            feeds[v.name] = rng.integers(0, 10, shape).astype(dtype.numpy)
        else:
            raise InputError(f"input '{v.name}' has dtype {dtype.short}; pass it explicitly")
    return feeds
