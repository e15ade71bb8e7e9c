"""report.html: one self-contained page (no network; its script inlined) a person reads in a minute.

Sections: per scenario, the headline, the verdict and the findings with their evidence and changes;
a zoomable per-batch timeline in four lanes (main thread, pin step, copy stream, compute stream; the
steady batches by default, start-up batches one click away); per-phase distributions (p10, median,
p90, mean, drawn as a bar from p10 to p90 with the median marked); the start-up batches left out;
the mode comparison; the run's settings (meta.json). Each lane is an SVG group with a ``data-lane``
attribute and each headline a ``.headline`` element, which the browser test looks for.

Every text from a name or a file goes through ``html.escape``: a Dataset named ``<script>`` stays text.
"""

from __future__ import annotations

import html
import json
from typing import Any

import numpy as np
import pandas as pd

from profiler.analysis.reading import Analysis
from profiler.render.lanes import LANES, intervals
from profiler.render.palette import COLORS

MAX_DRAWN = 400  # batches drawn per scenario: past this the page grows large and the lanes unreadable
LANE_H, GAP, WIDTH = 22, 6, 1000
DIST_PHASES = ("fetch", "pin", "stage", "layout", "h2d", "wait", "cpu_work", "compute", "batch")
SETTINGS = (
    "command",
    "device_name",
    "device",
    "driver",
    "torch_version",
    "torch_cuda",
    "python",
    "cpu_count",
    "host",
    "created_utc",
    "pinprof_version",
    "warmup_policy",
    "world_size",
    "loaders",
)

STYLE = """
body{font:14px/1.45 system-ui,sans-serif;margin:24px auto;max-width:1100px;color:#222;padding:0 12px}
h1{font-size:20px}h2{font-size:17px;margin-top:28px;border-bottom:1px solid #ddd}
.headline{font-size:16px;font-weight:600;background:#f3f6fb;padding:8px 10px;border-left:4px solid #1f77b4}
.verdict{margin:6px 0}.change{margin-left:22px;color:#174}.note{color:#666;font-size:12px}
table{border-collapse:collapse;font-size:13px}td,th{padding:2px 8px;border-bottom:1px solid #eee;text-align:right}
td:first-child,th:first-child{text-align:left}
.tl{display:flex;align-items:flex-start}.lanes{width:120px;font-size:12px}
.lanes div{height:22px;margin-bottom:6px;line-height:22px;white-space:nowrap}
svg.timeline{border:1px solid #ccc;cursor:grab;background:#fff;flex:1}
.legend span{display:inline-block;margin-right:12px;font-size:12px}
.legend i{display:inline-block;width:10px;height:10px;margin-right:4px;vertical-align:middle}
button{font-size:12px;margin:4px 4px 4px 0}
"""

# Zoom with the wheel around the pointer, pan by dragging, buttons for the steady batches or all.
SCRIPT = """
document.querySelectorAll('svg.timeline').forEach(function(svg){
  var full=svg.dataset.full.split(' ').map(Number), steady=svg.dataset.steady.split(' ').map(Number);
  var h=Number(svg.dataset.h), v=steady.slice();
  function show(){svg.setAttribute('viewBox',v[0]+' 0 '+v[1]+' '+h);}
  svg.addEventListener('wheel',function(e){e.preventDefault();var r=svg.getBoundingClientRect();
    var x=v[0]+(e.clientX-r.left)/r.width*v[1], k=e.deltaY>0?1.25:0.8;
    v[1]=Math.max(full[1]*1e-4,Math.min(full[1]*1.1,v[1]*k)); v[0]=x-(e.clientX-r.left)/r.width*v[1]; show();});
  var drag=null;
  svg.addEventListener('mousedown',function(e){drag=[e.clientX,v[0]];});
  window.addEventListener('mouseup',function(){drag=null;});
  window.addEventListener('mousemove',function(e){if(!drag)return;var r=svg.getBoundingClientRect();
    v[0]=drag[1]-(e.clientX-drag[0])/r.width*v[1]; show();});
  var box=svg.parentNode.parentNode;
  box.querySelector('.steady').onclick=function(){v=steady.slice();show();};
  box.querySelector('.all').onclick=function(){v=full.slice();show();};
  show(); svg.setAttribute('data-ready','1');
});
"""


def _e(text: object) -> str:
    return html.escape(str(text), quote=True)


def _timeline(tl: pd.DataFrame, scenario: str, index: int) -> str:
    """One scenario's lanes as an SVG whose viewBox the script moves (x: ms from the first batch)."""
    rows = tl[tl.scenario == scenario].sort_values("batch").head(MAX_DRAWN)
    if rows.empty:
        return ""
    iv = intervals(rows)
    t0 = float(np.nanmin(rows.batch_start_ms.to_numpy(float)))
    end = float(np.nanmax(np.r_[rows.batch_end_ms.to_numpy(float), iv.end_ms.to_numpy(float) if len(iv) else []]))
    span = max(end - t0, 1e-3)
    steady = rows[~rows.warmup.astype(bool)]
    s0 = float(steady.batch_start_ms.min()) - t0 if len(steady) else 0.0
    s1 = float(steady.batch_end_ms.max()) - t0 if len(steady) else span
    lanes = list(LANES)
    height = len(lanes) * (LANE_H + GAP)
    warm = set(rows.loc[rows.warmup.astype(bool), "batch"].tolist())
    out = []
    for k, lane in enumerate(lanes):
        y = k * (LANE_H + GAP)
        out.append(
            f'<g class="lane" data-lane="{_e(lane)}"><rect x="{-span}" y="{y}" width="{3 * span}" height="{LANE_H}" fill="#f7f7f7"/>'
        )
        for r in iv[iv.lane == lane].itertuples():
            x, w = r.start_ms - t0, max(r.end_ms - r.start_ms, span * 2e-5)
            tag, fade = (" (start-up)", ' opacity="0.45"') if r.batch in warm else ("", "")
            out.append(
                f'<rect x="{x:.4f}" y="{y}" width="{w:.4f}" height="{LANE_H}" fill="{COLORS[r.phase]}"{fade}>'
                f"<title>batch {r.batch}{tag}: {_e(r.phase)} {r.end_ms - r.start_ms:.3f} ms</title></rect>"
            )
        out.append("</g>")
    for b in rows.batch_start_ms.to_numpy(float):
        out.append(
            f'<line x1="{b - t0:.4f}" x2="{b - t0:.4f}" y1="0" y2="{height}" stroke="#999" stroke-width="0.5" vector-effect="non-scaling-stroke" stroke-dasharray="2 2"/>'
        )
    more = len(tl[tl.scenario == scenario]) - len(rows)
    labels = "".join(f"<div>{_e(lane)}</div>" for lane in lanes)
    return (
        f'<div class="tlbox"><button class="steady">steady batches</button><button class="all">all batches</button>'
        f'<span class="note">wheel: zoom, drag: pan; faded: start-up batches; dotted: batch starts'
        f"{f'; the first {MAX_DRAWN} of {MAX_DRAWN + more} batches drawn' if more > 0 else ''}</span>"
        f'<div class="tl"><div class="lanes">{labels}</div>'
        f'<svg class="timeline" id="timeline-{index}" preserveAspectRatio="none" width="{WIDTH}" height="{height}" '
        f'data-full="0 {span:.4f}" data-steady="{s0:.4f} {max(s1 - s0, 1e-3):.4f}" data-h="{height}" '
        f'viewBox="{s0:.4f} 0 {max(s1 - s0, 1e-3):.4f} {height}">{"".join(out)}</svg></div></div>'
    )


def _distributions(tl: pd.DataFrame, scenario: str) -> str:
    rows = tl[(tl.scenario == scenario) & ~tl.warmup.astype(bool)]
    stats = []
    for p in DIST_PHASES:
        x = rows[f"{p}_ms"].to_numpy(float) if f"{p}_ms" in rows else np.array([])
        x = x[~np.isnan(x)]
        if len(x):
            stats.append((p, *np.percentile(x, [10, 50, 90]), float(x.mean())))
    if not stats:
        return ""
    top = max(s[3] for s in stats) or 1.0
    body = []
    for p, p10, p50, p90, mean in stats:
        bar = (
            f'<svg width="260" height="12"><rect x="{260 * p10 / top:.1f}" y="2" width="{max(260 * (p90 - p10) / top, 1):.1f}" '
            f'height="8" fill="{COLORS.get(p, "#999")}"/><rect x="{260 * p50 / top:.1f}" y="0" width="2" height="12" fill="#000"/></svg>'
        )
        body.append(
            f"<tr><td>{_e(p)}</td><td>{p10:.3f}</td><td>{p50:.3f}</td><td>{p90:.3f}</td><td>{mean:.3f}</td><td>{bar}</td></tr>"
        )
    return (
        "<table class='dist'><tr><th>phase</th><th>p10</th><th>median</th><th>p90</th><th>mean</th>"
        f"<th>p10 to p90, median marked</th></tr>{''.join(body)}</table>"
        "<p class='note'>ms per steady batch; the verdicts above use the means</p>"
    )


def _legend() -> str:
    used = [p for lane in LANES.values() for p in lane]
    return (
        "<div class='legend'>"
        + "".join(f"<span><i style='background:{COLORS[p]}'></i>{_e(p)}</span>" for p in used)
        + "</div>"
    )


def _settings(info: dict[str, Any]) -> str:
    rows = []
    for key in SETTINGS:
        v = info.get(key)
        if v in (None, "", [], {}):
            continue
        text = " ".join(map(str, v)) if isinstance(v, list) else (json.dumps(v) if isinstance(v, dict) else str(v))
        rows.append(f"<tr><td>{_e(key)}</td><td style='text-align:left'>{_e(text)}</td></tr>")
    return f"<table>{''.join(rows)}</table>"


def report_html(title: str, a: Analysis, info: dict[str, Any], compare: list[str] | None = None) -> str:
    """The page (module docstring); ``compare``: lines of ``pinprof compare`` to show in a section."""
    parts = [f"<h1>pinprof report: {_e(title)}</h1>"]
    parts.append(
        "<p class='note'>Figures in the verdicts are means over each scenario's steady batches (start-up "
        "batches left out); the distributions show the typical batch (median) and the spread.</p>"
    )
    if a.clock:
        parts.append(f"<p class='note' id='gpu-clock'>{_e(a.clock)}</p>")
    if a.threads:
        parts.append(f"<p class='note' id='own-threads'>{_e(a.threads)}.</p>")
    for i, d in enumerate(a.diags):
        parts.append(f"<h2>{_e(d.scenario)} <span class='note'>({d.batches} steady batches)</span></h2>")
        parts.append(f"<p class='headline' id='headline-{i}'>{_e(d.headline.text or 'no headline')}</p>")
        if d.loop_line:
            parts.append(f"<p class='note'>Loop: {_e(d.loop_line)}.</p>")
        if d.own_line:
            parts.append(f"<p class='note' id='own-{i}'>{_e(d.own_line)}.</p>")
        if d.findings and not d.settled:
            parts.append(f"<p class='verdict'><b>Verdict: {_e(d.verdict_label)}</b></p>")
        for j, f in enumerate(d.findings):
            label = ("Verdict" if d.settled else "If so") if j == 0 else "Also"
            parts.append(f"<p class='verdict'><b>{label}: {_e(f.verdict.label)}</b> - {_e(f.evidence)}</p>")
            for c in sorted(f.changes, key=lambda c: -c.gain_ms):
                gain = f" (saves about {c.gain_ms:.3f} ms a batch)" if c.gain_ms > 0 else ""
                parts.append(f"<p class='change'>change: {_e(c.what)}{gain}</p>")
        if not d.findings:
            parts.append("<p>No bottleneck rule fired: the phases are balanced.</p>")
        parts.append("<h3>Per-batch timeline</h3>" + _legend() + _timeline(a.tl, d.scenario, i))
        parts.append("<h3>Per-phase distributions</h3>" + _distributions(a.tl, d.scenario))
    if a.warmup:
        parts.append(
            "<h2>Start-up batches left out</h2><ul>" + "".join(f"<li>{_e(w)}</li>" for w in a.warmup) + "</ul>"
        )
    if a.ranks:
        parts.append("<h2>Across ranks</h2><ul>" + "".join(f"<li>{_e(r)}</li>" for r in a.ranks) + "</ul>")
    if a.comparisons:
        parts.append(
            "<h2>Modes against pageable</h2><ul>" + "".join(f"<li>{_e(c)}</li>" for c in a.comparisons) + "</ul>"
        )
    if compare:
        parts.append(
            "<h2 id='compare'>Before and after</h2><ul>" + "".join(f"<li>{_e(c)}</li>" for c in compare) + "</ul>"
        )
    parts.append("<h2>Settings</h2>" + _settings(info))
    return (
        f"<!DOCTYPE html><html lang='en'><head><meta charset='utf-8'><title>pinprof: {_e(title)}</title>"
        f"<style>{STYLE}</style></head><body>{''.join(parts)}<script>{SCRIPT}</script></body></html>\n"
    )
