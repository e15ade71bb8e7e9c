"""The phase contexts a loop enters: ``with prof.cpu_work():`` and ``with prof.compute():``.

Classes, not ``@contextmanager``, to keep them cheap; the record keys are class attributes, so no key
string is built per batch.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from profiler.capture.backend import edge_ms
from profiler.capture.clock import now_ms
from profiler.capture.cuda.events import current_stream, record
from profiler.capture.nvtx import NvtxEmitter

if TYPE_CHECKING:
    from profiler.capture.profiler_state import ProfilerState


def account(rec: dict[str, Any], s_key: str, sum_key: str, e_key: str, start: float, end: float) -> None:
    """One block of a phase that a batch may enter several times: first start, summed time, last end."""
    if rec[s_key] != rec[s_key]:  # NaN: the first block of this batch
        rec[s_key], rec[sum_key] = start, end - start
    else:
        rec[sum_key] += end - start
    rec[e_key] = end


def _copied_since(rec: dict[str, Any], ms: float) -> bool:
    """Whether this batch's last copy call (CUPTI's ``_calls``: host ns) ended after ``ms``."""
    calls = rec.get("_calls")
    if not calls:
        return False
    return bool(calls[-1][1] > ms * 1e6)


class HostPhase:
    """Host-clock accounting shared by the phase contexts: first start, last end, summed time."""

    __slots__ = ("rec", "start")
    _S, _SUM, _E = "", "", ""
    rec: dict[str, Any]
    start: float

    def _account(self, end: float) -> None:
        account(self.rec, self._S, self._SUM, self._E, self.start, end)


class CpuWork(HostPhase):
    """``with prof.cpu_work():`` host clock and NVTX only."""

    __slots__ = ("nvtx",)
    _S, _SUM, _E = "cpu_s", "cpu_sum", "cpu_e"

    def __init__(self, rec: dict[str, Any], nvtx: NvtxEmitter) -> None:
        self.rec, self.nvtx = rec, nvtx

    def __enter__(self) -> None:
        self.start = now_ms()
        self.nvtx.push("cpu_work")

    def __exit__(self, *exc: object) -> None:
        self.nvtx.pop()
        self._account(now_ms())


class Compute(HostPhase):
    """``with prof.compute():`` host clock, NVTX, and CUDA events on the stream the work runs on."""

    __slots__ = ("cupti", "prof", "stream")
    _S, _SUM, _E = "comp_s", "comp_sum", "comp_e"

    def __init__(self, prof: ProfilerState, rec: dict[str, Any]) -> None:
        self.prof, self.rec = prof, rec

    def __enter__(self) -> None:
        prof, rec = self.prof, self.rec
        # CUPTI: the kernels launched in here are the step, bounded by markers where they place them;
        # a marker's call is pinprof's own time (pinprof_ms). Read once: the exit marks as the entry did.
        cupti = self.cupti = prof.cuda and prof._cupti_row(rec)
        start = self.start = now_ms()
        first = rec["request"] != rec["request"]  # NaN: first compute of this batch
        # Only the first block's entry is an edge (the step runs from it to the last exit), and none
        # is needed where this batch's copies came after the last exit's marker: the recorder takes
        # copy calls as markers too (Records._copy_edges). A marker costs 3-5 us (cupti/marker.py).
        if cupti and first and not _copied_since(rec, prof._exit_ms) and (mark := edge_ms(prof.device)) is not None:
            rec["own_sum"] += mark - start
            start = self.start = mark
        if first:
            rec["request"] = start
        if prof.cuda and not cupti:
            stream = self.stream = rec.get("_stream") or current_stream(prof._index)
            if "_comp_start" not in rec:  # later blocks of the same batch extend it: no start event
                ev = prof._pool.get()
                record(ev, stream)
                rec["_comp_start"] = ev
        prof.nvtx.push("compute")

    def __exit__(self, *exc: object) -> None:
        prof, rec = self.prof, self.rec
        prof.nvtx.pop()
        end = now_ms()
        if self.cupti and (mark := edge_ms(prof.device)) is not None:
            rec["own_sum"] += mark - end
            end = prof._exit_ms = mark
        if prof.cuda and "_comp_start" in rec:
            ev = prof._pool.get()
            record(ev, self.stream)
            old = rec.get("_comp_end")
            if old is not None:
                prof._pool.put(old)
            rec["_comp_end"] = ev
        self._account(end)
