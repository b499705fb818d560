"""``simulate --baseline`` / ``measure-performance --baseline``: this run beside an earlier run's
``--json`` report, row by row and in the totals.

Two runs of one model under other settings, another nnbridge version or on another machine are
judged side by side: SMV layers are matched by name, RDU stages by kernel name. Every numeric
column both rows hold gets a delta; any other column that differs is listed as changed; rows (and
totals) found on one side only are listed as such, never dropped.
"""

from __future__ import annotations

import html
import json
import math
import os
from collections import Counter
from dataclasses import dataclass, field
from typing import Any

from ..base.errors import InputError
from .html_page import sortable_table


@dataclass(frozen=True)
class Kind:
    """What one command's ``--json`` report holds: its rows, the column naming a row, the measure."""

    command: str
    what: str  # "SMV simulation", …
    rows: str  # the key of the rows in the JSON
    key: str  # the column that names a row
    unit: str  # "layer", "stage"
    signature: tuple[str, ...]  # keys only this kind's report has
    settings: tuple[str, ...] = ()  # top-level keys compared with the totals


KINDS = {
    "smv": Kind("simulate", "SMV simulation", "rows", "name", "layer", ("backend", "rows")),
    "rdu": Kind("measure-performance", "RDU performance estimate", "stages", "kernel", "stage",
                ("machine", "sections", "stages"), ("machine", "mode", "batch_size", "micro_batch")),
}


@dataclass
class Comparison:
    """This run against a baseline. ``rows``: one entry per row of either side, in this run's order
    then the baseline's leftovers, each ``{key, status, deltas: {column: Delta}, changed: {column:
    [baseline, now]}}`` (status ``both``, ``only in this run``, ``only in the baseline``)."""

    file: str
    kind: Kind
    model: str
    rows: list[dict[str, Any]] = field(default_factory=list)
    totals: dict[str, dict[str, Any]] = field(default_factory=dict)  # name → delta (or changed value)

    @property
    def only_here(self) -> list[str]:
        return [r[self.kind.key] for r in self.rows if r["status"] == "only in this run"]

    @property
    def only_in_baseline(self) -> list[str]:
        return [r[self.kind.key] for r in self.rows if r["status"] == "only in the baseline"]

    def to_dict(self) -> dict[str, Any]:
        return {"file": self.file, "model": self.model, "matched_by": self.kind.key, "totals": self.totals,
                "rows": self.rows, "only_in_this_run": self.only_here, "only_in_the_baseline": self.only_in_baseline}

    def table(self, measure: str, columns: list[str], top: int | None = None) -> Any:
        """A rich table of the rows both runs hold, the largest change of ``measure`` first
        (``top`` of them), with the deltas of ``columns`` and what else changed."""
        from rich.table import Table

        both = sorted((r for r in self.rows if r["status"] == "both"),
                      key=lambda r: -abs(r["deltas"].get(measure, {}).get("delta") or 0.0))
        shown = both if not top else both[:top]
        unit = self.kind.unit
        table = Table(title=f"against the baseline {self.file}: {measure} per {unit}, the largest change first"
                      + (f" ({len(shown)} of {len(both)} {unit}s in both runs)" if len(shown) < len(both) else ""))
        table.add_column(unit, justify="left")
        for head in ("baseline", "this run", "Δ", "Δ %", *(f"Δ {c}" for c in columns)):
            table.add_column(head, justify="right")
        table.add_column("changed", justify="left")
        for r in shown:
            d = r["deltas"].get(measure, {})
            table.add_row(str(r[self.kind.key]), _number(d.get("baseline")), _number(d.get("now")),
                          _number(d.get("delta"), signed=True), _percent(d.get("relative")),
                          *(_number(r["deltas"].get(c, {}).get("delta"), signed=True) for c in columns),
                          ", ".join(r["changed"]))
        return table

    def totals_table(self) -> Any:
        """The totals that changed (the unchanged ones counted in the caption)."""
        from rich.table import Table

        changed = {name: d for name, d in self.totals.items() if d["baseline"] != d["now"]}
        table = Table(title=f"totals against the baseline {self.file}")
        for head in ("total", "baseline", "this run", "Δ", "Δ %"):
            table.add_column(head, justify="left" if head == "total" else "right")
        if len(changed) < len(self.totals):
            table.caption = f"{len(self.totals) - len(changed)} more totals unchanged"
        for name, d in changed.items():
            table.add_row(name, _number(d["baseline"]), _number(d["now"]),
                          _number(d.get("delta"), signed=True), _percent(d.get("relative")))
        return table

    def one_sided_lines(self, limit: int = 20) -> list[str]:
        """The rows on one side only, by name (the first ``limit`` of each; every one is in the JSON
        and the HTML)."""
        lines = []
        for names, where in ((self.only_here, "only in this run"), (self.only_in_baseline, "only in the baseline")):
            if names:
                more = f" … and {len(names) - limit} more" if len(names) > limit else ""
                lines.append(f"{len(names)} {self.kind.unit}s {where}: {', '.join(names[:limit])}{more}")
        return lines

    def to_html(self, measure: str) -> str:
        """The totals and every row, sortable, with the row's status."""
        totals = sortable_table(["total", "baseline", "this run", "Δ", "Δ %"],
                                [[name, _cell(d["baseline"]), _cell(d["now"]), _cell(d.get("delta")),
                                  _percent(d.get("relative"))] for name, d in self.totals.items()])
        columns = list(dict.fromkeys(c for r in self.rows for c in r["deltas"] if c != measure))
        rows = []
        for r in self.rows:
            d = r["deltas"].get(measure, {})
            rows.append([r[self.kind.key], r["status"], _cell(d.get("baseline")), _cell(d.get("now")),
                         _cell(d.get("delta")), _percent(d.get("relative")),
                         *(_cell(r["deltas"].get(c, {}).get("delta")) for c in columns),
                         "; ".join(f"{c}: {a} → {b}" for c, (a, b) in r["changed"].items())])
        table = sortable_table([self.kind.unit, "status", f"baseline {measure}", measure, "Δ", "Δ %",
                                *(f"Δ {c}" for c in columns), "changed"], rows)
        one_sided = "".join(f"<p>{html.escape(line)}</p>" for line in self.one_sided_lines(limit=10**9))
        return (f'<h2 id="baseline">Against the baseline {html.escape(self.file)}</h2>{totals}{one_sided}'
                f"<h2>Every {self.kind.unit} against the baseline (click a column to sort)</h2>{table}")


def read_baseline(path: str | os.PathLike, kind: str) -> dict[str, Any]:
    """An earlier run's ``--json`` report of the ``kind`` (``smv``, ``rdu``) command, refused in one
    line if it cannot be read or is another kind of file."""
    where = f"--baseline {os.fspath(path)}"
    want = KINDS[kind]
    data = _read_json(path, where)
    _check_kind(data, want, kind, where)
    _check_contents(data, want, where)
    return data


def _read_json(path: str | os.PathLike, where: str) -> Any:
    """The file's JSON, refused in one line if it cannot be read or parsed."""
    try:
        with open(path, encoding="utf-8") as fh:
            return json.load(fh)
    except OSError as exc:
        raise InputError(f"{where}: cannot read it ({exc.strerror or exc})") from None
    except (UnicodeDecodeError, json.JSONDecodeError, RecursionError) as exc:
        raise InputError(f"{where}: not a JSON file ({str(exc).splitlines()[0][:120]})") from None


def _check_kind(data: Any, want: Kind, kind: str, where: str) -> None:
    """The report is the ``kind`` command's (naming the other command whose report it is, if any)."""
    if not isinstance(data, dict) or not all(k in data for k in want.signature):
        other = next((k for k in KINDS.values() if k is not want and isinstance(data, dict)
                      and all(s in data for s in k.signature)), None)
        found = f"an `nnbridge {other.command} --json` report" if other else "not an nnbridge run report"
        raise InputError(f"{where}: {found}; `{want.command} --baseline` takes a `{want.command} --json` report")
    if kind == "smv" and data.get("backend") != "smv":
        raise InputError(f"{where}: a report of the '{data.get('backend')}' backend, not an SMV simulation")


def _check_contents(data: dict[str, Any], want: Kind, where: str) -> None:
    """Rows each named, totals, and the model's name: what :func:`compare` reads."""
    rows, totals = data.get(want.rows), data.get("totals")
    if not isinstance(rows, list) or not isinstance(totals, dict):
        raise InputError(f"{where}: '{want.rows}' must be a list and 'totals' an object")
    for i, row in enumerate(rows):
        if not isinstance(row, dict) or not isinstance(row.get(want.key), str):
            raise InputError(f"{where}: {want.rows}[{i}] has no '{want.key}' naming its {want.unit}")
    if not isinstance(data.get("model"), str):
        raise InputError(f"{where}: names no model (write it again with this version's `{want.command} --json`)")


def same_model(baseline: dict[str, Any], path: str | os.PathLike, model: str) -> None:
    """Refuse a baseline of another model (checked again by :func:`compare`; a command checks it
    as soon as it has read the model, before the run)."""
    if baseline["model"] != model:
        raise InputError(f"--baseline {os.fspath(path)}: a report of model '{baseline['model']}', this run is of "
                         f"'{model}' (compare two runs of the same model)")


def compare(baseline: dict[str, Any], path: str | os.PathLike, kind: str, report: dict[str, Any]) -> Comparison:
    """This run's ``report`` (as its ``--json`` writes it) against ``baseline`` (from
    :func:`read_baseline`); a baseline of another model is refused in one line."""
    want = KINDS[kind]
    model, rows = report["model"], report[want.rows]
    same_model(baseline, path, model)
    result = Comparison(os.fspath(path), want, model)
    before = _keyed(baseline[want.rows], want.key)
    after = _keyed(rows, want.key)
    for key, row in after.items():
        old = before.pop(key, None)
        name = _name(key)
        if old is None:
            result.rows.append({want.key: name, "status": "only in this run", "deltas": {}, "changed": {}})
            continue
        deltas, changed = {}, {}
        for col in dict.fromkeys([*row, *old]):
            if col == want.key:
                continue
            a, b = old.get(col), row.get(col)
            if _numeric(a) and _numeric(b):
                deltas[col] = _delta(a, b)
            elif a != b:
                changed[col] = [a, b]
        result.rows.append({want.key: name, "status": "both", "deltas": deltas, "changed": changed})
    for key in before:
        result.rows.append({want.key: _name(key), "status": "only in the baseline", "deltas": {}, "changed": {}})
    old_totals, new_totals = (_flat({k: r[k] for k in want.settings if k in r} | r["totals"])
                              for r in (baseline, report))
    for name in dict.fromkeys([*new_totals, *old_totals]):
        a, b = old_totals.get(name), new_totals.get(name)
        if _numeric(a) and _numeric(b):
            result.totals[name] = _delta(a, b)
        elif a != b or name not in old_totals or name not in new_totals:
            result.totals[name] = {"baseline": a, "now": b}
    return result


def _keyed(rows: list[dict[str, Any]], key: str) -> dict[tuple[str, int], dict[str, Any]]:
    """Rows by their name (a name met twice: the second is (name, 1), matched to the other side's second)."""
    seen: Counter = Counter()
    out = {}
    for row in rows:
        name = row[key]
        out[(name, seen[name])] = row
        seen[name] += 1
    return out


def _name(key: tuple[str, int]) -> str:
    return key[0] if key[1] == 0 else f"{key[0]} #{key[1] + 1}"


def _flat(totals: dict[str, Any], prefix: str = "") -> dict[str, Any]:
    """Nested totals (an RDU estimate's bytes by tier) as dotted names."""
    out: dict[str, Any] = {}
    for k, v in totals.items():
        if isinstance(v, dict):
            out.update(_flat(v, f"{prefix}{k}."))
        else:
            out[f"{prefix}{k}"] = v
    return out


def _numeric(v: Any) -> bool:
    return isinstance(v, (int, float)) and not isinstance(v, bool)


def _delta(a: float, b: float) -> dict[str, Any]:
    delta = b - a
    relative = delta / abs(a) if a else (0.0 if not delta else None)  # from zero: no ratio
    return {"baseline": a, "now": b, "delta": delta, "relative": relative}


def _number(v: Any, signed: bool = False) -> str:
    if v is None:
        return "—"
    if not _numeric(v):
        return str(v)
    if isinstance(v, float) and not math.isfinite(v):
        return str(v)
    if isinstance(v, int):
        return f"{v:+,}" if signed else f"{v:,}"
    spec = ",.0f" if abs(v) >= 1000 else ".4g"
    return format(v, ("+" if signed else "") + spec)


def _percent(relative: float | None) -> str:
    return "—" if relative is None else f"{100 * relative:+.1f} %"


def _cell(v: Any) -> Any:
    return "—" if v is None else v
