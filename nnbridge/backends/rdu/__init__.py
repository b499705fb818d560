"""SambaNova-style RDU simulator backend (specs/rdu-architecture.md, docs/rdu.md)."""

from .backend import RduBackend, RduExecutable, load_pef
from .config import CompileOptions, Machine, Tier
from .presets import PRESETS, machine_for

BACKEND = RduBackend()

__all__ = ["BACKEND", "RduBackend", "RduExecutable", "load_pef", "CompileOptions", "Machine", "Tier",
           "machine_for", "PRESETS"]
