"""Chip presets (specs/rdu-architecture.md §1, §2, §5.1) with the provenance of every number.

The numbers are data: ``presets.toml`` beside this module holds each preset's values, each
beside its source (the provenance tags are explained there); this module makes them ``Machine``s.
"""

from __future__ import annotations

import dataclasses
from pathlib import Path
from typing import Any

from ...base.errors import InputError, RegistrationError
from ...base.fileio import read_constants
from .config import Machine, Tier

#: every preset's numbers with their sources (package data beside this module)
CONSTANTS = Path(__file__).with_name("presets.toml")


def _rows(table: str) -> dict[str, tuple[Any, str]]:
    """``field: (value, provenance)`` of one table of ``CONSTANTS`` (tiers made ``Tier``s)."""
    rows = {}
    for key, entry in read_constants(CONSTANTS, ("value", "provenance"), table).items():
        value = entry["value"]
        if key == "tiers":
            try:
                value = tuple(Tier(**tier) for tier in value)
            except TypeError as exc:
                raise RegistrationError(f"{CONSTANTS} [{table}] tiers: {exc}") from None
        rows[key] = (value, entry["provenance"])
    return rows


#: nnbridge's assumptions where no chip's documents give a number: every chip starts from them
ASSUMED: dict[str, tuple[Any, str]] = _rows("assumed")


def _preset(name: str, base: Machine | None = None) -> Machine:
    """The machine of ``CONSTANTS``' table ``name``; the fields it does not give (and their
    provenance) are ``base``'s, or without one ``ASSUMED``'s."""
    given = _rows(name) if base is not None else {**ASSUMED, **_rows(name)}
    values = {key: value for key, (value, _) in given.items()}
    provenance = {key: text for key, (_, text) in given.items()}
    try:
        if base is None:
            return Machine(name=name, provenance=provenance, **values)
        return dataclasses.replace(base, name=name, provenance={**base.provenance, **provenance}, **values)
    except TypeError as exc:
        raise RegistrationError(f"{CONSTANTS} [{name}]: {exc}") from None


PLASTICINE = _preset("plasticine")
SN40L = _preset("sn40l")
SN10 = _preset("sn10", SN40L)  # the same fabric as SN40L's: only what presets.toml's [sn10] gives differs

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
