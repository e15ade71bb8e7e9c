"""CUPTI's memcpy records time the batch's copies and CUDA events its step: ``pinprof profile``'s default.

The copies are timed as ``by_cupti`` times them, from the call's host span and the memcpy records it
made, with nothing of pinprof's around them; the step as ``by_events`` times it, from an event at its
start to one at its end on the stream it runs on. CUPTI's kernel records are off: each kernel launch
pays for its record in the driver, and on a short training step on an H100 CUPTI's memcpy and kernel
records alone read 1.10 of the bare script where its memcpy records alone read 1.06
(``profiler/DESIGN.md``, "What the clock costs"; ``reports/README.md``). What only kernel records
tell (a step's kernels' busy time, the GPU's waits between launches) is ``PINPROF_KERNELS=1``'s.
"""

from __future__ import annotations

from typing import Any

from profiler.capture.clocks.by_cupti import RecordedCopies
from profiler.capture.clocks.by_events import EventsClock
from profiler.capture.clocks.gpu_clock import GpuClock, Timed
from profiler.capture.cuda.events import current_stream, record


class CuptiCopiesClock(RecordedCopies, EventsClock):
    """A batch whose copies CUPTI's memcpy records time (``recorder``: the process's), and its step
    CUDA events (``EventsClock``'s step, compute blocks and marks)."""

    name = "cupti/events"

    def open(self, prof: Timed, rec: dict[str, Any]) -> None:
        rec["_calls"] = []  # its copy calls, for their records
        super().open(prof, rec)  # its step's start event (EventsClock), moved to after each copy

    def commit(self, prof: Timed, rec: dict[str, Any], row: int) -> None:
        GpuClock.commit(self, prof, rec, row)  # the step's events wait in the pending queue
        self.recorder.add(prof._store, row, rec.get("_calls", []), None, rec["batch_e"])

    # No event pair around the user's copy (EventsClock's): its NVTX range, then the copy added to the
    # batch and logged for its records (``noted``).
    copy_begin = GpuClock.copy_begin
    copy_end = GpuClock.copy_end

    def noted(
        self, prof: Any, rec: dict[str, Any], call_s_ns: int, call_e_ns: int, nbytes: int, alt_bytes: int | None
    ) -> None:
        super().noted(prof, rec, call_s_ns, call_e_ns, nbytes, alt_bytes)  # logged for its records
        if "_stepped" not in rec:  # a copy after the batch's step leaves its start alone (CopyHooks.copy_end)
            record(rec["_comp_start"], current_stream(prof._index))  # the step starts after the last copy
