"""Batches whose CUDA events are not read yet: read once done, never by waiting (except at the end)."""

from __future__ import annotations

import threading
from collections import deque

import torch

from profiler.capture.cuda.anchor import Anchor
from profiler.capture.cuda.events import EventPool, elapsed_ms, query
from profiler.capture.store import Store
from profiler.timeline.schema import RAW_GPU

Event = torch.cuda.Event
# (start, end, whether the pair came from the pool): one copy of a batch; a batch may make several.
Copy = tuple[Event, Event, bool]
# (store row, the batch's copies, compute start, compute end)
Entry = tuple[int, list[Copy], Event | None, Event | None]
_GS, _GE, _CS, _CE, _GSUM = (RAW_GPU.index(k) for k in ("h2d_gs", "h2d_ge", "comp_gs", "comp_ge", "h2d_gsum"))


def _done(copies: list[Copy], comp_end: Event | None) -> bool:
    """Whether every end event has fired: copies and compute may run on different streams. Compute's
    end first: when the compute stream waited on the copies (pinprof's modes), it is the last."""
    if comp_end is not None and not query(comp_end):
        return False
    for copy in copies:
        if not query(copy[1]):
            return False
    return True


class PendingEvents:
    """A queue of batches in the order they were recorded; their events are written into the store
    as elapsed ms since the first anchor (the copies: the first start, the last end, and the sum of
    each copy's own time), then handed back to the pool."""

    def __init__(self, store: Store, pool: EventPool | None) -> None:
        self._store, self._pool = store, pool
        self._queue: deque[Entry] = deque()
        self._lock = threading.Lock()  # the loop's thread and the journal's both read events

    def __len__(self) -> int:
        return len(self._queue)

    def first_row(self) -> int | None:
        """The store row of the oldest batch whose events are not read yet; None when all are."""
        return self._queue[0][0] if self._queue else None

    def add(self, row: int, copies: list[Copy], comp_start: Event | None, comp_end: Event | None) -> None:
        self._queue.append((row, copies, comp_start, comp_end))

    def resolve(self, anchor: Anchor | None, block: bool = False) -> None:
        """Read the events of finished batches (never waits unless ``block``) and recycle them."""
        with self._lock:
            self._resolve(anchor, block)

    def _resolve(self, anchor: Anchor | None, block: bool) -> None:
        queue = self._queue
        while queue:
            row, copies, comp_start, comp_end = queue[0]
            if not block and not _done(copies, comp_end):
                return
            queue.popleft()
            if anchor is not None:
                self._write(row, anchor.event, copies, comp_start, comp_end)
            self._recycle(copies, comp_start, comp_end)

    def _write(
        self, row: int, first: Event, copies: list[Copy], comp_start: Event | None, comp_end: Event | None
    ) -> None:
        store = self._store
        if copies:
            gs, ge = elapsed_ms(first, copies[0][0]), elapsed_ms(first, copies[-1][1])
            store.set_gpu(row, _GS, gs)
            store.set_gpu(row, _GE, ge)
            # One copy (the common case): its own time is the span, without a third event read.
            store.set_gpu(row, _GSUM, ge - gs if len(copies) == 1 else sum(elapsed_ms(s, e) for s, e, _ in copies))
        if comp_start is not None:
            store.set_gpu(row, _CS, elapsed_ms(first, comp_start))
        if comp_end is not None:
            store.set_gpu(row, _CE, elapsed_ms(first, comp_end))

    def _recycle(self, copies: list[Copy], comp_start: Event | None, comp_end: Event | None) -> None:
        pool = self._pool
        if pool is None:
            return
        # The staged pipeline's copy events are its own (not pooled): only the pool's come back.
        pool.put(*(ev for s, e, pooled in copies if pooled for ev in (s, e)), comp_start, comp_end)
