"""SMAUG ↔ IR: ``<name>_topo.pbtxt`` + ``<name>_params.pb`` (specs/smaug-format.md).

Registered as the ``smaug`` format (file suffix ``_topo.pbtxt``). Load options:
``inputs``, ``compute_dtype``, ``synthetic_scale``, ``lrelu``, ``activations``; save options:
``smaug_backend`` ("Reference" | "SMV"), ``smaug_mem_policy``, ``smaug_inputs``.
"""

from __future__ import annotations

from .. import Format, register_format
from . import export_control, export_ops, export_rnn, export_tensor, import_ops  # noqa: F401 - fill the op tables
from .files import model_paths, read_params, read_topology, write_model
from .reader import graph_from_proto, load_inputs, load_smaug
from .writer import graph_to_smaug, prepare, save_smaug

__all__ = ["graph_from_proto", "load_inputs", "load_smaug", "model_paths", "read_params",
           "read_topology", "write_model", "graph_to_smaug", "save_smaug"]

register_format(Format(
    "smaug", ("_topo.pbtxt",),
    load=load_smaug,
    save=save_smaug,
    description="SMAUG model: <name>_topo.pbtxt + <name>_params.pb (Reference or SMV backend)",
    supported_ops=export_ops.supported_ops,
    load_options=frozenset({"inputs", "compute_dtype", "synthetic_scale", "lrelu", "activations"}),
    static_shapes="all",
    written=lambda path: list(model_paths(path)),
    prepare=prepare,
    save_options=frozenset({"smaug_backend", "smaug_mem_policy", "smaug_inputs", "smaug_allow_overflow"}),
))
