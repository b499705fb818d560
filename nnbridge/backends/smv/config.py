"""Every constant of the SMV simulator, with where it comes from.

The constants themselves are data: ``config.toml`` beside this module holds each setting's
type, default, provenance (its tags explained there) and help; ``SmvConfig`` is built from it.

A config is overridable from a TOML file (``[smv]`` table or top level) and from
``key=value`` strings (the CLI's ``--set``).
"""

from __future__ import annotations

import enum
import math
from dataclasses import dataclass, field, fields, replace
from pathlib import Path
from typing import Any, Generic, NamedTuple, TypeVar

from ...base.errors import InputError, RegistrationError
from ...base.fileio import read_constants, read_toml
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


#: where each setting's type, default, provenance and help live (package data beside this module)
CONSTANTS = Path(__file__).with_name("config.toml")
_TYPES: dict[str, type] = {"int": int, "float": float, "bool": bool, "MemPolicy": MemPolicy}


def _settings(cls: type) -> type:
    """Give ``cls`` (before ``@dataclass`` makes it one) a field for every setting of ``CONSTANTS``,
    in the file's order, annotated with its type's name and carrying its provenance and help."""
    annotations = cls.__dict__.get("__annotations__", {})
    for name, entry in read_constants(CONSTANTS, ("type", "value", "provenance", "doc")).items():
        kind, value = _TYPES.get(entry["type"]), entry["value"]
        if kind is MemPolicy and value in {m.value for m in MemPolicy}:
            value = MemPolicy(value)
        if kind is None or type(value) is not kind:
            raise RegistrationError(f"{CONSTANTS} [{name}]: value {value!r} is not of its type "
                                    f"'{entry['type']}' (one of {', '.join(_TYPES)})")
        annotations[name] = entry["type"]
        setattr(cls, name, field(default=value, metadata={"provenance": entry["provenance"], "doc": entry["doc"]}))
    cls.__annotations__ = annotations
    return cls


@dataclass(frozen=True)
@_settings
class SmvConfig:
    """One SMV configuration: a field per setting of ``config.toml`` (what each is, its default and
    where that number comes from), overridable by name."""

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
