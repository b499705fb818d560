"""String tensor ops (object arrays of Python str): concatenation, splitting, regex
matching. numpy has no string kernels for object arrays, so the
per-string work goes through ``np.frompyfunc`` (one C-level loop, Python callables).
"""

from __future__ import annotations

import re

import numpy as np

from ...ir import DType
from ..registry import kernel

STRING = frozenset({DType.STRING})


@kernel("StringConcat", dtypes=STRING)
def string_concat(ctx, a, b):
    return np.asarray(np.add(a, b), dtype=object)  # object arrays add as Python str


@kernel("StringSplit", dtypes=STRING)
def string_split(ctx, x, *, delimiter=None, maxsplit=None):
    """Substrings padded with "" to the longest split, and the substring counts.
    No delimiter (or "") splits on runs of whitespace, dropping leading/trailing ones."""
    delimiter = delimiter or None
    maxsplit = -1 if maxsplit is None else maxsplit
    parts = np.frompyfunc(lambda s: s.split(delimiter, maxsplit), 1, 1)(x)
    parts = np.asarray(parts, dtype=object)
    counts = np.frompyfunc(len, 1, 1)(parts).astype(np.int64).reshape(x.shape)
    width = int(counts.max()) if counts.size else 0
    out = np.full((*x.shape, width), "", dtype=object)
    flat = out.reshape(x.size, width)
    for row, pieces in zip(flat, parts.reshape(-1)):  # one row per string: no per-character work
        row[:len(pieces)] = pieces
    return out, counts


def _check_regex(node, *, pattern=None):
    try:
        re.compile(pattern or "")
    except re.error as exc:
        return f"pattern {pattern!r} is not a valid regular expression ({exc})"
    if re.search(r"\(\?[=!<]|\\[0-9]", pattern or ""):  # lookarounds and backreferences are not RE2
        return f"pattern {pattern!r} uses constructs RE2 does not have"
    return None


@kernel("RegexFullMatch", dtypes=STRING, check=_check_regex)
def regex_full_match(ctx, x, *, pattern=None):
    matcher = re.compile(pattern or "")
    return np.frompyfunc(lambda s: matcher.fullmatch(s) is not None, 1, 1)(x).astype(bool).reshape(x.shape)
