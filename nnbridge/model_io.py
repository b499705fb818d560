"""Turn whatever a user passes as a "model" (path, ModelProto, Graph) into a Graph."""

from __future__ import annotations

import os
from typing import Any

from onnx import ModelProto

from .errors import InputError
from .ir import Graph


def as_graph(model: Any, **load_options: Any) -> Graph:
    if isinstance(model, Graph):
        return model
    if isinstance(model, ModelProto):
        from .converters.onnx import load_onnx

        return load_onnx(model)
    if isinstance(model, (str, os.PathLike)):
        from .converters import load_model

        return load_model(model, **load_options)
    raise InputError(f"expected a model path, an onnx.ModelProto or an nnbridge Graph, got {type(model).__name__}")
