"""Schemas of nnbridge's own ops (domain ``nnbridge``), shared by converters,
passes and backends. Each op documents its semantics and its ONNX export.
"""

from __future__ import annotations

from .schema import NNBRIDGE_DOMAIN, OpSchema, PatternKind, register_schema

#: Reorder(x) {perm, src_layout, dst_layout}: a layout change (a transpose whose
#: meaning is "same tensor, other layout"); exports to ONNX Transpose.
REORDER = register_schema(OpSchema(
    "Reorder", NNBRIDGE_DOMAIN, 1, 1, 1, 1,
    {"perm": None, "src_layout": None, "dst_layout": None}, frozenset({"perm"}),
    PatternKind.INJECTIVE, "layout change (exports to Transpose)",
))

#: Repeat(x) {multiples}: SMAUG's broadcast materialisation; exports to ONNX Tile.
REPEAT = register_schema(OpSchema(
    "Repeat", NNBRIDGE_DOMAIN, 1, 1, 1, 1, {"multiples": None}, frozenset({"multiples"}),
    PatternKind.INJECTIVE, "SMAUG Repeat (exports to Tile)",
))

#: Fused(inputs…) {body: Graph, kind: str}: a fused group that a backend runs as one
#: kernel; the body's inputs bind positionally; exports by inlining the body.
FUSED = register_schema(OpSchema(
    "Fused", NNBRIDGE_DOMAIN, 0, 2**31, 1, 2**31, {"body": None, "kind": "", "anchor": ""},
    frozenset({"body"}), PatternKind.OPAQUE, "fused group (exports inlined)",
))
