"""SMAUG's shared tiling machinery (spec §5): strategies, best-strategy choice,
candidate enumeration and cutting a tensor into (possibly overlapping) tiles.

Shapes are tuples in the tensor's own order: NHWC ``(N, H, W, C)`` or NC
``(N, C)``. Sizes always include the last-dimension padding to the alignment.
"""

from __future__ import annotations

import math
from collections.abc import Iterator, Sequence
from dataclasses import dataclass

from ....base.errors import ShapeError
from ....ir.types import DimLetters

Shape = tuple[int, ...]


class _Strategy(DimLetters):
    """A tiling strategy: ``has("H")`` says whether it tiles the rows."""

    def has(self, letter: str) -> bool:
        return self.name != "NONE" and super().has(letter)


#: SMAUG's tiling strategies, in the order spec §5.2 tries them; a value spells the dims it tiles
#: (``None``, SMAUG's name for the strategy that tiles none, spells none)
TilingDims = _Strategy("TilingDims", [("NONE", "None"), *((dims, dims) for dims in "N NC NH NW NHW NCH NCW".split())])


def ceil_to(x: int, m: int) -> int:
    return -(-x // m) * m


def storage_size(shape: Sequence[int], alignment: int = 8) -> int:
    """Elements stored, last dim padded to ``alignment`` (spec §5)."""
    if not shape:
        return 1
    return math.prod(shape[:-1]) * ceil_to(shape[-1], alignment)


def find_best_tiling_dims(shape: Shape, max_size: int, min_shape: Shape, alignment: int = 8) -> TilingDims:
    """The first strategy of spec §5.2 under which a minimal tile fits."""
    size = storage_size(shape, alignment)
    if size <= max_size:
        return TilingDims.NONE
    per_n = size / shape[0]
    m = [min(d, md) for d, md in zip(shape, min_shape)]
    if per_n * m[0] <= max_size:
        return TilingDims.N
    c_axis = len(shape) - 1
    fraction = {"C": m[c_axis] / shape[c_axis]}  # of one sample, by tiled dim
    if len(shape) > 2:  # NHWC
        fraction.update(H=m[1] / shape[1], W=m[2] / shape[2])
    for strategy in list(TilingDims)[2:]:
        dims = strategy.value[1:]
        if all(d in fraction for d in dims) and per_n * math.prod(fraction[d] for d in dims) <= max_size:
            return strategy
    raise ShapeError(f"no tiling of {list(shape)} fits a {max_size}-element scratchpad (the real runtime "
                     f"reports 'Unable to find a supported set of tiling dimensions')")


def enum_4d(shape: Shape, min_shape: Shape, steps: Shape, max_size: int, alignment: int = 8) -> Iterator[Shape]:
    """Candidate NHWC tiles in SMAUG's order n → c → h → w; a misfit ends the w loop only."""
    N, H, W, C = shape
    for n in range(min(min_shape[0], N), N + 1, steps[0]):
        for c in range(min(min_shape[3], C), C + 1, steps[3]):
            for h in range(min(min_shape[1], H), H + 1, steps[1]):
                for w in range(min(min_shape[2], W), W + 1, steps[2]):
                    tile = (n, h, w, c)
                    if storage_size(tile, alignment) > max_size:
                        break
                    yield tile


def enum_2d(shape: Shape, min_shape: Shape, steps: Shape, max_size: int, alignment: int = 8) -> Iterator[Shape]:
    N, C = shape
    for n in range(min(min_shape[0], N), N + 1, steps[0]):
        for c in range(min(min_shape[1], C), C + 1, steps[1]):
            tile = (n, c)
            if storage_size(tile, alignment) > max_size:
                break
            yield tile


@dataclass(frozen=True)
class Window:
    """How tiles of a dimension relate to the data: receptive field, stride, padding."""

    field_h: int = 0
    field_w: int = 0
    stride_h: int = 1
    stride_w: int = 1
    same_padding: bool = False


def cut_dim(total: int, tile: int, field: int = 0, stride: int = 1, pad_before: int = 0,
            spatial: bool = False) -> list[int]:
    """Tile extents along one dimension (spec §5.4); consecutive tiles overlap by the halo."""
    halo = field - stride if spatial else 0
    sizes: list[int] = []
    remaining = total
    while remaining > 0:
        t = min(tile, remaining)
        if spatial and not sizes and t < remaining:
            k = (t + pad_before - field) // stride
            if k > 0:
                t = field + stride * k - pad_before
        sizes.append(t)
        remaining -= t
        if remaining > 0:
            remaining += halo
    return sizes


def tile_starts(sizes: Sequence[int], field: int = 0, stride: int = 1, spatial: bool = False) -> list[int]:
    """Start offsets matching ``cut_dim`` (each tile starts ``halo`` before the previous end)."""
    halo = field - stride if spatial else 0
    starts, pos = [], 0
    for s in sizes:
        starts.append(pos)
        pos += s - halo
    return starts


@dataclass(frozen=True)
class TiledTensor:
    """A tensor cut into tiles: per-dimension tile sizes and start offsets."""

    shape: Shape
    tile: Shape
    sizes: tuple[tuple[int, ...], ...]  # per dimension
    starts: tuple[tuple[int, ...], ...]

    @property
    def counts(self) -> tuple[int, ...]:
        return tuple(len(s) for s in self.sizes)

    @property
    def num_tiles(self) -> int:
        return math.prod(self.counts)

    def tile_shape(self, index: Sequence[int]) -> Shape:
        return tuple(self.sizes[d][i] for d, i in enumerate(index))

    def tile_slices(self, index: Sequence[int]) -> tuple[slice, ...]:
        return tuple(slice(self.starts[d][i], self.starts[d][i] + self.sizes[d][i]) for d, i in enumerate(index))


def cut(shape: Shape, tile: Shape, window: Window | None = None) -> TiledTensor:
    """Cut ``shape`` (NHWC or NC) by ``tile``; for NHWC, ``window`` gives the H/W halo rule."""
    sizes, starts = [], []
    for d, (total, t) in enumerate(zip(shape, tile)):
        spatial = window is not None and len(shape) == 4 and d in (1, 2)
        if spatial:
            field = window.field_h if d == 1 else window.field_w
            stride = window.stride_h if d == 1 else window.stride_w
            pad = math.ceil((field - 1) / 2) if window.same_padding else 0
        else:
            field, stride, pad = 0, 1, 0
        s = cut_dim(total, t, field, stride, pad, spatial)
        sizes.append(tuple(s))
        starts.append(tuple(tile_starts(s, field, stride, spatial)))
    return TiledTensor(tuple(shape), tuple(tile), tuple(sizes), tuple(starts))


def best(candidates: Iterator[tuple[int, tuple]]) -> tuple:
    """The first candidate with the maximal total (SMAUG keeps the first maximum)."""
    best_total, best_item = -1, None
    for total, item in candidates:
        if total > best_total:
            best_total, best_item = total, item
    if best_item is None:
        raise ShapeError("no candidate tile configuration fits the 16384-element scratchpads (the real runtime "
                         "stops with 'Failed to get best tiling config!')")
    return best_item
