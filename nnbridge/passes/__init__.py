"""Graph passes, one module per pass; importing this package registers them all by name.

The package knows no backend: each backend declares its own pipeline (a list of these names).
"""

import importlib
import pkgutil

from .manager import (
    PASSES,
    Fixpoint,
    PassError,
    PassInfo,
    PassManager,
    Step,
    available_passes,
    get_pass,
    pass_names,
    register_pass,
    run_passes,
)

__all__ = ["PASSES", "Fixpoint", "PassError", "PassInfo", "PassManager", "Step", "available_passes", "get_pass",
           "pass_names", "register_pass", "run_passes"]

for _module in pkgutil.iter_modules(__path__):
    importlib.import_module(f"{__name__}.{_module.name}")
