"""Accelerator compute cycles of one invocation: the pipelined inner loop (spec §4, §9).

Conv issues one iteration per (num_pes-ofmap block × kernel position × maccs_per_pe-channel
block × output pixel) at a calibrated initiation interval (the scratchpad
read-modify-write limits it well below the 256-MAC peak); FC one iteration per
(8 neurons × 32 activations); pool/BN/eltwise one ``vector_width``-wide vector op per cycle.
"""

from __future__ import annotations

from ..config import SmvConfig
from ..tiling.plan import Invocation


def compute_cycles(family: str, inv: Invocation, cfg: SmvConfig) -> float:
    """Cycles of one invocation: its inner-loop iterations on this configuration's PE array
    (``num_pes`` outputs × ``maccs_per_pe`` reduction lanes per iteration) times the family's rate."""
    return work_units(inv, cfg) * cfg.family_rates(family).work


def work_units(inv: Invocation, cfg: SmvConfig) -> int:
    if inv.vector is not None:
        elements, repeats = inv.vector
        return -(-elements // cfg.vector_width) * repeats
    if inv.blocks is None:
        return inv.work
    outputs, reduction, repeats = inv.blocks
    return -(-outputs // cfg.num_pes) * -(-reduction // cfg.maccs_per_pe) * repeats

