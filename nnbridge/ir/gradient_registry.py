"""The table of reverse-mode rules and its decorator (the rules: ``gradients.py``, ``gradients_nn.py``)."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from ..base.registry import Registry

Rule = Callable[[Any, Any, list], list]
#: (domain, op) → reverse-mode rule; an op's traits read it live (``OpTraits.gradient``)
RULES: Registry[tuple[str, str], Rule] = Registry("gradient rules")


def rule(*ops: str, domain: str = "") -> Callable[[Rule], Rule]:
    """Register ``fn`` as the reverse-mode rule of each op in ``ops``."""
    return RULES.decorator(*((domain, op) for op in ops))
