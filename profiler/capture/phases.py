"""The phase contexts a loop enters: ``with prof.cpu_work():`` and ``with prof.compute():``.

Classes, not ``@contextmanager``, to keep them cheap; the record keys are class attributes, so no key
string is built per batch.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from profiler.capture.clock import now_ms
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
    """``with prof.compute():`` host clock, NVTX, and the batch's GPU clock (``profiler.capture.clocks``:
    CUDA events on the stream the work runs on, or CUPTI's markers at the block's edges)."""

    __slots__ = ("clock", "prof", "stream")
    _S, _SUM, _E = "comp_s", "comp_sum", "comp_e"

    def __init__(self, prof: ProfilerState, rec: dict[str, Any]) -> None:
        self.prof, self.rec = prof, rec

    def __enter__(self) -> None:
        prof, rec = self.prof, self.rec
        clock = self.clock = prof._clocks.of(rec)  # read once: the exit marks as the entry did
        first = rec["request"] != rec["request"]  # NaN: first compute of this batch
        start, self.stream = clock.compute_enter(prof, rec, now_ms(), first)
        self.start = start
        if first:
            rec["request"] = start
        prof.nvtx.push("compute")

    def __exit__(self, *exc: object) -> None:
        prof, rec = self.prof, self.rec
        prof.nvtx.pop()
        self._account(self.clock.compute_exit(prof, rec, now_ms(), self.stream))
