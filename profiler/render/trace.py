"""Chrome trace-event JSON of the per-batch timeline (opens in Perfetto or chrome://tracing).

One process per scenario, one thread per lane (main thread, pin step, copy stream, compute
stream); each phase a complete ("X") event in microseconds, with the batch number in its args.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pandas as pd

from profiler.atomic import to_json, write_text_atomic
from profiler.render.lanes import LANES, intervals, with_labels


def chrome_trace(tl: pd.DataFrame) -> dict[str, Any]:
    tl = with_labels(tl)
    events: list[dict[str, Any]] = []
    scen = list(dict.fromkeys(tl.scenario))
    lanes = list(LANES)
    for pid, name in enumerate(scen, start=1):
        events.append({"ph": "M", "name": "process_name", "pid": pid, "args": {"name": f"pinprof {name}"}})
        for tid, lane in enumerate(lanes, start=1):
            events.append({"ph": "M", "name": "thread_name", "pid": pid, "tid": tid, "args": {"name": lane}})
            events.append({"ph": "M", "name": "thread_sort_index", "pid": pid, "tid": tid, "args": {"sort_index": tid}})
    iv = intervals(tl)
    for r in iv.itertuples():
        events.append(
            {
                "ph": "X",
                "cat": "pinprof",
                "name": r.phase,
                "pid": scen.index(r.scenario) + 1,
                "tid": lanes.index(r.lane) + 1,
                "ts": round(r.start_ms * 1e3, 3),
                "dur": round((r.end_ms - r.start_ms) * 1e3, 3),
                "args": {"batch": int(r.batch)},
            }
        )
    for r in tl.itertuples():
        if pd.notna(r.batch_start_ms) and pd.notna(r.batch_end_ms):
            events.append(
                {
                    "ph": "X",
                    "cat": "pinprof",
                    "name": f"batch {r.batch}",
                    "pid": scen.index(r.scenario) + 1,
                    "tid": 1,
                    "ts": round(r.batch_start_ms * 1e3, 3),
                    "dur": round((r.batch_end_ms - r.batch_start_ms) * 1e3, 3),
                    "args": {"bytes": int(r.bytes)},
                }
            )
    return {"traceEvents": events, "displayTimeUnit": "ms"}


def write(tl: pd.DataFrame, path: Path) -> Path:
    write_text_atomic(Path(path), to_json(chrome_trace(tl)))
    return Path(path)
