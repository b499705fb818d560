"""ONNX ↔ IR, registered as the ``onnx`` format (``.onnx``)."""

from __future__ import annotations

from .. import Format, register_format
from . import lowering  # noqa: F401 - registers the ONNX exporters of nnbridge-domain ops
from .reader import load_onnx, model_to_graph
from .writer import graph_to_model, register_exporter, save_onnx, written_files

__all__ = ["load_onnx", "model_to_graph", "graph_to_model", "register_exporter", "save_onnx"]

register_format(Format(
    "onnx", (".onnx",),
    load=lambda path, **_: load_onnx(path),
    save=lambda graph, path, onnx_opset=None, **_: save_onnx(graph, path, onnx_opset=onnx_opset),
    description="ONNX model (any opset; normalized to the IR opset)",
    written=written_files,
    save_options=frozenset({"onnx_opset"}),
))
