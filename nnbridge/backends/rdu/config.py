"""Machine description and compile options of the RDU simulator (JSON round-trippable).

Every machine field is configurable (``--set reconfig_us=5`` style overrides; an off-chip tier's
as ``--set hbm_bw_gbps=800`` / ``hbm_capacity_bytes=8e9``) because most per-unit numbers of
SambaNova parts are derived or assumed (see ``presets.py``).
"""

from __future__ import annotations

import dataclasses
import math
from dataclasses import dataclass, field
from typing import Any

from ...base.errors import InputError
from ..base import Setting

MODES = ("o0", "o1")


@dataclass(frozen=True)
class Tier:
    """One off-chip memory tier (HBM, DDR, DRAM)."""

    name: str
    bw_gbps: float  # GB/s (1e9 bytes per second)
    capacity_bytes: int


@dataclass(frozen=True)
class Machine:
    name: str
    n_pcu: int
    n_pmu: int | None  # None: unbounded (the Plasticine analyzer validation, spec 6.1)
    pcu_lanes: int
    flop_per_pcu_per_cycle: float
    clock_ghz: float
    pmu_bytes: int
    pmu_bw_bytes_per_cycle: float
    switch_bw_bytes_per_cycle: float
    sram_bytes: int | None  # None: unbounded
    tiers: tuple[Tier, ...]
    reconfig_us: float
    max_section_ports: int
    stage_sync_cycles: int
    storage: str  # "fp32" or "bf16": bytes per stored float element
    link_gbps: float  # GB/s one socket sends to the others (multi-socket models)
    link_latency_us: float  # per message step between sockets
    provenance: dict[str, str] = field(default_factory=dict, compare=False)

    @property
    def peak_flops(self) -> float:
        return self.n_pcu * self.flop_per_pcu_per_cycle * self.clock_ghz * 1e9

    @property
    def float_bytes(self) -> int:
        return 2 if self.storage == "bf16" else 4

    @property
    def on_chip_bytes(self) -> float:
        """Usable on-chip capacity: the smaller of the SRAM and PMU limits (inf if unbounded)."""
        limits = [float(self.sram_bytes) if self.sram_bytes is not None else float("inf"),
                  float(self.n_pmu * self.pmu_bytes) if self.n_pmu is not None else float("inf")]
        return min(limits)

    def tier_fields(self) -> dict[str, tuple[int, str]]:
        """``<tier>_bw_gbps`` / ``<tier>_capacity_bytes`` → (tier index, Tier field)."""
        return {f"{t.name}_{f}": (i, f) for i, t in enumerate(self.tiers) for f in ("bw_gbps", "capacity_bytes")}

    def with_overrides(self, **overrides: Any) -> Machine:
        names = {f.name for f in dataclasses.fields(self)} - {"provenance", "tiers", "name"}
        tier_fields = self.tier_fields()
        unknown = sorted(set(overrides) - names - set(tier_fields))
        if unknown:
            raise InputError(f"unknown RDU machine parameter(s) {unknown}; choose from "
                             f"{sorted(names | set(tier_fields))}")
        provenance = dict(self.provenance)
        tiers = list(self.tiers)
        for key in [k for k in overrides if k in tier_fields]:
            i, field_name = tier_fields[key]
            value = overrides.pop(key)
            provenance[key] = f"user override (preset value {getattr(tiers[i], field_name)!r})"
            if value is None or not math.isfinite(float(value)):
                raise InputError(f"RDU machine '{self.name}': {key} needs a finite number")
            tiers[i] = dataclasses.replace(tiers[i], **{field_name: int(value) if field_name == "capacity_bytes"
                                                         else float(value)})
        provenance.update({k: f"user override (preset value {getattr(self, k)!r})" for k in overrides})
        return dataclasses.replace(self, provenance=provenance, tiers=tuple(tiers), **overrides).validated()

    def validated(self) -> Machine:
        if self.n_pcu < 1 or (self.n_pmu is not None and self.n_pmu < 1):
            raise InputError(f"RDU machine '{self.name}': n_pcu and n_pmu must be >= 1")
        positive = ("pcu_lanes", "flop_per_pcu_per_cycle", "clock_ghz", "pmu_bytes",
                    "pmu_bw_bytes_per_cycle", "switch_bw_bytes_per_cycle", "max_section_ports")
        for name in positive:
            if not getattr(self, name) > 0:
                raise InputError(f"RDU machine '{self.name}': {name} must be > 0")
        if self.sram_bytes is not None and not self.sram_bytes > 0:
            raise InputError(f"RDU machine '{self.name}': sram_bytes must be > 0 (got {self.sram_bytes})")
        if not (self.link_gbps > 0 and self.link_latency_us >= 0):
            raise InputError(f"RDU machine '{self.name}': link_gbps must be > 0 and link_latency_us >= 0")
        if not (self.reconfig_us >= 0 and self.stage_sync_cycles >= 0):  # NaN fails too
            raise InputError(f"RDU machine '{self.name}': reconfig_us and stage_sync_cycles must be >= 0")
        if not self.tiers:
            raise InputError(f"RDU machine '{self.name}': needs at least one off-chip tier with bandwidth")
        for t in self.tiers:
            if not (t.bw_gbps > 0 and t.capacity_bytes > 0):
                raise InputError(f"RDU machine '{self.name}': off-chip tier '{t.name}' needs {t.name}_bw_gbps > 0 "
                                 f"and {t.name}_capacity_bytes > 0 (got {t.bw_gbps:g} and {t.capacity_bytes})")
        if self.storage not in ("fp32", "bf16"):
            raise InputError(f"RDU machine '{self.name}': storage must be fp32 or bf16")
        return self

    def to_dict(self) -> dict[str, Any]:
        return dataclasses.asdict(self)

    @classmethod
    def from_dict(cls, data: dict[str, Any]) -> Machine:
        from .plan_schema import decode

        return decode(cls, data, f"RDU machine '{data.get('name', '?')}'", "machine").validated()


@dataclass(frozen=True)
class CompileOptions:
    """What SambaFlow fixes at compile time: the mode and the batch (a recompile changes them)."""

    mode: str = "o1"
    batch_size: int = 1  # samples streamed through the pipeline per run
    #: samples per pipeline token; None: the compiler picks the fastest that fits on chip (as
    #: SambaFlow does: a token's samples share each weight read, so streamed weights amortise)
    micro_batch: int | None = None
    #: price a model whose weights exceed the last off-chip tier instead of refusing it
    allow_overcommit: bool = False

    def validated(self) -> CompileOptions:
        if self.mode not in MODES:
            raise InputError(f"unknown RDU compiler mode '{self.mode}'; choose from {', '.join(MODES)}")
        if self.batch_size < 1 or (self.micro_batch is not None and self.micro_batch < 1):
            raise InputError("batch size and micro-batch must be >= 1")
        if self.micro_batch is not None and self.micro_batch > self.batch_size:
            raise InputError(f"micro-batch {self.micro_batch} is larger than the batch size {self.batch_size}")
        return self

    def to_dict(self) -> dict[str, Any]:
        return dataclasses.asdict(self)



#: what each machine parameter is (the values are each preset's, ``presets.py``)
MACHINE_HELP = {
    "n_pcu": "pattern compute units", "n_pmu": "pattern memory units (none: unbounded)",
    "pcu_lanes": "SIMD lanes per PCU", "flop_per_pcu_per_cycle": "peak FLOP per PCU per cycle",
    "clock_ghz": "clock", "pmu_bytes": "bytes per PMU", "pmu_bw_bytes_per_cycle": "bytes per PMU per cycle",
    "switch_bw_bytes_per_cycle": "bytes per switch link per cycle", "sram_bytes": "on-chip SRAM (none: unbounded)",
    "reconfig_us": "µs to load a section's configuration", "max_section_ports": "off-chip streams per section",
    "stage_sync_cycles": "per-token handshake between pipeline stages", "storage": "stored float format",
    "link_gbps": "GB/s between sockets", "link_latency_us": "µs per message step between sockets",
}


def compile_settings(presets: dict[str, Machine], default: str) -> dict[str, Setting]:
    """What ``RduBackend.compile`` reads: the compile options, every machine parameter (defaults:
    preset ``default``'s) and every off-chip tier's bandwidth and capacity (``<tier>_bw_gbps``)."""
    base = presets[default]
    out = {"mode": Setting("mode", str, "o1", "o0: one operator per section; o1: fusion and resource-driven "
                           "sections", choices=MODES),
           "preset": Setting("preset", str, default, "the chip", choices=tuple(presets), python=(Machine,)),
           "batch_size": Setting("batch_size", int, 1, "samples per run"),
           "micro_batch": Setting("micro_batch", int, None, "samples per pipeline token (default: the fastest "
                                  "that fits on chip)", optional=True),
           "allow_overcommit": Setting("allow_overcommit", bool, False, "price a model whose weights exceed the "
                                       "last off-chip tier instead of refusing it")}
    for name, doc in MACHINE_HELP.items():
        value = getattr(base, name)
        kind = str if name == "storage" else float if isinstance(value, float) else int
        out[name] = Setting(name, kind, value, f"{doc} ({default}'s)", choices=("fp32", "bf16") if kind is str else (),
                            optional=name in ("n_pmu", "sram_bytes"))
    for machine in presets.values():
        for tier in machine.tiers:
            for field_name, kind, doc in (("bw_gbps", float, "GB/s"), ("capacity_bytes", int, "bytes")):
                name = f"{tier.name}_{field_name}"
                out.setdefault(name, Setting(name, kind, getattr(tier, field_name),
                                             f"off-chip tier {tier.name}: {doc} ({machine.name}'s)"))
    return out
