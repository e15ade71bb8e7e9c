"""CUDA events time the batch: a pair around each copy (behind the stream gate where pinprof makes
the copy), and its step from an event at its start to one at its end on the stream it runs on, read
later from the pending queue (``profiler.capture.pending``)."""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from profiler.capture.clocks.gpu_clock import CopySession, GpuClock, Timed
from profiler.capture.cuda.events import current_stream, record

if TYPE_CHECKING:
    import torch

    from profiler.capture.in_flight import Mark


class EventsClock(GpuClock):
    """A batch CUDA events time."""

    name = "events"

    def open(self, prof: Timed, rec: dict[str, Any]) -> None:
        ev = rec["_comp_start"] = prof._pool.get()
        record(ev, current_stream(prof._index))  # re-recorded after each copy of the batch

    def copy_begin(self, s: CopySession, prof: Any) -> Any:
        return s.copy_begin()  # its NVTX ``h2d`` range too

    def copy_end(
        self,
        s: CopySession,
        prof: Any,
        rec: dict[str, Any],
        began: Any,
        src: torch.Tensor,
        non_blocking: bool,
        alt_bytes: int | None,
        call_s_ns: int,
        call_e_ns: int,
        relaid: bool,
    ) -> None:
        # the call's own time starts after the layout copy the hooks made inside it
        s.copy_end((*began[:3], call_s_ns / 1e6) if relaid else began, src, non_blocking, call_e_ns)

    def compute_enter(self, prof: Timed, rec: dict[str, Any], start: float, first: bool) -> tuple[float, Any]:
        stream = rec.get("_stream") or current_stream(prof._index)
        if "_comp_start" not in rec:  # later blocks of the same batch extend it: no start event
            ev = prof._pool.get()
            record(ev, stream)
            rec["_comp_start"] = ev
        return start, stream

    def compute_exit(self, prof: Timed, rec: dict[str, Any], end: float, stream: Any) -> float:
        if "_comp_start" in rec:
            ev = prof._pool.get()
            record(ev, stream)
            old = rec.get("_comp_end")
            if old is not None:
                prof._pool.put(old)
            rec["_comp_end"] = ev
        return end

    def mark(self, prof: Timed, stream: Any = None) -> Any:
        ev = prof._pool.get()
        record(ev, stream or current_stream(prof._index))
        return ev

    def start_step(self, prof: Timed, rec: dict[str, Any], now: float) -> None:
        record(rec["_comp_start"], current_stream(prof._index))

    def end_step(
        self, prof: Timed, rec: dict[str, Any], end: float, tent: Mark | None, at_tent: bool, bump: Mark | None
    ) -> None:
        # The step ends at ``tent``'s event where the row closes at its tentative end (``at_tent``), else
        # at one recorded now on the current stream; it starts at ``bump``'s event where a later batch's
        # fetch or copy came before it. Events not kept go back to the pool.
        if at_tent and tent is not None and tent.event is not None:
            ev = tent.event
        else:
            if tent is not None and tent.event is not None and tent is not bump:  # a tent may be the start
                prof._pool.put(tent.event)
            ev = prof._pool.get()
            record(ev, current_stream(prof._index))
        rec["_comp_end"] = ev
        if bump is not None and bump.event is not None:
            if "_comp_start" in rec:
                prof._pool.put(rec["_comp_start"])
            rec["_comp_start"] = bump.event
