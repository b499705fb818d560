"""Just enough of protobuf's wire format to move large tensors without whole-message copies.

Writers put a message's small fields through protobuf and append each large field as its header
(``field_header``) followed by the array's own bytes: protobuf merges a repeated singular message
field and appends repeated fields, so the file parses as one ordinary message. The ONNX reader
cuts large initializers out of a memory-mapped file (``split_nested``, ``cut_field``) and reads
them as arrays over the map, so neither side ever holds the weights twice.
"""

from __future__ import annotations

from onnx import GraphProto, ModelProto, TensorProto

#: where an ONNX model keeps its weights: ModelProto.graph → GraphProto.initializer → TensorProto.raw_data
ONNX_GRAPH = ModelProto.DESCRIPTOR.fields_by_name["graph"].number
ONNX_INITIALIZER = GraphProto.DESCRIPTOR.fields_by_name["initializer"].number
ONNX_RAW_DATA = TensorProto.DESCRIPTOR.fields_by_name["raw_data"].number
_LENGTH_DELIMITED = 2
_FIXED_SIZES = {1: 8, 5: 4}  # wire types 1 (64-bit) and 5 (32-bit)


class WireError(ValueError):
    """Bytes that are not a well-formed protobuf message."""


def field_header(number: int, length: int) -> bytes:
    """The key (field ``number``, length-delimited) and ``length``, as protobuf varints."""
    out = bytearray()
    for value in (number << 3 | _LENGTH_DELIMITED, length):
        while value > 0x7F:
            out.append(value & 0x7F | 0x80)
            value >>= 7
        out.append(value)
    return bytes(out)


def _varint(buf, pos: int, end: int) -> tuple[int, int]:
    value = shift = 0
    while pos < end and shift < 64:
        byte = buf[pos]
        pos += 1
        value |= (byte & 0x7F) << shift
        if byte < 0x80:
            return value, pos
        shift += 7
    raise WireError("truncated or overlong varint")


def fields(buf, start: int, end: int):
    """(number, wire type, field start, value start, value end) of each field in ``buf[start:end]``."""
    pos = start
    while pos < end:
        key, value_start = _varint(buf, pos, end)
        number, wire_type = key >> 3, key & 7
        if wire_type == 0:
            _, value_end = _varint(buf, value_start, end)
        elif wire_type == _LENGTH_DELIMITED:
            length, value_start = _varint(buf, value_start, end)
            value_end = value_start + length
        elif wire_type in _FIXED_SIZES:
            value_end = value_start + _FIXED_SIZES[wire_type]
        else:
            raise WireError(f"wire type {wire_type} (groups are not used by ONNX)")
        if number == 0 or value_end > end:
            raise WireError("a field runs past the end of its message")
        yield number, wire_type, pos, value_start, value_end
        pos = value_end


def split_nested(buf, outer: int, inner: int, threshold: int) -> tuple[bytes, list[tuple[int, int]]]:
    """``buf`` (a serialized message) without the ``inner`` fields of ``threshold`` bytes or more
    inside its ``outer`` message fields (an ONNX model's large graph initializers), and the
    (start, end) of each of those in ``buf``, in file order."""
    rest, spans = bytearray(), []
    for number, wire_type, field_start, value_start, value_end in fields(buf, 0, len(buf)):
        if number != outer or wire_type != _LENGTH_DELIMITED:
            rest += buf[field_start:value_end]
            continue
        kept = bytearray()
        for field, field_type, inner_start, inner_value, inner_end in fields(buf, value_start, value_end):
            if field == inner and field_type == _LENGTH_DELIMITED and inner_end - inner_value >= threshold:
                spans.append((inner_value, inner_end))
            else:
                kept += buf[inner_start:inner_end]
        rest += field_header(outer, len(kept)) + kept
    return bytes(rest), spans


def cut_field(buf, start: int, end: int, number: int) -> tuple[bytes, tuple[int, int] | None]:
    """The message ``buf[start:end]`` without its length-delimited field ``number``, and that
    field's (start, end) in ``buf`` (``None`` when absent; the last one counts, as in protobuf)."""
    rest, span = bytearray(), None
    for field, wire_type, field_start, value_start, value_end in fields(buf, start, end):
        if field == number and wire_type == _LENGTH_DELIMITED:
            span = (value_start, value_end)
        else:
            rest += buf[field_start:value_end]
    return bytes(rest), span
