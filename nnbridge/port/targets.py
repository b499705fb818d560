"""The targets ``port`` reports on: the file each writes, the writer options and the flags that
say them on ``convert``'s command line, and the backend that runs the file."""

from __future__ import annotations

import os
import re
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any


@dataclass(frozen=True, kw_only=True)
class Target:
    name: str
    title: str
    #: the format its files are in (a ``converters`` name); None: a compiled RDU program
    fmt: str | None
    #: what follows the model's stem in the file's name
    suffix: str
    #: the writer's options, and the same said as ``convert`` flags
    options: Mapping[str, Any] = field(default_factory=dict)
    flags: tuple[str, ...] = ()
    #: the backend that computes the file's values (its precision picks the verdict's rule)
    backend: str = "reference"
    #: why there is no cost column, for targets nnbridge has no performance model of
    unpriced: str = ""

    def destination(self, out_dir: str, stem: str) -> str:
        """Where the suggested command writes the file: ``out/<stem><suffix>``."""
        return os.path.join(out_dir, f"{_safe(stem)}{self.suffix}")


TARGETS: dict[str, Target] = {t.name: t for t in (
    Target(name="smaug-ref", title="SMAUG (Reference)", fmt="smaug", suffix="_ref_topo.pbtxt",
           options={"smaug_backend": "Reference"}, flags=("--smaug-backend", "Reference"),
           unpriced="no cost model: SMAUG's Reference backend is plain C++ on the host CPU (the SMV row is its "
                    "accelerator)"),
    Target(name="smaug-smv", title="SMAUG (SMV)", fmt="smaug", suffix="_smv_topo.pbtxt",
           options={"smaug_backend": "SMV"}, flags=("--smaug-backend", "SMV"), backend="smv"),
    Target(name="lbann", title="LBANN", fmt="lbann", suffix=".prototext",
           unpriced="no cost model: LBANN runs on CPU and GPU clusters, which nnbridge does not simulate"),
    Target(name="rdu", title="RDU", fmt=None, suffix=".pef", backend="rdu"),
)}


def parse_targets(text: str | None) -> list[str]:
    """``smaug-ref,rdu`` → the names, in the table's order; an unknown name is refused in one line."""
    from ..base.errors import UsageError

    if text is None:
        return list(TARGETS)
    names = [t.strip() for t in text.split(",") if t.strip()]
    unknown = [n for n in names if n not in TARGETS]
    if unknown or not names:
        raise UsageError(f"--targets {text}: {'unknown ' + ', '.join(unknown) if unknown else 'no target'}; "
                         f"choose from {','.join(TARGETS)}")
    return [n for n in TARGETS if n in names]


def _safe(stem: str) -> str:
    """A file stem SMAUG and LBANN both take as a model name."""
    return re.sub(r"[^A-Za-z0-9_]+", "_", stem).strip("_") or "model"
