"""``port --html``: the table as one page, with each target's own report beside it and linked
(the SMV simulation's page of ``simulate --html``, the RDU program's of ``measure-performance --html``)."""

from __future__ import annotations

import html
import os
from pathlib import Path

from ..base.fileio import atomic_write
from ..reporting.html_page import STYLE
from .report import COLUMNS, PortReport, TargetReport

#: cell text → its colour: what the verdict words mean at a glance
_TONES = {"yes": "#1a7f37", "with rewrites": "#9a6700", "no": "#cf222e", "agree": "#1a7f37", "DIFFER": "#cf222e",
          "not run": "#57606a"}

_PAGE_STYLE = STYLE + """
table.port td,table.port th{text-align:left;vertical-align:top;white-space:pre-wrap;max-width:34em}
table.port td.next{font-family:monospace;font-size:12px;word-break:break-all} .lead{font-weight:bold}"""


def write_html(report: PortReport, path: str | os.PathLike) -> list[Path]:
    """The page at ``path`` and each target's report beside it (``<page stem>.<target>.html``);
    returns every file written."""
    page = Path(path)
    written = []
    for row in report.targets:
        linked = _target_page(row, page)
        if linked is not None:
            row.page = linked.name
            written.append(linked)
    rows = "".join(_row(t) for t in report.targets)
    head = "".join(f"<th>{html.escape(c)}</th>" for c in COLUMNS)
    pins = ", ".join([*(f"{k}={v}" for k, v in report.dims.items()),
                      *(f"{k}={'x'.join(map(str, v))}" for k, v in report.input_shapes.items())]) or "none"
    inputs = "; ".join(f"{i['name']} {'x'.join(map(str, i['shape']))} {i['dtype']} {i['distribution']}"
                       for i in report.inputs)
    title = f"nnbridge port: {report.model}"
    text = f"""<!DOCTYPE html>
<html lang="en"><head><meta charset="utf-8"><title>{html.escape(title)}</title>
<style>{_PAGE_STYLE}</style></head><body>
<h1>Where {html.escape(Path(report.model).name)} can go</h1>
<p>pins: {html.escape(pins)} — inputs (every target's): {html.escape(inputs)} — {report.seconds:,.1f} s</p>
<table class="port"><thead><tr>{head}</tr></thead><tbody>{rows}</tbody></table>
</body></html>
"""
    with atomic_write(page, "w") as fh:
        fh.write(text)
    return [page, *written]


def _target_page(row: TargetReport, page: Path) -> Path | None:
    if "smv" in row.sources:
        from ..backends.smv.reporting import write_html as smv_page

        target = page.with_name(f"{page.stem}.{row.target}.html")
        exe = row.sources["smv"]
        smv_page(target, exe.report, exe.graph)
        return target
    if "rdu" in row.sources:
        from ..backends.rdu.reporting import write_html as rdu_page

        target = page.with_name(f"{page.stem}.{row.target}.html")
        exe, est = row.sources["rdu"]
        rdu_page(target, exe, est)
        return target
    return None


def _row(row: TargetReport) -> str:
    cells = row.cells()
    out = []
    for i, text in enumerate(cells):
        lead, _, rest = text.partition("\n")
        tone = next((c for w, c in _TONES.items() if lead == w or lead.startswith(w + ":")
                     or lead.startswith(w + " on")), None)
        style = f' style="color:{tone}"' if tone else ""
        first = f'<span class="lead"{style}>{html.escape(lead)}</span>' if tone or i == 0 else html.escape(lead)
        body = first + (f"\n{html.escape(rest)}" if rest else "")
        if i == 0 and row.page:
            body += f'\n<a href="{html.escape(row.page)}">its report</a>'
        out.append(f'<td class="{"next" if i == len(cells) - 1 else ""}">{body}</td>')
    return "<tr>" + "".join(out) + "</tr>"
