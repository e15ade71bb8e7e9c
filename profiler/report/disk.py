"""A report on a full disk: the journal's rows stay, the run's other rows follow them as far as the disk
holds them, and meta.json, written over the room its "running" version reserved (``META_RESERVE``),
says the report is partial and how many batches could not be written.

A run's last step rewrites every file atomically: a temporary copy of timeline.csv beside the journal
it replaces, which a full disk cannot hold. So a disk that fills keeps the journal as the timeline.
"""

from __future__ import annotations

import errno
from pathlib import Path
from typing import Any

import pandas as pd

from profiler.atomic import overwrite_json
from profiler.errors import ReportError
from profiler.report.files import read_timeline
from profiler.report.journal import Journal

# Bytes a run's first meta.json holds (padded with spaces): its final version, written in place on a
# full disk, needs no new block. A final meta.json of pinprof's is 1-3 KB.
META_RESERVE = 16384
# The errors of a disk that cannot take more bytes: full, over quota, past the largest file allowed.
FULL = frozenset({errno.ENOSPC, errno.EDQUOT, errno.EFBIG})


def is_full(err: BaseException) -> bool:
    return isinstance(err, OSError) and err.errno in FULL


def keep_on_full_disk(folder: Path, journal: Journal, tl: pd.DataFrame, info: dict[str, Any], err: OSError) -> str:
    """After the report's files could not be written (``err``): ``tl``'s rows beyond the journal's
    appended to it as far as the disk holds them, meta.json finished as partial in place; the one line
    that says what was kept (without ``pinprof: ``)."""
    try:  # the final rewrite may have got as far as timeline.csv: its rows are then all there
        journal.rows = len(read_timeline(journal.path))
    except (OSError, ReportError):
        pass
    lost = journal.keep(tl)
    final = {
        **info,
        "partial": True,
        "status": "disk_full",
        "interrupted_by": info.get("interrupted_by") or "a full disk",
        "batches_measured": len(tl),
        "batches_not_written": lost,
    }
    try:
        overwrite_json(final, Path(folder) / "meta.json")
        said = "meta.json says the report is partial"
    except OSError:  # an older report's meta.json, without the room: it still says running, so partial
        said = "meta.json still says the run is running (partial)"
    return (
        f"the disk is full ({err.strerror or err}): {journal.path} keeps {journal.rows} of the {len(tl)} batches "
        f"measured ({lost} could not be written); {said}; summary, diagnosis and plots were not written: free "
        f"some space, then `pinprof diagnose {folder} --write`"
    )
