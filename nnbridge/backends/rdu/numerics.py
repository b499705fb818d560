"""bf16 storage with fp32 accumulation (spec §4, §5.2 step 7).

Tensors are rounded to bfloat16 (round-to-nearest-even, via ml_dtypes) where the RDU
stores them: weights in PMUs, graph inputs, and every kernel output (section boundaries
are kernel outputs too). Inside a fused kernel values flow through the PCU pipeline in
fp32, and contractions accumulate in fp32, so arithmetic itself runs in float32 on
bf16-representable operands.
"""

from __future__ import annotations

from typing import Any

import ml_dtypes
import numpy as np

BF16 = np.dtype(ml_dtypes.bfloat16)

_ROUNDED = frozenset(np.dtype(t) for t in (np.float16, np.float32, np.float64))


def round_bf16(value: Any) -> Any:
    """``value`` rounded to bf16, in its own dtype; non-float values (and sequences) pass through."""
    if isinstance(value, np.ndarray) and value.dtype in _ROUNDED:
        return value.astype(BF16).astype(value.dtype)
    if isinstance(value, np.generic) and value.dtype in _ROUNDED:
        return value.dtype.type(np.asarray(value).astype(BF16))
    return value
