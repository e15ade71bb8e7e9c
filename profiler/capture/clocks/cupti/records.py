"""The batches waiting for their CUPTI records and the records delivered, matched: ``Records`` takes
parsed activity records (``layout``) on the host clock and attributes the batches whose GPU work is
surely over (``attribute``), writing each batch's copies (their times, memory kind and the driver's
staging around them: ``staging_ns``) and its step's kernels into its profiler's store. No CUPTI call
in here: a recording replays through it on a CPU (``profiler.bench.cupti_replay``).

A batch is attributed once CUPTI has delivered a record that started ``LAG_NS`` after the batch
ended on the host (its copies and kernels, queued before that, have then run), or at the end, after
a synchronize and a forced flush. Written batches are kept ``HISTORY_NS`` for records that come late.
"""

from __future__ import annotations

import itertools
from collections import deque
from collections.abc import Callable

import numpy as np

from profiler.capture.clocks.cupti import attribute, layout
from profiler.capture.clocks.cupti.batches import (
    NAN,
    Call,
    Done,
    Pending,
    Stats,
    _copies,
    _in_windows,
    _lists,
    _steps_ms,
    staging_ns,
)
from profiler.capture.clocks.cupti.marker_table import MarkerTable

KERNEL, MEMCPY = layout.KIND_CONCURRENT_KERNEL, layout.KIND_MEMCPY
LAG_NS = 50_000_000
HISTORY_NS = 30_000_000_000  # written batches whose late records can still be added: the last 30 s


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
        # Markers (``profiler.capture.clocks.cupti.marker``), where kernels carry no launch time: ``marked``
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
            while n < len(pending) and (
                pending[n].awaits_nothing
                or (pending[n].end_ns + LAG_NS <= self.frontier_ns and self._marked_by(pending[n].end_ns))
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
        wins = sorted((s, e, i, id(p.store)) for i, p in enumerate(ready) for s, e in p.windows or ())
        pick, group = _in_windows(ker, wins, self.snap if self.marked else None)
        first, last, busy, count = _steps_ms(pick, group, ker, len(ready))
        cols = _lists(mem) if h2d else {}
        staged: dict[int, int] = {}  # the driver's staging of each batch's pageable copies, ns
        for i, s, e, got in whole_calls:
            staged[i] = staged.get(i, 0) + staging_ns(s, e, got, cols)
        for i, p in enumerate(ready):
            ks = h2d.get(i)
            # a step CUDA events time (no windows) is theirs: its row keeps what they wrote
            comp = None if p.windows is None else (first[i], last[i], busy[i], count[i])
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
            self.first_ns = min((s for p in ready for s, _ in p.windows or ()), default=0)
        floors = self._floors
        for i, p in enumerate(ready):
            self._reach = max(self._reach, p.end_ns)
            d = Done(p.store, p.row, tuple(p.windows or ()), tuple(missing.get(i, ())), p.end_ns, self._reach)
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
