"""A whole report folder: timeline, summary, metadata, diagnosis and plots, each file written atomically.

Files: timeline.csv (one row per batch), summary.csv and summary.md (one row per scenario),
meta.json, calibration.csv (when calibrated), diagnosis.md, summary.json (the verdicts, a flat record per scenario, for
a tracker), report.html (one self-contained page), gantt.png and phases.png.
"""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path
from typing import Any

import pandas as pd

from profiler.analysis.reading import Analysis, analyse
from profiler.analysis.warmup import AUTO
from profiler.names import clean
from profiler.render.markdown import diagnosis_text, md, own_lines, summary_table
from profiler.report import files


def diagnosis_of(
    folder: Path, tl: pd.DataFrame, info: dict[str, Any], per_epoch: dict[str, int] | None = None
) -> tuple[Analysis, str]:
    """The reading of ``tl`` (with the folder's calibration, if any; ``info``: its meta.json) and the
    diagnosis in Markdown."""
    a = analyse(tl, files.read_calibration(folder), info, per_epoch)
    return a, diagnosis_text(a.diags, a.comparisons, a.ranks, a.warmup, a.clock, a.threads)


def partial_label(info: dict[str, Any]) -> str:
    """`` (PARTIAL: why)`` for a report whose run did not finish, else ``""`` (plain text: each format
    escapes it once, as it does the folder's name); meta.json says
    ``"status": "running"`` from the start of a run until its end rewrites it, so a run killed
    (SIGKILL, out of memory) or stopped by a full disk reads as such."""
    if not info.get("partial"):
        return ""
    if info.get("status") == "running":
        return " (PARTIAL: the run stopped before its end, killed or out of disk; these are the batches it had flushed)"
    why = info.get("interrupted_by")
    return f" (PARTIAL: interrupted by {clean(why)})" if isinstance(why, str) and why else " (PARTIAL: interrupted)"


def write_diagnosis(folder: Path, a: Analysis, text: str, info: dict[str, Any]) -> list[Path]:
    """The files that say what a report means: diagnosis.md, summary.json and report.html."""
    from profiler.render.html import report_html
    from profiler.render.json import summary_json

    partial = partial_label(info)
    title = f"{clean(folder.name)}{partial}"
    made = [folder / "diagnosis.md", folder / files.SUMMARY_JSON, folder / "report.html"]
    files.write_text_atomic(made[0], f"# pinprof diagnosis: {md(title)}\n\n{text}")
    files.write_json(summary_json(a, partial=bool(partial)), made[1])
    files.write_text_atomic(made[2], report_html(title, a, info))
    return made


def write_report(
    out: Path,
    tl: pd.DataFrame,
    info: dict[str, Any],
    per_epoch: dict[str, int],
    echo: Callable[[str], None],
    plots: bool = True,
) -> None:
    """Write timeline, summary and metadata (atomically), then the diagnosis, summary.json,
    report.html and, if asked, the plots; the terminal gets the table and the diagnosis in brief."""
    from profiler.render.terminal import brief, table

    info = {**info, "warmup_policy": info.get("warmup_policy", AUTO)}
    a, text = diagnosis_of(out, tl, info, per_epoch)
    files.write_csv(a.tl, out / files.TIMELINE)  # start-up batches flagged warmup, as every figure reads them
    files.write_csv(a.summary, out / files.SUMMARY)
    files.write_json(info, out / files.META)
    md_table = summary_table(a.summary) if len(a.summary) else "No batch was measured.\n"
    partial = partial_label(info)
    clock = f"\n{md(a.clock)}\n" if a.clock else ""
    clock += f"\n{md(a.threads)}.\n" if a.threads else ""
    # The folder's name, then the command that made it: "pinprof run" was read as the command's name
    # on a pinprof profile report.
    command = info.get("command")
    made_by = ""
    if isinstance(command, str) and command:
        made_by = "`" + md(" ".join(command.split()).replace("`", "'")) + "`\n\n"  # one line, one code span
    files.write_text_atomic(
        out / "summary.md",
        f"# pinprof report {md(clean(out.name) + partial)}\n\n{made_by}{md_table}{own_lines(a.diags)}{clock}",
    )
    echo(table(a.summary) if len(a.summary) else "No batch was measured.")
    if len(tl):
        write_diagnosis(out, a, text, info)
        if plots:
            from profiler.render import plots as plotting  # matplotlib: only when pictures are asked for

            plotting.write_all(a.tl, out)
        echo(brief(a))
        echo(f"pinprof: report written to {out}/{partial}: open {out / 'report.html'}")
    else:  # no report.html: none is promised, and why is said
        echo(
            f"pinprof: no batch was measured{partial}: pinprof's rows are the batches the program takes from a "
            f"torch DataLoader, and it took none; {out}/ holds meta.json and a timeline.csv of its header alone"
        )
