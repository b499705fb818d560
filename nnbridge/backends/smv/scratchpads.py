"""SMV's three scratchpads as they stand between kernels, and the SMAUG file forms whose results
depend on them or on padded storage (spec §4; smaug/operators/smv/kernels/*).

A kernel loads its tiles into the scratchpads (fp16 widened to fp32), computes in place and
stores its result tile back; the store narrows the result in place (the first half of the
region then holds packed fp16 pairs). Most kernels overwrite everything they later read, but
SMAUG's softmax and post-FC batch-norm kernels compute whole 8-value vectors of a row only,
and the batch norm places rows after the first beyond the region it stores: those values are
whatever an earlier kernel left in the result scratchpad. nnbridge's SMAUG writer never emits
these forms; files from elsewhere may hold them, and the simulator reproduces the runtime on
them (``smaug.smv_deviations`` metadata, written by the SMAUG reader). The approximation: each
kernel leaves what its last invocation loaded and computed, and kernels run in graph order.
"""

from __future__ import annotations

import numpy as np

from ...base.smaug_runtime import padded, repeat_copies

WORDS = 16384  # each scratchpad is allocated as 2 × 32 KB and addressed as fp32 words
VECTOR = 8
PAGE_HALVES = 2048  # a load/store moves at most 4 KB of fp16 at a time


def storage(array: np.ndarray) -> np.ndarray:
    """An array as SMV stores it: the last dimension padded to a multiple of 8 with zeros, flat fp32."""
    a = np.asarray(array, np.float32)
    if a.ndim == 0:
        return a.reshape(1)
    extra = padded(a.shape[-1]) - a.shape[-1]
    if extra:
        a = np.concatenate([a, np.zeros(a.shape[:-1] + (extra,), np.float32)], axis=-1)
    return a.reshape(-1)


class Scratchpads:
    """spad0 (inputs), spad1 (weights / unary results), spad2 (results), zero at start."""

    def __init__(self) -> None:
        self.words = [np.zeros(WORDS, np.float32) for _ in range(3)]

    def load(self, pad: int, values: np.ndarray) -> None:
        flat = np.asarray(values, np.float32).reshape(-1)[:WORDS]
        self.words[pad][:flat.size] = flat

    def region(self, pad: int, size: int) -> np.ndarray:
        return self.words[pad][:size].copy()

    def store(self, pad: int, size: int) -> None:
        """host_store_fp16: per 4 KB page, fp32 words narrowed to fp16 and packed into the page's
        first half (the transfer is rounded up to whole 32-byte lines)."""
        words = self.words[pad]
        halves = words.view(np.uint16)
        total = -(-size * 2 // 32) * 32  # bytes, whole cache lines
        for page, offset in enumerate(range(0, min(size, WORDS), PAGE_HALVES)):
            nbytes = min(total - page * 2 * PAGE_HALVES, 2 * PAGE_HALVES)
            vectors = nbytes // 16
            with np.errstate(over="ignore"):
                packed = words[offset:offset + VECTOR * vectors].astype(np.float16)
            halves[2 * offset:2 * offset + packed.size] = packed.view(np.uint16)

    def kernel(self, loads: list[tuple[int, np.ndarray]], result_pad: int, result: np.ndarray) -> None:
        """A kernel's last invocation: its loads, its fp32 result tile, the narrowing store."""
        for pad, values in loads:
            self.load(pad, values)
        self.load(result_pad, result)
        self.store(result_pad, np.asarray(result).size)


def last_tile(array: np.ndarray, tiled) -> np.ndarray:
    """The last tile of ``array`` under a tiling plan's TiledTensor, in SMV storage."""
    index = tuple(c - 1 for c in tiled.counts)
    return storage(array[tiled.tile_slices(index)])


# -- CPU operators on padded rows (smaug/core/tensor_utils.h copyTensorRegion) ---------------------
def concat_rows(parts: list[np.ndarray]) -> np.ndarray:
    """Concat along the last axis as SMAUG copies it: each input's padded rows, one after the
    other, at the running offset of a row of the padded output — a copy that reaches past its
    row lands on the next row's first values (inputs' padding lanes zero)."""
    rows = int(np.prod(parts[0].shape[:-1]))
    total = sum(p.shape[-1] for p in parts)
    width = padded(total)
    out = np.zeros(rows * width + max(padded(p.shape[-1]) for p in parts), np.float32)
    offset = 0
    for part in parts:
        src = storage(part).reshape(rows, padded(part.shape[-1]))
        for r in range(rows):
            out[r * width + offset:r * width + offset + src.shape[1]] = src[r]
        offset += part.shape[-1]
    return out[:rows * width].reshape(parts[0].shape[:-1] + (width,))[..., :total]


def repeat_rows(x: np.ndarray, repeats: int) -> np.ndarray:
    """Repeat along the last axis as SMAUG copies it: each copy moves whole padded rows of the
    output (first the input's rows), so one reaching past its row lands on the next row."""
    rows, width = int(np.prod(x.shape[:-1])), x.shape[-1]
    total = width * repeats
    row = padded(total)
    out = np.zeros(rows * row + 2 * row, np.float32)
    src = storage(x).reshape(rows, padded(width))
    for r in range(rows):
        out[r * row:r * row + src.shape[1]] = src[r]
    for offset, block in repeat_copies(width, total):
        for r in range(rows):
            start = r * row
            out[start + offset:start + offset + padded(block)] = out[start:start + padded(block)].copy()
    return out[:rows * row].reshape(x.shape[:-1] + (row,))[..., :total]


def raw_reshape(x: np.ndarray, shape: tuple[int, ...]) -> np.ndarray:
    """Reshape between tensors of equal padding: SMAUG copies the input's storage verbatim (what
    a larger output storage holds beyond it was never written: NaN here)."""
    src = storage(x)
    size = int(np.prod(shape[:-1])) * padded(shape[-1])
    flat = np.full(size, np.nan, np.float32)
    flat[:min(size, src.size)] = src[:size]
    return flat.reshape(shape[:-1] + (padded(shape[-1]),))[..., :shape[-1]]
