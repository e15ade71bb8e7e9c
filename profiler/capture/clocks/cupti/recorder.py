"""The process's one CUPTI client: activity buffers in, per-batch GPU fields out.

The loop's thread pays, per copy call, a tuple appended to its batch record, and per batch one
``deque.append`` of what the batch did (``Pending``: its copy calls, its step's host windows, its
end). CUPTI hands its buffers to callbacks written in C (``shim.c``: a Python callback under CUPTI's
lock deadlocked against a thread holding the GIL in a CUDA call), which queue them; the recorder's
own thread takes them every ``DRAIN_S``, as does reading a timeline: a buffer is copied out and
parsed with numpy (``layout``), its times moved onto the host clock, and the batches whose GPU work is
surely over are attributed (``attribute``) and written into their profiler's store. Records are
dropped once their batch is written, so memory stays bounded by the records of the last second or so.

Matching records to batches is ``records`` (CUPTI-free, replayed on a CPU by the tests); CUPTI's
clock onto the host's is ``clock``.

Another CUPTI client takes the records over: Nsight Systems refuses this one from the start
(``CUPTI_ERROR_MULTIPLE_SUBSCRIBERS_NOT_SUPPORTED``), and torch.profiler's Kineto, started while
this one runs, replaces its callbacks; started before, enabling records under it hung the process on
the H200. So the recorder is not started while torch.profiler runs, and a torch.profiler started
later first makes it hand over (``release``): what was recorded is attributed, and the batches that
follow, to the end of the run, are timed with CUDA events (``profiler.capture.cuda.events``). Only a
test or a benchmark takes CUPTI back (``resume``; ``profiler.capture.clocks.choice.take_back``): on the
H200, records enabled again while a resnet50 loop ran hung it (``profiler.capture.clocks.choice``).
"""

from __future__ import annotations

import ctypes
import functools
import threading
import time
from typing import Any

from profiler.capture import own_threads
from profiler.capture.clocks.cupti import layout
from profiler.capture.clocks.cupti.batches import Call, Pending, Stats, _ns
from profiler.capture.clocks.cupti.clock import CuptiClock, _c_reads
from profiler.capture.clocks.cupti.lib import (
    ATTR_PER_THREAD_ACTIVITY_BUFFER,
    ERROR_MULTIPLE_SUBSCRIBERS_NOT_SUPPORTED,
    FLUSH_FORCED,
    SUCCESS,
    CuptiCallError,
    Lib,
)
from profiler.capture.clocks.cupti.marker import Marker, MarkerError
from profiler.capture.clocks.cupti.records import KERNEL, MEMCPY, Records
from profiler.capture.clocks.cupti.shim import Shim
from profiler.capture.store import Store
from profiler.settings import current

BUFFER_BYTES = 1 << 20  # about 4,800 kernel records: a callback's numpy work stays near a millisecond
MAX_BUFFERS = 64  # 64 MiB in CUPTI's hands at most; past that CUPTI drops records and counts them
FLUSH_PERIOD_MS = 500  # profiler.settings' default for PINPROF_CUPTI_FLUSH_MS
DRAIN_S = 0.1  # how often the recorder's thread takes the buffers CUPTI handed back
TAKEN = "another CUPTI client (Nsight Systems or torch.profiler) holds the activity records"


class CuptiRecorder:
    """Started once per process (``start``); ``add`` takes each batch, ``collect`` brings the store up
    to date, ``release`` hands CUPTI over."""

    def __init__(self, lib: Lib, shim: Shim) -> None:
        self.lib, self.shim = lib, shim
        self.active = False
        self.why_not = ""  # set when it stopped or could not start: the line the report prints
        self._paused = False  # stopped by release(paused=True): resume enables the records only
        # Kernel records on (PINPROF_KERNELS=1): a batch's step is its kernels; off, CUDA events time it
        # and CUPTI records the copies alone (``profiler.capture.clocks``); kept when taken back.
        self.kernels = current().kernels
        self.stats = Stats()
        self.sizes: dict[int, int] = {}
        self.records = Records(self.stats)
        self.clock = CuptiClock(lib.timestamp, _c_reads(lib, shim))
        self.failure: str | None = None
        # A recording for tests (scripts/record_cupti.py): raw buffers and batches, when a list is set.
        self.tap: list[Any] | None = None
        self.marker: Marker | None = None  # made at the first edge marked (it needs CUDA's context)
        self.marker_failure: str | None = None
        self._lock = threading.RLock()
        self._drainer: threading.Thread | None = None

    # -- life ---------------------------------------------------------------------------------------
    def start(self) -> None:
        """Register the buffers and enable the records; raises ``CuptiCallError`` (nothing left on)."""
        lib = self.lib
        try:
            self._queues(per_thread=current().cupti_queues == "thread")
            register = ctypes.cast(lib.handle.cuptiActivityRegisterCallbacks, ctypes.c_void_p).value or 0
            code = self.shim.register(register, BUFFER_BYTES, MAX_BUFFERS)
            if code != SUCCESS:
                raise CuptiCallError("cuptiActivityRegisterCallbacks", code, lib.result_string(code))
            if self.kernels and current().cupti_latency:
                # PINPROF_CUPTI_LATENCY=1: kernel launch times (``queued``) find each kernel's step.
                # They take part in the driver deadlock of ``profiler.capture.clocks.choice``'s docstring, so
                # by default markers do (``profiler.capture.clocks.cupti.marker``).
                lib.call("cuptiActivityEnableLatencyTimestamps", 1)
            else:
                self.records.marked = self.kernels  # markers place kernels: none to place without them
            self._enable()
        except CuptiCallError as err:
            self._disable()
            if err.code == ERROR_MULTIPLE_SUBSCRIBERS_NOT_SUPPORTED:
                raise CuptiCallError(err.call, err.code, TAKEN) from None
            raise
        period = current().cupti_flush_ms  # PINPROF_CUPTI_FLUSH_MS, FLUSH_PERIOD_MS unless given
        try:
            if period > 0:
                lib.call("cuptiActivityFlushPeriod", period)
        except CuptiCallError:
            pass  # older CUPTI: buffers come back when full, and at every collect
        self.clock.reset()  # a client since may have registered a clock of its own
        self.active = True
        if self._drainer is None:
            self._drainer = threading.Thread(target=self._drain_loop, name="pinprof-cupti", daemon=True)
            self._drainer.start()

    def _queues(self, per_thread: bool) -> None:
        """A queue of buffers for each launching thread (``PINPROF_CUPTI_QUEUES=thread``, the default,
        CUPTI's own since 12.3), or one for all (``process``); set before the callbacks are registered,
        every start, since torch.profiler's Kineto sets it too.

        CUPTI hands a buffer back when it is full. With a buffer a thread, on the H200 (2026-12-04, a
        small CNN's training step) the autograd thread's backward kernels came back up to 0.6 s after
        the main thread's buffers had carried records past their batches, so ``Records.process`` wrote
        those batches first: ``Records.take`` then adds such late records to them. With one queue
        they come in order, but the resnet50 benchmark hung in two of three runs in that mode (8 and
        12 rounds; the main thread in a forward, autograd's thread in native code), so it is not the
        default."""
        value = ctypes.c_uint8(1 if per_thread else 0)
        size = ctypes.c_size_t(ctypes.sizeof(value))
        try:
            self.lib.call(
                "cuptiActivitySetAttribute", ATTR_PER_THREAD_ACTIVITY_BUFFER, ctypes.byref(size), ctypes.byref(value)
            )
        except CuptiCallError:
            pass  # a CUPTI before 12.3: it has no such attribute, its buffers are the process's

    def _drain_loop(self) -> None:
        while True:
            time.sleep(DRAIN_S)
            with own_threads.working(own_threads.CUPTI):
                self.drain()

    def _enable(self) -> None:
        for kind in (MEMCPY, KERNEL) if self.kernels else (MEMCPY,):
            self.lib.call("cuptiActivityEnable", kind)

    def kernel_records(self, on: bool) -> None:
        """Kernel records on or off from the next batch on (``kernels``: ``Clocks.for_new_batch`` reads
        it); for a test that measures both in one process. A profiled run never switches: a probe timed
        an enable and disable at 0.57-1.75 ms on an H100, and records enabled while a loop ran hung one
        on the H200 (``profiler/DESIGN.md``, "What the clock costs")."""
        if on == self.kernels or not self.active:
            return
        self.lib.call("cuptiActivityEnable" if on else "cuptiActivityDisable", KERNEL)
        self.kernels = on
        if not current().cupti_latency:
            self.records.marked = on

    def _disable(self) -> None:
        for kind in (MEMCPY, KERNEL):
            try:
                self.lib.call("cuptiActivityDisable", kind)
            except CuptiCallError:
                pass

    def release(self, why: str, paused: bool = False) -> None:
        """Stop recording (another client takes CUPTI over): what was recorded is attributed first.
        ``paused``: no other client comes (the caller only stops the records for a while), so
        ``resume`` enables them again under the callbacks already registered."""
        if not self.active:
            return
        try:
            import torch

            torch.cuda.synchronize()
        except Exception:
            pass
        self.collect(force=True)
        self._disable()
        try:
            self.lib.call("cuptiActivityFlushAll", FLUSH_FORCED)
        except CuptiCallError:
            pass
        self.active = False
        self.why_not = why
        self.stats.handovers += 1
        self._paused = paused

    def resume(self) -> bool:
        """Record again after a handover (torch.profiler ended); False, with why, where CUPTI refuses."""
        if self.active:
            return True
        try:
            if self._paused:
                # Only the records, under the callbacks already registered: no second registration.
                # That alone did not keep the resnet50 benchmark from hanging on the H200 (2026-12-04,
                # 8 rounds, as with one), so a profiled run takes nothing back (profiler.capture.clocks.choice).
                try:
                    self._enable()
                except CuptiCallError:
                    self._disable()
                    raise
                self.active = True
                return True
            self.start()
        except CuptiCallError as err:
            self.why_not = f"{self.why_not}; taking CUPTI back failed: {err}"
            return False
        return True

    # -- the loop's side ----------------------------------------------------------------------------
    def add(
        self, store: Store, row: int, calls: list[Call], windows: list[tuple[float, float]] | None, end_ms: float
    ) -> None:
        """Batch ``row`` of ``store`` (times in host ms, as the recorder's). ``windows``: where its
        step's kernels were launched; None where CUDA events time its step (its copies alone are CUPTI's)."""
        self.stats.calls += len(calls)
        steps = None if windows is None else [(_ns(s), _ns(e)) for s, e in windows]
        p = Pending(store, row, calls, steps, _ns(end_ms))
        if self.tap is not None:
            self.tap.append(("batch", store, row, calls, p.windows, p.end_ns))
        self.records.incoming.append(p)
        store.wait_for_gpu(row)

    def mark(self, device: Any) -> float | None:
        """A marker at a step window's edge (``marker``), on the loop's thread; its host time in ms,
        or None where the records are not this recorder's now, launch times place the kernels, or no
        marker can be issued (said in ``summary``)."""
        if not (self.active and self.records.marked):
            return None
        m = self.marker
        if m is None:
            if self.marker_failure is not None:
                return None
            m = self._new_marker(device)
            if m is None:
                return None
            self.records.marker_stream = m.stream_id
            self.records.issued = m.issued
            self.marker = m
            if self.tap is not None:
                self.tap.append(("marker_stream", m.stream_id))
        ms = m.mark()
        if self.tap is not None:
            self.tap.append(("marker", *m.last))
        return ms

    def _new_marker(self, device: Any) -> Marker | None:
        """The marker ``PINPROF_MARKER`` asks for; where it cannot be made (an empty kernel needs the
        driver's PTX JIT), the other kind, and ``summary`` says why; None where neither can be issued."""
        kinds = [current().marker, "kernel" if current().marker == "copy" else "copy"]
        why = []
        for kind in kinds:
            try:
                return Marker(self.lib, self.shim, device, kind)
            except (MarkerError, RuntimeError, OSError) as err:
                why.append(f"{kind}: {err}")
            finally:
                self.marker_failure = "; ".join(why) or None
        return None

    # -- CUPTI's side -------------------------------------------------------------------------------
    def drain(self) -> None:
        """Read every buffer CUPTI has handed back (``shim.take``), in order, and give each back."""
        with self._lock:  # one reader at a time: buffers are read in the order CUPTI completed them
            while (got := self.shim.take()) is not None:
                addr, valid, ctx, stream = got
                try:
                    if valid:
                        raw = ctypes.string_at(addr, valid)
                        parsed = layout.parse(raw, self.sizes, functools.partial(self.lib.record_size, addr, valid))
                        self.stats.record_sizes = dict(self.sizes)
                        self.clock.update(wait=True)  # off the loop's thread, or at the end of a run
                        if self.tap is not None:
                            self.tap.append(("buffer", raw, self.clock.last, self.clock.rate))
                        self.records.take(parsed, self.clock.to_host)
                        self.records.process(force=False)
                    self._count_dropped(ctx, stream)
                except BaseException as err:
                    self._fail(err)
                finally:
                    self.shim.give(addr)

    def _count_dropped(self, ctx: Any, stream: int) -> None:
        dropped = ctypes.c_size_t()
        try:
            self.lib.call("cuptiActivityGetNumDroppedRecords", ctx, stream, ctypes.byref(dropped))
            self.stats.dropped += int(dropped.value)
        except CuptiCallError:
            pass

    def _fail(self, err: BaseException) -> None:
        if self.failure is None:
            self.failure = f"{type(err).__name__}: {err}"

    # -- records ------------------------------------------------------------------------------------
    def collect(self, force: bool = False) -> None:
        """Bring every store up to date: buffers handed back now (``force``: also the ones CUPTI is
        still filling; call it after a synchronize, so every batch so far is attributed).

        Only a forced collect flushes. A flush while the loop still launches work hung on the H200
        even with the C callbacks (2026-12-03, resnet50 under ``pinprof profile``: the journal's
        thread in ``cuptiActivityFlushAll`` with the GIL released, the main thread in backward), so
        between the end's flushes the buffers come from CUPTI's own periodic flush
        (``FLUSH_PERIOD_MS``) and when they fill."""
        if self.active and force:  # handed over: no new records, but batches that ended since may still wait
            try:
                self.lib.call("cuptiActivityFlushAll", FLUSH_FORCED)
            except CuptiCallError as err:
                self._fail(err)
        with self._lock:
            self.drain()
            self.records.process(force)

    # -- what the report says -----------------------------------------------------------------------
    def summary(self) -> dict[str, Any]:
        s = self.stats
        return {
            "library": self.lib.path,
            "records": {"kernels": s.kernels, "copies": s.copies, "buffers": s.buffers, "dropped": s.dropped},
            "buffers_live_refused": list(self.shim.counts()),
            "copy_calls": s.calls,
            "unmatched_copy_calls": s.unmatched_calls,
            "late_records": s.late,
            "late_records_added": s.late_added,
            "record_bytes": {("kernel" if k == KERNEL else "memcpy"): v for k, v in s.record_sizes.items()},
            "cupti_ticks_per_ns": self.clock.rate,
            "handed_to_torch_profiler": s.handovers,
            "kernel_records": self.kernels,
            "kernels_placed_by": ("markers" if self.records.marked else "launch times") if self.kernels else None,
            "markers": {
                "kind": self.marker.kind if self.marker is not None else None,
                "issued": self.marker.count if self.marker is not None else 0,
                "matched": s.markers,
                "lost": s.markers_lost,
                "copy_calls_as_markers": s.copy_edges,
                "failure": self.marker_failure or (self.marker.failure if self.marker is not None else None),
            },
            "failure": self.failure,
        }
