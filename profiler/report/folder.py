"""A whole report folder: timeline, summary, metadata, diagnosis and plots, each file written atomically.

Files: timeline.csv (one row per batch), summary.csv and summary.md (one row per scenario),
meta.json, calibration.csv (when calibrated), diagnosis.md, gantt.png and phases.png.
"""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path
from typing import Any

import pandas as pd

from profiler.analysis.compare import compare_modes
from profiler.analysis.diagnose import diagnose
from profiler.analysis.findings import Diagnosis
from profiler.analysis.ranks import diagnose_ranks
from profiler.analysis.summary import summarize
from profiler.names import clean
from profiler.render.markdown import diagnosis_text, md, summary_table
from profiler.report import files


def diagnosis_of(folder: Path, tl: pd.DataFrame, cpu_count: int | None) -> tuple[list[Diagnosis], str]:
    """The diagnoses of ``tl`` (with the folder's calibration, if any) and their Markdown."""
    cal = files.read_calibration(folder)
    diags = diagnose(tl, cal, cpu_count)
    return diags, diagnosis_text(diags, compare_modes(tl), diagnose_ranks(tl, cal))


def partial_label(info: dict[str, Any]) -> str:
    """`` (PARTIAL: why)`` for a report whose run did not finish, else ``""``; meta.json says
    ``"status": "running"`` from the start of a run until its end rewrites it, so a run killed
    (SIGKILL, out of memory) or stopped by a full disk reads as such."""
    if not info.get("partial"):
        return ""
    if info.get("status") == "running":
        return " (PARTIAL: the run stopped before its end, killed or out of disk; these are the batches it had flushed)"
    why = info.get("interrupted_by")
    return f" (PARTIAL: interrupted by {md(clean(why))})" if isinstance(why, str) and why else " (PARTIAL: interrupted)"


def write_diagnosis(folder: Path, text: str, partial: str = "") -> None:
    """diagnosis.md of the report in ``folder``."""
    files.write_text_atomic(
        folder / "diagnosis.md", f"# pinprof diagnosis: {md(clean(folder.name))}{partial}\n\n{text}"
    )


def write_report(
    out: Path,
    tl: pd.DataFrame,
    info: dict[str, Any],
    per_epoch: dict[str, int],
    echo: Callable[[str], None],
    plots: bool = True,
) -> None:
    """Write timeline, summary and metadata (atomically), then the diagnosis and, if asked, the plots."""
    files.write_csv(tl, out / files.TIMELINE)
    summ = summarize(tl, per_epoch)
    files.write_csv(summ, out / files.SUMMARY)
    files.write_json(info, out / files.META)
    table = summary_table(summ) if len(summ) else "No batch was measured.\n"
    partial = partial_label(info)
    files.write_text_atomic(out / "summary.md", f"# pinprof run {md(clean(out.name))}{partial}\n\n{table}")
    echo(table)
    if len(tl):
        write_diagnosis(out, diagnosis_of(out, tl, info.get("cpu_count"))[1], partial)
        if plots:
            from profiler.render import plots as plotting  # matplotlib: only when pictures are asked for

            plotting.write_all(tl, out)
    echo(f"pinprof: report written to {out}/{partial} (diagnosis: pinprof diagnose {out})")
