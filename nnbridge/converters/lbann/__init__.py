"""LBANN prototext ↔ IR, registered as the ``lbann`` format (``.prototext``).

Read: Era C (LBANN v0.103+) and legacy Era A (≤ v0.99) files, with ``input_shapes``
giving each input layer's per-sample dims (no batch dim). Write: Era C for
``lbann_version`` 0.103, 0.104 (default) or develop, weights inline or as ``.npy``.
See docs/lbann.md and specs/lbann-format.md.
"""

from __future__ import annotations

from .. import Format, register_format
from .exporting import EXPORTERS
from .reader import build_graph, read_prototext
from .writer import graph_to_lbann, notes, prepared, save_prototext, written_files

__all__ = ["build_graph", "read_prototext", "graph_to_lbann", "save_prototext"]


def _load(path, *, input_shapes=None, batch_size=None, lbann_training_layers=False, lbann_trust_paths=False,
          lbann_slice_points=None, **_):
    return read_prototext(path, input_shapes=input_shapes, batch_size=batch_size,
                          training_layers=lbann_training_layers, trust_paths=lbann_trust_paths,
                          slice_points=lbann_slice_points)


register_format(Format(
    "lbann", (".prototext",),
    load=_load,
    save=save_prototext,
    description="LBANN model prototext (Era C; legacy Era A read); weights inline or as .npy",
    supported_ops=lambda: set(EXPORTERS),
    load_options=frozenset({"input_shapes", "batch_size", "lbann_training_layers", "lbann_trust_paths",
                            "lbann_slice_points"}),
    static_shapes="per-sample",
    written=written_files,
    notes=notes,
    prepare=prepared,
    save_options=frozenset({"lbann_weights", "lbann_version", "lbann_npy_paths", "lbann_train"}),
))
