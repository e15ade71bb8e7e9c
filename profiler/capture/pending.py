"""Batches whose CUDA events are not read yet: read once done, never by waiting (except at the end)."""

from __future__ import annotations

from collections import deque

import torch

from profiler.capture.cuda.anchor import Anchor
from profiler.capture.cuda.events import EventPool, elapsed_ms, query
from profiler.capture.store import Store

# (store row, (h2d start, h2d end, compute start, compute end) events or None, h2d events pooled)
Entry = tuple[int, tuple[torch.cuda.Event | None, ...], bool]


class PendingEvents:
    """A queue of batches in the order they were recorded; their events are written into the store
    as elapsed ms since the first anchor, then handed back to the pool."""

    def __init__(self, store: Store, pool: EventPool | None) -> None:
        self._store, self._pool = store, pool
        self._queue: deque[Entry] = deque()

    def __len__(self) -> int:
        return len(self._queue)

    def add(self, row: int, events: tuple[torch.cuda.Event | None, ...], pooled: bool) -> None:
        self._queue.append((row, events, pooled))

    def resolve(self, anchor: Anchor | None, block: bool = False) -> None:
        """Read the events of finished batches (never waits unless ``block``) and recycle them."""
        queue, store, pool = self._queue, self._store, self._pool
        while queue:
            row, events, pooled = queue[0]
            last = next((e for e in reversed(events) if e is not None), None)
            if last is not None and not block and not query(last):
                return
            queue.popleft()
            if anchor is not None:
                first = anchor.event
                for field, ev in enumerate(events):
                    if ev is not None:
                        store.set_gpu(row, field, elapsed_ms(first, ev))
            if pool is not None:
                # The staged pipeline's h2d events are its own (not pooled): only compute's come back.
                pool.put(*(events if pooled else events[2:]))
