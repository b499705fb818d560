"""Facts about SMAUG's C++ runtime that both the SMAUG writer (which must avoid what the runtime
computes wrong) and the SMV simulator (which reproduces it) rely on. A base module, like
``errors``: converters and backends may both import it, and it imports nothing of nnbridge.
"""

from __future__ import annotations

#: SMV tensors pad their last dimension to a multiple of this (SmvBackend::Alignment)
ALIGN = 8

#: graph metadata key the SMAUG reader writes for SMV files: "node<TAB>reason" lines, the nodes the
#: real runtime computes differently from what the file means (the SMV simulator reproduces them)
DEVIATIONS_KEY = "smaug.smv_deviations"


def padded(width: int) -> int:
    return -(-width // ALIGN) * ALIGN


def repeat_copies(width: int, total: int) -> list[tuple[int, int]]:
    """(offset, width) of each copy SMAUG's Repeat makes along the last axis (repeat_op.h): the
    filled prefix is copied after itself, doubling, then the remainder. Each copy moves whole
    padded rows (copyTensorRegion), so a copy may reach past its row."""
    copies, offset, block = [], width, width
    while offset + block <= total:
        copies.append((offset, block))
        offset += block
        block *= 2
    if offset < total:
        copies.append((offset, total - offset))
    return copies
