"""Default pass pipelines per backend and optimisation level (specs/passes.md §9, §12).

Levels: 0 simplify only, 1 + fusion, 2 + constant folding, 3 + scale folding and
layout alteration. Layout passes that make a graph executable at all (the
backend's own layout) run at every level. Shapes are re-inferred after the
rewrites that change them. SMV folds constants at every level (its weights must
be constants to be stored in SMV layouts) and keeps BatchNormalization (SMAUG's only bias
carrier, specs §4) and does no generic fusion (SMAUG fuses activations itself).
The reference backend fuses from level 2 only: numpy runs a fused body op by op,
so fusion there serves kernel counting and inspection, not speed, and level 1
keeps per-node profiles. From level 1 it also turns exporters' decomposed GELU
and SiLU chains back into single ops (one pass over the tensor instead of five).
It folds constants from level 1 on, so weights that a
model computes from constants (onnx's light models fill theirs with
ConstantOfShape) are computed once at compile time, not on every run.
"""

from __future__ import annotations

_CLEAN = ["eliminate", "infer-shapes"]
_FOLD = ["fold", "eliminate", "infer-shapes"]
_SCALE = ["fold-scale-axis", "fold", "eliminate"]

#: backend → opt level → pass names
PIPELINES: dict[str, dict[int, list[str]]] = {
    "reference": {
        0: ["simplify", "layout-nchw", "cancel-transposes", *_CLEAN],
        1: [*_FOLD, "simplify", "recognize-activations", "layout-nchw", "cancel-transposes", *_CLEAN,
            "plan-memory"],
        2: [*_FOLD, "simplify", "recognize-activations", "layout-nchw", "cancel-transposes", *_CLEAN, "fuse",
            "plan-memory"],
        3: [*_FOLD, "simplify", "recognize-activations", *_SCALE, "layout-nchw", "cancel-transposes", *_CLEAN,
            "fuse", "plan-memory"],
    },
    "smv": {
        0: [*_FOLD, "layout-nhwc", *_CLEAN],
        1: [*_FOLD, "layout-nhwc", "cancel-transposes", *_CLEAN],
        2: [*_FOLD, "layout-nhwc", "cancel-transposes", *_FOLD],
        3: [*_FOLD, "layout-nhwc", "cancel-transposes", *_FOLD],
    },
    "rdu": {
        0: ["simplify", "layout-nchw", "cancel-transposes", *_CLEAN],
        1: ["simplify", "layout-nchw", "cancel-transposes", *_CLEAN, "fuse"],
        2: [*_FOLD, "simplify", "layout-nchw", "cancel-transposes", *_CLEAN, "fuse"],
        3: [*_FOLD, "simplify", *_SCALE, "layout-nchw", "cancel-transposes", *_CLEAN, "fuse"],
    },
}


def pipeline_for(backend: str, opt_level: int = 1) -> list[str]:
    """The pass names ``backend`` runs at ``opt_level`` (unknown backends get the reference's)."""
    levels = PIPELINES.get(backend, PIPELINES["reference"])
    return list(levels.get(opt_level, levels[max(levels)]))


def select_passes(backend: str, opt_level: int = 1, passes: list[str] | None = None,
                  disabled: list[str] | None = None) -> list[str]:
    """The pass list a command runs: ``passes`` if given, else the backend's pipeline at
    ``opt_level``; minus every name in ``disabled`` (``--disable-pass``)."""
    from ..ir.passes import get_pass

    for name in disabled or []:
        get_pass(name)  # a typo fails loudly instead of silently disabling nothing
    chosen = list(passes) if passes is not None else pipeline_for(backend, opt_level)
    return [p for p in chosen if p not in set(disabled or [])]
