"""LBANN's own schemas as facts (../shared/specs/lbann-schema): the judge of what nnbridge's LBANN
schemas contain and of every field nnbridge writes."""

from __future__ import annotations

import json
from functools import cache

from shared_paths import SHARED_SPECS

FACTS_DIR = SHARED_SPECS / "lbann-schema"
FACT_FILES = {"develop": "lbann-develop.json", "0.104": "lbann-v0.104.json", "0.99": "lbann-v0.99.json"}
PACKAGE = "lbann_data."


@cache
def facts(version: str) -> dict:
    return json.loads((FACTS_DIR / FACT_FILES[version]).read_text())


@cache
def fields(version: str) -> dict[str, dict[str, int]]:
    """{message without the package: {field: number}} of one LBANN version."""
    return {name.removeprefix(PACKAGE): {f["name"]: f["number"] for f in info["fields"]}
            for name, info in facts(version)["messages"].items()}


#: what v0.103 lacks of v0.104 (specs/lbann-format.md §1; there are no v0.103 facts): field → first version
SINCE = {("Layer.BatchNormalization", "no_bessel_correction"): "0.104", ("Layer.LayerNorm", "scale"): "0.104",
         ("Layer.LayerNorm", "bias"): "0.104", ("Layer.LayerNorm", "start_dim"): "develop",
         ("Layer.ChannelwiseSoftmax", "dim"): "0.104", ("Layer.ChannelwiseSoftmax", "single_dim_mode"): "0.104",
         ("Weights", "sharded"): "0.104", ("Initializer.ValueInitializer", "values_d"): "0.104",
         ("GeluOperator", ""): "0.104", ("SelectOperator", ""): "0.104"}
