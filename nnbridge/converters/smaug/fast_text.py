"""A fast reader for protobuf text in the default printer's layout (one field per line).

``text_format.Parse`` is generic and slow (≈0.3 s for ResNet-50's 265 KB topology);
the files SMAUG and nnbridge write are printed by the default printer, so a
line-by-line reader handles them in a fraction of that. Anything it does not
recognise (comments, ``[a, b]`` lists, escapes, other layouts) returns False and
the caller falls back to ``text_format.Parse`` — which stays the reference.
"""

from __future__ import annotations

import re

from google.protobuf.descriptor import FieldDescriptor as FD
from google.protobuf.message import Message

_LINE = re.compile(r"[ ]*(?:([A-Za-z_]\w*)(?: \{|: (.*))|\})\Z")
_STRING = re.compile(r'"([^"\\]*)"\Z')
_INTS = {FD.TYPE_INT32, FD.TYPE_INT64, FD.TYPE_UINT32, FD.TYPE_UINT64, FD.TYPE_SINT32, FD.TYPE_SINT64,
         FD.TYPE_FIXED32, FD.TYPE_FIXED64, FD.TYPE_SFIXED32, FD.TYPE_SFIXED64}


def parse_printed(text: str, message: Message) -> bool:
    """Fill ``message`` from printer-layout text; False (message untouched) if the text is not in it."""
    target = type(message)()
    stack = [target]
    try:
        for line in text.splitlines():
            if not line:
                continue
            m = _LINE.match(line)
            if m is None:
                return False
            key, value = m.group(1), m.group(2)
            if key is None:  # closing brace
                stack.pop()
                if not stack:
                    return False
                continue
            msg = stack[-1]
            field = msg.DESCRIPTOR.fields_by_name.get(key)
            if field is None:
                return False
            repeated = field.is_repeated
            if value is None:  # "key {"
                if field.type != FD.TYPE_MESSAGE:
                    return False
                child = getattr(msg, key).add() if repeated else getattr(msg, key)
                if not repeated:
                    child.SetInParent()
                stack.append(child)
                continue
            scalar = _scalar(field, value)
            if scalar is None:
                return False
            if repeated:
                getattr(msg, key).append(scalar)
            else:
                setattr(msg, key, scalar)
    except (ValueError, TypeError, IndexError):
        return False
    if len(stack) != 1:
        return False
    message.CopyFrom(target)
    return True


def _scalar(field, text: str):
    kind = field.type
    if kind == FD.TYPE_STRING:
        m = _STRING.match(text)
        return m.group(1) if m else None
    if kind == FD.TYPE_ENUM:
        value = field.enum_type.values_by_name.get(text)
        return value.number if value is not None else None
    if kind in _INTS:
        return int(text)
    if kind in (FD.TYPE_FLOAT, FD.TYPE_DOUBLE):
        return float(text)
    if kind == FD.TYPE_BOOL:
        return {"true": True, "false": False}.get(text)
    return None
