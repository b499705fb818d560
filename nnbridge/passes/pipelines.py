"""Default pass pipelines per backend and optimisation level (specs/passes.md §9, §12)."""

from __future__ import annotations

#: backend → opt level → pass names. Levels: 0 simplify only, 1 + fusion,
#: 2 + constant folding, 3 + scale folding and layout alteration.
PIPELINES: dict[str, dict[int, list[str]]] = {
    "reference": {0: [], 1: [], 2: [], 3: []},
}


def pipeline_for(backend: str, opt_level: int = 1) -> list[str]:
    levels = PIPELINES.get(backend, PIPELINES["reference"])
    return list(levels.get(opt_level, levels[max(levels)]))
