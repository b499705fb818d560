"""Make a graph LBANN-ready: fold constant sub-expressions, ensure static shapes.

LBANN has no shape arithmetic and takes trained weights only as weights objects,
so everything computable from constants (ONNX ``Constant``, ``ConstantOfShape``
weight generators, ``Shape`` of static tensors, the Unsqueeze/Reshape/Cast
chains around them) is evaluated here with numpy before the op mapping sees
the graph (specs/lbann-format.md §8, last row). Only the small set of shape and
data-movement ops those patterns use is folded; real compute is left alone.
"""

from __future__ import annotations

from collections.abc import Callable

import numpy as np

from ...ir import DType, Graph, Node

Folder = Callable[[Node, list[np.ndarray]], np.ndarray]


def _constant(node: Node, _inputs: list[np.ndarray]) -> np.ndarray:
    for key, dtype in (("value", None), ("value_float", np.float32), ("value_floats", np.float32),
                       ("value_int", np.int64), ("value_ints", np.int64)):
        if key in node.attrs:
            return np.asarray(node.attrs[key], dtype=dtype)
    raise ValueError("unsupported Constant attribute")


def _constant_of_shape(node: Node, inputs: list[np.ndarray]) -> np.ndarray:
    value = node.attrs.get("value")
    fill = np.asarray(value).reshape(-1)[:1] if value is not None else np.zeros(1, np.float32)
    return np.full(tuple(int(d) for d in inputs[0]), fill[0], dtype=fill.dtype)


def _axes(node: Node, inputs: list[np.ndarray], rank: int) -> list[int]:
    axes = inputs[1] if len(inputs) > 1 and inputs[1] is not None else node.attrs.get("axes", [])
    return sorted(int(a) % rank for a in np.asarray(axes).reshape(-1))


def _unsqueeze(node: Node, inputs: list[np.ndarray]) -> np.ndarray:
    x = inputs[0]
    return np.expand_dims(x, tuple(_axes(node, inputs, x.ndim + len(np.asarray(inputs[1]).reshape(-1)))))


def _squeeze(node: Node, inputs: list[np.ndarray]) -> np.ndarray:
    x = inputs[0]
    if len(inputs) < 2 or inputs[1] is None:
        return np.squeeze(x)
    return np.squeeze(x, axis=tuple(_axes(node, inputs, x.ndim)))


def _reshape(node: Node, inputs: list[np.ndarray]) -> np.ndarray:
    x, shape = inputs[0], [int(d) for d in inputs[1]]
    if not node.attrs.get("allowzero", 0):
        shape = [x.shape[i] if d == 0 else d for i, d in enumerate(shape)]
    return x.reshape(shape)


def _flatten(node: Node, inputs: list[np.ndarray]) -> np.ndarray:
    x = inputs[0]
    axis = int(node.attrs.get("axis", 1)) % max(x.ndim, 1) if x.ndim else 0
    return x.reshape(int(np.prod(x.shape[:axis])), -1)


def _gather(node: Node, inputs: list[np.ndarray]) -> np.ndarray:
    return np.take(inputs[0], inputs[1].astype(np.int64), axis=int(node.attrs.get("axis", 0)))


FOLDERS: dict[str, Folder] = {
    "Constant": _constant,
    "ConstantOfShape": _constant_of_shape,
    "Identity": lambda node, inputs: inputs[0],
    "Cast": lambda node, inputs: inputs[0].astype(DType(int(node.attrs["to"])).numpy),
    "Unsqueeze": _unsqueeze,
    "Squeeze": _squeeze,
    "Reshape": _reshape,
    "Flatten": _flatten,
    "Transpose": lambda node, inputs: np.transpose(inputs[0], node.attrs.get("perm")),
    "Concat": lambda node, inputs: np.concatenate(inputs, axis=int(node.attrs["axis"])),
    "Gather": _gather,
}


def fold_constants(graph: Graph) -> None:
    """Replace foldable nodes whose inputs are all known by initializers (in place)."""
    for node in graph.nodes:
        if node.domain or node.op not in FOLDERS and node.op != "Shape":
            continue
        if node.op == "Shape":
            shape = node.inputs[0].type.shape if node.inputs[0] is not None else None
            if shape is None or not all(isinstance(d, int) for d in shape):
                continue
            start, end = node.attrs.get("start", 0), node.attrs.get("end")
            result = np.asarray(shape[start:end], dtype=np.int64)
        else:
            values = [None if v is None else v.const for v in node.inputs]
            if any(v is None and inp is not None for v, inp in zip(values, node.inputs)):
                continue
            try:
                result = np.asarray(FOLDERS[node.op](node, values))
            except (ValueError, KeyError, IndexError, TypeError):
                continue  # left in place; the op mapping reports it if LBANN cannot express it
        old = node.outputs[0]
        graph.remove_node(node)
        new = graph.add_initializer(old.name, result, exact=True)
        graph.replace_uses(old, new)


def needs_shape_inference(graph: Graph) -> bool:
    return any(not out.type.is_static for node in graph.nodes for out in node.outputs)
