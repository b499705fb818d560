"""Pieces of nnbridge's single-file HTML reports: sortable tables, inlined PNGs, the sort script.

A report is one file to open or mail: plots are inlined (as SVG, or base64 PNGs), and a small script sorts
any ``table.sortable`` by the clicked column (numbers numerically, text alphabetically).
"""

from __future__ import annotations

import base64
import html
from typing import Any

SORT_SCRIPT = """
document.querySelectorAll('table.sortable th').forEach(function (th) {
  th.addEventListener('click', function () {
    var column = th.cellIndex;
    var body = th.closest('table').tBodies[0];
    var rows = Array.prototype.slice.call(body.rows);
    var up = th.dataset.order !== 'up';
    th.dataset.order = up ? 'up' : 'down';
    rows.sort(function (a, b) {
      var x = a.cells[column].textContent, y = b.cells[column].textContent;
      var nx = parseFloat(x), ny = parseFloat(y);
      var c = (isNaN(nx) || isNaN(ny)) ? x.localeCompare(y) : nx - ny;
      return up ? c : -c;
    });
    rows.forEach(function (r) { body.appendChild(r); });
  });
});
"""


def sortable_table(header: list[str], rows: list[list[Any]]) -> str:
    def cell(v: Any) -> str:
        return f"{v:.6g}" if isinstance(v, float) else html.escape(str(v))

    head = "".join(f"<th>{html.escape(h)}</th>" for h in header)
    body = "".join("<tr>" + "".join(f"<td>{cell(v)}</td>" for v in r) + "</tr>" for r in rows)
    return f'<table class="sortable"><thead><tr>{head}</tr></thead><tbody>{body}</tbody></table>'


def svg_figure(fig: Any, caption: str) -> str:
    """A matplotlib figure inlined as SVG with its text kept as text: the page stays one file, its
    labels can be searched and copied, and they read the same at any zoom."""
    import io

    import matplotlib

    buffer = io.StringIO()
    with matplotlib.rc_context({"svg.fonttype": "none"}):
        fig.savefig(buffer, format="svg")
    svg = buffer.getvalue()
    svg = svg[svg.index("<svg"):]  # the XML declaration and doctype cannot sit inside HTML
    return f'<figure role="img" aria-label="{html.escape(caption)}">{svg}<figcaption>{html.escape(caption)}' \
           f"</figcaption></figure>"


def png_figure(data: bytes, caption: str) -> str:
    return (f'<figure><img alt="{html.escape(caption)}" src="data:image/png;base64,{base64.b64encode(data).decode()}">'
            f"<figcaption>{html.escape(caption)}</figcaption></figure>")


STYLE = """body{font-family:sans-serif;margin:1.5em} table{border-collapse:collapse;font-size:13px}
td,th{border:1px solid #ccc;padding:2px 6px;text-align:right} th{cursor:pointer;background:#eee}
figure{display:inline-block;margin:4px} .graph{overflow:auto;border:1px solid #ccc;max-height:70vh}"""
