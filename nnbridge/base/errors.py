"""One exception hierarchy for everything nnbridge reports to a user.

The CLI prints any ``NNBridgeError`` as one line (no traceback) and exits non-zero (2 for a
``UsageError``, 1 for the others), so every message must name the file, node or op at fault and say what to do.
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


class UsageError(InputError):
    """The command line or call names what the model or backend does not take: an input, an option,
    a setting, or a value of the wrong type. The CLI exits 2 for these, as for any usage error."""


class OptionError(UsageError, TypeError):
    """An option a command or backend does not read (an unknown keyword, ``--set`` key or a flag
    that has no effect here), or an option's value of the wrong type; a ``TypeError`` like Python's."""


class OutputError(NNBridgeError):
    """A destination cannot be written: a directory where a file goes, no permission, a name the file
    system refuses, no space left."""


class SecurityError(NNBridgeError):
    """A file tries to reach outside the model directory or to smuggle code."""


class KernelError(NNBridgeError):
    """A kernel failed at run time on inputs it accepted at compile time."""


class NonFiniteError(NNBridgeError):
    """Training met a non-finite loss, gradient or weight; the message names the step, the batch
    and the first such tensor (nothing of that step was applied)."""


class RegistrationError(NNBridgeError):
    """A table entry is malformed at import time (a kernel's keyword that its op's schema lacks...)."""


class DuplicateRegistrationError(RegistrationError):
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
