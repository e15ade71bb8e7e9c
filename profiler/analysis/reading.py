"""One reading of a timeline, computed once for every output of a report (Markdown, terminal,
summary.json, report.html): start-up batches flagged, diagnoses, comparisons, the summary."""

from __future__ import annotations

from dataclasses import dataclass, field
from functools import cached_property
from typing import Any

import pandas as pd

from profiler.analysis.clock import clock_line
from profiler.analysis.compare import compare_modes
from profiler.analysis.diagnose import diagnose
from profiler.analysis.findings import Diagnosis
from profiler.analysis.ranks import diagnose_ranks
from profiler.analysis.summary import summarize
from profiler.analysis.threads import threads_line
from profiler.analysis.warmup import RECORDED, Found, settle


@dataclass
class Analysis:
    """``tl``: the timeline with its start-up batches flagged ``warmup`` (``profiler.analysis.warmup``);
    ``found``: what was left out, per scenario, and ``warmup``: that in a sentence each; ``diags``:
    one diagnosis per scenario; ``comparisons`` and ``ranks``: the mode comparison's and the rank
    findings' lines; ``clock``: which clock timed the GPU columns (``profiler.analysis.clock``);
    ``threads``: what pinprof's own threads cost beside the loop (``profiler.analysis.threads``);
    ``summary``: ``profiler.analysis.summary.summarize`` of ``tl``, computed when first read
    (``pinprof diagnose`` never reads it: on 1,000,000 rows it copies the whole frame)."""

    tl: pd.DataFrame
    found: list[Found]
    warmup: list[str]
    diags: list[Diagnosis]
    comparisons: list[str]
    ranks: list[str]
    per_epoch: dict[str, int] | None = field(default=None)
    clock: str | None = field(default=None)
    threads: str | None = field(default=None)

    @cached_property
    def summary(self) -> pd.DataFrame:
        return summarize(self.tl, self.per_epoch)


def _int(v: Any) -> int | None:
    return None if v is None or pd.isna(v) else int(v)


def analyse(
    tl: pd.DataFrame,
    calibration: pd.DataFrame | None,
    info: dict[str, Any],
    per_epoch: dict[str, int] | None = None,
) -> Analysis:
    """The reading of ``tl`` (``info``: its meta.json: ``warmup_policy``, ``cpu_count``)."""
    tl, found = settle(tl, str(info.get("warmup_policy", RECORDED)))
    loaders = info.get("loaders")
    diags = diagnose(tl, calibration, info.get("cpu_count"), loaders if isinstance(loaders, dict) else None)
    workers: dict[str, Any] = {}
    if "num_workers" in tl:
        workers = {str(s): w for s, w in tl.groupby("scenario", sort=False)["num_workers"].first().items()}
    warm = [f.text(_int(workers.get(f.scenario))) for f in found]
    ranks = diagnose_ranks(tl, calibration)
    return Analysis(
        tl, found, warm, diags, compare_modes(tl), ranks, per_epoch, clock_line(tl, info), threads_line(tl, info)
    )
