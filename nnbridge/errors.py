"""One exception hierarchy for everything nnbridge reports to a user.

The CLI prints any ``NNBridgeError`` as one line (no traceback) and exits non-zero,
so every message must name the file, node or op at fault and say what to do.
"""

from __future__ import annotations

from dataclasses import dataclass


class NNBridgeError(Exception):
    """Base class of every error nnbridge raises on purpose."""


class FormatError(NNBridgeError):
    """A model file is corrupt, truncated, or not valid for its format."""


class ShapeError(NNBridgeError):
    """Shapes are impossible, unknown where they must be known, or too large."""


class CapacityError(NNBridgeError):
    """A model needs more memory than the machine it is compiled for has (and overcommit was not allowed)."""


class InputError(NNBridgeError):
    """User-supplied inputs are missing or do not match the model's declaration."""


class SecurityError(NNBridgeError):
    """A file tries to reach outside the model directory or to smuggle code."""


class KernelError(NNBridgeError):
    """A kernel failed at run time on inputs it accepted at compile time."""


class DuplicateRegistrationError(NNBridgeError):
    """Two definitions claim the same key of a registry (an op's kernel, a format, a pass...)."""


class NNBridgeWarning(UserWarning):
    """Something a user should know about a result that is not an error (the CLI prints it)."""


@dataclass(frozen=True)
class Unsupported:
    """One node that a backend or format cannot handle, and why."""

    op: str
    node: str
    reason: str = ""
    domain: str = ""

    def __str__(self) -> str:
        op = f"{self.domain}::{self.op}" if self.domain not in ("", "ai.onnx") else self.op
        text = f"{op} (node '{self.node}')"
        return f"{text}: {self.reason}" if self.reason else text


class UnsupportedOpError(NNBridgeError):
    """Raised with *all* offending nodes at once, never only the first. ``lines()`` gives one
    readable line per distinct reason (the CLI prints those), naming the nodes it applies to."""

    def __init__(self, target: str, items: list[Unsupported]):
        self.target = target
        self.items = list(items)
        super().__init__(f"{self.headline()}: {'; '.join(self.lines())}")

    def headline(self) -> str:
        ops = sorted({i.op for i in self.items})
        return f"{self.target} does not support {len(self.items)} node(s) [ops: {', '.join(ops)}]"

    def lines(self, limit: int = 20) -> list[str]:
        groups: dict[tuple[str, str, str], list[str]] = {}
        for item in self.items:
            groups.setdefault((item.op, item.domain, item.reason), []).append(item.node)
        lines = []
        for (op, domain, reason), nodes in list(groups.items())[:limit]:
            label = f"{domain}::{op}" if domain not in ("", "ai.onnx") else op
            names = ", ".join(f"'{n}'" for n in nodes[:3]) + (", …" if len(nodes) > 3 else "")
            where = f"node {names}" if len(nodes) == 1 else f"{len(nodes)} nodes: {names}"
            lines.append(f"{label} ({where})" + (f": {reason}" if reason else ""))
        if len(groups) > limit:
            lines.append(f"… and {len(groups) - limit} more reasons")
        return lines
