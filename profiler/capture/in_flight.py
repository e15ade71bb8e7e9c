"""Batches in flight under ``pinprof profile``: fetched, not yet closed into a row.

A row is a batch: its fetch, its pin, its copies and the step that trains on it. A loop written by
hand does these in order, so one ``next()`` to the next is one batch. Frameworks fetch ahead:

- **plain**: fetch n, copy n, step n, fetch n+1. Nothing is in flight across a ``next()``;
- **fetch-ahead**: batch n+1 is fetched before step n (Accelerate's prepared loader copies n, then
  fetches n+1, then yields n; Lightning's fetcher on a dataset of no length fetches n+1 before it
  copies n). Its copies come after step n;
- **device-prefetch**: batch n+1 is fetched and copied to the device before step n (timm's
  ``PrefetchLoader``, a hand-written side-stream prefetcher).

So a copy belongs to the batch whose tensors it reads (``owner``: the storages of each batch in
flight, looked up newest first, since a freed batch's address may be reused by the next), and a step
to the batch it consumes: torch's global optimizer step hook closes every batch in flight but the
newest (``AutoSession.stepped``), unless a backward said otherwise (``AutoSession.backward``: a batch
trained before the ``next()`` after it, with no step since, ends at that ``next()``; one of a window
trained before a later one, where its training ended). Loops with no optimizer (validation,
inference) keep ``next()`` as the boundary; before the first optimizer step, a batch that a
``next()`` would end untrained, of a loader called to fetch a whole window first (Hugging Face's
Trainer), is held open with that end (``HOLD``), as its training comes after. ``Patterns`` counts
what each loader did, for ``meta.json`` and the report.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any, NamedTuple

import torch

from profiler.capture.batch_tree import iter_tensors, storage_of
from profiler.timeline.schema import PLAIN

LOOKS = 64  # batches of a loader whose tensors are read while another is in flight (AutoSession.arrived)
# Batches of a loader a next() holds open, before the first optimizer step, where it would end them
# untrained (AutoSession._at_next), in a loader called to fetch windows: the window that Hugging Face's
# Trainer fetches before it trains on any (gradient_accumulation_steps) is trained after; closed
# untrained, its batches read 0.1-0.2 ms of compute. A loader that holds this many with no backward
# holds no more. Held rows reach the journal late (a kill -9 loses them), so only such loaders hold.
HOLD = 32
BY_NEXT, BY_STEP = "next()", "optimizer step"


class Mark(NamedTuple):
    """A moment in a batch in flight: host ms, and the CUDA event recorded then on the stream that
    matters (None for a batch CUPTI times, or on a CPU device). A batch's ``_tent`` is its tentative
    end (the ``next()`` after it, if no step claims it); its ``_bump``, where its step starts (after
    a later batch's fetch or copy); its ``_ahead``, where its step starts in a loader that fetches
    ahead (after the next batch's fetch: ``profiler.timeline.schema.FETCHES_AHEAD``)."""

    host_ms: float
    event: Any


def storages(batch: Any) -> frozenset[int]:
    """The storage addresses of ``batch``'s CPU tensors (those with none, sparse or nested, left out)."""
    out = set()
    for t in iter_tensors(batch):
        if t.is_cpu and (p := storage_of(t)) is not None:
            out.add(p)
    return frozenset(out)


def owner(flight: Sequence[dict[str, Any]], src: torch.Tensor) -> int:
    """Which batch in flight (records, oldest first) ``src`` is a tensor of: the newest whose storages
    hold it, else the newest one. A batch's storages are in ``rec["_ptrs"]`` when it was read (a batch
    that arrived with another in flight); one not read matches if it is the only one not read."""
    newest = len(flight) - 1
    ptr = storage_of(src)
    if ptr is None:
        return newest
    unread = []
    for i in range(newest, -1, -1):
        ptrs = flight[i].get("_ptrs")
        if ptrs is None:
            unread.append(i)
        elif ptr in ptrs:
            return i
    return unread[0] if len(unread) == 1 else newest


class Patterns:
    """Per loader (scenario): how many of its rows closed at each boundary, and which pattern each
    step saw; ``summary`` is what ``meta.json`` keeps."""

    def __init__(self) -> None:
        self.seen: dict[str, dict[str, int]] = {}
        self.closed: dict[str, dict[str, int]] = {}
        self.unused: dict[str, int] = {}  # batches fetched and never copied nor stepped on, by scenario

    def saw(self, scenario: str, pattern: str) -> None:
        counts = self.seen.setdefault(scenario, {})
        counts[pattern] = counts.get(pattern, 0) + 1

    def row(self, scenario: str, boundary: str) -> None:
        counts = self.closed.setdefault(scenario, {})
        counts[boundary] = counts.get(boundary, 0) + 1

    def pattern(self, scenario: str) -> str:
        """The loader's pattern: the one most of its steps saw (plain where none was seen)."""
        counts = self.seen.get(scenario)
        return max(counts, key=lambda k: counts[k]) if counts else PLAIN

    def boundary(self, scenario: str) -> str:
        counts = self.closed.get(scenario)
        return max(counts, key=lambda k: counts[k]) if counts else BY_NEXT

    def left_unused(self, scenario: str) -> None:
        self.unused[scenario] = self.unused.get(scenario, 0) + 1

    def summary(self) -> dict[str, dict[str, Any]]:
        names = sorted(set(self.seen) | set(self.closed) | set(self.unused))
        return {
            s: {
                "pattern": self.pattern(s),
                "row_boundary": self.boundary(s),
                "rows_closed_at": self.closed.get(s, {}),
                "fetched_unused": self.unused.get(s, 0),
            }
            for s in names
        }
