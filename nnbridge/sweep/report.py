"""``nnbridge sweep-report DIR``: PNG plots and one self-contained HTML page of a sweep.

Plots: each metric against each swept field, and per model the Pareto front of a latency metric
against a hardware cost — by default the compute the point pays for (SMV: accelerators × PEs ×
MACs per PE; RDU: PCUs), or a product of fields given with ``--cost``. A model keeps one colour
in every plot (its cloud of points and its front alike). The HTML page inlines the plots (base64)
and holds sortable tables of the Pareto points and of every row, so it is one file to open or mail.
"""

from __future__ import annotations

import html
import math
from pathlib import Path
from typing import Any

from ..base.errors import InputError
from ..reporting.html_page import SORT_SCRIPT, STYLE, png_figure, sortable_table
from .engine import read_results
from .targets import TARGETS

DEFAULT_COST = {"smv": ["num_accels", "num_pes", "maccs_per_pe"], "rdu": ["n_pcu"]}


def _setting(recorded: dict[str, Any], row: dict[str, Any], name: str) -> float:
    """A setting of a row: swept, else the simulator's default."""
    if name in row:
        return float(row[name])
    if recorded["backend"] == "smv":
        from ..backends.smv.config import SmvConfig

        return float(getattr(SmvConfig(), name))
    from ..backends.rdu.presets import DEFAULT_PRESET, PRESETS

    preset = PRESETS[row.get("preset", DEFAULT_PRESET)]
    value = getattr(preset, name)
    return math.inf if value is None else float(value)


def pareto(points: list[tuple[float, float, dict]]) -> list[tuple[float, float, dict]]:
    """The points no other point beats on both cost and latency (lower is better on both)."""
    front, best = [], math.inf
    for cost, latency, row in sorted(points, key=lambda p: (p[0], p[1])):
        if latency < best:
            front.append((cost, latency, row))
            best = latency
    return front


def model_colours(models: list[str]) -> dict[str, Any]:
    """One colour per model, the same in every plot, no two models alike: a qualitative palette
    (tab10, then tab20), past 20 models evenly spaced along a perceptual map."""
    from matplotlib import colormaps

    if len(models) <= 20:
        palette = colormaps["tab10" if len(models) <= 10 else "tab20"]
        return {m: palette(i) for i, m in enumerate(models)}
    spread = colormaps["turbo"]
    return {m: spread(i / (len(models) - 1)) for i, m in enumerate(models)}


def figures(out_dir: str | Path, cost_fields: list[str] | None = None,
            latency: str = "latency_ms") -> tuple[dict[str, Any], list[dict[str, Any]], dict[str, list], list[str],
                                                  dict[str, Any]]:
    """The sweep's results and its plots, unsaved: (recorded, rows, Pareto fronts per model, cost
    fields, file stem → figure, the Pareto plot first). Every artist of a model carries its name as
    its ``gid`` and its colour from :func:`model_colours`."""
    import matplotlib

    matplotlib.use("Agg")

    out = Path(out_dir)
    recorded, rows = read_results(out)
    cost_fields = cost_fields or DEFAULT_COST[recorded["backend"]]
    _check_fields(recorded, cost_fields, latency)
    good = [r for r in rows if not r["error"]]
    if not good:
        raise InputError(f"{out}: no successful points to report ({len(rows)} failed)")
    models = sorted({r["model"] for r in good})
    colour = model_colours(models)
    points = {model: [(math.prod(_setting(recorded, r, f) for f in cost_fields), r[latency], r)
                      for r in good if r["model"] == model] for model in models}
    fronts = {model: pareto(pts) for model, pts in points.items()}
    plots: dict[str, Any] = {"pareto": _pareto_figure(points, fronts, colour, cost_fields, latency)}
    swept = [f for f, values in recorded["space"].items() if len(set(map(str, values))) > 1]
    for metric in recorded["metrics"]:
        for name in swept:
            plots[f"{metric}_vs_{name}"] = _metric_figure(good, models, colour, metric, name)
    return recorded, rows, fronts, cost_fields, plots


def _check_fields(recorded: dict[str, Any], cost_fields: list[str], latency: str) -> None:
    """The cost fields are the target's settings and the latency metric was recorded."""
    target = TARGETS[recorded["backend"]]
    for name in cost_fields:
        if name not in target.fields:
            raise InputError(f"--cost: '{name}' is not a {target.name} setting (known: {', '.join(target.fields)})")
    if latency not in recorded["metrics"]:
        raise InputError(f"the sweep did not record '{latency}' (recorded: {', '.join(recorded['metrics'])})")


def _pareto_figure(points: dict[str, list], fronts: dict[str, list], colour: dict[str, Any],
                   cost_fields: list[str], latency: str) -> Any:
    """Latency against cost: every model's points faint, its Pareto front drawn over them, both
    axes logarithmic."""
    import matplotlib.pyplot as plt

    fig, ax = plt.subplots(figsize=(6, 4))
    for model, pts in points.items():
        ax.plot([p[0] for p in pts], [p[1] for p in pts], ".", alpha=0.3, color=colour[model], gid=model)
        ax.plot([p[0] for p in fronts[model]], [p[1] for p in fronts[model]], "-o", color=colour[model], gid=model,
                label=Path(model).stem)
    ax.set_xlabel(" × ".join(cost_fields))
    ax.set_ylabel(latency)
    ax.set_xscale("log")
    ax.set_yscale("log")
    ax.set_title("Pareto front: latency against cost")
    ax.legend(fontsize=7)
    fig.tight_layout()
    return fig


def _metric_figure(good: list[dict[str, Any]], models: list[str], colour: dict[str, Any], metric: str,
                   name: str) -> Any:
    """One metric against one swept field, a colour per model."""
    import matplotlib.pyplot as plt

    fig, ax = plt.subplots(figsize=(5, 3.4))
    for model in models:
        mine = [r for r in good if r["model"] == model]
        ax.plot([str(r[name]) if isinstance(r[name], str) else r[name] for r in mine],
                [r[metric] for r in mine], "o", alpha=0.6, color=colour[model], gid=model,
                label=Path(model).stem)
    ax.set_xlabel(name)
    ax.set_ylabel(metric)
    ax.legend(fontsize=7)
    fig.tight_layout()
    return fig


def write_report(out_dir: str | Path, cost_fields: list[str] | None = None, latency: str = "latency_ms") -> list[Path]:
    """Write ``DIR/plots/*.png`` and ``DIR/report.html``; returns the files written."""
    import matplotlib.pyplot as plt

    out = Path(out_dir)
    recorded, rows, fronts, cost_fields, plots = figures(out, cost_fields, latency)
    (out / "plots").mkdir(exist_ok=True)
    written: list[Path] = []
    for stem, fig in plots.items():
        path = out / "plots" / f"{stem}.png"
        fig.savefig(path, dpi=90)
        plt.close(fig)
        written.append(path)
    page = out / "report.html"
    page.write_text(_html(recorded, rows, fronts, cost_fields, written), encoding="utf-8")
    return [*written[1:], written[0], page]


def _html(recorded: dict[str, Any], rows: list[dict[str, Any]], fronts: dict[str, list], cost_fields: list[str],
          images: list[Path]) -> str:
    fields, metrics = list(recorded["space"]), recorded["metrics"]
    failed = [r for r in rows if r["error"]]
    pareto_rows = [[Path(m).stem, cost, *[p[f] for f in fields], *[p[k] for k in metrics]]
                   for m, front in fronts.items() for cost, _, p in front]
    figures = "".join(png_figure(p.read_bytes(), p.stem) for p in images)
    return f"""<!DOCTYPE html>
<html lang="en"><head><meta charset="utf-8"><title>nnbridge sweep: {html.escape(recorded['source'])}</title>
<style>{STYLE}</style></head><body>
<h1>Sweep on {html.escape(recorded['backend'].upper())}: {len(rows)} points, {len(failed)} failed</h1>
<p>Spec {html.escape(recorded['source'])}; models {html.escape(', '.join(Path(m).stem for m in recorded['models']))};
cost = {html.escape(' × '.join(cost_fields))}. Click a column to sort.</p>
<h2>Pareto points (latency against cost, per model)</h2>
{sortable_table(['model', 'cost', *fields, *metrics], pareto_rows)}
<h2>Plots</h2>{figures}
<h2>Every point</h2>
{sortable_table(['model', *fields, *metrics, 'error'],
        [[Path(r['model']).stem, *[r[f] for f in fields], *[r[k] for k in metrics], r['error']] for r in rows])}
<script>{SORT_SCRIPT}</script>
</body></html>
"""
