"""The copy hooks of an ``AutoSession`` (``profiler.capture.auto_session``): one host-to-device copy of
the loop's, added to the batch it reads as ``TransferProfiler.to_device`` adds its own.

- ``takes_over``/``copy_pinned``: a plain ``non_blocking`` copy of a dense pinned tensor that pinprof
  makes itself, the DMA alone between its events;
- ``copy_begin``/``copy_end``: a copy of the user's timed by CUDA events on the stream it runs on;
- ``copy_noted``: a copy no event times (CUPTI's records time it, or a CPU device), in one call;
- ``layout_noted``: the layout copy the hooks made of a non-dense source (``profiler.capture.dense``),
  and the leaf it was for;
- ``pin_end``: a ``pin_memory()`` the loop's thread made itself.
"""

from __future__ import annotations

from time import perf_counter_ns
from typing import TYPE_CHECKING, Any

import torch

from profiler.capture.auto_rows import RowEnds
from profiler.capture.batch_tree import tensor_bytes
from profiler.capture.clock import now_ms
from profiler.capture.cuda.events import current_stream, record
from profiler.capture.dense import leaf_path
from profiler.capture.phases import account
from profiler.capture.store import note_memory
from profiler.modes import Mode

if TYPE_CHECKING:
    from profiler.capture.profiler import TransferProfiler


def copy_mode(pinned: bool, non_blocking: bool) -> Mode:
    """The mode a loop's first copy says it runs in."""
    if pinned:
        return "pinned_nb" if non_blocking else "pinned"
    return "pageable_nb" if non_blocking else "pageable"


class CopyHooks(RowEnds):
    """The copy half of ``AutoSession``: it adds to the batches the session holds (``SessionState``),
    and a copy of a batch fetched after older ones in flight moves their step's start (``_bump``)."""

    def takes_over(self, src: torch.Tensor, device: torch.device | None, dtype: Any, extra: bool) -> bool:
        """Whether a ``.to()``/``.cuda()`` of ``src`` is one pinprof makes itself (``copy_pinned``): a
        plain non_blocking copy of a dense pinned tensor to the session's device, nothing else
        asked of it (``extra``: a dtype change, ``copy=True``, a memory format, grad)."""
        return bool(
            self.cuda
            and not extra
            and not self.cur[1]["_clock"].records_copies  # type: ignore[index]  # an exact clock needs none of ours
            and type(src) is torch.Tensor
            and not src.requires_grad
            and (dtype is None or dtype == src.dtype)
            and (device is None or device.index is None or device.index == self.device.index)
            and src.is_pinned()
        )

    def copy_pinned(self, src: torch.Tensor) -> torch.Tensor:
        """The copy made as ``TransferProfiler.to_device`` makes it: the destination allocated first,
        then the DMA alone between its events behind the stream gate, so the events time the DMA and
        not the host's dispatch before it (a plain event pair around the user's call read 0.81 ms for
        CUPTI's 0.70 ms on the H200); the current stream waits on its end, as after ``.to()``."""
        prof, rec = cur = self.cur  # type: ignore[misc]
        if len(self.flight) > 1:
            self._bump(rec)  # batches fetched before this one: their step comes after this copy
        self.cur = None  # pinprof's own copy_ inside is not the user's: the hooks let it through
        try:
            out = prof._copy_into(rec, src)
        finally:
            self.cur = cur
        if "_stepped" not in rec:  # a copy after the batch's step leaves the step's start alone: see copy_end
            rec["request"] = now_ms()  # the script's next op may use the data: see copy_end
            record(rec["_comp_start"], current_stream(prof._index))  # compute starts after the batch's last copy
        return out  # type: ignore[no-any-return]

    def copy_begin(self) -> tuple[Any, Any, Any, float]:
        """Before one of the user's host-to-device copies in the current batch, where CUDA events time
        it: its start event on the current stream, where the copy runs. Returns what ``copy_end``
        takes. A copy no event times (CUPTI's records, a CPU device) is ``copy_noted``'s."""
        prof, _ = self.cur  # type: ignore[misc]
        prof.nvtx.push("h2d")
        stream = current_stream(prof._index)
        start, end = prof._pool.get(), prof._pool.get()
        record(start, stream)
        return stream, start, end, now_ms()

    def copy_end(
        self,
        began: tuple[Any, Any, Any, float],
        src: torch.Tensor,
        non_blocking: bool,
        returned_ns: int | None = None,
    ) -> None:
        """After it: its end event, and the copy added to the current batch (bytes, ``copies``, call
        time, whether it blocked, ``src_memory``) as ``TransferProfiler.to_device`` adds its own; the
        events' twin of ``copy_noted``. ``returned_ns``: when the call returned (``perf_counter_ns``),
        if the caller read it (a clock read less); else now."""
        call_e = (perf_counter_ns() if returned_ns is None else returned_ns) / 1e6
        stream, start, end, call_s = began
        prof, rec = self.cur  # type: ignore[misc]
        record(end, stream)
        if self.steps and len(self.flight) > 1:  # _bump marks nothing before the first step
            self._bump(rec)  # batches fetched before this one: their step comes after this copy
        prof.nvtx.pop()
        pinned = src.is_pinned()  # events run on CUDA only
        nbytes = tensor_bytes(src)
        rec["bytes"] = max(rec["bytes"], 0) + nbytes
        rec["copies"] += 1
        account(rec, "call_s", "call_sum", "call_e", call_s, call_e)
        rec["copy_sync"] = rec["copy_sync"] or not (pinned and non_blocking)
        rec.setdefault("_h2d", []).append((start, end, True))
        # No compute() context says when the step needs the data: the script's next GPU op may use it
        # as soon as the call returns, so that is when it is asked for (the wait of an asynchronous
        # copy runs from the last copy's return to its end). Without it, the wait fell back to the
        # batch's end and read 0 on a loop whose GPU idled 2.8 ms per step for its copy (resnet50 on
        # the H200). A copy after the batch's step (a metric's, a logger's: Lightning's logged values
        # at the end of a fit) is counted, but the step's start and its ask for the data stay where
        # they were: moved to it, the last training row of a Lightning fit read 2.0 ms of compute for 160.
        if "_stepped" not in rec:
            rec["request"] = call_e
            record(rec["_comp_start"], stream)  # compute starts when the batch's last copy has ended
        note_memory(rec, "pinned" if pinned else "pageable", None)
        if prof.mode == "auto":
            prof.mode = copy_mode(pinned, non_blocking)

    def copy_noted(
        self,
        prof: TransferProfiler,
        rec: dict[str, Any],
        src: torch.Tensor,
        non_blocking: bool,
        alt_bytes: int | None,
        call_s_ns: int,
        call_e_ns: int,
    ) -> int:
        """``copy_end`` of a copy no event times (CUPTI's records time it, or a CPU device), in one
        call: the copy added to the current batch ``rec`` of ``prof`` as ``copy_end`` adds it.
        ``alt_bytes``: the copy's size in the dtype it was asked for, when it converts (torch may convert
        before the copy); CUPTI's record may have either size. ``call_s_ns``, ``call_e_ns``:
        ``perf_counter_ns`` around the user's call (from the end of the layout copy the hooks made inside it,
        if they made one: ``layout_ms`` is a phase of its own). Kept apart from
        ``copy_end`` because every copy of a profiled loop comes here: ``account`` and
        ``note_memory`` are written out (a call each less), and no event is recorded. Returns the
        bytes it moved; the batch's clock adds what it times by (``profiler.capture.clocks``)."""
        if self.steps and len(self.flight) > 1:  # _bump marks nothing before the first step
            self._bump(rec)  # batches fetched before this one: their step comes after this copy
        prof.nvtx.pop()
        pinned = self.cuda and src.is_pinned()  # is_pinned() asks CUDA: not on a CPU machine
        nbytes = src.numel() * src.element_size()  # batch_tree.tensor_bytes
        was = rec["bytes"]
        rec["bytes"] = nbytes + (was if was > 0 else 0)
        rec["copies"] += 1
        call_s, call_e = call_s_ns / 1e6, call_e_ns / 1e6
        if rec["call_s"] != rec["call_s"]:  # NaN: the batch's first copy (phases.account)
            rec["call_s"], rec["call_sum"] = call_s, call_e - call_s
        else:
            rec["call_sum"] += call_e - call_s
        rec["call_e"] = call_e
        if not (pinned and non_blocking):
            rec["copy_sync"] = True
        kind = "pinned" if pinned else "pageable"
        was_kind = rec["src_memory"]  # store.note_memory
        if was_kind != kind:
            rec["src_memory"] = "mixed" if was_kind else kind
        if prof.mode == "auto":
            prof.mode = copy_mode(pinned, non_blocking)
        return nbytes

    def layout_noted(self, src: torch.Tensor, start_ns: int, end_ns: int) -> None:
        """The layout copy the hooks made of ``src`` for the current batch's copy, from ``start_ns`` to
        ``end_ns`` (``perf_counter_ns``): the batch's layout interval, and the leaf it was made for."""
        prof, rec = self.cur  # type: ignore[misc]
        account(rec, "layout_s", "layout_sum", "layout_e", start_ns / 1e6, end_ns / 1e6)
        batch = self._batches.get(id(prof))
        path = leaf_path(batch, src) if batch is not None else ""
        pinned = self.cuda and src.is_pinned()
        self.leaves.note(str(prof.scenario), path, src, pinned, (end_ns - start_ns) / 1e6)

    def pin_end(self, start: float) -> None:
        """A ``pin_memory()`` the main thread made inside the current batch, from ``start`` (host ms)
        to now: the batch's pin interval (first start, last end)."""
        rec = self.cur[1]  # type: ignore[index]
        if rec["pin_s"] != rec["pin_s"]:  # NaN: the first pin of this batch
            rec["pin_s"] = start
        rec["pin_e"] = now_ms()
