"""The report folder of an automatic profile (``pinprof profile``, the Lightning callback).

Written with signals held (``profiler.report.signals``), into ``<out>/`` or, under torchrun,
``<out>/rank<k>/``; rank 0 then waits for the other ranks' final meta.json (each rank writes it last,
over the "running" one it wrote at its start) and merges them into ``<out>/`` on one clock
(``profiler.report.merge``).
"""

from __future__ import annotations

import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pandas as pd

from profiler.capture import auto_hooks, own_threads
from profiler.capture.auto_session import AutoSession
from profiler.capture.devices import rank_info
from profiler.capture.environment import describe
from profiler.drivers.saving import report_folder
from profiler.errors import ReportError
from profiler.report import disk, files, meta
from profiler.report.folder import write_report
from profiler.report.journal import Journal
from profiler.report.signals import write_held

# How long rank 0 waits for the other ranks' reports before it merges (they end within seconds of
# each other; a rank that died leaves no report, and the merge goes on with those there are).
MERGE_WAIT_S = 120.0


LOOP_WORDS = {
    "fetch-ahead": "fetches each batch before the step of the one before (as Accelerate's prepared loader, or "
    "Lightning's fetcher on a dataset of no length)",
    "device-prefetch": "fetches and copies each batch to the device before the step of the one before (a device "
    "prefetcher, as timm's PrefetchLoader)",
}


def write_session_report(
    session: AutoSession,
    out: Path,
    argv: list[str],
    *,
    interrupted_by: str | None = None,
    error: str | None = None,
    exit_status: int | None = None,
    plots: bool = True,
    echo: Callable[[str], None] = print,
    split: Callable[[pd.DataFrame, dict[str, Any]], pd.DataFrame] | None = None,
) -> Path:
    """Close ``session`` and write its report; returns the folder this process wrote. ``split``: fills
    the split of the events' copies (``dma_ms``, ``hidden_stage_ms``) and notes what it measured for
    it in meta.json's fields (``drivers.calibrate.split_profiled``)."""
    tl = session.close()
    ranks = rank_info()
    folder = report_folder(out)
    folder.mkdir(parents=True, exist_ok=True)
    info: dict[str, Any] = meta.collect(
        describe(session.device),
        argv=argv,
        partial=interrupted_by is not None,
        interrupted_by=interrupted_by,
        error=error,
        exit_status=exit_status,
        profiler_error=auto_hooks.failure,
        origin_monotonic_ms=session.origin,
        loaders=_loaders(session),
        warmup_policy=session.warmup_policy,
        **own_threads.meta_fields(session.journal_process_ms, session.journal_process_start_ms),  # after close()
        **ranks,
    )
    if session.cuda:
        from profiler.capture.clocks import choice as clocks

        clocks.say(echo)
    if split is not None and not tl.empty:
        try:
            tl = split(tl, info)
        except Exception as err:  # the recording stands without the split: said, and kept
            echo(f"pinprof: the events' copies are not split into staging and DMA ({type(err).__name__}: {err})")
    for scenario, seen in session.patterns.summary().items():
        if seen["pattern"] != "plain":
            echo(
                f"pinprof: {scenario}: the loop {LOOP_WORDS[seen['pattern']]}; each row is one batch, its fetch, "
                f"copies and the step that used it (rows end at the {seen['row_boundary']})"
            )
    try:
        write_held(lambda: write_report(folder, tl, info, {}, echo, plots), replay=False)
    except OSError as err:
        journal = session.journal  # the drivers hand the session report's own Journal
        if not isinstance(journal, Journal) or not disk.is_full(err):
            raise
        echo("pinprof: " + disk.keep_on_full_disk(folder, journal, tl, info, err))
        return folder
    if ranks["world_size"] > 1 and ranks["rank"] == 0:
        _merge(out, ranks["world_size"], echo)
    return folder


def _loaders(session: AutoSession) -> dict[str, dict[str, Any]]:
    """meta.json's ``loaders``: each loader's pattern (``in_flight.Patterns``), how busy its
    workers were (``workers.WorkerWatch``), where they were read, and the leaves of its batches that
    the loop's copies had to make contiguous (``layout_leaves``: ``dense.Leaves``)."""
    out = session.patterns.summary()
    for scenario, busy in session.workers.summary().items():
        out.setdefault(scenario, {}).update(busy)
    for scenario, leaves in session.leaves.summary().items():
        out.setdefault(scenario, {})["layout_leaves"] = leaves
    return out


def _finished(folder: Path) -> bool:
    """Whether ``folder`` holds a rank's final report: its meta.json is written last, and the one
    written when the rank started says ``"status": "running"`` (a rank killed keeps that one)."""
    try:
        return files.read_meta(folder / files.META).get("status") != "running"
    except (OSError, ReportError):  # not there yet
        return False


def _merge(out: Path, world: int, echo: Callable[[str], None]) -> None:
    """Rank 0: once every rank has written its final report (``MERGE_WAIT_S`` at most), merge them
    into ``out``; a rank not done by then is merged with the rows it has appended, and said."""
    from profiler.report.merge import write_merged

    deadline = time.monotonic() + MERGE_WAIT_S
    waiting = list(range(world))
    while True:
        waiting = [k for k in waiting if not _finished(out / f"rank{k}")]
        if not waiting or time.monotonic() >= deadline:
            break
        time.sleep(0.2)
    if waiting:
        echo(
            f"pinprof: rank(s) {waiting} had not written their report {MERGE_WAIT_S:.0f} s after rank 0; "
            f"merged with the batches they had appended (partial): `pinprof merge {out}` once they end"
        )
    write_merged(out)
    echo(f"pinprof: {world} ranks merged into {out}/")
