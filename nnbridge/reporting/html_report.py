"""``simulate --html`` / ``measure-performance --html``: one HTML file that says where the time goes.

It holds the totals, the plot (inlined SVG, its labels text), the roll-ups, every row in a sortable table, and the
graph drawn as SVG with each node coloured by its share of the time (white: none, red: the most):
nodes sit in columns by their depth from the inputs, edges join producers to consumers, and
hovering a node shows its name, op and time.
"""

from __future__ import annotations

import html
import os
from collections.abc import Mapping, Sequence
from typing import Any

from ..base.fileio import atomic_write
from ..ir import Graph
from .baseline import Comparison
from .html_page import SORT_SCRIPT, STYLE, sortable_table, svg_figure
from .report import Report

BOX_W, BOX_H, GAP_X, GAP_Y = 120, 28, 40, 12


def write_html_report(path: str | os.PathLike, report: Report, stack: list[str], measure: str,
                      rollups: Mapping[str, Sequence[tuple[str, int, float]]], graph: Graph | None,
                      times: Mapping[str, float], note: str | None = None,
                      baseline: Comparison | None = None) -> None:
    """``times``: node name → time in ``measure`` units, for colouring the graph; ``baseline``: this
    run against an earlier one (``--baseline``), shown after the totals."""
    import matplotlib.pyplot as plt

    fig = report.figure(stack, note=note, xlabel=measure)
    chart = svg_figure(fig, "where the time goes")
    plt.close(fig)
    total = sum(value for _, _, value in next(iter(rollups.values()), []))
    totals = "".join(f"<tr><th>{html.escape(str(k))}</th><td>{_cell(v)}</td></tr>" for k, v in report.totals.items())
    sections = "".join(
        f"<h2>{html.escape(title.replace('_', ' '))}</h2>"
        + sortable_table(["group", "rows", measure, "share"],
                         [[g, n, v, f"{100 * v / total:.1f} %" if total else "—"] for g, n, v in groups])
        for title, groups in rollups.items())
    columns = list(dict.fromkeys(k for row in report.rows for k in row))
    rows = sortable_table(columns, [[row.get(c, "") for c in columns] for row in report.rows])
    drawing = graph_svg(graph, times) if graph is not None else ""
    title = f"nnbridge {report.backend}: {report.model}"
    page = f"""<!DOCTYPE html>
<html lang="en"><head><meta charset="utf-8"><title>{html.escape(title)}</title>
<style>{STYLE}</style></head><body>
<h1>{html.escape(report.backend.upper())}: {html.escape(report.model)}</h1>
<table>{totals}</table>
<p>{'<br>'.join(html.escape(n) for n in report.notes)}</p>
{baseline.to_html(measure) if baseline else ""}
{chart}
{sections}
<h2>The graph, each node coloured by its {html.escape(measure)}</h2>
<div class="graph">{drawing}</div>
<h2>Every row (click a column to sort)</h2>
{rows}
<script>{SORT_SCRIPT}</script>
</body></html>
"""
    with atomic_write(path, "w") as fh:
        fh.write(page)


def graph_svg(graph: Graph, times: Mapping[str, float]) -> str:
    """The graph's nodes in columns by depth, coloured white → red by their time."""
    depth: dict[str, int] = {}
    producer = {o.name: n.name for n in graph.nodes for o in n.outputs}
    for node in graph.nodes:  # topological order: parents first
        parents = [producer[v.name] for v in node.inputs if v is not None and v.name in producer]
        depth[node.name] = 1 + max((depth[p] for p in parents), default=-1)
    columns: dict[int, list[str]] = {}
    for node in graph.nodes:
        columns.setdefault(depth[node.name], []).append(node.name)
    where = {name: (d * (BOX_W + GAP_X) + 10, i * (BOX_H + GAP_Y) + 10)
             for d, names in columns.items() for i, name in enumerate(names)}
    width = (max(columns, default=0) + 1) * (BOX_W + GAP_X) + 20
    height = max((len(v) for v in columns.values()), default=1) * (BOX_H + GAP_Y) + 20
    peak = max(times.values(), default=0.0) or 1.0
    edges, boxes = [], []
    for node in graph.nodes:
        x, y = where[node.name]
        for v in node.inputs:
            if v is not None and v.name in producer:
                px, py = where[producer[v.name]]
                edges.append(f'<line x1="{px + BOX_W}" y1="{py + BOX_H / 2}" x2="{x}" y2="{y + BOX_H / 2}"/>')
        t = times.get(node.name, 0.0)
        shade = int(255 * (1 - min(1.0, t / peak)))
        label = html.escape(node.op if len(node.op) <= 16 else node.op[:15] + "…")
        boxes.append(f'<g class="node"><title>{html.escape(node.name)} ({html.escape(node.op)}): {t:,.1f}</title>'
                     f'<rect x="{x}" y="{y}" width="{BOX_W}" height="{BOX_H}" rx="4" fill="rgb(255,{shade},{shade})" '
                     f'stroke="#555"/><text x="{x + BOX_W / 2}" y="{y + BOX_H / 2 + 4}" text-anchor="middle" '
                     f'font-size="11">{label}</text></g>')
    return (f'<svg xmlns="http://www.w3.org/2000/svg" width="{width}" height="{height}" '
            f'viewBox="0 0 {width} {height}"><g stroke="#999" stroke-width="1">{"".join(edges)}</g>'
            f'{"".join(boxes)}</svg>')


def _cell(value: Any) -> str:
    return f"{value:,.6g}" if isinstance(value, float) else html.escape(str(value))
