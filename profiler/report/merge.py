"""Merge per-rank reports (``rank<k>/`` folders written under torchrun) into one, on one clock.

Each rank writes only its own folder, so no two processes ever write one file. Every rank's meta.json
records ``origin_monotonic_ms``: the host monotonic clock (``perf_counter``, CLOCK_MONOTONIC, shared
by all processes of one host) at its timeline's zero. Merging shifts each rank's interval columns by
its origin minus the earliest one, so all ranks share the earliest rank's zero. Ranks on
different hosts have unrelated monotonic clocks: their intervals are merged unaligned, and
meta.json says so (``clock_aligned: false``).
"""

from __future__ import annotations

import re
from pathlib import Path
from typing import Any

import pandas as pd

from profiler.analysis.summary import summarize
from profiler.errors import ReportError
from profiler.report import files as report_io
from profiler.timeline.schema import INTERVALS, concat

RANK_FOLDER = re.compile(r"^rank(0|[1-9]\d{0,5})$")


def rank_folders(folder: Path) -> list[Path]:
    """The ``rank<k>`` folders pinprof wrote: the name exactly so (``rank-1``, ``rankings`` are not),
    a real folder (a link to a folder elsewhere is not), holding a timeline."""
    found = sorted(
        (
            p
            for p in Path(folder).iterdir()
            if RANK_FOLDER.match(p.name) and p.is_dir() and not p.is_symlink() and (p / report_io.TIMELINE).is_file()
        ),
        key=lambda p: int(p.name[4:]),
    )
    if not found:
        raise ReportError(f"{folder}: no rank<k>/timeline.csv folders to merge")
    return found


def merge(folder: Path) -> tuple[pd.DataFrame, dict[str, Any]]:
    """The merged timeline and metadata (nothing written)."""
    parts, metas = [], []
    for sub in rank_folders(folder):
        metas.append(report_io.read_meta(sub / report_io.META))
        parts.append(report_io.read_timeline(sub))
    ranks = [i if m.get("rank") is None else int(m["rank"]) for i, m in enumerate(metas)]
    twice = sorted({r for r in ranks if ranks.count(r) > 1})
    if twice:
        raise ReportError(f"{folder}: rank(s) {twice} claimed by more than one folder; one job's ranks only")
    hosts = {m.get("host") for m in metas}
    origins: list[float | None] = [m.get("origin_monotonic_ms") for m in metas]
    known = [o for o in origins if o is not None]
    # One host's monotonic clock is shared by its processes: intervals can be put on one axis.
    aligned = len(hosts) == 1 and len(known) == len(origins)
    if aligned:
        zero = min(known)
        parts = [p.assign(**{c: p[c] + (o - zero) for c in INTERVALS}) for p, o in zip(parts, known)]
    merged = concat(parts)
    meta = dict(metas[0])
    meta.update(
        ranks=ranks,
        world_size=len(metas),
        clock_aligned=aligned,
        partial=any(m.get("partial") for m in metas),
        merged_from=[str(p) for p in rank_folders(folder)],
    )
    return merged, meta


def write_merged(folder: Path) -> Path:
    tl, meta = merge(folder)
    report_io.write_csv(tl, Path(folder) / report_io.TIMELINE)
    report_io.write_csv(summarize(tl), Path(folder) / report_io.SUMMARY)
    report_io.write_json(meta, Path(folder) / report_io.META)
    return Path(folder)
