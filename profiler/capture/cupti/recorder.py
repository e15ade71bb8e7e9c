"""The process's one CUPTI client: activity buffers in, per-batch GPU fields out.

The loop's thread pays, per copy call, a tuple appended to its batch record, and per batch one
``deque.append`` of what the batch did (``Pending``: its copy calls, its step's host windows, its
end). CUPTI hands its buffers to callbacks written in C (``shim.c``: a Python callback under CUPTI's
lock deadlocked against a thread holding the GIL in a CUDA call), which queue them; the recorder's
own thread takes them every ``DRAIN_S``, as does reading a timeline: a buffer is copied out and
parsed with numpy (``layout``), its times moved onto the host clock, and the batches whose GPU work is
surely over are attributed (``attribute``) and written into their profiler's store. Records are
dropped once their batch is written, so memory stays bounded by the records of the last second or so.

A batch is attributed once CUPTI has delivered a record that started ``LAG_NS`` after the batch
ended on the host (its copies and kernels, queued before that, have then run), or at the end, after
a synchronize and a forced flush.

Another CUPTI client takes the records over: Nsight Systems refuses this one from the start
(``CUPTI_ERROR_MULTIPLE_SUBSCRIBERS_NOT_SUPPORTED``), and torch.profiler's Kineto, started while
this one runs, replaces its callbacks; started before, enabling records under it hung the process on
the H200. So the recorder is not started while torch.profiler runs, and a torch.profiler started
later first makes it hand over (``release``): what was recorded is attributed, and the batches that
follow, to the end of the run, are timed with CUDA events (``profiler.capture.cuda.events``). Only a
test or a benchmark takes CUPTI back (``resume``; ``profiler.capture.backend.take_back``): on the
H200, records enabled again while a resnet50 loop ran hung it (``profiler.capture.backend``).
"""

from __future__ import annotations

import ctypes
import functools
import itertools
import threading
import time
from collections import deque
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

import numpy as np

from profiler.capture import own_threads
from profiler.capture.cupti import attribute, layout
from profiler.capture.cupti.lib import (
    ATTR_PER_THREAD_ACTIVITY_BUFFER,
    ERROR_MULTIPLE_SUBSCRIBERS_NOT_SUPPORTED,
    FLUSH_FORCED,
    SUCCESS,
    CuptiCallError,
    Lib,
)
from profiler.capture.cupti.marker import Marker, MarkerError
from profiler.capture.cupti.marker_table import MarkerTable
from profiler.capture.cupti.shim import Shim
from profiler.capture.store import Store
from profiler.settings import current

KERNEL, MEMCPY = layout.KIND_CONCURRENT_KERNEL, layout.KIND_MEMCPY
BUFFER_BYTES = 1 << 20  # about 4,800 kernel records: a callback's numpy work stays near a millisecond
MAX_BUFFERS = 64  # 64 MiB in CUPTI's hands at most; past that CUPTI drops records and counts them
FLUSH_PERIOD_MS = 500  # profiler.settings' default for PINPROF_CUPTI_FLUSH_MS
DRAIN_S = 0.1  # how often the recorder's thread takes the buffers CUPTI handed back
LAG_NS = 50_000_000
HISTORY_NS = 30_000_000_000  # written batches whose late records can still be added: the last 30 s
TAKEN = "another CUPTI client (Nsight Systems or torch.profiler) holds the activity records"

# One copy call: host start and end (ns, perf_counter clock) and what it should have copied.
Call = tuple[int, int, tuple[attribute.Expect, ...]]


@dataclass
class Pending:
    """A batch waiting for its records: where to write them and what to look for."""

    store: Store
    row: int
    calls: list[Call]
    windows: list[tuple[int, int]]  # host ns intervals whose kernel launches are the batch's step
    end_ns: int


@dataclass(slots=True)
class Done:
    """A batch already written, kept ``HISTORY_NS`` for records that come late: its step's windows and
    the copy calls (with the records still missing) that found no record. Tuples, not lists: a loop
    of short batches keeps tens of thousands, which Python's collector walks at every full collection,
    and a tuple of numbers drops out of its walk where a list stays in it."""

    store: Store
    row: int
    windows: tuple[tuple[int, int], ...]
    missing: tuple[Call, ...]
    end_ns: int
    reach_ns: int = 0  # the latest end of this batch and of every batch written before it


@dataclass
class Stats:
    """What the recorder saw (``meta.json`` ``gpu_clock``)."""

    buffers: int = 0
    kernels: int = 0
    copies: int = 0
    calls: int = 0
    unmatched_calls: int = 0
    dropped: int = 0
    late: int = 0  # records delivered after the batches of their time were written, and not added to them
    late_added: int = 0  # records delivered after their batch was written, added to it since
    record_sizes: dict[int, int] = field(default_factory=dict)
    handovers: int = 0
    markers: int = 0  # marker copies' records matched to their host times (``marker``)
    markers_lost: int = 0  # markers issued whose record never came (CUPTI dropped it)
    copy_edges: int = 0  # copy calls taken as markers too (``Records._copy_edges``)


def _ns(ms: float) -> int:
    return round(ms * 1e6)


def _c_reads(lib: Lib, shim: Shim) -> Callable[[], tuple[int, int, int]] | None:
    """The shim's back-to-back clock readings around ``cuptiGetTimestamp``; None where the shim or the
    library lacks them (the readings from Python are used then)."""
    try:
        address = ctypes.cast(lib.handle.cuptiGetTimestamp, ctypes.c_void_p).value
        return shim.clock_reads(address) if address else None
    except (AttributeError, TypeError):
        return None


def _copies(mem: dict[str, list[int]], ks: list[int]) -> tuple[tuple[float, float, float], str]:
    """A batch's copy records (indices ``ks`` into ``mem``'s columns as lists, host ns): (first start, last
    end, summed time) in ms, and the memory kind they read, ``mixed`` where they differ. Lists, not
    numpy: a batch has a few copies, where numpy's calls cost more than the arithmetic."""
    start, end, src = mem["start"], mem["end"], mem["src_kind"]
    if len(ks) == 1:  # a batch of one tensor: no generators (the recorder's thread holds the loop's lock)
        k = ks[0]
        return (start[k] / 1e6, end[k] / 1e6, (end[k] - start[k]) / 1e6), _kind(src[k])
    kinds = {_kind(src[k]) for k in ks}
    times = (
        min(start[k] for k in ks) / 1e6,
        max(end[k] for k in ks) / 1e6,
        sum(end[k] - start[k] for k in ks) / 1e6,
    )
    return times, kinds.pop() if len(kinds) == 1 else "mixed"


NAN = float("nan")
PAGEABLE = 1  # CUpti_ActivityMemoryKind of pageable host memory (layout.MEMORY_KINDS)


def staging_ns(call_s: int, call_e: int, ks: list[int], mem: dict[str, list[int]]) -> int:
    """The driver's staging inside one copy call whose records ``ks`` read pageable memory (0 where none
    does): the span from the call's start (after any layout copy: ``copy_noted``'s driver start) to
    whichever ends last, the call or its last DMA, less the DMA records' own time. The driver copies
    pageable bytes into its pinned buffers piece by piece on the calling thread and DMAs each piece, so
    the span holds the first piece's staging before any DMA, the pieces' staging the DMA waits on, and
    the DMA; the call returns once the last piece is staged, before its DMA ends."""
    start, end, src = mem["start"], mem["end"], mem["src_kind"]
    if not any(src[k] == PAGEABLE for k in ks):
        return 0
    dma = sum(end[k] - start[k] for k in ks)
    return max(0, max(call_e, max(end[k] for k in ks)) - call_s - dma)


def _kind(code: int) -> str:
    """CUPTI's memory kind by name (the number where pinprof has none for it)."""
    return layout.MEMORY_KINDS.get(code) or f"kind{code}"


def _lists(mem: dict[str, np.ndarray]) -> dict[str, list[int]]:
    """The columns ``_copies`` reads, as lists."""
    return {c: mem[c].tolist() for c in ("start", "end", "src_kind")}


def _steps_ms(pick: np.ndarray, group: np.ndarray, ker: dict[str, np.ndarray], groups: int) -> tuple[list[Any], ...]:
    """(first start, last end, busy time) in ms, and the number, of the kernels ``pick`` (indices into
    ``ker``) of each group 0..groups-1 (``group``, one per pick; ``attribute.per_group``), as lists:
    each batch's row reads four of them."""
    start, end = ker["start"][pick], ker["end"][pick]
    times = [(v / 1e6).tolist() for v in attribute.per_group(group, start, end, groups)]
    return (*times, np.bincount(group[group >= 0], minlength=groups).tolist())


def _in_windows(
    ker: dict[str, np.ndarray],
    wins: list[tuple[int, int, int, int]],
    snap: Callable[[np.ndarray], np.ndarray] | None = None,
) -> tuple[np.ndarray, np.ndarray]:
    """(kernel index, group) of each kernel launched in one of ``wins`` ((start, end, group, owner)
    each, sorted): ``attribute.kernels_by_owner``. ``snap``: the edges onto markers' times
    (``Records.snap``; it keeps their order)."""
    if not wins:
        return np.empty(0, dtype=np.int64), np.empty(0, dtype=np.int64)
    ws, we, wrow, wown = (np.array(col, dtype=np.int64) for col in zip(*wins))
    if snap is not None:
        ws, we = snap(ws), snap(we)
    return attribute.kernels_by_owner(ker["queued"], ws, we, wrow, wown)


class CuptiClock:
    """CUPTI's timestamps onto ``perf_counter_ns``: ``host = p + (cupti - c) / rate`` from the latest
    paired read (p, c), the rate from the first and the latest.

    CUPTI's own clock runs at one tick a ns (the rate is then exactly 1), but a client may register its
    own: torch.profiler's Kineto registers the CPU's cycle counter (about 2.1 ticks a ns on the H200)
    and leaves it registered after it ends, so the copies read 2.1 times too long and 11 s off until
    the rate was measured. The first pair is taken whenever recording (re)starts."""

    MIN_SPAN_NS = 20_000_000  # the rate from pairs at least this far apart (a pair is good to ~0.3 us)
    # Readings from C whose host clock is more than this from perf_counter_ns are not the same clock.
    SAME_CLOCK_NS = 1_000_000

    def __init__(self, now: Callable[[], int], reads: Callable[[], tuple[int, int, int]] | None = None) -> None:
        """``now``: CUPTI's clock; ``reads``: (host ns, CUPTI's clock, host ns) read back to back in C
        (``Shim.clock_reads``), used where it reads ``perf_counter_ns``'s clock."""
        self._now = now
        self._reads = reads if reads is not None and self._same_clock(reads) else None
        self.reset()

    def _same_clock(self, reads: Callable[[], tuple[int, int, int]]) -> bool:
        try:
            a = time.perf_counter_ns()
            before, _, after = reads()
            b = time.perf_counter_ns()
        except OSError:
            return False
        return a - self.SAME_CLOCK_NS <= before <= after <= b + self.SAME_CLOCK_NS

    def _read(self) -> tuple[int, int, int]:
        """(host ns before, CUPTI's clock, host ns after). From Python a wait for the GIL can fall
        between the readings (``shim.c``, ``pinprof_clock_reads``): in C none can."""
        if self._reads is not None:
            return self._reads()
        a = time.perf_counter_ns()
        c = self._now()
        return a, c, time.perf_counter_ns()

    def _pair(self) -> tuple[int, int]:
        best: tuple[int, int, int] | None = None
        for _ in range(5):
            a, c, b = self._read()
            if best is None or b - a < best[0]:
                best = (b - a, (a + b) // 2, c)
        return best[1], best[2]  # type: ignore[index]

    def reset(self) -> None:
        self.first = self.last = self._pair()
        self.rate = 1.0
        self.measured = False

    def update(self, wait: bool = False) -> None:
        """A new pair; ``wait``: sleep, if need be, until the rate can be measured (the end of a run)."""
        if wait and not self.measured:
            short = self.MIN_SPAN_NS - (time.perf_counter_ns() - self.first[0])
            if short > 0:
                time.sleep(short / 1e9)
        self.last = self._pair()
        span = self.last[0] - self.first[0]
        if span >= self.MIN_SPAN_NS:
            rate = (self.last[1] - self.first[1]) / span
            self.rate = 1.0 if abs(rate - 1.0) < 1e-4 else rate
            self.measured = True

    def to_host(self, cupti: np.ndarray) -> np.ndarray:
        p, c = self.last
        return p + np.round((cupti - c) / self.rate).astype(np.int64)


class Records:
    """Delivered records and the batches waiting for them; ``process`` attributes the batches whose
    GPU work is surely over. No CUPTI call in here: a recording replays through it on a CPU."""

    def __init__(self, stats: Stats) -> None:
        self.stats = stats
        self.frontier_ns = 0  # the latest start of a delivered record, host ns
        self.written_ns = 0  # the latest end of a batch already attributed, host ns
        self._done: deque[Done] = deque()  # batches written in the last HISTORY_NS, oldest first
        self._reach = 0  # the latest end of a batch in _done so far (Done.reach_ns)
        # (earliest window start, batch) of kept batches, starts rising: the first is the earliest of
        # all kept (a sliding-window minimum, kept as batches come and go)
        self._floors: deque[tuple[int, Done]] = deque()
        self._with_missing = 0  # kept batches with copy calls still missing their record
        self.first_ns = 0  # the start of the first written batch's first step window, host ns
        self.incoming: deque[Pending] = deque()  # the loop appends; ``process`` pops
        self._pending: list[Pending] = []
        self._mem = layout.empty(MEMCPY)
        self._ker = layout.empty(KERNEL)
        # Markers (``profiler.capture.cupti.marker``), where kernels carry no launch time: ``marked``
        # says so; the marker copies' stream (CUPTI's id), the markers issued and not yet matched to
        # their record ((host ns, bytes), oldest first: the loop's thread appends), and those matched:
        # correlation ids and host ns, both rising.
        self.marked = False
        self.marker_stream = -1
        self.issued: deque[tuple[int, int]] = deque()
        self._marks = MarkerTable()

    # -- markers ------------------------------------------------------------------------------------
    def _take_markers(self, corr: np.ndarray, nbytes: np.ndarray) -> None:
        """Marker records (their correlation ids and sizes) paired with the host times they were
        issued at, in order: a size that is not the next marker's means CUPTI dropped that one. (A
        record taken before the loop's thread noted its marker, between the call's return and the
        append, would be passed over and its marker counted lost: none was, of 12,283 on an H100.)"""
        issued = self.issued
        order = np.argsort(corr, kind="stable")
        corr, nbytes = corr[order], nbytes[order]
        head = list(itertools.islice(issued, len(corr)))
        if len(head) == len(corr) and all(n == b for (_, n), b in zip(head, nbytes.tolist())):
            # the usual case, none dropped: all at once (one at a time cost 0.7 us a marker on the
            # 2-core machine, on the recorder's thread but holding the loop's lock)
            for _ in head:
                issued.popleft()
            self.stats.markers += len(head)
            self._marks.add(corr, np.array([h for h, _ in head], dtype=np.int64))
            return
        got_c: list[int] = []
        got_h: list[int] = []
        for c, b in zip(corr.tolist(), nbytes.tolist()):
            while issued:
                host, n = issued.popleft()
                if n == b:
                    got_c.append(c)
                    got_h.append(host)
                    break
                self.stats.markers_lost += 1
        if got_c:
            self.stats.markers += len(got_c)
            self._marks.add(np.array(got_c, dtype=np.int64), np.array(got_h, dtype=np.int64))

    def _launches(self, corr: np.ndarray) -> np.ndarray:
        """Each kernel's launch time as its markers bound it: the host time of the latest marker
        numbered before it, plus 1 ns; 0 (unknown) where no matched marker is numbered after it yet,
        or none before it."""
        mc = self._marks.corr
        if not len(mc):
            return np.zeros(len(corr), dtype=np.int64)
        i = np.searchsorted(mc, corr)
        known = (i > 0) & (i < len(mc))
        return np.where(known, self._marks.host[np.clip(i - 1, 0, None)] + 1, 0).astype(np.int64)

    def snap(self, t: np.ndarray) -> np.ndarray:
        """Host times (ns) onto the latest matched marker at or before each (unchanged before the
        first): a window between two snapped edges holds the kernels numbered between their markers."""
        mh = self._marks.host
        if not len(mh):
            return t
        j = np.searchsorted(mh, t, side="right") - 1
        return np.where(j >= 0, mh[np.clip(j, 0, None)], t)

    def _copy_bounds(self, mem_corr: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        """``attribute.issue_bounds`` of copy records by the markers around them: only the markers from
        the one before the lowest-numbered copy to the one after the highest (all of them made each
        buffer cost the whole history kept)."""
        mc, mh = self._marks.corr, self._marks.host
        if not len(mem_corr) or not len(mc):
            return attribute.issue_bounds(mem_corr, mc, mh)
        a = max(int(np.searchsorted(mc, mem_corr.min())) - 1, 0)
        b = int(np.searchsorted(mc, mem_corr.max())) + 1
        return attribute.issue_bounds(mem_corr, mc[a:b], mh[a:b])

    def _copy_edges(self, corr: np.ndarray, host: np.ndarray) -> bool:
        """Copy calls matched to their records, taken as markers: a call's host end and its last
        record's correlation id (a kernel numbered after the copy was launched after the call began).
        So a window whose start has no marker of its own (``phases.Compute`` issues none where the
        batch's copies were the loop's last CUDA calls) still leaves out the kernels launched before
        those copies. One is kept only where it keeps the table's host times rising: a call on another
        thread can end after a marker numbered after it. Returns whether any was added."""
        mc, mh = self._marks.corr, self._marks.host
        if not len(mc):
            return False
        order = np.argsort(corr, kind="stable")
        corr, host = corr[order], host[order]
        above = np.empty(len(host), dtype=np.int64)  # the latest host time of the calls before each
        above[0] = np.iinfo(np.int64).min
        np.maximum.accumulate(host[:-1], out=above[1:])
        i = np.searchsorted(mc, corr)
        before = np.where(i > 0, mh[np.clip(i - 1, 0, None)], np.iinfo(np.int64).min)
        after = np.where(i < len(mc), mh[np.clip(i, None, len(mc) - 1)], np.iinfo(np.int64).max)
        ok = (host > above) & (host > before) & (host < after)
        if not ok.any():
            return False
        self._marks.merge(corr[ok], host[ok])
        self.stats.copy_edges += int(ok.sum())
        return True

    def _marked_by(self, end_ns: int) -> bool:
        """Whether the marker at or after ``end_ns`` (a batch's end) has been matched, if one was
        issued: the batch's kernels are all numbered before it then."""
        if not self.marked:
            return True
        if len(self._marks) and int(self._marks.host[-1]) >= end_ns:
            return True
        try:
            return self.issued[-1][0] < end_ns  # none issued since: none to wait for
        except IndexError:
            return True

    def take(self, parsed: dict[int, dict[str, np.ndarray]], to_host: Callable[[np.ndarray], np.ndarray]) -> None:
        """New records, moved onto the host clock by ``to_host``, into the pools."""
        self.stats.buffers += 1
        ker, mem = parsed[KERNEL], parsed[MEMCPY]
        if self.marked:  # markers first: the kernels below are placed by them
            ker, mem = self._split_markers(ker, mem, to_host)
        if len(mem["start"]):
            mem = dict(mem)
            mem["start"], mem["end"] = to_host(mem["start"]), to_host(mem["end"])
            self.frontier_ns = max(self.frontier_ns, int(mem["start"].max()))
            self.stats.copies += len(mem["start"])
        if len(ker["start"]):
            ker = dict(ker)
            ker["start"], ker["end"] = to_host(ker["start"]), to_host(ker["end"])
            if self.marked:
                ker["queued"] = self._launches(ker["correlation"])
            else:
                ker["queued"] = np.where(ker["queued"] > 0, to_host(ker["queued"]), 0)
            self.stats.kernels += len(ker["start"])
            self.frontier_ns = max(self.frontier_ns, int(ker["start"].max()))
            late = (ker["queued"] > 0) & (ker["queued"] <= self.written_ns)
            if late.any():
                ker = layout.take(ker, ~self._late_kernels(layout.take(ker, late), late))
            self._ker = layout.concat([self._ker, ker], KERNEL)
        if len(mem["start"]):
            late = mem["start"] <= self.written_ns  # started on the device, so issued, before
            if late.any() and self._with_missing:
                mem = layout.take(mem, ~self._late_copies(layout.take(mem, late), late))
            self._mem = layout.concat([self._mem, mem], MEMCPY)

    def _split_markers(
        self, ker: dict[str, np.ndarray], mem: dict[str, np.ndarray], to_host: Callable[[np.ndarray], np.ndarray]
    ) -> tuple[dict[str, np.ndarray], dict[str, np.ndarray]]:
        """The records on the markers' stream taken out (kernels: their ``block_x``; copies: their
        bytes, as the sequence) and matched; the others returned."""
        out = []
        for cols, seq in ((ker, "block_x"), (mem, "bytes")):
            mine = cols["stream"] == self.marker_stream
            if mine.any():
                self.frontier_ns = max(self.frontier_ns, int(to_host(cols["start"][mine]).max()))
                self._take_markers(cols["correlation"][mine], cols[seq][mine])
                cols = layout.take(cols, ~mine)
            out.append(cols)
        return out[0], out[1]

    def _late_kernels(self, ker: dict[str, np.ndarray], late: np.ndarray) -> np.ndarray:
        """Kernels launched before the latest written batch ended, delivered after it was written (a
        launching thread's own queue, ``CuptiRecorder._queues``): each one launched in a written
        batch's step window is added to that batch's row. Returns, over the mask ``late`` of the whole
        buffer, which of them were added (the rest go on as any record: a batch still waiting may
        own them, else they belong to no step)."""
        q = ker["queued"]
        known = q[q > 0]
        earliest = int(known.min()) if len(known) else self.written_ns + 1
        # Only the written batches that can hold one: a window ends by its batch's end, and reach_ns
        # grows along the deque, so a batch whose reach is before the earliest launch ends before it,
        # as every batch before it does. Searching all 30 s kept (HISTORY_NS, 4,500 batches at 150 a
        # second) cost a late buffer 36.9 us a batch, against 10.3 so (scripts/bench_cupti_parse.py).
        done: list[Done] = []
        for d in reversed(self._done):
            if d.reach_ns < earliest:
                break
            done.append(d)
        done.reverse()
        wins = sorted((s, e, i, id(d.store)) for i, d in enumerate(done) for s, e in d.windows)
        added = np.zeros(len(q), dtype=bool)
        pick, group = _in_windows(ker, wins, self.snap if self.marked else None)
        if len(pick):
            first, last, busy, count = _steps_ms(pick, group, ker, len(done))
            for i in np.unique(group).tolist():
                d = done[i]
                d.store.add_cupti(d.row, h2d=None, src=None, comp=(first[i], last[i], busy[i], count[i]))
            added[pick] = True
        self.stats.late_added += int(added.sum())
        # Launched after the first batch's step began but before the oldest batch kept: no row can
        # take them any more (before the first step, they belong to no batch anyway).
        oldest = self._floors[0][0] if self._floors else self.written_ns
        self.stats.late += int((~added & (q >= self.first_ns) & (q < oldest)).sum())
        out = np.zeros(len(late), dtype=bool)
        out[np.flatnonzero(late)[added]] = True
        return out

    def _late_copies(self, mem: dict[str, np.ndarray], late: np.ndarray) -> np.ndarray:
        """Copy records that started before the latest written batch ended, delivered after it was
        written: matched, in order, against the written batches' copy calls that found no record.
        Returns, over the mask ``late`` of the whole buffer, which were added (the rest go on as any
        record: a batch still waiting, a prefetching loop's next one, may own them)."""
        back = np.flatnonzero(late)
        order = np.argsort(mem["correlation"], kind="stable")
        mem, back = layout.take(mem, order), back[order]
        flat = sorted(((c[0], c[1], c[2], i) for i, d in enumerate(self._done) for c in d.missing), key=lambda t: t[0])
        n = len(mem["start"])
        lo, hi = np.full(n, -np.inf), np.full(n, np.inf)  # the kernels around them are long gone
        matched = attribute.match_copies([(a, b, x) for a, b, x, _ in flat], mem["bytes"], mem["start"], lo, hi)
        used = np.zeros(n, dtype=bool)
        found: dict[int, list[int]] = {}
        for (_, _, _, i), got in zip(flat, matched):
            for k in got:
                if k >= 0:
                    found.setdefault(i, []).append(k)
                    used[k] = True
        done = list(self._done)
        cols = _lists(mem) if found else {}
        for i, ks in found.items():
            d = done[i]
            h2d, src = _copies(cols, ks)
            d.store.add_cupti(d.row, h2d=h2d, src=src, comp=None)
            self.stats.unmatched_calls -= len(ks)
            self._with_missing -= 1  # a batch in flat had calls missing
            d.missing = ()  # what is left of its calls can no longer be told apart: none kept
        self.stats.late_added += int(used.sum())
        out = np.zeros(len(late), dtype=bool)
        out[back[used]] = True
        return out

    def process(self, force: bool) -> None:
        """Attribute the batches whose work is over (``force``: every batch waiting)."""
        while self.incoming:
            self._pending.append(self.incoming.popleft())
        pending = self._pending
        n = len(pending) if force else 0
        if not force:
            while (
                n < len(pending)
                and pending[n].end_ns + LAG_NS <= self.frontier_ns
                and self._marked_by(pending[n].end_ns)
            ):
                n += 1
        if n == 0:
            return
        ready, self._pending = pending[:n], pending[n:]
        self._attribute(ready)

    def _attribute(self, ready: list[Pending]) -> None:
        mem = self._mem
        order = np.argsort(mem["correlation"], kind="stable")
        mem = layout.take(mem, order)
        ker = self._ker
        if self.marked:
            # a copy's issue is bracketed by the markers around it, whose host times are exact
            lo, hi = self._copy_bounds(mem["correlation"])
        else:
            korder = np.argsort(ker["correlation"], kind="stable")
            lo, hi = attribute.issue_bounds(mem["correlation"], ker["correlation"][korder], ker["queued"][korder])
        # Calls of every ready batch in the order they were made.
        flat = sorted(((c[0], c[1], c[2], i) for i, p in enumerate(ready) for c in p.calls), key=lambda t: t[0])
        matched = attribute.match_copies([(s, e, x) for s, e, x, _ in flat], mem["bytes"], mem["start"], lo, hi)
        used: list[int] = []
        h2d: dict[int, list[int]] = {}
        whole_calls: list[tuple[int, int, int, list[int]]] = []  # (batch, start, end, records) of calls all matched
        missing: dict[int, list[Call]] = {}
        edge_k: list[int] = []  # copy calls as edges: the last record of each call wholly matched ...
        edge_h: list[int] = []  # ... and the call's host end
        for (s, e, expects, i), got in zip(flat, matched):
            whole = -1 not in got
            if got and whole:
                edge_k.append(max(got))  # (mem is in id order)
                edge_h.append(e)
                whole_calls.append((i, s, e, got))
            lost = () if whole else tuple(x for x, k in zip(expects, got) if k < 0)
            for k in got:
                if k >= 0:
                    h2d.setdefault(i, []).append(k)
                    used.append(k)
                else:
                    self.stats.unmatched_calls += 1
            if lost:
                missing.setdefault(i, []).append((s, e, lost))
        if self.marked:
            if edge_k and self._copy_edges(mem["correlation"][edge_k], np.array(edge_h, dtype=np.int64)):
                ker["queued"] = self._launches(ker["correlation"])  # every kernel, among the new edges
            else:  # kernels delivered before the markers after them: placed now
                unknown = ker["queued"] == 0
                if unknown.any():
                    ker["queued"] = np.where(unknown, self._launches(ker["correlation"]), ker["queued"])
        # Kernels by the step window their launch fell in.
        wins = sorted((s, e, i, id(p.store)) for i, p in enumerate(ready) for s, e in p.windows)
        pick, group = _in_windows(ker, wins, self.snap if self.marked else None)
        first, last, busy, count = _steps_ms(pick, group, ker, len(ready))
        cols = _lists(mem) if h2d else {}
        staged: dict[int, int] = {}  # the driver's staging of each batch's pageable copies, ns
        for i, s, e, got in whole_calls:
            staged[i] = staged.get(i, 0) + staging_ns(s, e, got, cols)
        for i, p in enumerate(ready):
            ks = h2d.get(i)
            comp = (first[i], last[i], busy[i], count[i])
            if ks:
                times, src = _copies(cols, ks)
                stage = staged[i] / 1e6 if i in staged else NAN
                p.store.set_cupti(p.row, h2d=(*times, stage), src=src, comp=comp)
            else:
                p.store.set_cupti(p.row, h2d=None, src=None, comp=comp)
        # What can no longer be any batch's: matched copies and those issued before the last match;
        # kernels launched before the end of the last batch written.
        keep_mem = np.ones(len(mem["start"]), dtype=bool)
        if used:
            keep_mem[: max(used) + 1] = False
        self._mem = layout.take(mem, keep_mem)
        horizon = max(p.end_ns for p in ready)
        self.written_ns = max(self.written_ns, horizon)
        done = self._done
        if not self.first_ns:
            self.first_ns = min((s for p in ready for s, _ in p.windows), default=0)
        floors = self._floors
        for i, p in enumerate(ready):
            self._reach = max(self._reach, p.end_ns)
            d = Done(p.store, p.row, tuple(p.windows), tuple(missing.get(i, ())), p.end_ns, self._reach)
            done.append(d)
            self._with_missing += bool(d.missing)
            if p.windows:
                start = min(p.windows)[0]  # the earliest start (tuples compare their start first)
                while floors and floors[-1][0] >= start:
                    floors.pop()
                floors.append((start, d))
        while done and done[0].end_ns < horizon - HISTORY_NS:
            d = done.popleft()
            self._with_missing -= bool(d.missing)
            if floors and floors[0][1] is d:
                floors.popleft()
        q = ker["queued"]
        keep = (q > horizon) | (q == 0) & (ker["start"] > horizon)
        marks = self._marks
        if self.marked and len(marks):
            # not placed yet (numbered after the latest matched marker): kept, within the history
            keep |= (q == 0) & (ker["correlation"] > marks.corr[-1]) & (ker["start"] > horizon - HISTORY_NS)
            # markers: from the latest one before the oldest kept batch's first window (its edges snap to it)
            oldest = floors[0][0] if floors else horizon - HISTORY_NS
            marks.drop(int(np.searchsorted(marks.host, oldest)) - 1)
        self._ker = layout.take(ker, keep)


class CuptiRecorder:
    """Started once per process (``start``); ``add`` takes each batch, ``collect`` brings the store up
    to date, ``release`` hands CUPTI over."""

    def __init__(self, lib: Lib, shim: Shim) -> None:
        self.lib, self.shim = lib, shim
        self.active = False
        self.why_not = ""  # set when it stopped or could not start: the line the report prints
        self._paused = False  # stopped by release(paused=True): resume enables the records only
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
            if current().cupti_latency:
                # PINPROF_CUPTI_LATENCY=1: kernel launch times (``queued``) find each kernel's step.
                # They take part in the driver deadlock of ``profiler.capture.backend``'s docstring, so
                # by default markers do (``profiler.capture.cupti.marker``).
                lib.call("cuptiActivityEnableLatencyTimestamps", 1)
            else:
                self.records.marked = True
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
        for kind in (MEMCPY, KERNEL):
            self.lib.call("cuptiActivityEnable", kind)

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
                # 8 rounds, as with one), so a profiled run takes nothing back (profiler.capture.backend).
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
    def add(self, store: Store, row: int, calls: list[Call], windows: list[tuple[float, float]], end_ms: float) -> None:
        """Batch ``row`` of ``store`` (times in host ms, as the recorder's)."""
        self.stats.calls += len(calls)
        p = Pending(store, row, calls, [(_ns(s), _ns(e)) for s, e in windows], _ns(end_ms))
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
            "kernels_placed_by": "markers" if self.records.marked else "launch times",
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
