"""Run a sweep: every point of a spec evaluated as Ray tasks (or in this process), rows appended to
``DIR/results.csv`` as chunks finish, ``DIR/results.parquet`` written at the end.

Points go to Ray in chunks of a few dozen (one Ray task per chunk) so that the millisecond
simulations are not drowned by per-task overhead, in model order so that each worker process
prepares a model once (``targets.prepared_graph`` is cached per process). A failing point is a
row with its one-line error; it never stops the sweep. ``--resume`` reads the keys already in
``results.csv`` (a row cut short by a kill is dropped) and runs only the rest.
"""

from __future__ import annotations

import csv
import json
import math
import time
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from ..base.errors import InputError
from .spec import Spec, point_key
from .targets import TARGETS, evaluate_point

RESULTS_CSV, RESULTS_PARQUET, SPEC_JSON = "results.csv", "results.parquet", "spec.json"


@dataclass
class SweepSummary:
    points: int
    skipped: int  # already recorded (--resume)
    computed: int
    failed: int
    seconds: float
    out_dir: Path

    @property
    def points_per_second(self) -> float:
        return self.computed / self.seconds if self.seconds else math.inf


def columns(spec: Spec) -> list[str]:
    return ["key", "model", *spec.space, *spec.metrics, "error"]


def evaluate_chunk(backend: str, points: list[dict[str, Any]], metrics: list[str]) -> list[dict[str, Any]]:
    """Rows for a chunk of points (the body of one Ray task)."""
    return [{"key": point_key(p), **evaluate_point(backend, p, metrics)} for p in points]


def _chunks(points: list[dict[str, Any]], size: int) -> Iterator[list[dict[str, Any]]]:
    for start in range(0, len(points), size):
        yield points[start:start + size]


def _recorded_keys(path: Path, header: list[str]) -> set[str]:
    """Keys of the complete rows of an earlier run; the file is rewritten without a torn last row."""
    with path.open(newline="") as fh:
        rows = list(csv.reader(fh))
    if not rows or rows[0] != header:
        raise InputError(f"{path}: its columns do not match this spec; use another --out")
    complete = [r for r in rows[1:] if len(r) == len(header) and r[0]]
    if len(complete) != len(rows) - 1:
        with path.open("w", newline="") as fh:
            csv.writer(fh).writerows([header, *complete])
    return {r[0] for r in complete}


def run_sweep(spec: Spec, out_dir: str | Path, *, address: str | None = None, resume: bool = False,
              workers: int | None = None, serial: bool = False,
              on_progress: Callable[[int, int], None] | None = None) -> SweepSummary:
    """Evaluate every point of ``spec`` into ``out_dir``; Ray unless ``serial``."""
    out = Path(out_dir)
    header = columns(spec)
    csv_path = out / RESULTS_CSV
    if csv_path.exists() and not resume:
        raise InputError(f"{out} already holds sweep results; pass --resume to continue them or choose another --out")
    out.mkdir(parents=True, exist_ok=True)
    points = spec.points()
    done = _recorded_keys(csv_path, header) if csv_path.exists() else set()
    todo = [p for p in points if point_key(p) not in done]
    (out / SPEC_JSON).write_text(json.dumps({"backend": spec.backend, "models": spec.models, "space": spec.space,
                                             "metrics": spec.metrics, "sample": spec.sample, "source": spec.source},
                                            indent=2, default=str))
    start = time.perf_counter()
    failed = 0
    new_file = not csv_path.exists()
    with csv_path.open("a", newline="") as fh:
        writer = csv.DictWriter(fh, header)
        if new_file:
            writer.writeheader()
            fh.flush()
        finished = 0
        for rows in (_serial(spec, todo) if serial else _on_ray(spec, todo, address, workers)):
            writer.writerows(rows)
            fh.flush()
            failed += sum(1 for r in rows if r["error"])
            finished += len(rows)
            if on_progress:
                on_progress(finished, len(todo))
    seconds = time.perf_counter() - start
    write_parquet(spec, out)
    return SweepSummary(len(points), len(points) - len(todo), len(todo), failed, seconds, out)


def _serial(spec: Spec, todo: list[dict[str, Any]]) -> Iterator[list[dict[str, Any]]]:
    for chunk in _chunks(todo, 16):
        yield evaluate_chunk(spec.backend, chunk, spec.metrics)


def _on_ray(spec: Spec, todo: list[dict[str, Any]], address: str | None,
            workers: int | None) -> Iterator[list[dict[str, Any]]]:
    try:
        import ray
    except ImportError:
        raise InputError("nnbridge sweep runs on Ray: pip install 'nnbridge[sweep]' (or pass --serial)") from None
    started_here = not ray.is_initialized()
    if started_here:
        try:
            if address:
                ray.init(address=address, log_to_driver=False)
            else:
                # "local" starts a private instance even when a cluster runs on this machine.
                ray.init(address="local", num_cpus=workers, include_dashboard=False, log_to_driver=False)
        except Exception as exc:  # connection refused, bad address: one line
            hint = (" (on the head node use --address auto; from another machine set RAY_AUTH_TOKEN "
                    "as on the head)") if address else ""
            raise InputError(f"cannot start or join Ray{f' at {address}' if address else ''}: "
                             f"{str(exc).splitlines()[0]}{hint}") from None
    try:
        remote = ray.remote(evaluate_chunk)
        slots = max(1, int(ray.cluster_resources().get("CPU", 1)))
        size = max(1, min(32, math.ceil(len(todo) / (slots * 8))))
        pending = [remote.remote(spec.backend, chunk, spec.metrics) for chunk in _chunks(todo, size)]
        while pending:
            ready, pending = ray.wait(pending, num_returns=1)
            yield ray.get(ready[0])
    finally:
        if started_here:
            ray.shutdown()


def read_results(out_dir: str | Path) -> tuple[dict[str, Any], list[dict[str, Any]]]:
    """(the spec as recorded, typed rows) of a sweep directory."""
    out = Path(out_dir)
    try:
        recorded = json.loads((out / SPEC_JSON).read_text())
        with (out / RESULTS_CSV).open(newline="") as fh:
            raw = list(csv.DictReader(fh))
    except (OSError, json.JSONDecodeError) as exc:
        raise InputError(f"{out} is not a sweep directory (needs {SPEC_JSON} and {RESULTS_CSV}): {exc}") from None
    target = TARGETS[recorded["backend"]]
    rows = []
    for r in raw:
        row: dict[str, Any] = {"key": r["key"], "model": r["model"], "error": r["error"]}
        for name in recorded["space"]:
            row[name] = _typed(target.fields[name].kind, r[name])
        for metric in recorded["metrics"]:
            row[metric] = float(r[metric]) if r[metric] not in ("", "nan") else math.nan
        rows.append(row)
    return recorded, rows


def _typed(kind: type, text: str) -> Any:
    if kind is bool:
        return text == "True"
    return kind(float(text)) if kind is int else kind(text)


def write_parquet(spec: Spec, out: Path) -> None:
    import pyarrow as pa
    import pyarrow.parquet as pq

    _, rows = read_results(out)
    table = pa.Table.from_pylist(rows) if rows else pa.table({c: [] for c in columns(spec)})
    pq.write_table(table, out / RESULTS_PARQUET)
