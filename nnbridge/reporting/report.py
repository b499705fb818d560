"""Run reports: per-node rows plus totals, printable as a table, JSON or a plot.

Backends fill a ``Report``; the CLI and users look at it. Columns are free-form
(each backend adds what it measures: time, cycles, bytes, placement…) so one
mechanism serves the reference backend and both simulators.
"""

from __future__ import annotations

import json
import os
from dataclasses import dataclass, field
from typing import Any


@dataclass
class Report:
    backend: str
    model: str = ""
    rows: list[dict[str, Any]] = field(default_factory=list)
    totals: dict[str, Any] = field(default_factory=dict)
    notes: list[str] = field(default_factory=list)

    def add_row(self, **columns: Any) -> None:
        self.rows.append(columns)

    def columns(self) -> list[str]:
        cols: list[str] = []
        for row in self.rows:
            cols.extend(k for k in row if k not in cols)
        return cols

    def to_dict(self) -> dict[str, Any]:
        return {"backend": self.backend, "model": self.model, "rows": self.rows,
                "totals": self.totals, "notes": self.notes}

    def top(self, measure: str, n: int) -> Report:
        """The ``n`` rows with the largest ``measure``, largest first (totals and notes kept)."""
        rows = sorted(self.rows, key=lambda r: -float(r.get(measure) or 0.0))[:n]
        return Report(self.backend, self.model, rows, dict(self.totals), list(self.notes))

    def rollup(self, group: Any, measure: str) -> list[tuple[str, int, float]]:
        """(group, rows, sum of ``measure``) for each value of ``group`` (a column name or a function
        of a row), largest sum first: where the time goes, by op type or by reason."""
        sums: dict[str, list] = {}
        for row in self.rows:
            key = str(group(row) if callable(group) else row.get(group))
            entry = sums.setdefault(key, [0, 0.0])
            entry[0] += 1
            entry[1] += float(row.get(measure) or 0.0)
        return sorted(((k, n, v) for k, (n, v) in sums.items()), key=lambda item: -item[2])

    def to_json(self, path: str | os.PathLike | None = None, extra: dict[str, Any] | None = None) -> str:
        text = json.dumps({**self.to_dict(), **(extra or {})}, indent=2, default=_jsonable)
        if path is not None and os.fspath(path) == "-":  # standard output, not a file named "-"
            import sys

            sys.stdout.write(text + "\n")
        elif path is not None:
            from ..base.fileio import atomic_write

            with atomic_write(path, "w") as fh:
                fh.write(text + "\n")
        return text

    def to_table(self, title: str | None = None, max_rows: int | None = None):
        """A rich Table (print it with a rich Console)."""
        from rich.table import Table

        table = Table(title=title or f"{self.backend} report: {self.model}", show_lines=False)
        cols = self.columns()
        for c in cols:
            table.add_column(c, justify="right" if _numeric(self.rows, c) else "left")
        rows = self.rows if max_rows is None else self.rows[:max_rows]
        for row in rows:
            table.add_row(*[_fmt(row.get(c)) for c in cols])
        if self.totals:
            table.caption = "  ".join(f"{k}: {_fmt(v)}" for k, v in self.totals.items())
        return table

    def plot(self, path: str | os.PathLike, stack: list[str], label: str = "name", ylabel: str = "",
             top: int = 25, note: str | None = None) -> None:
        """A PNG of :meth:`figure` (or SVG, PDF… by the file's suffix; an SVG keeps its text as text)."""
        import matplotlib
        import matplotlib.pyplot as plt

        fig = self.figure(stack, label, ylabel, top, note)
        with matplotlib.rc_context({"svg.fonttype": "none"}):
            fig.savefig(path, dpi=120)
        plt.close(fig)

    def figure(self, stack: list[str], label: str = "name", xlabel: str = "", top: int = 25,
               note: str | None = None) -> Any:
        """Horizontal stacked bars of the ``top`` rows with the most time (the columns in ``stack``),
        largest first, full names, the other rows summed in one bar, and the totals in the title: it
        reads the same at 10 rows or 10,000. ``note`` names a column shown after each label (e.g.
        the bound of an RDU section)."""
        import matplotlib

        matplotlib.use("Agg")
        import matplotlib.pyplot as plt
        import numpy as np

        def total(row: dict) -> float:
            return sum(float(row.get(col) or 0) for col in stack)

        unnamed = sum(label not in r for r in self.rows)
        if unnamed:  # a bar labelled by its rank says nothing: the caller named the wrong column
            raise ValueError(f"{unnamed} of {len(self.rows)} rows have no '{label}' column to label their bars")
        ranked = sorted(self.rows, key=lambda r: -total(r))
        shown, rest = ranked[:top], ranked[top:]
        labels = [str(r[label]) + (f" ({r[note]})" if note and r.get(note) else "") for r in shown]
        values = [[float(r.get(col) or 0) for col in stack] for r in shown]
        grand = sum(total(r) for r in self.rows)
        if rest:  # summed in its label, not drawn: one long bar would flatten every other
            others = sum(total(r) for r in rest)
            labels.append(f"… {len(rest)} more: {others:,.1f} ({100 * others / grand if grand else 0:.0f} %)")
            values.append([0.0] * len(stack))
        height = 1.6 + 0.3 * len(labels)
        fig, ax = plt.subplots(figsize=(11, height))
        y = np.arange(len(labels))[::-1]
        left = np.zeros(len(labels))
        for k, col in enumerate(stack):
            widths = np.array([v[k] for v in values])
            ax.barh(y, widths, left=left, label=col.removesuffix("_us"), height=0.7)
            left += widths
        ax.set_yticks(y, labels, fontsize=8)
        ax.set_xlabel(xlabel)
        ax.set_title(f"{self.backend}: {self.model} — {len(self.rows)} rows, total {grand:,.1f}"
                     + (f"; the top {len(shown)} shown" if rest else ""), fontsize=10)
        ax.legend(fontsize=8, loc="lower right")
        fig.tight_layout()
        return fig


def _numeric(rows: list[dict[str, Any]], col: str) -> bool:
    return all(isinstance(r.get(col), (int, float)) or r.get(col) is None for r in rows)


def _fmt(v: Any) -> str:
    if v is None:
        return ""
    if isinstance(v, float):
        return f"{v:.4g}"
    if isinstance(v, int):
        return f"{v:,}"
    return str(v)


def _jsonable(v: Any) -> Any:
    if hasattr(v, "tolist"):
        return v.tolist()
    return str(v)
