"""nnbridge's own ops (domain ``nnbridge``): their schemas and traits, shared by converters,
passes and backends. Each op documents its semantics and its ONNX export.
"""

from __future__ import annotations

from .ops import Flag, OpTraits, register_op
from .schema import NNBRIDGE_DOMAIN, OpSchema, PatternKind

#: Reorder(x) {perm, src_layout, dst_layout}: a layout change (a transpose whose
#: meaning is "same tensor, other layout"); exports to ONNX Transpose.
REORDER = register_op(OpTraits(
    "Reorder", NNBRIDGE_DOMAIN, PatternKind.INJECTIVE, flags=frozenset({Flag.WHOLE_INPUT}),
    schema=OpSchema("Reorder", NNBRIDGE_DOMAIN, 1, 1, 1, 1,
                    {"perm": None, "src_layout": None, "dst_layout": None}, frozenset({"perm"}),
                    "layout change (exports to Transpose)"),
)).schema

#: Repeat(x) {multiples}: SMAUG's broadcast materialisation; exports to ONNX Tile.
REPEAT = register_op(OpTraits(
    "Repeat", NNBRIDGE_DOMAIN, PatternKind.INJECTIVE,
    schema=OpSchema("Repeat", NNBRIDGE_DOMAIN, 1, 1, 1, 1, {"multiples": None}, frozenset({"multiples"}),
                    "SMAUG Repeat (exports to Tile)"),
)).schema

#: Fused(inputs…) {body: Graph, kind: str}: a fused group that a backend runs as one
#: kernel; the body's inputs bind positionally; exports by inlining the body.
FUSED = register_op(OpTraits(
    "Fused", NNBRIDGE_DOMAIN, PatternKind.OPAQUE,
    schema=OpSchema("Fused", NNBRIDGE_DOMAIN, 0, 2**31, 1, 2**31, {"body": None, "kind": "", "anchor": ""},
                    frozenset({"body"}), "fused group (exports inlined)"),
)).schema
