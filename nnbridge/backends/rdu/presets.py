"""Chip presets (specs/rdu-architecture.md §1, §2, §5.1) with the provenance of every number.

Tags: ``P`` published by the cited source, ``D`` derived by arithmetic from published
numbers (formula given), ``A`` nnbridge assumption (not public; a configurable parameter).
Only ``flop_per_pcu_per_cycle × clock_ghz`` matters for compute, so an assumed clock of
1 GHz for SambaNova parts is harmless as long as the product matches the published peak.
"""

from __future__ import annotations

import dataclasses
from typing import Any

from ...base.errors import InputError
from .config import Machine, Tier

KIB = 1024
MIB = 1024**2
GIB = 1024**3
TIB = 1024**4

#: nnbridge's assumptions where no chip's documents give a number: every chip starts from them
#: (Plasticine is a single-chip design: its link settings matter only to multi-socket models)
ASSUMED: dict[str, tuple[Any, str]] = {
    "switch_bw_bytes_per_cycle": (64, "A: one 16-lane x 4 B vector link"),
    "reconfig_us": (10.0, "A: not public; sweep it"),
    "link_gbps": (100.0, "A: socket-to-socket bandwidth not public; 100 GB/s per socket, sweep it"),
    "link_latency_us": (2.0, "A: not public; 2 µs per step puts a 16-socket all-reduce of one token's hidden "
                             "state near 4 µs, consistent with the 8B decode rate SambaNova publishes"),
}


def _preset(name: str, base: Machine | None = None, **fields: tuple[Any, str]) -> Machine:
    """A machine from ``field=(value, provenance)`` pairs, each number beside its source; the
    fields not given (and their provenance) are ``base``'s, or without one ``ASSUMED``'s."""
    given = fields if base is not None else {**ASSUMED, **fields}
    values = {key: value for key, (value, _) in given.items()}
    provenance = {key: text for key, (_, text) in given.items()}
    if base is None:
        return Machine(name=name, provenance=provenance, **values)
    return dataclasses.replace(base, name=name, provenance={**base.provenance, **provenance}, **values)


PLASTICINE = _preset(
    "plasticine",
    n_pcu=(64, "P: 16x8 checkerboard of PCUs and PMUs (Plasticine, ISCA 2017; pir SN16x8)"),
    n_pmu=(64, "P: same checkerboard"),
    pcu_lanes=(16, "P: 16 lanes x 6 stages per PCU"),
    flop_per_pcu_per_cycle=(192.0, "D: 2 x 16 lanes x 6 stages = 192 (peak 12.288 TFLOPS at 1 GHz)"),
    clock_ghz=(1.0, "P: 1 GHz"),
    pmu_bytes=(256 * KIB, "D: 16 MB / 64 PMUs; matches the model analyzer's memory utilisation (spec 6.1)"),
    pmu_bw_bytes_per_cycle=(256, "A: 4 addresses/cycle x 16 lanes x 4 B"),
    sram_bytes=(16 * MIB, "P: 16 MB on chip"),
    tiers=((Tier("dram", 51.2, 16 * GIB),),
           "A: 4 x 64-bit DDR3-1600 channels = 51.2 GB/s (simulator uses DRAMSim2, 4 x 4096 MB: P)"),
    max_section_ports=(16, "A: address generators at the DRAM interface usable by one section"),
    stage_sync_cycles=(0, "A: the synchronous analyzer pipeline has no per-token overhead"),
    storage=("fp32", "P: single precision datapath"),
)

SN40L = _preset(
    "sn40l",
    n_pcu=(1040, "P: 1 040 PCUs (Hot Chips 2024; arXiv 2405.07518)"),
    n_pmu=(1040, "P: 1 040 PMUs"),
    pcu_lanes=(32, "A: lanes per PCU not public"),
    flop_per_pcu_per_cycle=(613.5, "D: 638 TFLOPS BF16 / 1 040 PCUs / 1 GHz (assumed clock) = 613.5"),
    clock_ghz=(1.0, "A: not public; only flop_per_pcu_per_cycle x clock matters"),
    pmu_bytes=(512 * KIB, "D: 520 MB / 1 040 PMUs = 0.5 MB"),
    pmu_bw_bytes_per_cycle=(256, "A: 256 B/cycle per PMU, ~0.27 PB/s aggregate ('hundreds of TB/s', P)"),
    sram_bytes=(520 * MIB, "P: 520 MB on-chip SRAM"),
    tiers=((Tier("hbm", 1600.0, 64 * GIB), Tier("ddr", 100.0, int(1.5 * TIB))),
           "D: HBM ~1.6 TB/s (64 GB, P), DDR ~0.1 TB/s (1.5 TB, P) from 16-socket slide figures"),
    max_section_ports=(64, "A: AGCU streams usable by one section"),
    stage_sync_cycles=(16, "A: per-token handshake between pipeline stages"),
    storage=("bf16", "P: BF16 compute with FP32 accumulation"),
)

# SN10 is SN40L's predecessor on the same fabric: the per-unit parameters (lanes, PMU
# size, switch width, section ports, stage handshake, BF16 storage) are SN40L's; what
# differs is the unit count, the peak, the SRAM and the memory tiers.
SN10 = _preset(
    "sn10", SN40L,
    n_pcu=(640, "P: 640 PCUs (Hot Chips 33)"),
    n_pmu=(640, "P: 640 PMUs (Hot Chips 33)"),
    flop_per_pcu_per_cycle=(500.0, "D: > 320 TFLOPS BF16 / 640 PCUs / 1 GHz (assumed clock) = 500"),
    pmu_bytes=(512 * KIB, "D: 320 MB / 640 PMUs = 0.5 MB"),
    pmu_bw_bytes_per_cycle=(256, "A: same as Plasticine's address-generator width"),
    sram_bytes=(320 * MIB, "P: 320 MB on-chip SRAM"),
    tiers=((Tier("ddr", 128.0, int(1.5 * TIB)),),
           "D: 6 DDR4-2667 channels x 21.3 GB/s = 128 GB/s; capacity 1.5 TB (P)"),
)

PRESETS: dict[str, Machine] = {m.name: m for m in (PLASTICINE, SN10, SN40L)}
DEFAULT_PRESET = "sn40l"


def machine_for(preset: str | Machine, **overrides: Any) -> Machine:
    """A preset by name (or a Machine) with parameter overrides applied."""
    if isinstance(preset, Machine):
        machine = preset
    else:
        key = preset.lower()
        if key not in PRESETS:
            raise InputError(f"unknown RDU preset '{preset}'; choose from {', '.join(PRESETS)}")
        machine = PRESETS[key]
    return machine.with_overrides(**overrides) if overrides else machine.validated()
