"""``hvio report``: one self-contained HTML page of every result under ``out/``.

It gathers what the other commands wrote there: the scheduler comparison of
``make run`` / ``hvio compare`` (``compare.json``), every sweep
(``sweep/<study>/``) and every reproduced paper experiment (``<name>.json``
of ``hvio reproduce``). Each gets its tables (the paper's numbers beside
hvio's where the experiment has them), its goals met or missed, and figures
in the papers' forms: per-VM bandwidth by scheduler (paper 000 Fig. 6b),
seek-distance classes (Table 4), throughput over time (Fig. 7), latency
CDFs, and a heat map where a sweep varies two keys. Figures are plotly,
drawn in the page by plotly.js, which the page carries inline: it opens
with no network. Every run's seed, config and hvio version are listed.

The page is a function of the results only (fixed figure ids, no date), so
the same results give the same bytes.
"""

from __future__ import annotations

import html
import json
import math
import os
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import pandas as pd

from . import _hvio, studies
from .api import Comparison
from .plots import _whole_buckets

# A JSON file in out/ is an experiment report when it has these keys.
_REPORT_KEYS = {"name", "title", "paper", "seed", "quick", "tables", "notes"}


@dataclass
class Page:
    """The page being built: sections of HTML and the figures in them."""

    sections: list[tuple[str, str, str]] = field(default_factory=list)  # (anchor, title, body)
    figures: int = 0

    def figure(self, fig) -> str:
        """A plotly figure as a div with a fixed id (the page's bytes depend on the data only)."""
        self.figures += 1
        fig.update_layout(template="plotly_white", margin={"l": 60, "r": 20, "t": 50, "b": 50}, height=420)
        div = fig.to_html(
            full_html=False,
            include_plotlyjs=False,
            div_id=f"figure-{self.figures}",
            config={"responsive": True},
        )
        return f'<div class="figure" data-figure="{self.figures}">{div}</div>'


def _esc(x: Any) -> str:
    return html.escape(str(x))


def _table(df: pd.DataFrame, digits: int | None = None) -> str:
    """A DataFrame as an HTML table; numbers right-aligned, infinite as ∞."""
    cols = list(df.columns)
    out = ["<table><thead><tr>" + "".join(f"<th>{_esc(c)}</th>" for c in cols) + "</tr></thead><tbody>"]
    for _, row in df.iterrows():
        cells = []
        for c in cols:
            v = row[c]
            if isinstance(v, float):
                text = (
                    "∞"
                    if math.isinf(v)
                    else ("" if math.isnan(v) else (f"{v:.{digits}f}" if digits else f"{v:g}"))
                )
                cells.append(f'<td class="n">{text}</td>')
            elif isinstance(v, (int,)) and not isinstance(v, bool):
                cells.append(f'<td class="n">{v}</td>')
            else:
                cells.append(f"<td>{_esc(v)}</td>")
        out.append("<tr>" + "".join(cells) + "</tr>")
    out.append("</tbody></table>")
    return "".join(out)


def _goals(lines: list[tuple[bool | None, str]]) -> str:
    if not lines:
        return ""
    items = []
    for ok, text in lines:
        cls, mark = {True: ("met", "met"), False: ("missed", "missed"), None: ("info", "")}[ok]
        items.append(f'<li class="{cls}">{"<b>" + mark + "</b> " if mark else ""}{_esc(text)}</li>')
    return "<ul class='goals'>" + "".join(items) + "</ul>"


def _runs_table(rows: list[dict[str, Any]]) -> str:
    """The seed, config and hvio version of every run, folded away."""
    return (
        "<details><summary>every run: seed, config, hvio version</summary>"
        + _table(pd.DataFrame(rows))
        + "</details>"
    )


def comparison_section(page: Page, c: Comparison, version: str) -> str:
    import plotly.graph_objects as go

    parts = [f"<p>Config <code>{_esc(c.config)}</code>, {_esc(c.seed_text)}, hvio {_esc(version)}.</p>"]
    sched = c.schedulers[["scheduler", "total_mb_per_s", "jain", "worst_p99_ms", "worst_p99_vm", "starved"]]
    parts.append(
        _table(
            sched.rename(
                columns={
                    "total_mb_per_s": "total MB/s",
                    "jain": "fairness (Jain)",
                    "worst_p99_ms": "worst p99 ms",
                    "worst_p99_vm": "worst VM",
                }
            ),
            3,
        )
    )
    # The verdict: the best scheduler per objective, and every starved VM (a goal missed).
    goals = [(None if not v.startswith("starved") else False, v) for v in c.verdict]
    parts.append("<h3>verdict</h3>" + _goals(goals))
    vms = c.vms
    bw = go.Figure()
    for vm, g in vms.groupby("vm", sort=False):
        bw.add_bar(
            x=g["scheduler"], y=g["mb_per_s"], name=vm, error_y={"type": "data", "array": g["mb_per_s_sd"]}
        )
    bw.update_layout(
        barmode="group",
        title="Per-VM bandwidth by host scheduler (paper 000 Fig. 6b's form)",
        yaxis_title="MB/s",
    )
    parts.append(page.figure(bw))
    lat = go.Figure()
    for vm, g in vms.groupby("vm", sort=False):
        lat.add_bar(x=g["scheduler"], y=g["p99_ms"], name=vm)
    lat.update_layout(
        barmode="group",
        title="Per-VM p99 latency by host scheduler",
        yaxis_title="p99 (ms)",
        yaxis_type="log",
    )
    parts.append(page.figure(lat))
    runs = c.runs
    first = [r for r in runs if r.raw["seed"] == c.seeds[0]]
    seek = go.Figure()
    for label, key in (
        ("0", "zero_frac"),
        ("within ±image", "within_image_frac"),
        ("beyond image", "beyond_image_frac"),
    ):
        seek.add_bar(x=[r.scheduler for r in first], y=[r.host["seek"][key] for r in first], name=label)
    seek.update_layout(
        barmode="stack",
        title=f"Seek distances by class (paper 000 Table 4's form, seed {c.seeds[0]})",
        yaxis_title="fraction of host requests",
    )
    parts.append(page.figure(seek))
    tput = go.Figure()
    for r in first:
        s = _whole_buckets(r)
        if s.empty:
            continue
        total = s.groupby("time_s", sort=True)["mb_per_s"].sum()
        tput.add_scatter(x=list(total.index), y=list(total.values), mode="lines", name=r.scheduler)
    tput.update_layout(
        title=f"Total throughput over time (paper 000 Fig. 7's form, seed {c.seeds[0]})",
        xaxis_title="time (s)",
        yaxis_title="MB/s",
    )
    parts.append(page.figure(tput))
    fair = go.Figure()
    fair.add_scatter(
        x=c.schedulers["total_mb_per_s"],
        y=c.schedulers["jain"],
        mode="markers+text",
        text=c.schedulers["scheduler"],
        textposition="top center",
    )
    fair.update_layout(
        title="Throughput against weighted fairness", xaxis_title="total MB/s", yaxis_title="Jain's index"
    )
    parts.append(page.figure(fair))
    parts.append(
        _runs_table(
            [
                {"scheduler": r.scheduler, "seed": r.raw["seed"], "config": c.config, "hvio": version}
                for r in runs
            ]
        )
    )
    return "".join(parts)


def sweep_section(page: Page, where: Path) -> str:
    import plotly.graph_objects as go

    meta = json.loads((where / "runs.json").read_text())
    df = pd.read_parquet(where / "results.parquet")
    params = [k for k in (meta["runs"][0]["params"] if meta["runs"] else {}) if k != "seed"]
    parts = [
        f"<p>Study <code>{_esc(meta['study'])}</code>: {len(meta['runs'])} runs, hvio {_esc(meta['hvio'])}; "
        f"long-form results <code>{_esc(where / 'results.parquet')}</code>.</p>"
    ]
    runs = df.drop_duplicates("run")
    by = params[0] if params else "scheduler"
    if by in runs.columns:
        summary = (
            runs.groupby(params or [by], sort=False)["total_mb_per_s"]
            .agg(["mean", "std", "count"])
            .reset_index()
        )
        parts.append(_table(summary.rename(columns={"mean": "total MB/s", "std": "sd", "count": "runs"}), 2))
        box = go.Figure()
        for value, g in runs.groupby(by, sort=False):
            box.add_box(y=g["total_mb_per_s"], name=str(value), boxpoints="all")
        box.update_layout(title=f"Total MB/s per run by {by}", yaxis_title="MB/s", showlegend=False)
        parts.append(page.figure(box))
    if "latency_p99_ms" in df.columns and by in df.columns:
        cdf = go.Figure()
        for value, g in df.groupby(by, sort=False):
            x = sorted(g["latency_p99_ms"])
            cdf.add_scatter(
                x=x,
                y=[(i + 1) / len(x) for i in range(len(x))],
                mode="lines",
                name=str(value),
                line_shape="hv",
            )
        cdf.update_layout(
            title=f"CDF of the jobs' p99 latency by {by}",
            xaxis_title="p99 (ms)",
            yaxis_title="fraction of jobs",
            xaxis_type="log",
        )
        parts.append(page.figure(cdf))
    if len(params) >= 2:
        a, b = params[0], params[1]
        grid = runs.pivot_table(index=b, columns=a, values="total_mb_per_s", aggfunc="mean", sort=False)
        heat = go.Figure(
            go.Heatmap(
                z=grid.values.tolist(),
                x=[str(x) for x in grid.columns],
                y=[str(y) for y in grid.index],
                colorbar={"title": "MB/s"},
            )
        )
        heat.update_layout(title=f"Mean total MB/s: {a} × {b}", xaxis_title=a, yaxis_title=b)
        parts.append(page.figure(heat))
    parts.append(
        _runs_table(
            [
                {"run": r["run"], **r["params"], "config": r["base"], "hvio": meta["hvio"]}
                for r in meta["runs"]
            ]
        )
    )
    return "".join(parts)


def _report_table(t: dict[str, Any]) -> str:
    """A report's table: numbers right-aligned with their column's decimals,
    as ``hvio reproduce`` prints them."""
    out = [
        "<table><thead><tr>" + "".join(f"<th>{_esc(c)}</th>" for c in t["columns"]) + "</tr></thead><tbody>"
    ]
    for row, texts in zip(t["rows"], studies.table_cells(t)):
        cells = []
        for v, text in zip(row, texts):
            number = isinstance(v, (int, float)) and not isinstance(v, bool)
            cells.append(f'<td class="n">{_esc(text)}</td>' if number else f"<td>{_esc(text)}</td>")
        out.append("<tr>" + "".join(cells) + "</tr>")
    out.append("</tbody></table>")
    return "".join(out)


def experiment_section(page: Page, rep: dict[str, Any], version: str) -> str:
    parts = [
        f"<p>{_esc(rep['paper'])}; seed {rep['seed']}{', quick run' if rep['quick'] else ''}, "
        f"hvio {_esc(version)}.</p>"
    ]
    for t in rep["tables"]:
        parts.append(f"<h3>{_esc(t['title'])}</h3>")
        parts.append(_report_table(t))
    parts.append(_goals([(None, n) for n in rep["notes"]]))
    return "".join(parts)


_STYLE = """
body{font-family:system-ui,sans-serif;margin:2em auto;max-width:1200px;color:#222;padding:0 1em}
table{border-collapse:collapse;margin:.5em 0;font-size:.85em}th,td{border:1px solid #ccc;padding:2px 6px}
th{background:#f3f3f3}td.n{text-align:right;font-variant-numeric:tabular-nums}
.goals li.met b{color:#1a7f37}.goals li.missed b{color:#cf222e}section{margin-bottom:3em}
nav li{margin:.2em 0}code{background:#f6f6f6;padding:0 .2em}.figure{margin:1em 0}
"""

# Records the page's script errors and, once plotly has drawn, how many
# figures it drew (axes and data drawn): `hvio report`'s test reads both from the DOM.
_WATCH = """
window.hvioErrors=[];
window.addEventListener('error',function(e){window.hvioErrors.push(String(e.message||e.type))},true);
(function(){var ce=console.error;console.error=function(){
window.hvioErrors.push(Array.from(arguments).join(' '));ce.apply(console,arguments)}})();
"""
_COUNT = """
window.addEventListener('load',function(){setTimeout(function(){
var n=document.querySelectorAll('.figure').length,d=0;
document.querySelectorAll('.figure').forEach(function(f){
if(f.querySelector('svg.main-svg .xtick')&&f.querySelector('svg [class*="trace"],svg image'))d++});
var b=document.body;b.setAttribute('data-figures',n);b.setAttribute('data-drawn',d);
b.setAttribute('data-errors',window.hvioErrors.join(' | '));},500)});
"""


def build(out: Path, where: str | None = None) -> tuple[str, int]:
    """The page of everything under ``out``, and how many figures it holds;
    ``where`` names the folder on the page (``"."``: the page's own folder)."""
    import plotly.offline

    version = _hvio.version()
    page = Page()
    compare = out / "compare.json"
    if compare.is_file():
        c = Comparison(json.loads(compare.read_text()))
        page.sections.append(
            ("compare", f"Host schedulers compared: {c.config_name}", comparison_section(page, c, version))
        )
    for where in sorted((out / "sweep").glob("*/runs.json")):
        name = where.parent.name
        page.sections.append((f"sweep-{name}", f"Sweep: {name}", sweep_section(page, where.parent)))
    for p in sorted(out.glob("*.json")):
        if p.name == "compare.json":
            continue
        try:
            rep = json.loads(p.read_text())
        except (OSError, ValueError):
            continue
        if isinstance(rep, dict) and _REPORT_KEYS <= rep.keys():
            title = f"{rep['name']}{' (quick)' if rep['quick'] else ''}: {rep['title']}"
            page.sections.append((f"exp-{p.stem}", title, experiment_section(page, rep, version)))
    nav = "".join(f'<li><a href="#{a}">{_esc(t)}</a></li>' for a, t, _ in page.sections)
    body = "".join(f'<section id="{a}"><h2>{_esc(t)}</h2>{b}</section>' for a, t, b in page.sections)
    if not page.sections:
        body = (
            f"<p>No results under <code>{_esc(out)}</code>: run <code>make run</code>, "
            "<code>hvio sweep</code> or <code>hvio reproduce</code> first.</p>"
        )
    # The page names its folder relative to itself when it can, so the same
    # results give the same bytes wherever they were written.
    where_html = (
        "in this page's folder" if where == "." else f"under <code>{_esc(where if where else out)}</code>"
    )
    doc = (
        "<!DOCTYPE html><html lang='en'><head><meta charset='utf-8'><title>hvio results</title>"
        f"<style>{_STYLE}</style><script>{_WATCH}</script>"
        f"<script>{plotly.offline.get_plotlyjs()}</script></head><body>"
        f"<h1>hvio results</h1><p>hvio {_esc(version)}; every result {where_html}.</p>"
        f"<nav><ul>{nav}</ul></nav>{body}<script>{_COUNT}</script></body></html>"
    )
    return doc, page.figures


def write(out: Path, path: Path | None = None) -> tuple[Path, int]:
    """Write the page (default ``out/report.html``) whole; its path and figure count."""
    path = path or out / "report.html"
    doc, n = build(out, os.path.relpath(out.resolve(), path.resolve().parent))
    path.parent.mkdir(parents=True, exist_ok=True)
    tmp = path.with_name(f".{path.name}.tmp")
    tmp.write_text(doc)
    tmp.replace(path)
    return path, n
