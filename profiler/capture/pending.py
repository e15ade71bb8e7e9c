"""Batches whose CUDA events are not read yet: read once done, never by waiting (except at the end)."""

from __future__ import annotations

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


class PendingEvents:
    """A queue of batches in the order they were recorded; their events are written into the store
    as elapsed ms since the first anchor (the copies: the first start, the last end, and the sum of
    each copy's own time), then handed back to the pool."""

    def __init__(self, store: Store, pool: EventPool | None) -> None:
        self._store, self._pool = store, pool
        self._queue: deque[Entry] = deque()

    def __len__(self) -> int:
        return len(self._queue)

    def add(self, row: int, copies: list[Copy], comp_start: Event | None, comp_end: Event | None) -> None:
        self._queue.append((row, copies, comp_start, comp_end))

    def resolve(self, anchor: Anchor | None, block: bool = False) -> None:
        """Read the events of finished batches (never waits unless ``block``) and recycle them."""
        queue = self._queue
        while queue:
            row, copies, comp_start, comp_end = queue[0]
            # Copies and compute may run on different streams: every end must be done.
            ends = [c[1] for c in copies] + ([comp_end] if comp_end is not None else [])
            if not block and not all(query(e) for e in ends):
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
            store.set_gpu(row, _GS, elapsed_ms(first, copies[0][0]))
            store.set_gpu(row, _GE, elapsed_ms(first, copies[-1][1]))
            store.set_gpu(row, _GSUM, sum(elapsed_ms(s, e) for s, e, _ in copies))
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
