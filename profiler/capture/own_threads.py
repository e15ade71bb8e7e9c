"""The CPU time of pinprof's own threads, which run beside the profiled loop: the journal's appends
(``rows.JournalWriter``), CUPTI's records read and attributed (``cupti.recorder``'s drain thread) and
the stall watch (``stall.StallWatch``).

``pinprof_ms`` counts pinprof's time on the loop's thread only. These threads hold Python's lock while
they run Python, so a loop that runs Python (a loader with no workers, augmentation code, the step's
launches) waits for them as for its own hooks; on a loop whose thread waits on the GPU or on I/O they
cost little more than a core. Their CPU time is what meta.json's ``pinprof_threads_ms`` keeps, per
thread, so that a report can state pinprof's whole cost, not only its share on the loop's thread.

Read with ``time.thread_time_ns`` around each piece of a thread's work: about 0.5 us a read on the
project's CPU machine, paid per append or per drain (every ``DRAIN_S``), never per batch. It includes
the time a thread's C code runs without Python's lock (numpy's parsing of CUPTI's buffers, the append's
``write``): an upper bound on what the loop's thread waited.
"""

from __future__ import annotations

import threading
from collections.abc import Iterator
from contextlib import contextmanager
from time import thread_time_ns
from typing import Any

# What each thread's work is called in meta.json and the report.
JOURNAL, CUPTI, STALL = "journal", "cupti", "stall"

_lock = threading.Lock()
_spent_ns: dict[str, int] = {}


@contextmanager
def working(part: str) -> Iterator[None]:
    """Around a piece of ``part``'s work on its own thread: its CPU time is added to ``part``'s."""
    start = thread_time_ns()
    try:
        yield
    finally:
        spent = thread_time_ns() - start
        with _lock:
            _spent_ns[part] = _spent_ns.get(part, 0) + spent


def summary() -> dict[str, float]:
    """CPU ms spent by each part so far in this process (meta.json's ``pinprof_threads_ms``)."""
    with _lock:
        return {part: round(ns / 1e6, 3) for part, ns in sorted(_spent_ns.items())}


def meta_fields(process_ms: float | None, process_start_ms: float | None) -> dict[str, Any]:
    """meta.json's account of pinprof's work beside the loop, as ``pinprof profile`` and ``pinprof
    run`` write it (``profiler.analysis.threads`` reads it): its threads' CPU ms so far, and the
    journal's process's (``profiler.report.journal_process``) for the rows and to start; None where
    no process ran."""
    return {
        "pinprof_threads_ms": summary(),
        "pinprof_journal_process_ms": process_ms,
        "pinprof_journal_process_start_ms": process_start_ms,
    }


def reset() -> None:
    """Start counting afresh (a test, or a second session in one process)."""
    with _lock:
        _spent_ns.clear()
