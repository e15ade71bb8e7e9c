"""What ``pinprof profile`` and ``pinprof run`` print when they end: a table that fits 100 columns and
the diagnosis in a few lines per scenario (headline, verdict, the change that pays most and its
saving), so that the answer reaches the terminal and not only ``diagnosis.md``.

Columns empty in every row (the GPU's on a CPU machine) are left out; a long scenario name is cut in
the middle so that both its dataset and its loader settings stay readable.
"""

from __future__ import annotations

import textwrap

import pandas as pd

from profiler.analysis.findings import ahead_without_steps
from profiler.analysis.reading import Analysis
from profiler.render.markdown import cell_text, headings

WIDTH = 100


def _cut(text: str, width: int) -> str:
    if len(text) <= width:
        return text
    keep = max(width - 1, 2)
    return text[: keep - keep // 2] + "~" + text[len(text) - keep // 2 :]


def table(summary: pd.DataFrame, width: int = WIDTH) -> str:
    """The summary's medians as aligned text, at most ``width`` columns wide."""
    cols = [(c, h, f) for c, h, f in headings(summary) if c in summary and summary[c].notna().any()]
    cells = [[cell_text(r.get(c), f, c) for c, _, f in cols] for _, r in summary.iterrows()]
    heads = [h for _, h, _ in cols]
    widths = [max([len(h)] + [len(row[i]) for row in cells]) for i, h in enumerate(heads)]
    rest = sum(widths[1:]) + 2 * (len(widths) - 1)
    widths[0] = max(8, min(widths[0], width - rest))
    lines = []
    for row in [heads, *cells]:
        first = _cut(row[0], widths[0]).ljust(widths[0])
        lines.append("  ".join([first, *(v.rjust(w) for v, w in zip(row[1:], widths[1:]))]).rstrip()[:width])
    return "\n".join(lines) + "\nmedians of the steady batches, ms (MiB: bytes a batch; GB/s: h2d rate)"


def brief(analysis: Analysis, width: int = WIDTH) -> str:
    """A few lines per scenario: what sets the pace, the verdict, the change that pays most."""
    wrap = textwrap.TextWrapper(width=width, subsequent_indent="    ", break_on_hyphens=False)
    left = {f.scenario: f.total for f in analysis.found}
    lines: list[str] = []
    for d in analysis.diags:
        out = left.get(d.scenario, 0)
        lines.append(f"{d.scenario}: {d.batches} steady batches" + (f" ({out} start-up left out)" if out else ""))
        if d.headline.text:
            lines.extend(wrap.wrap(f"  {d.headline.text}"))
        caveat = ahead_without_steps(d.loop, d.framework)  # rows not their batch's own: said before any figure is read
        if caveat:
            lines.extend(wrap.wrap(f"  rows: {caveat}"))
        if d.own_line:  # measured: say what pinprof itself cost
            lines.extend(wrap.wrap(f"  {d.own_line}"))
        if d.findings:
            top = d.findings[0]
            lines.extend(wrap.wrap(f"  verdict: {d.verdict_label}"))
            changes = sorted(top.changes, key=lambda c: -c.gain_ms)
            if changes:
                c = changes[0]
                saves = f" (saves about {c.gain_ms:.3f} ms a batch)" if c.gain_ms > 0 else ""
                which = "change" if d.settled else f"change, if {top.verdict.label}"
                lines.extend(wrap.wrap(f"  {which}: {c.what}{saves}"))
    if analysis.clock:
        lines.extend(wrap.wrap(analysis.clock))
    if analysis.threads:  # one line here; report.html and diagnosis.md say what each thread took
        lines.append(f"{analysis.threads.split(' (', 1)[0]} (report.html has the detail)")
    return "\n".join(lines)
