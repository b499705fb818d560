"""Turn whatever a user passes as a "model" (path, ModelProto, Graph) into a Graph."""

from __future__ import annotations

import os
from typing import Any

from onnx import ModelProto

from ..base.errors import InputError
from ..ir import Graph


def as_graph(model: Any, **load_options: Any) -> Graph:
    if isinstance(model, (Graph, ModelProto)):
        unread = sorted(set(load_options) - {"input_shapes", "dims"})
        if unread:
            from ..base.errors import OptionError

            raise OptionError(f"{', '.join(unread)}: not read for a model already in memory (a file's reader takes "
                              f"them); pin shapes with input_shapes or dims")
        shapes, dims = load_options.get("input_shapes"), load_options.get("dims")
        if isinstance(model, Graph) and not (shapes or dims):
            return model
        if isinstance(model, Graph):
            graph = model.copy()  # pinning never changes the caller's graph
        else:
            from ..converters.onnx import load_onnx

            graph = load_onnx(model)
        if shapes or dims:
            from ..passes.pin_shapes import pin_shapes

            pin_shapes(graph, shapes, dims)
        return graph
    if isinstance(model, (str, os.PathLike)):
        if _is_program(model) and not load_options.get("fmt"):  # a compiled RDU program: its graph
            from ..backends.rdu import load_pef

            return load_pef(model).graph
        from ..converters import load_model

        return load_model(model, **load_options)
    raise InputError(f"expected a model path, an onnx.ModelProto or an nnbridge Graph, got {type(model).__name__}")


def warn_if_synthetic(graph: Graph, path: str | os.PathLike) -> None:
    """Say so when what is written carries weights a loader made up (a SMAUG topology without params)."""
    if graph.metadata.get("nnbridge.synthetic_params") == "true":
        import warnings

        from ..base.errors import NNBridgeWarning

        warnings.warn(NNBridgeWarning(
            f"'{graph.name}' was loaded from a topology without its params file: the weights (and network "
            f"inputs) written to {os.fspath(path)} are SMAUG's random-data recipe, not trained values"), stacklevel=3)


def _is_program(path: str | os.PathLike) -> bool:
    """A ``.pef`` by name, or any zip archive (the reader then checks it is one)."""
    if os.fspath(path).lower().endswith(".pef"):
        return True
    try:
        with open(path, "rb") as fh:
            return fh.read(4) == b"PK\x03\x04"
    except OSError:
        return False
