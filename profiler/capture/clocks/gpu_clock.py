"""The GPU clock of one batch: what times its copies and its step, behind one interface.

Four clocks, one class each: CUPTI's memcpy records for the copies and CUDA events for the step
(``by_cupti_copies``, the default where CUPTI runs), CUPTI's memcpy and kernel records (``by_cupti``,
``PINPROF_KERNELS=1``), CUDA events (``by_events``) and, with no GPU, the host's clock
(``by_host``). A profiler holds one of each it can use
(``Clocks``) and gives each batch the one that runs when the batch begins (``Clocks.for_new_batch``);
the batch keeps it to its row's end (``rec["_clock"]``), so a batch whose copies CUPTI logged stays
CUPTI's even if CUPTI is handed over before its step ends (``profiler.capture.clocks.choice``).
Everything that times a batch on the GPU asks the batch's clock: no module outside
``profiler.capture.clocks`` asks which clock runs (``tests/test_layers.py`` holds that).

What a clock is asked, in a batch's order:

- ``open``: the batch is fetched (the hooks of ``pinprof profile``);
- ``copy_begin``/``copy_end``: one of the user's copies, around the call (the hooks);
  ``copy_events``/``copy_logged``: one of ``TransferProfiler.to_device``'s (``device_copy``);
- ``compute_enter``/``compute_exit``: a ``with prof.compute():`` block (``phases``);
- ``mark``, ``step_edge``, ``start_step``, ``end_step``: where its step starts and ends (the hooks);
- ``commit``: the row is stored; its GPU fields come later (``collect``, ``Clocks.collect``).
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any, Protocol

if TYPE_CHECKING:
    import torch

    from profiler.capture.cuda.anchor import Anchor
    from profiler.capture.cuda.events import EventPool
    from profiler.capture.in_flight import Mark
    from profiler.capture.pending import PendingEvents
    from profiler.capture.store import Store


class Timed(Protocol):
    """What a clock reads and writes of the profiler whose batch it times."""

    device: torch.device
    _index: int
    _pool: EventPool
    _pending: PendingEvents
    _store: Store
    _anchor: Anchor | None
    _exit_ms: float  # the latest compute() exit's marker, host ms


class CopySession(Protocol):
    """The hooks' side of a user's copy (``profiler.capture.auto_copies.CopyHooks``)."""

    def copy_begin(self) -> tuple[Any, Any, Any, float]: ...

    def copy_end(
        self, began: tuple[Any, Any, Any, float], src: torch.Tensor, non_blocking: bool, returned_ns: int | None = None
    ) -> None: ...

    def copy_noted(
        self,
        prof: Any,
        rec: dict[str, Any],
        src: torch.Tensor,
        non_blocking: bool,
        alt_bytes: int | None,
        call_s_ns: int,
        call_e_ns: int,
    ) -> int: ...


class GpuClock:
    """What times one batch's GPU side; the base holds what the clocks share (no CUDA event)."""

    name = ""  # the timeline's ``gpu_clock``
    # Each copy timed as the device ran it from the host's call alone: pinprof puts no event, stream
    # gate or copy of its own around the user's copy (CUPTI's records; the events need them).
    records_copies = False

    def __deepcopy__(self, memo: dict[int, Any]) -> GpuClock:
        return self  # one per profiler, shared by its batches: a copied batch record keeps its clock

    # -- the batch -----------------------------------------------------------------------------------
    def open(self, prof: Timed, rec: dict[str, Any]) -> None:
        """The batch ``rec`` was fetched: what its step's start needs before any copy."""
        raise NotImplementedError

    def commit(self, prof: Timed, rec: dict[str, Any], row: int) -> None:
        """``rec`` is row ``row`` of the store now (which reads it, never changes it): an event-timed
        row waits in the pending queue for its copies' events and its step's."""
        copies, comp_start, comp_end = rec.get("_h2d", ()), rec.get("_comp_start"), rec.get("_comp_end")
        if copies or comp_start is not None or comp_end is not None:
            prof._pending.add(row, list(copies), comp_start, comp_end)

    # -- copies ----------------------------------------------------------------------------------------
    def copy_begin(self, s: CopySession, prof: Any) -> Any:
        """Before one of the user's copies in the current batch: what ``copy_end`` takes."""
        prof.nvtx.push("h2d")
        return None

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
        """After it: the copy added to ``rec`` (``CopySession.copy_noted``), then what this clock keeps
        of it (``noted``). ``call_s_ns``: where the copy proper began (``perf_counter_ns``; after the
        layout copy the hooks made, where ``relaid``)."""
        nbytes = s.copy_noted(prof, rec, src, non_blocking, alt_bytes, call_s_ns, call_e_ns)
        self.noted(prof, rec, call_s_ns, call_e_ns, nbytes, alt_bytes)

    def noted(
        self, prof: Any, rec: dict[str, Any], call_s_ns: int, call_e_ns: int, nbytes: int, alt_bytes: int | None
    ) -> None:
        """What this clock keeps of one of the user's copies that ``copy_end`` added to ``rec`` (of
        ``prof``): ``nbytes`` moved, ``alt_bytes`` asked for where the copy converts, the call's host
        span (ns)."""
        raise NotImplementedError

    def copy_events(self, pool: EventPool, defer: bool) -> tuple[Any, Any]:
        """The start and end events around one ``to_device`` call's copies (None: none)."""
        return pool.get(), pool.get()

    def copy_logged(
        self, rec: dict[str, Any], srcs: list[torch.Tensor], call_s: float, call_e: float, start: Any, end: Any
    ) -> None:
        """One ``to_device`` call's copies made (host ms ``call_s`` to ``call_e``, events ``start``/``end``)."""
        rec.setdefault("_h2d", []).append((start, end, True))

    def waited(self, prof: Timed, end: Any) -> None:
        """The compute stream was made to wait on a prefetched copy's ``end`` event."""

    # -- the step --------------------------------------------------------------------------------------
    def compute_enter(self, prof: Timed, rec: dict[str, Any], start: float, first: bool) -> tuple[float, Any]:
        """A ``compute()`` block entered at host ms ``start`` (``first``: the batch's first):
        (where it starts, the stream its exit marks)."""
        return start, None

    def compute_exit(self, prof: Timed, rec: dict[str, Any], end: float, stream: Any) -> float:
        """The block left at host ms ``end``: where it ends."""
        return end

    def mark(self, prof: Timed, stream: Any = None) -> Any:
        """A CUDA event recorded now on ``stream`` (the current one if None), where events time the
        batch; None elsewhere."""
        return None

    def step_edge(self, ms: float, edge: Any) -> float:
        """Where a step edge that happened at host ms ``ms`` is placed: ``edge()`` (a marker now)
        where markers place CUPTI's kernels, ``ms`` elsewhere."""
        return ms

    def start_step(self, prof: Timed, rec: dict[str, Any], now: float) -> None:
        """The batch's step starts now (host ms)."""
        raise NotImplementedError

    def end_step(
        self, prof: Timed, rec: dict[str, Any], end: float, tent: Mark | None, at_tent: bool, bump: Mark | None
    ) -> None:
        """The batch's row ends at ``end`` (host ms): where its step ends and starts. ``tent``: its
        tentative end's mark (its step's end where ``at_tent``); ``bump``: where its step starts, if a
        later batch's fetch or copy (or a window's training) moved it."""
        raise NotImplementedError
