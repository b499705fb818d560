"""The inputs a check runs on: given ones, then those the model file stores, then generated ones."""

from __future__ import annotations

import os
from collections.abc import Mapping
from typing import Any

import numpy as np

from ..api.inputs import InputInfo, generate_inputs
from ..ir import Graph


def check_feeds(model: Any, graph: Graph, given: Mapping[str, np.ndarray] | None, seed: int | None,
                dims: Mapping[str, int] | None, ranges: Mapping[str, tuple[float, float]] | None,
                stored: bool) -> tuple[dict[str, np.ndarray], list[InputInfo]]:
    """Given inputs, then the values the model file stores (a SMAUG params file), then generated ones."""
    given = dict(given or {})
    sources = dict.fromkeys(given, "given")
    where = "the model file"
    if isinstance(model, (str, os.PathLike)) and os.fspath(model).endswith("_topo.pbtxt"):
        from ..converters.smaug import model_paths

        where = model_paths(model)[1].name
    for name, value in graph.input_values.items() if stored else ():
        if name not in given and name not in (ranges or {}):
            given[name] = value
            sources[name] = f"stored in {where}"
    return generate_inputs(graph, seed, dims, given, ranges, sources)

