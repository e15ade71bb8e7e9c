"""CUPTI's activity records time the batch (``PINPROF_KERNELS=1``): its copy calls are logged for the
recorder to match to their memcpy records, and its step is the kernels launched inside its window,
placed by markers (``profiler.capture.clocks.cupti``). Nothing of pinprof's sits around a user's copy."""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from profiler.capture.batch_tree import tensor_bytes
from profiler.capture.clocks.gpu_clock import GpuClock, Timed

if TYPE_CHECKING:
    import torch

    from profiler.capture.clocks.cupti.recorder import CuptiRecorder
    from profiler.capture.cuda.events import EventPool
    from profiler.capture.in_flight import Mark


def copied_since(rec: dict[str, Any], ms: float) -> bool:
    """Whether this batch's last copy call (``_calls``: host ns) ended after ``ms``."""
    calls = rec.get("_calls")
    if not calls:
        return False
    return bool(calls[-1][1] > ms * 1e6)


def log_call(rec: dict[str, Any], srcs: list[torch.Tensor], call_s: float, call_e: float) -> None:
    """A ``to_device`` call: its host interval (ns) and the sizes its memcpy records will carry, one
    a non-empty source, for the recorder to match them."""
    sizes = tuple((tensor_bytes(t),) for t in srcs if t.numel())
    rec.setdefault("_calls", []).append((round(call_s * 1e6), round(call_e * 1e6), sizes))


class RecordedCopies(GpuClock):
    """What a clock whose copies CUPTI's memcpy records time keeps of each (the call's host span and
    the sizes its records carry): no event or stream gate of pinprof's around the user's copy."""

    records_copies = True

    def __init__(self, recorder: CuptiRecorder) -> None:
        self.recorder = recorder

    def noted(
        self, prof: Any, rec: dict[str, Any], call_s_ns: int, call_e_ns: int, nbytes: int, alt_bytes: int | None
    ) -> None:
        if "_stepped" not in rec:  # a copy after the batch's step: see CopyHooks.copy_end
            rec["request"] = call_e_ns / 1e6  # the step may use the data once the call returns
        # the sizes its records may carry: torch may convert before the copy or after it
        expect = (nbytes,) if alt_bytes is None or alt_bytes == nbytes else (nbytes, alt_bytes)
        rec["_calls"].append((call_s_ns, call_e_ns, (expect,) if nbytes else ()))

    def copy_events(self, pool: EventPool, defer: bool) -> tuple[Any, Any]:
        # no event times the copy; a deferred one's end still orders the compute stream after it
        return None, pool.get() if defer else None

    def copy_logged(
        self, rec: dict[str, Any], srcs: list[torch.Tensor], call_s: float, call_e: float, start: Any, end: Any
    ) -> None:
        log_call(rec, srcs, call_s, call_e)

    def waited(self, prof: Timed, end: Any) -> None:
        prof._pool.put(end)  # the event only ordered the streams


class CuptiClock(RecordedCopies):
    """A batch CUPTI's records time, copies and step (``recorder``: the process's)."""

    name = "cupti"

    def open(self, prof: Timed, rec: dict[str, Any]) -> None:
        rec["_calls"] = []  # its copy calls, then its step's launches

    def commit(self, prof: Timed, rec: dict[str, Any], row: int) -> None:
        window = rec.get("_window")
        if window is None:  # the step is what ran inside compute(), first entry to last exit
            window = [(rec["comp_s"], rec["comp_e"])] if rec["comp_s"] == rec["comp_s"] else []
        self.recorder.add(prof._store, row, rec.get("_calls", []), window, rec["batch_e"])

    def compute_enter(self, prof: Timed, rec: dict[str, Any], start: float, first: bool) -> tuple[float, Any]:
        # The kernels launched in here are the step, bounded by markers; a marker's call is pinprof's
        # own time (pinprof_ms). Only the first block's entry is an edge (the step runs from it to the
        # last exit), and none is needed where this batch's copies came after the last exit's marker:
        # the recorder takes copy calls as markers too (Records._copy_edges). A marker costs 3-5 us.
        if first and not copied_since(rec, prof._exit_ms) and (mark := self.recorder.mark(prof.device)) is not None:
            rec["own_sum"] += mark - start
            start = mark
        return start, None

    def compute_exit(self, prof: Timed, rec: dict[str, Any], end: float, stream: Any) -> float:
        if (mark := self.recorder.mark(prof.device)) is not None:
            rec["own_sum"] += mark - end
            end = prof._exit_ms = mark
        return end

    def step_edge(self, ms: float, edge: Any) -> float:
        return float(edge())  # a marker now: the kernels launched before it are the window's

    def start_step(self, prof: Timed, rec: dict[str, Any], now: float) -> None:
        """Nothing: its window starts where the rows before it end (``_close``'s ``batch_s``)."""

    def end_step(
        self, prof: Timed, rec: dict[str, Any], end: float, tent: Mark | None, at_tent: bool, bump: Mark | None
    ) -> None:
        # every kernel launched between the batch's handoff (or ``bump``) and the row's end is its step's
        start = bump.host_ms if bump is not None else max(rec["fetch_e"], rec["batch_s"])
        rec["_window"] = [(start, end)]
