"""Every constant of the SMV simulator, with where it comes from.

Provenance tags: ``spec`` = specs/smv-architecture.md (SMAUG source, gem5/Aladdin
configs, the TACO 2020 paper); ``fit`` = least-squares fit to the spec's measured
cycles (§8.3) by ``cost/calibration.py``; ``derived`` = computed from spec data;
``assumed`` = an engineering estimate where the spec is silent (kept few, and
tuned only against the paper's normalized trends, §8.1–8.2).

A config is overridable from a TOML file (``[smv]`` table or top level) and from
``key=value`` strings (the CLI's ``--set``).
"""

from __future__ import annotations

import enum
import math
from dataclasses import dataclass, field, fields, replace
from pathlib import Path
from typing import Any, Generic, NamedTuple, TypeVar

from ...base.errors import InputError
from ...base.fileio import read_toml
from ..base import Setting


class MemPolicy(enum.Enum):
    """Host-array interface per operand (spec §2.1)."""

    DMA = "dma"  # AllDma
    ACP = "acp"  # AllAcp
    ACP_DMA_WEIGHTS = "acp-dma-weights"  # AllAcpWithDmaForWeights

    def weights_use_dma(self) -> bool:
        return self is not MemPolicy.ACP

    def activations_use_dma(self) -> bool:
        return self is MemPolicy.DMA


def _c(default: Any, provenance: str, doc: str) -> Any:
    return field(default=default, metadata={"provenance": provenance, "doc": doc})


T = TypeVar("T")


class FamilyRates(NamedTuple, Generic[T]):
    """What prices one tiling family: DMA cycles per loaded byte, per stored byte, and accelerator
    cycles per pipelined work unit (as setting names in ``FAMILY_RATES``, as values from
    ``SmvConfig.family_rates``)."""

    load: T
    store: T
    work: T


#: tiling family → the settings that price it: the one place cost/compute.py (pricing) and
#: cost/calibration.py (fitting) learn which constant belongs to which family. Only conv's stores
#: have their own rate (identifiable in §8.3 only for conv: FC stores are 0.3 % of its bytes and
#: pooling's always a quarter of its loads)
FAMILY_RATES: dict[str, FamilyRates[str]] = {
    "conv": FamilyRates("dma_cycles_per_byte_conv", "dma_store_cycles_per_byte_conv", "conv_cycles_per_iter"),
    "fc": FamilyRates("dma_cycles_per_byte_fc", "dma_cycles_per_byte_fc", "fc_cycles_per_iter"),
    "pool": FamilyRates("dma_cycles_per_byte_pool", "dma_cycles_per_byte_pool", "vector_cycles_per_op"),
    "bn": FamilyRates("dma_cycles_per_byte_bn", "dma_cycles_per_byte_bn", "vector_cycles_per_op"),
    "vector": FamilyRates("dma_cycles_per_byte_vector", "dma_cycles_per_byte_vector", "vector_cycles_per_op"),
    "softmax": FamilyRates("dma_cycles_per_byte_vector", "dma_cycles_per_byte_vector", "vector_cycles_per_op"),
}


@dataclass(frozen=True)
class SmvConfig:
    # --- datapath (spec §2) ---------------------------------------------------
    num_pes: int = _c(8, "spec §2 kNumPEs", "processing elements (conv, FC)")
    maccs_per_pe: int = _c(32, "spec §2 kNumMaccsPerPE", "MACs per PE per cycle")
    vector_width: int = _c(8, "spec §2 VECTOR_SIZE", "fp16 lanes of pool/BN/eltwise/activation units")
    spad_bytes: int = _c(32 * 1024, "spec §2 kSpadSize", "bytes per scratchpad used by tiling")
    alignment: int = _c(8, "spec §2 SmvBackend::Alignment", "last dim padded to a multiple of this")
    clock_ghz: float = _c(1.0, "spec §2 smv-accel.cfg cycle_time=1ns", "accelerator clock")
    # --- DMA (spec §2 gem5.cfg) -----------------------------------------------
    dma_setup_cycles: int = _c(100, "spec §2 dma_setup_overhead", "cycles per DMA request")
    page_bytes: int = _c(4096, "spec §2 LOG_PAGE_SIZE=12", "max bytes per DMA request")
    cacheline_bytes: int = _c(32, "spec §2 CACHELINE_SIZE", "transfer granularity")
    # per-family DMA cost per byte and per-iteration pipeline cost: relative least-squares fit to the
    # spec's §8.3 per-layer cycles (cost/calibration.py; every layer within 20 % with its network
    # held out of the fit); the fp16<->fp32 conversion the kernels run after each load and before each
    # store is its own (compute) cost, fitted to the paper's compute/transfer split (§8.1)
    dma_cycles_per_byte_fc: float = _c(0.507, "fit §8.3", "FC tile loads/stores (DMA)")
    dma_cycles_per_byte_conv: float = _c(0.619, "fit §8.3", "conv tile loads (DMA)")
    dma_store_cycles_per_byte_conv: float = _c(0.088, "fit §8.3 (stores: 27 % of conv bytes)",
                                               "conv output tile stores (DMA; other families: as their loads)")
    dma_cycles_per_byte_pool: float = _c(0.367, "fit §8.3", "pooling tile loads/stores (DMA)")
    dma_cycles_per_byte_bn: float = _c(0.461, "fit §8.3", "batch-norm tile loads/stores (DMA)")
    dma_cycles_per_byte_vector: float = _c(0.461, "assumed = batch norm (same flat-vector kernel shape)",
                                           "eltwise/activation/softmax tile loads/stores (DMA)")
    fp16_convert_cycles_per_vector: float = _c(3.83, "fit §8.1 breakdown with §8.3 (cost/calibration.py)",
                                               "one vector_width-wide fp16<->fp32 conversion of a loaded or "
                                               "stored tile (host_load_fp16/host_store_fp16), on the accelerator")
    conv_cycles_per_iter: float = _c(4.578, "fit §8.3", "pipelined conv iteration (8 ofmaps x 32 channels)")
    fc_cycles_per_iter: float = _c(1.0, "spec §9", "pipelined FC iteration (8 neurons x 32 activations)")
    vector_cycles_per_op: float = _c(1.0, "spec §9", "one 8-wide pool/BN/eltwise/activation vector op")
    # --- ACP (spec §2.1) -------------------------------------------------------
    acp_hit_cycles: int = _c(20, "spec §2.1 (paper: LLC hit through ACP)", "latency of one cache line")
    acp_outstanding: int = _c(3, "assumed; tuned to spec §8.2 ACP trend", "lines in flight via the ACP")
    # --- host CPU (spec §2, §8.1) ---------------------------------------------
    memcpy_gbps: float = _c(0.5, "assumed; tuned to spec §8.1 CPU shares", "memcpy GB/s per thread")
    memcpy_call_bytes: float = _c(94.0, "derived from spec §8.1 Fig. 5b ratios 1.78x and 6.5x",
                                  "per-memcpy call overhead, as equivalent bytes")
    dram_gbps: float = _c(25.6, "spec §2 paper Table 2 (LPDDR4, 4 channels)", "shared DRAM bandwidth")
    memcpy_scaling: float = _c(2.7, "derived: spec §8.2, 8 tiling threads raise ResNet50 bandwidth 2.7x",
                               "copy bandwidth of many threads / one thread")
    flush_ns_per_line: float = _c(4.0, "assumed; tuned to spec §8.2 ACP trend", "CPU flush/invalidate per line (DMA)")
    invoke_overhead_ns: float = _c(6000.0, "assumed; tuned to spec §8.1 CPU shares", "software stack per invocation")
    op_overhead_ns: float = _c(5000.0, "assumed; tuned to spec §8.1 CPU share", "framework cost per operator")
    cpu_gmacs: float = _c(10.0, "assumed (4 fp32 MAC/cycle at 2.5 GHz)", "CPU fallback compute rate")
    # --- system -----------------------------------------------------------------
    num_accels: int = _c(1, "spec §2 (1..8, maxNumAccelerators)",
                         "accelerators; each conv/FC's tile groups go round-robin over as many of them as runs it "
                         "fastest")
    smaug_schedule: bool = _c(False, "spec §6.7 (SMAUG's runNHWC/runNWA: all numAcceleratorsAvailable, whole batch)",
                              "schedule and compute as SMAUG's runtime does: every conv/FC over all num_accels, every "
                              "operator on its whole batch with SMAUG's tiles (more accelerators or batch can then be "
                              "slower; by default an operator may run as sub-batch calls, each computed as SMAUG "
                              "computes that sub-batch)")
    mem_policy: MemPolicy = _c(MemPolicy.DMA, "spec §2.1 (AllDma in every shipped model)", "host interface")
    tiling_threads: int = _c(1, "spec §8.2 (1 or 8 in the paper)", "CPU threads for tiling copies")
    perf_only: bool = _c(False, "nnbridge", "skip numerics (timing only)")

    @property
    def max_tile_elems(self) -> int:
        """16 384 fp16 elements per scratchpad (spec §2)."""
        return self.spad_bytes // 2

    @property
    def peak_maccs(self) -> int:
        return self.num_pes * self.maccs_per_pe

    def __post_init__(self) -> None:
        if not 1 <= self.num_accels <= 8:
            raise InputError(f"SMV: --accels must be between 1 and 8 (got {self.num_accels})")
        if self.tiling_threads < 1:
            raise InputError(f"SMV: tiling_threads must be >= 1 (got {self.tiling_threads})")
        for f in fields(self):
            value = getattr(self, f.name)
            if isinstance(value, bool) or not isinstance(value, (int, float)):
                continue
            if not math.isfinite(value) or value < 0 or (value == 0 and f.name in _POSITIVE):
                bound = "> 0" if f.name in _POSITIVE else ">= 0"
                raise InputError(f"SMV setting {f.name}={value!r}: must be a finite number {bound}")
        if self.spad_bytes < _MIN_SPAD_BYTES:
            raise InputError(f"SMV setting spad_bytes={self.spad_bytes}: at least {_MIN_SPAD_BYTES} bytes "
                             f"(smaller scratchpads make tiling searches unbounded); SMAUG's is 32768")

    # ---------------------------------------------------------------- overrides
    def with_overrides(self, values: dict[str, Any]) -> SmvConfig:
        """A copy with ``values`` applied; strings are parsed to each field's type."""
        known = {f.name: f for f in fields(self)}
        parsed: dict[str, Any] = {}
        for key, raw in values.items():
            name = key.replace("-", "_")
            if name not in known:
                raise InputError(f"SMV config has no setting '{key}'; known: {', '.join(sorted(known))}")
            parsed[name] = _parse(name, type(getattr(self, name)), raw)
        return replace(self, **parsed)

    @classmethod
    def from_toml(cls, path: str | Path, base: SmvConfig | None = None) -> SmvConfig:
        return (base or cls()).with_overrides(read_toml(path, "SMV config", "smv"))

    def describe(self) -> list[tuple[str, Any, str, str]]:
        """(name, value, provenance, meaning) for every setting."""
        return [(f.name, getattr(self, f.name), f.metadata["provenance"], f.metadata["doc"]) for f in fields(self)]

    # ------------------------------------------------------------ family rates
    def family_rates(self, family: str) -> FamilyRates[float]:
        """The rates that price one tiling family on this configuration."""
        return FamilyRates(*(getattr(self, name) for name in FAMILY_RATES[family]))

    def with_family_rates(self, rates: dict[str, tuple[float, float, float]]) -> SmvConfig:
        """A copy pricing each family given at its (load, store, work) rates. Families that share a
        setting (FC's loads and stores, the vector units' work) must give it one value."""
        values: dict[str, float] = {}
        for family, given in rates.items():
            for name, value in zip(FAMILY_RATES[family], given):
                if values.setdefault(name, value) != value:
                    raise ValueError(f"SMV family rates: {family} sets {name}={value}, another family "
                                     f"{values[name]}")
        return replace(self, **values)


#: short names the CLI and the Python API also take for two settings
ALIASES = {"accels": "num_accels", "threads": "tiling_threads"}


def config_settings() -> dict[str, Setting]:
    """Every ``SmvConfig`` field (and alias) as a backend setting: ``SmvBackend.settings``."""
    defaults = SmvConfig()
    out = {}
    for f in fields(SmvConfig):
        value = getattr(defaults, f.name)
        out[f.name] = Setting(f.name, type(value), value, f.metadata["doc"])
    for alias, name in ALIASES.items():
        out[alias] = replace(out[name], name=alias, help=f"{out[name].help} (= {name})")
    return out


#: settings that divide or count something: zero is meaningless (the others may be 0, e.g. an ideal overhead)
_POSITIVE = frozenset({"num_pes", "maccs_per_pe", "vector_width", "spad_bytes", "alignment",
                       "clock_ghz", "page_bytes", "cacheline_bytes", "conv_cycles_per_iter", "fc_cycles_per_iter",
                       "vector_cycles_per_op", "acp_outstanding", "memcpy_gbps", "memcpy_call_bytes",
                       "dram_gbps", "memcpy_scaling", "cpu_gmacs"})
_MIN_SPAD_BYTES = 1024


def _parse(name: str, kind: type, raw: Any) -> Any:
    if isinstance(raw, kind) and not (kind is int and isinstance(raw, bool)):
        return raw
    text = str(raw).strip()
    try:
        if kind is MemPolicy:
            return MemPolicy(text.lower())
        if kind is bool:
            if text.lower() in ("1", "true", "yes", "on"):
                return True
            if text.lower() in ("0", "false", "no", "off"):
                return False
            raise ValueError(text)
        if kind is int:
            return int(text)
        if kind is float:
            return float(text)
    except ValueError:
        choices = f" (one of {', '.join(m.value for m in MemPolicy)})" if kind is MemPolicy else ""
        raise InputError(f"SMV setting {name}={text!r}: expected {kind.__name__}{choices}") from None
    raise InputError(f"SMV setting {name}: unsupported type {kind.__name__}")
