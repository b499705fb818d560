"""Accelerator compute cycles of one invocation: the pipelined inner loop (spec §4, §9).

Conv issues one iteration per (num_pes-ofmap block × kernel position × maccs_per_pe-channel
block × output pixel) at a calibrated initiation interval (the scratchpad
read-modify-write limits it well below the 256-MAC peak); FC one iteration per
(8 neurons × 32 activations); pool/BN/eltwise one ``vector_width``-wide vector op per cycle.
"""

from __future__ import annotations

from ..config import SmvConfig
from ..tiling.plan import Invocation

#: tiling family → (config field of cycles per work unit, config field of DMA cycles per byte)
FAMILY_RATES = {
    "conv": ("conv_cycles_per_iter", "dma_cycles_per_byte_conv"),
    "fc": ("fc_cycles_per_iter", "dma_cycles_per_byte_fc"),
    "pool": ("vector_cycles_per_op", "dma_cycles_per_byte_pool"),
    "bn": ("vector_cycles_per_op", "dma_cycles_per_byte_bn"),
    "vector": ("vector_cycles_per_op", "dma_cycles_per_byte_vector"),
    "softmax": ("vector_cycles_per_op", "dma_cycles_per_byte_vector"),
}


def compute_cycles(family: str, inv: Invocation, cfg: SmvConfig) -> float:
    """Cycles of one invocation: its inner-loop iterations on this configuration's PE array
    (``num_pes`` outputs × ``maccs_per_pe`` reduction lanes per iteration) times the family's rate."""
    return work_units(inv, cfg) * getattr(cfg, FAMILY_RATES[family][0])


def work_units(inv: Invocation, cfg: SmvConfig) -> int:
    if inv.vector is not None:
        elements, repeats = inv.vector
        return -(-elements // cfg.vector_width) * repeats
    if inv.blocks is None:
        return inv.work
    outputs, reduction, repeats = inv.blocks
    return -(-outputs // cfg.num_pes) * -(-reduction // cfg.maccs_per_pe) * repeats


#: families whose stores have their own rate (identifiable in §8.3 only for conv: FC stores are
#: 0.3 % of its bytes and pooling's always a quarter of its loads)
STORE_RATES = {"conv": "dma_store_cycles_per_byte_conv"}


def dma_rate(family: str, cfg: SmvConfig) -> float:
    return getattr(cfg, FAMILY_RATES[family][1])


def dma_store_rate(family: str, cfg: SmvConfig) -> float:
    return getattr(cfg, STORE_RATES.get(family, FAMILY_RATES[family][1]))
