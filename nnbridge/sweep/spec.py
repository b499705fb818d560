"""A sweep specification (TOML): models × a space of simulator settings × metrics to record.

```toml
backend = "smv"                     # or "rdu"
models = ["minerva", "lenet5"]      # zoo names, large builders (bert_base, llama_decoder) or files
metrics = ["latency_ms", "dram_bytes", "utilisation_pct"]

[space]                             # a field: list of values, or a range
mem_policy = ["dma", "acp"]
num_accels = [1, 2, 4, 8]
tiling_threads = {start = 1, stop = 8, step = 7}

[sample]                            # optional: random / Latin-hypercube points instead of the grid
method = "latin-hypercube"          # or "random"
points = 200
seed = 0
```

Every field and value is checked before any point runs: a bad spec fails with one line that
names the field. Points are plain dicts of field → value, in a deterministic order, each with a
stable key so that ``--resume`` can skip those already recorded.
"""

from __future__ import annotations

import hashlib
import itertools
import json
import math
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np

from ..base.errors import InputError
from ..base.fileio import read_toml
from .targets import TARGETS, Target, resolve_model_ref


@dataclass(frozen=True)
class Spec:
    backend: str
    models: list[str]
    metrics: list[str]
    space: dict[str, list[Any]]  # field → candidate values (for sampled numeric fields: [low, high])
    sample: dict[str, Any] = field(default_factory=dict)
    source: str = "<spec>"

    @property
    def target(self) -> Target:
        return TARGETS[self.backend]

    def points(self) -> list[dict[str, Any]]:
        """Every (model, settings) point, grid order or the sampled set (seeded)."""
        settings = self._sampled() if self.sample else self._grid()
        return [{"model": m, **s} for m in self.models for s in settings]

    def _grid(self) -> list[dict[str, Any]]:
        names = list(self.space)
        return [dict(zip(names, combo)) for combo in itertools.product(*(self.space[n] for n in names))]

    def _sampled(self) -> list[dict[str, Any]]:
        count, rng = int(self.sample["points"]), np.random.default_rng(int(self.sample.get("seed", 0)))
        names = list(self.space)
        if self.sample["method"] == "latin-hypercube":  # one point per stratum of every field
            unit = np.stack([(rng.permutation(count) + rng.random(count)) / count for _ in names], axis=1)
        else:
            unit = rng.random((count, len(names)))
        points = []
        for row in unit:
            point = {}
            for name, u in zip(names, row):
                values = self.space[name]
                kind = self.target.fields[name].kind
                if name in self.sample.get("continuous", ()) and kind in (int, float):
                    low, high = values[0], values[-1]
                    value = low + u * (high - low)
                    point[name] = int(round(value)) if kind is int else float(value)
                else:
                    point[name] = values[min(int(u * len(values)), len(values) - 1)]
            points.append(point)
        return points


def point_key(point: dict[str, Any]) -> str:
    """A stable identity of a point (model and settings), for --resume."""
    text = json.dumps(point, sort_keys=True, default=str)
    return hashlib.sha1(text.encode()).hexdigest()[:16]


def load_spec(path: str | Path) -> Spec:
    """Read and validate a TOML spec; every problem is one InputError line naming the field."""
    data = read_toml(path, "sweep spec")
    return parse_spec(data, str(path), base_dir=Path(path).parent)


def parse_spec(data: dict[str, Any], source: str = "<spec>", base_dir: Path | None = None) -> Spec:
    where = f"sweep spec '{source}'"
    unknown = set(data) - {"backend", "models", "metrics", "space", "sample"}
    if unknown:
        raise InputError(f"{where}: unknown key '{sorted(unknown)[0]}' (known: backend, models, metrics, space, "
                         f"sample)")
    backend = data.get("backend")
    if backend not in TARGETS:
        raise InputError(f"{where}: backend must be one of {', '.join(TARGETS)} (got {backend!r})")
    target = TARGETS[backend]
    models = data.get("models")
    if not isinstance(models, list) or not models or not all(isinstance(m, str) for m in models):
        raise InputError(f"{where}: models must be a non-empty list of zoo names or files")
    models = [resolve_model_ref(m, base_dir, where) for m in models]
    metrics = data.get("metrics", list(target.default_metrics))
    if not isinstance(metrics, list) or not metrics:
        raise InputError(f"{where}: metrics must be a non-empty list (known for {backend}: "
                         f"{', '.join(target.metrics)})")
    for metric in metrics:
        target.check_metric(metric, where)
    space_table = data.get("space", {})
    if not isinstance(space_table, dict) or not space_table:
        raise InputError(f"{where}: [space] must name at least one field (known for {backend}: "
                         f"{', '.join(target.fields)})")
    space = {name: _values(target, name, raw, where) for name, raw in space_table.items()}
    sample = _sample(data.get("sample"), space, target, where)
    return Spec(backend, models, metrics, space, sample, source)


def _values(target: Target, name: str, raw: Any, where: str) -> list[Any]:
    spec_field = target.fields.get(name)
    if spec_field is None:
        raise InputError(f"{where}: field '{name}' is not a {target.name} setting (known: {', '.join(target.fields)})")
    if isinstance(raw, dict):
        values = _range(name, raw, where)
    elif isinstance(raw, list):
        values = raw
    else:
        values = [raw]
    if not values:
        raise InputError(f"{where}: field '{name}' has an empty list of values")
    checked = [spec_field.check(v, f"{where}: field '{name}'") for v in values]
    for value in checked:
        target.check_value(name, value, f"{where}: field '{name}'")
    return checked


def _range(name: str, raw: dict[str, Any], where: str) -> list[Any]:
    if set(raw) - {"start", "stop", "step", "num", "log"} or "start" not in raw or "stop" not in raw:
        raise InputError(f"{where}: field '{name}': a range is {{start, stop, step}} or {{start, stop, num[, log]}}")
    start, stop = raw["start"], raw["stop"]
    if "num" in raw:
        num = int(raw["num"])
        if num < 1:
            raise InputError(f"{where}: field '{name}' has an empty range (num = {num})")
        if raw.get("log"):
            if start <= 0 or stop <= 0:
                raise InputError(f"{where}: field '{name}': a log range needs positive ends")
            values = np.geomspace(start, stop, num)
        else:
            values = np.linspace(start, stop, num)
        integral = isinstance(start, int) and isinstance(stop, int)
        return [int(round(v)) if integral else float(v) for v in values]
    step = raw.get("step", 1)
    if step == 0 or (stop - start) * step < 0:
        raise InputError(f"{where}: field '{name}' has an empty range ({start} to {stop} by {step})")
    count = int(math.floor((stop - start) / step + 1e-9)) + 1
    return [start + i * step for i in range(count)]


def _sample(raw: Any, space: dict[str, list[Any]], target: Target, where: str) -> dict[str, Any]:
    if raw is None:
        return {}
    if not isinstance(raw, dict) or raw.get("method") not in ("random", "latin-hypercube"):
        raise InputError(f"{where}: [sample] method must be 'random' or 'latin-hypercube'")
    points = raw.get("points")
    if not isinstance(points, int) or points < 1:
        raise InputError(f"{where}: [sample] points must be a positive integer (got {points!r})")
    for name in raw.get("continuous", []):
        if name not in space or target.fields[name].kind not in (int, float):
            raise InputError(f"{where}: [sample] continuous field '{name}' must be a numeric field of [space]")
    return dict(raw)
