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

import numpy as np
from google.protobuf import text_format
from google.protobuf.message import Message

from ...base.errors import FormatError
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
    fast = _parse_with_bulk_values(text)
    if fast is not None:
        return fast, ERA_C
    errors = {}
    for era, cls, label in ((ERA_C, lbann_pb2.LbannPB, "Era C (LBANN v0.103 and later)"),
                            (ERA_A, lbann_v099_pb2.LbannPB, "legacy Era A (LBANN v0.98–v0.99)")):
        try:
            return text_format.Parse(text, cls()), era
        except text_format.ParseError as exc:
            errors[label] = _describe(exc)
    listing = "; ".join(f"as {label}: {msg}" for label, msg in errors.items())
    if mark := era_b_mark(text):
        raise FormatError(f"{source}: an Era B LBANN file (v0.100–v0.102: {mark}); nnbridge reads Era C "
                          f"(v0.103 and later) and Era A (≤ v0.99) — write it again with LBANN v0.103 or later, "
                          f"whose frontend writes Era C ({listing})")
    raise FormatError(f"{source}: not an LBANN model of any supported schema era (stale or unknown "
                      f"era, or not LBANN) — {listing}")


#: What only Era B files (LBANN v0.100–v0.102) write (specs/lbann-format.md §11.1), as (pattern, what)
_ERA_B = [
    (re.compile(r"^\s*trainer\s*\{", re.M), None),  # Era B and C have a trainer, Era A none
    (re.compile(r"\b(num_output_channels|conv_dims_i|conv_pads_i|conv_strides_i)\s*:"),
     "convolution fields {0} (Era C: out_channels, kernel_size, padding, stride)"),
    (re.compile(r"(?<![\w.])(sigmoid|tanh|add|multiply|subtract|exp|log|square|sqrt|abs)\s*\{"),
     "element-wise '{0}' as a layer type (Era C: operator_layer)"),
    (re.compile(r"^\s*parents\s*:\s*\"[^\"]*\s[^\"]*\"", re.M), "space-separated parents (Era C: one per line)"),
]


def era_b_mark(text: str) -> str | None:
    """The first Era B construct in a file that has a trainer, else None."""
    trainer, *marks = _ERA_B
    if not trainer[0].search(text):
        return None
    for pattern, what in marks:
        if found := pattern.search(text):
            return what.format(found.group(1) if found.groups() else "")
    return None


# Inline weights are long runs of "values: <number>" lines, which protobuf's pure-Python
# text tokenizer reads at a few µs each. Such blocks are cut out and converted with
# numpy; the rest of the file still goes through the strict parser (with the same line
# numbers), and the result is used only if every value_initializer is accounted for.
_VALUES_BLOCK = re.compile(r"value_initializer\s*\{((?:\s*values\s*:\s*[-+0-9.eE]+)+)\s*\}")
_VALUE = re.compile(r"values\s*:\s*([-+0-9.eE]+)")


def _parse_with_bulk_values(text: str) -> Message | None:
    blocks: list[np.ndarray] = []

    def cut(match: re.Match) -> str:
        try:
            blocks.append(np.array(_VALUE.findall(match.group(1)), dtype=np.float64).astype(np.float32))
        except ValueError:
            return match.group(0)
        return "value_initializer {" + "\n" * match.group(0).count("\n") + "}"

    stripped = _VALUES_BLOCK.sub(cut, text)
    if not blocks:
        return None
    try:
        message = text_format.Parse(stripped, lbann_pb2.LbannPB())
    except text_format.ParseError:
        return None
    targets = [w.initializer.value_initializer for w in message.model.weights
               if w.initializer.WhichOneof("initializer_type") == "value_initializer"]
    if len(targets) != len(blocks) or text.count("value_initializer") != len(blocks) or \
            any(len(t.values) or len(t.values_d) for t in targets):
        return None
    for target, values in zip(targets, blocks):
        target.values.extend(values)
    return message


def _describe(exc: text_format.ParseError) -> str:
    """'line 2, column 3: Message type "lbann_data.Model" has no field named "type".'"""
    message = str(exc)
    line, column = exc.GetLine(), exc.GetColumn()
    message = re.sub(r"^\d+:\d+\s*:\s*", "", message)
    return f"line {line}, column {column}: {message}" if line else message


def parse_header(text: str, source: str = "<prototext>") -> Header:
    header = Header()
    for number, line in enumerate(text.splitlines(), 1):
        if not line.startswith("#"):
            if line.strip():
                break
            continue
        if m := _INPUT_LINE.match(line):
            parts = m.group(2).split("x") if m.group(2) != "-" else []
            if not all(p.isascii() and p.isdigit() for p in parts):
                raise FormatError(f"{source}: line {number}: the nnbridge-input dims of '{m.group(1)}' are "
                                  f"'{m.group(2)[:40]}'; write numbers joined by x (3x32x32), or - for a scalar")
            header.inputs[m.group(1)] = (tuple(int(p) for p in parts), m.group(3))
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


def to_text(message: Message, values: list[np.ndarray] | None = None) -> str:
    """LBANN's own printing convention: fields in field-number order (§2).

    ``values`` fills the empty ``value_initializer {}`` blocks in order; they are
    formatted with numpy (9 significant digits round-trip float32 exactly) because
    protobuf's printer takes seconds per million values.
    """
    text = text_format.MessageToString(message, use_index_order=True)
    if not values:
        return text
    queue = iter(values)

    def fill(match: re.Match) -> str:
        indent = match.group(1)
        array = next(queue, None)
        if array is None or not array.size:
            return match.group(0)
        body = f"\n{indent}  values: ".join(f"{v:.9g}" for v in np.asarray(array, np.float32).tolist())
        return f"{indent}value_initializer {{\n{indent}  values: {body}\n{indent}}}"

    return re.sub(r"(?m)^( *)value_initializer \{\n\1\}", fill, text)
