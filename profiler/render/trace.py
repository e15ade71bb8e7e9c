"""Chrome trace-event JSON of the per-batch timeline (opens in Perfetto or chrome://tracing).

One process per scenario, one thread per lane (main thread, pin step, copy stream, compute
stream); each phase a complete ("X") event in microseconds, with the batch number in its args.
``write`` streams the events to the file a slice of rows at a time: a 1,000,000-row timeline built
as one list of events took 9.3 GB.
"""

from __future__ import annotations

import json
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pandas as pd

from profiler.atomic import TempFile
from profiler.render.lanes import LANES, intervals, with_labels

ROWS_PER_SLICE = 20_000


def chrome_trace(tl: pd.DataFrame) -> dict[str, Any]:
    """The whole trace as one object (small timelines, tests)."""
    return {"traceEvents": list(events(tl)), "displayTimeUnit": "ms"}


def events(tl: pd.DataFrame) -> Iterator[dict[str, Any]]:
    """The trace's events, metadata first, then each slice of ``ROWS_PER_SLICE`` rows' phases."""
    tl = with_labels(tl)
    scen = list(dict.fromkeys(tl.scenario))
    pid_of = {name: pid for pid, name in enumerate(scen, start=1)}
    lanes = list(LANES)
    for name, pid in pid_of.items():
        yield {"ph": "M", "name": "process_name", "pid": pid, "args": {"name": f"pinprof {name}"}}
        for tid, lane in enumerate(lanes, start=1):
            yield {"ph": "M", "name": "thread_name", "pid": pid, "tid": tid, "args": {"name": lane}}
            yield {"ph": "M", "name": "thread_sort_index", "pid": pid, "tid": tid, "args": {"sort_index": tid}}
    for start in range(0, len(tl), ROWS_PER_SLICE):
        part = tl.iloc[start : start + ROWS_PER_SLICE]
        for r in intervals(part).itertuples():
            yield {
                "ph": "X",
                "cat": "pinprof",
                "name": r.phase,
                "pid": pid_of[r.scenario],
                "tid": lanes.index(r.lane) + 1,
                "ts": round(r.start_ms * 1e3, 3),
                "dur": round((r.end_ms - r.start_ms) * 1e3, 3),
                "args": {"batch": int(r.batch)},
            }
        for r in part.itertuples():
            if pd.notna(r.batch_start_ms) and pd.notna(r.batch_end_ms):
                yield {
                    "ph": "X",
                    "cat": "pinprof",
                    "name": f"batch {r.batch}",
                    "pid": pid_of[r.scenario],
                    "tid": 1,
                    "ts": round(r.batch_start_ms * 1e3, 3),
                    "dur": round((r.batch_end_ms - r.batch_start_ms) * 1e3, 3),
                    "args": {"bytes": int(r.bytes)},
                }


def write(tl: pd.DataFrame, path: Path) -> Path:
    """The trace into ``path`` (through a temporary file: ``profiler.atomic``), event by event."""
    out = TempFile(Path(path))
    try:
        fh = out.file
        fh.write('{"displayTimeUnit": "ms", "traceEvents": [')
        for i, ev in enumerate(events(tl)):
            fh.write(("," if i else "") + "\n" + json.dumps(ev, allow_nan=False))
        fh.write("\n]}\n")
    except BaseException:
        out.discard()
        raise
    out.commit()  # removes the temporary file where the disk cannot hold its last bytes
    return Path(path)
