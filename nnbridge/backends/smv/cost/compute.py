"""Accelerator compute cycles of one invocation: the pipelined inner loop (spec §4, §9).

Conv issues one iteration per (8-ofmap block × kernel position × 32-channel
block × output pixel) at a calibrated initiation interval (the scratchpad
read-modify-write limits it well below the 256-MAC peak); FC one iteration per
(8 neurons × 32 activations); pool/BN/eltwise one 8-wide vector op per cycle.
"""

from __future__ import annotations

from ..config import SmvConfig

#: tiling family → (config field of cycles per work unit, config field of DMA cycles per byte)
FAMILY_RATES = {
    "conv": ("conv_cycles_per_iter", "dma_cycles_per_byte_conv"),
    "fc": ("fc_cycles_per_iter", "dma_cycles_per_byte_fc"),
    "pool": ("vector_cycles_per_op", "dma_cycles_per_byte_pool"),
    "bn": ("vector_cycles_per_op", "dma_cycles_per_byte_bn"),
    "vector": ("vector_cycles_per_op", "dma_cycles_per_byte_vector"),
    "softmax": ("vector_cycles_per_op", "dma_cycles_per_byte_vector"),
}


def compute_cycles(family: str, work: int, cfg: SmvConfig) -> float:
    return work * getattr(cfg, FAMILY_RATES[family][0])


def dma_rate(family: str, cfg: SmvConfig) -> float:
    return getattr(cfg, FAMILY_RATES[family][1])
