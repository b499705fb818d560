"""Every golden tiling of specs/smv-architecture.md §7.1–7.5 (SMAUG's Catch2 test vectors)."""

from __future__ import annotations

import pytest

from nnbridge.backends.smv.layers import BNLayer, ConvLayer, FCLayer, PoolLayer, VectorLayer
from nnbridge.backends.smv.tiling import plan_layer
from nnbridge.backends.smv.tiling.common import TilingDims, cut_dim, find_best_tiling_dims
from nnbridge.base.errors import ShapeError


def dims(text: str) -> tuple[int, ...]:
    return tuple(int(d) for d in text.split("x"))


# (input, K, k, stride, same, strategies in/w/out, input tile, weight tile, output tile)
CONV = [
    ("1x32x32x8", 8, 5, 1, True, "None/None/None", "1x32x32x8", "8x5x5x8", "1x32x32x8"),
    ("1x32x64x16", 8, 3, 1, True, "NH/None/NH", "1x16x64x16", "8x3x3x16", "1x15x64x8"),
    ("1x16x16x128", 16, 3, 1, True, "NC/N/NC", "1x16x16x64", "16x3x3x64", "1x16x16x16"),
    ("1x32x32x192", 32, 4, 1, True, "NCH/NC/NCH", "1x16x32x32", "32x4x4x32", "1x15x32x32"),
    ("1x64x64x192", 32, 2, 1, True, "NCH/N/NCH", "1x8x64x32", "32x2x2x32", "1x8x64x32"),
    ("1x128x128x192", 32, 2, 1, True, "NCH/N/NCH", "1x4x128x32", "32x2x2x32", "1x4x128x32"),
    ("1x8x8x192", 256, 3, 1, True, "None/N/NC", "1x8x8x192", "8x3x3x192", "1x8x8x8"),
    ("1x8x8x256", 256, 3, 1, True, "None/NC/NC", "1x8x8x256", "56x3x3x32", "1x8x8x56"),
    ("1x32x32x8", 128, 1, 1, True, "None/None/NC", "1x32x32x8", "128x1x1x8", "1x32x32x16"),
    ("1x32x64x32", 1024, 2, 1, True, "NH/N/NCH", "1x2x64x32", "128x2x2x32", "1x2x64x128"),
    ("1x64x32x32", 32, 5, 1, True, "NH/N/NCH", "1x16x32x32", "16x5x5x32", "1x14x32x16"),
    ("1x56x56x256", 512, 1, 2, True, "NH/N/NCH", "1x1x56x256", "64x1x1x256", "1x1x28x64"),
    ("1x64x64x32", 16, 3, 2, False, "NH/None/NH", "1x7x64x32", "16x3x3x32", "1x3x31x16"),
    ("1x225x225x3", 64, 7, 2, True, "NH/N/NCH", "1x9x225x3", "40x7x7x3", "1x3x113x40"),
    ("1x64x64x32", 16, 5, 3, False, "NH/None/NH", "1x8x64x32", "16x5x5x32", "1x2x20x16"),
]


def conv(text, k_out, k, stride, same):
    return plan_layer(ConvLayer(name="c", input=dims(text), kernels=k_out, kh=k, kw=k, stride_h=stride,
                                stride_w=stride, same=same))


@pytest.mark.parametrize("case", CONV, ids=[f"conv{i + 1}" for i in range(len(CONV))])
def test_conv_golden_tiles(case):
    text, k_out, k, stride, same, strategies, t_in, t_w, t_out = case
    plan = conv(text, k_out, k, stride, same)
    assert plan.strategy_summary() == strategies
    assert plan.tiles == {"input": dims(t_in), "weights": dims(t_w), "output": dims(t_out)}


def test_conv_golden_tile_counts_and_rows():
    p = conv("1x32x64x16", 8, 3, 1, True)
    assert p.tiled["input"].sizes[1] == (16, 16, 4) and p.tiled["output"].sizes[1] == (15, 14, 3)
    assert conv("1x16x16x128", 16, 3, 1, True).tiled["input"].num_tiles == 2
    p = conv("1x32x32x192", 32, 4, 1, True)
    assert p.tiled["input"].sizes[1] == (16, 16, 6) and p.tiled["input"].counts[3] == 6
    assert p.tiled["output"].sizes[1] == (15, 13, 4)
    p = conv("1x64x64x192", 32, 2, 1, True)
    assert p.tiled["input"].counts[1:] == (9, 1, 6)
    assert p.tiled["output"].sizes[1] == (8,) + (7,) * 8
    p = conv("1x128x128x192", 32, 2, 1, True)
    assert p.tiled["input"].counts[1] == 43 and p.tiled["input"].sizes[1][-1] == 2 and p.tiled["input"].counts[3] == 6
    assert p.tiled["output"].sizes[1][:2] == (4, 3) and p.tiled["output"].sizes[1][-1] == 1
    assert conv("1x8x8x192", 256, 3, 1, True).tiled["weights"].num_tiles == 32
    p = conv("1x8x8x256", 256, 3, 1, True)
    assert p.tiled["weights"].counts == (5, 1, 1, 8) and p.tiled["weights"].sizes[0] == (56, 56, 56, 56, 32)
    assert p.tiled["output"].sizes[3] == (56, 56, 56, 56, 32)
    assert conv("1x32x32x8", 128, 1, 1, True).tiled["output"].num_tiles == 8
    p = conv("1x32x64x32", 1024, 2, 1, True)
    assert p.tiled["output"].sizes[1][0] == 2 and p.tiled["output"].sizes[1][-1] == 1
    p = conv("1x64x32x32", 32, 5, 1, True)
    assert p.tiled["output"].sizes[1][:2] == (14, 12)
    assert [b - a for a, b in zip(p.tiled["input"].starts[1], p.tiled["input"].starts[1][1:])] == [12] * 4  # halo 4
    p = conv("1x225x225x3", 64, 7, 2, True)
    rows = p.tiled["input"].sizes[1]
    assert len(rows) == 56 and rows[0] == 8 and rows[-1] == 6
    assert p.tiled["weights"].sizes[0] == (40, 24)
    assert p.tiled["output"].num_tiles == 112 and p.tiled["output"].sizes[1][:2] == (3, 2)
    p = conv("1x64x64x32", 16, 5, 3, False)
    assert p.tiled["input"].counts[1] == 11 and p.tiled["input"].sizes[1][-1] == 4
    assert p.tiled["output"].num_tiles == 10


FC = [  # input features, neurons, strategies, input tile, weight tile, weight tile counts
    (256, 32, "None/None/None", "1x256", "32x256", (1, 1)),
    (256, 128, "None/N/None", "1x256", "64x256", (2, 1)),
    (4096, 128, "None/NC/None", "1x4096", "8x2048", (16, 2)),
    (32768, 256, "NC/NC/None", "1x2048", "8x2048", (32, 16)),
]


@pytest.mark.parametrize("case", FC, ids=[f"fc{c[0]}x{c[1]}" for c in FC])
def test_inner_product_golden(case):
    features, neurons, strategies, t_in, t_w, counts = case
    plan = plan_layer(FCLayer("f", 1, features, neurons))
    assert plan.strategy_summary() == strategies
    assert plan.tiles["input"] == dims(t_in) and plan.tiles["weights"] == dims(t_w)
    assert plan.tiles["output"] == (1, neurons)
    assert plan.tiled["weights"].counts == counts
    if features == 32768:
        assert plan.tiled["input"].num_tiles == 16


POOL = [  # input, window, stride, strategies, input tile, output tile, tiles in/out
    ("1x32x32x8", 2, 2, "None/None", "1x32x32x8", "1x16x16x8", 1, 1),
    ("1x32x32x32", 2, 2, "NC/None", "1x32x32x16", "1x16x16x32", 2, 1),
    ("1x32x32x128", 2, 2, "NC/NC", "1x32x32x16", "1x16x16x16", 8, 8),
    ("1x64x64x32", 2, 2, "NH/NCH", "1x8x64x32", "1x4x32x32", 8, 8),
    ("1x68x68x32", 2, 2, "NH/NCH", "1x6x68x32", "1x3x34x32", 12, 12),
    ("1x512x1024x16", 2, 2, "NW/NHW", "1x512x2x16", "1x256x1x16", 512, 512),
    ("1x512x512x32", 2, 2, "NHW/NHW", "1x2x256x32", "1x1x128x32", 512, 512),
    ("1x64x64x128", 16, 16, "NCH/NH", "1x32x64x8", "1x2x4x128", 32, 2),
    ("1x64x256x128", 16, 16, "NCW/NW", "1x64x32x8", "1x4x2x128", 128, 8),
]


@pytest.mark.parametrize("case", POOL, ids=[c[0] + f"_p{c[1]}" for c in POOL])
def test_pooling_golden(case):
    text, window, stride, strategies, t_in, t_out, n_in, n_out = case
    plan = plan_layer(PoolLayer(name="p", input=dims(text), ph=window, pw=window, stride_h=stride, stride_w=stride))
    assert plan.strategy_summary() == strategies
    assert plan.tiles == {"input": dims(t_in), "output": dims(t_out)}
    assert (plan.tiled["input"].num_tiles, plan.tiled["output"].num_tiles) == (n_in, n_out)
    assert plan.num_invocations == n_in
    if text == "1x68x68x32":  # last tiles 1x2x68x32 -> 1x1x34x32
        assert plan.tiled["input"].sizes[1][-1] == 2 and plan.tiled["output"].sizes[1][-1] == 1


BN = [  # input, strategy, input/output tile, weight tile, tiles
    ("1x32x32x16", "None", "1x32x32x16", "4x16", 1),
    ("1x16x16x128", "NC", "1x16x16x64", "4x128", 2),
    ("1x64x64x32", "NH", "1x8x64x32", "4x32", 8),
    ("1x64x1024x32", "NW", "1x64x8x32", "4x32", 128),
    ("1x128x128x64", "NHW", "1x8x32x64", "4x64", 64),
    ("1x64x64x512", "NCH", "1x32x64x8", "4x512", 128),
    ("1x64x512x512", "NCW", "1x64x32x8", "4x512", 1024),
    ("1x1024", "None", "1x1024", "4x1024", 1),
    ("1x32768", "NC", "1x4096", "4x4096", 8),
]


@pytest.mark.parametrize("case", BN, ids=[c[0] for c in BN])
def test_batch_norm_golden(case):
    text, strategy, tile, weights, count = case
    plan = plan_layer(BNLayer("b", dims(text)))
    assert plan.strategies[0].value == strategy
    assert plan.tiles == {"input": dims(tile), "weights": dims(weights), "output": dims(tile)}
    assert plan.num_invocations == count


@pytest.mark.parametrize("shape, tiles", [("1x32x32x8", [8192]), ("2x16x32x32", [16384, 16384]),
                                          ("2x16x32x24", [16384, 8192]), ("1x1024", [1024])])
def test_unary_golden(shape, tiles):
    plan = plan_layer(VectorLayer("u", dims(shape)))
    assert [inv.out_bytes // 2 for inv in plan.invocations] == tiles


def test_find_best_uses_padded_sizes_and_first_rule():
    assert find_best_tiling_dims((1, 28, 28, 1), 16384, (1, 3, 28, 32)) is TilingDims.NONE  # 28*28*8 = 6272
    assert find_best_tiling_dims((1, 26, 26, 32), 16384, (1, 3, 26, 32)) is TilingDims.NH
    with pytest.raises(ShapeError):
        find_best_tiling_dims((1, 40000), 16384, (1, 40000))


def test_cut_dim_shrinks_first_tile_to_whole_strides():
    assert cut_dim(225, 9, field=7, stride=2, pad_before=3, spatial=True)[:2] == [8, 9]
    assert cut_dim(32, 16, field=3, stride=1, pad_before=1, spatial=True) == [16, 16, 4]
    assert cut_dim(100, 30) == [30, 30, 30, 10]
