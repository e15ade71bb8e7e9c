"""What pinprof's own threads cost beside the loop, in one sentence for the report's reader.

Reads meta.json's ``pinprof_threads_ms`` (``profiler.capture.own_threads``: CPU ms per part over the
run, written by ``pinprof profile`` and ``pinprof run``) and the timeline's row count. The per-scenario ``pinprof_ms``
line (``Diagnosis.own_line``) is pinprof's time on the loop's thread; this is the rest of its time,
spread over every batch of the run, since the threads serve all loaders at once.
"""

from __future__ import annotations

from typing import Any

import pandas as pd

PARTS = {"journal": "appends to timeline.csv", "cupti": "CUPTI's records", "stall": "the stall watch"}


def threads_line(tl: pd.DataFrame, info: dict[str, Any]) -> str | None:
    """``pinprof's threads ...`` for a run whose meta.json counted them and whose threads ran at all;
    None otherwise (a report written before the count, an empty timeline). The
    journal's process follows (``pinprof_journal_process_ms``: its CPU time for the rows, and
    ``pinprof_journal_process_start_ms``: to start): it runs on a core of its own, outside the
    profiled process's lock."""
    spent = info.get("pinprof_threads_ms")
    if not isinstance(spent, dict) or not len(tl):
        return None
    parts = {str(k): float(v) for k, v in spent.items() if isinstance(v, (int, float)) and v > 0}
    if not parts:
        return None
    n = len(tl)
    said = ", ".join(f"{PARTS.get(k, k)} {v / n:.3f}" for k, v in sorted(parts.items(), key=lambda kv: -kv[1]))
    line = (
        f"pinprof's own threads: {sum(parts.values()) / n:.3f} ms of CPU a batch over the run's {n:,} batches "
        f"({said}), not in pinprof_ms: while they run Python, a loop's thread that runs Python waits for them"
    )
    child, start = info.get("pinprof_journal_process_ms"), info.get("pinprof_journal_process_start_ms")
    if isinstance(child, (int, float)) and child > 0:
        line += (
            f"; the journal's own process, which builds and writes timeline.csv's rows, {child / n:.3f} ms a batch "
            "on another core, outside that lock"
        )
        if isinstance(start, (int, float)) and start > 0:
            line += f", after {start:,.0f} ms of CPU to start"
    return line
