"""SMAUG's SMV accelerator simulator: fp16 functional simulation, SMAUG's tiling,
and a calibrated performance model (compute / data transfer / CPU)."""

from .backend import BACKEND, SmvBackend, SmvExecutable, make_config
from .config import MemPolicy, SmvConfig

__all__ = ["BACKEND", "MemPolicy", "SmvBackend", "SmvConfig", "SmvExecutable", "make_config"]
