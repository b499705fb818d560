"""Prototext in and out: era detection by strict trial parsing, nnbridge's header lines.

LBANN parses prototext with C++ ``TextFormat::Parse``, where an unknown field is
fatal; protobuf's Python text parser is just as strict, so a file is accepted
exactly when one of the schemas in ``nnbridge/protos/lbann`` accepts it. Era C
(v0.103+, the target) is tried first, then the legacy Era A schema (≤ v0.99);
a file neither accepts is rejected with both diagnostics, each naming the line
and the offending field (specs/lbann-format.md §1, §10).

LBANN files carry no input shapes and no list of graph outputs; nnbridge
records them in ``# nnbridge-…`` comment lines, which LBANN ignores.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field
from pathlib import Path

from google.protobuf import text_format
from google.protobuf.message import Message

from ...errors import FormatError
from ...protos.lbann import lbann_pb2, lbann_v099_pb2

ERA_C = "C"
ERA_A = "A"


@dataclass
class Header:
    """What nnbridge wrote into the comment header of a prototext (all optional)."""

    inputs: dict[str, tuple[tuple[int, ...], str]] = field(default_factory=dict)  # name → (dims, dtype)
    outputs: list[str] = field(default_factory=list)


_INPUT_LINE = re.compile(r"^#\s*nnbridge-input:\s*(\S+)\s+(\S*)\s+(\w+)\s*$")
_OUTPUT_LINE = re.compile(r"^#\s*nnbridge-output:\s*(\S+)\s*$")


def read_text(path: Path) -> str:
    if not path.is_file():
        raise FormatError(f"{path}: no such file")
    try:
        return path.read_text(encoding="utf-8")
    except UnicodeDecodeError:
        raise FormatError(f"{path}: not a text file (LBANN .prototext is protobuf text format)") from None


def parse(text: str, source: str) -> tuple[Message, str]:
    """Parse with the Era C schema, else Era A; returns (message, era)."""
    errors = {}
    for era, cls, label in ((ERA_C, lbann_pb2.LbannPB, "Era C (LBANN v0.103 and later)"),
                            (ERA_A, lbann_v099_pb2.LbannPB, "legacy Era A (LBANN v0.98–v0.99)")):
        try:
            return text_format.Parse(text, cls()), era
        except text_format.ParseError as exc:
            errors[label] = _describe(exc)
    listing = "; ".join(f"as {label}: {msg}" for label, msg in errors.items())
    raise FormatError(f"{source}: not an LBANN model of any supported schema era (stale or unknown "
                      f"era, or not LBANN) — {listing}")


def _describe(exc: text_format.ParseError) -> str:
    """'line 2, column 3: Message type "lbann_data.Model" has no field named "type".'"""
    message = str(exc)
    line, column = exc.GetLine(), exc.GetColumn()
    message = re.sub(r"^\d+:\d+\s*:\s*", "", message)
    return f"line {line}, column {column}: {message}" if line else message


def parse_header(text: str) -> Header:
    header = Header()
    for line in text.splitlines():
        if not line.startswith("#"):
            if line.strip():
                break
            continue
        if m := _INPUT_LINE.match(line):
            dims = tuple(int(d) for d in m.group(2).split("x") if d) if m.group(2) != "-" else ()
            header.inputs[m.group(1)] = (dims, m.group(3))
        elif m := _OUTPUT_LINE.match(line):
            header.outputs.append(m.group(1))
    return header


def format_header(version: str, header: Header) -> str:
    lines = [f"# Written by nnbridge for LBANN {version} (Era C schema). LBANN files do not store",
             "# input shapes; the nnbridge-* lines below record them (per sample, no batch dim)."]
    for name, (dims, dtype) in header.inputs.items():
        lines.append(f"# nnbridge-input: {name} {'x'.join(map(str, dims)) or '-'} {dtype}")
    lines.extend(f"# nnbridge-output: {name}" for name in header.outputs)
    return "\n".join(lines) + "\n"


def to_text(message: Message) -> str:
    """LBANN's own printing convention: fields in field-number order (§2)."""
    return text_format.MessageToString(message, use_index_order=True)
