"""Markdown a person reads: the summary table and the diagnosis.

Every text that came from a name (a scenario, a run, what interrupted it) goes through ``md``, once:
HTML's ``& < >`` become entities, so a ``<script>`` in a Dataset's name stays text in any viewer that
renders Markdown to HTML; brackets are escaped, so link and image syntax stays text; and a table
cell's ``|`` is escaped. Names are one line already (``profiler.names``).
"""

from __future__ import annotations

import numpy as np
import pandas as pd

from profiler.analysis.findings import Diagnosis

# HTML's three, and a backslash and the brackets: ``[text](url)`` and ``![alt](url)`` in a Dataset's
# class name would be a live link and a remote image in any viewer that renders the file.
_ESCAPES = str.maketrans({"&": "&amp;", "<": "&lt;", ">": "&gt;", "\\": "\\\\", "[": "\\[", "]": "\\]"})


def md(text: object, cell: bool = False) -> str:
    """``text`` safe in Markdown (see the module docstring); ``cell``: inside a table row."""
    out = str(text).translate(_ESCAPES)
    return out.replace("|", "\\|") if cell else out


MD_COLUMNS = [
    ("scenario", "scenario", "{}"),
    ("batches", "n", "{}"),
    ("bytes", "MiB", "{:.2f}"),
    ("fetch_ms_p50", "fetch", "{:.3f}"),
    ("pin_ms_p50", "pin", "{:.3f}"),
    ("stage_ms_p50", "stage", "{:.3f}"),
    ("h2d_ms_p50", "h2d", "{:.3f}"),
    ("h2d_GBps", "GB/s", "{:.1f}"),
    ("cpu_work_ms_p50", "cpu", "{:.3f}"),
    ("compute_ms_p50", "gpu", "{:.3f}"),
    ("wait_ms_p50", "wait", "{:.3f}"),
    ("overlap_ms_p50", "overlap", "{:.3f}"),
    ("batch_ms_p50", "batch", "{:.3f}"),
    ("exposed_pct", "exposed %", "{:.1f}"),
]


def headings(summary: pd.DataFrame) -> list[tuple[str, str, str]]:
    """``MD_COLUMNS``, the step's column headed ``compute`` where no scenario ran on a GPU: the host's
    clock timed the step then, and ``gpu`` would say a GPU did. A summary with no ``device`` column
    (an older file) keeps ``gpu``."""
    if "device" not in summary or summary["device"].astype(str).str.startswith("cuda").any():
        return MD_COLUMNS
    return [(c, "compute" if c == "compute_ms_p50" else h, f) for c, h, f in MD_COLUMNS]


def cell_text(value: object, fmt: str, col: str) -> str:
    """A summary cell as text (``MD_COLUMNS``' format; bytes as MiB), empty when not measured."""
    if value is None or value is pd.NA or (isinstance(value, float) and np.isnan(value)):
        return ""
    return fmt.format(float(value) / 2**20 if col == "bytes" else value)  # type: ignore[arg-type]


def own_lines(diags: list[Diagnosis]) -> str:
    """What pinprof cost each scenario's loop (``Diagnosis.own_line``), for the summary: "" if none
    was measured (``pinprof run``'s prefetch mode, a file from elsewhere)."""
    said = [f"- {md(d.scenario)}: {md(d.own_line)}" for d in diags if d.own_line]
    return "\n" + "\n".join(said) + "\n" if said else ""


def summary_table(summary: pd.DataFrame) -> str:
    """A compact Markdown table (medians in ms; empty = not measured)."""
    columns = headings(summary)
    head = "| " + " | ".join(h for _, h, _ in columns) + " |"
    sep = "|" + "|".join("---" if i == 0 else "---:" for i in range(len(columns))) + "|"
    lines = [head, sep]
    for _, row in summary.iterrows():
        cells = [md(cell_text(row.get(col), fmt, col), cell=True) for col, _, fmt in columns]
        lines.append("| " + " | ".join(cells) + " |")
    return "\n".join(lines) + "\n\nMedians over measured batches, in ms; empty = not measured.\n"


STATISTIC = (
    "Figures are means over each scenario's steady batches (start-up batches left out, see below): a "
    "loop's time is the sum of its batches, so the shares add up and a saving per batch is what an epoch saves."
)


def diagnosis_text(
    diags: list[Diagnosis],
    comparisons: list[str] | None = None,
    ranks: list[str] | None = None,
    warmup: list[str] | None = None,
    clock: str | None = None,
    threads: str | None = None,
) -> str:
    """The report a person reads: which clock timed the GPU and what pinprof's threads cost
    (``threads``), the headline, then findings ranked by expected saving (verdict, evidence,
    changes), then the start-up batches left out and the mode comparison."""
    lines = [STATISTIC, ""]
    if clock:
        lines += [md(clock), ""]
    if threads:
        lines += [f"{md(threads)}.", ""]
    for d in diags:
        lines.append(f"## {md(d.scenario)}  ({d.batches} batches)")
        if d.headline.text:
            lines.append(f"**Headline**: {md(d.headline.text)}.")
            lines.append("")
        if d.loop_line:
            lines.append(f"Loop: {md(d.loop_line)}.")
            lines.append("")
        if d.own_line:
            lines.append(f"{md(d.own_line)}.")
            lines.append("")
        if not d.findings:
            lines.append("- no bottleneck rule fired: the phases are balanced.")
        if d.findings and not d.settled:
            lines.append(f"**Verdict**: {md(d.verdict_label)}.")
            lines.append("")
        # ranked by expected saving (diagnose), largest first
        for i, fd in enumerate(d.findings):
            head = "**Verdict**" if i == 0 and d.settled else ("- if so" if i == 0 else "- also")
            lines.append(f"{head}: {md(fd.verdict.label)} - {md(fd.evidence)}")
            for c in sorted(fd.changes, key=lambda c: -c.gain_ms):
                gain = f" (saves about {c.gain_ms:.3f} ms/batch)" if c.gain_ms > 0 else ""
                lines.append(f"    - change: {md(c.what)}{gain}")
        lines.append("")
    if warmup:
        lines.append("## Start-up batches left out")
        lines.extend(f"- {md(w)}" for w in warmup)
        lines.append("")
    if ranks:
        lines.append("## Across ranks")
        lines.extend(f"- {md(r)}" for r in ranks)
        lines.append("")
    if comparisons:
        lines.append(
            "## Against pageable (and prefetch against pinned_nb), same loader settings (medians, ms per batch)"
        )
        lines.extend(f"- {md(c)}" for c in comparisons)
        lines.append("")
    return "\n".join(lines)
