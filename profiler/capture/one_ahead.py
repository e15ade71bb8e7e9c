"""Finding a loop that fetches one batch ahead of its copies (``pinprof profile``).

Lightning's fetcher on a dataset of no length calls the loader's ``next()`` for batch n+1 before the
step of batch n copies it, so a row cut at each ``next()`` holds batch n+1's fetch with batch n's
copies and compute. Such a loop shows itself by a copy whose source is a tensor of the loader's
previous batch, still alive (a freed tensor's address may be reused by any new one, so it says
nothing), and not one of the current batch's. ``AutoSession`` asks this once per copy until found,
for a loader's first ``LOOKS`` batches: a loop's order of fetch and copy is its code's, the same in
every batch, and the walk over a batch's tensors was the largest part of a hooked ``next()`` that
finds nothing, paid for the whole run (``scripts/bench_cpu_recorder.py``: the hooks 54.2 us a batch
with the limit against 66.6 us before it, ``reports/README.md``).
"""

from __future__ import annotations

import weakref
from typing import Any

import torch

from profiler.capture.batch_tree import owners, storage_of

LOOKS = 64  # batches of a loader checked; one ahead shows from its second batch on


class OneAhead:
    """Per loader (keyed by its profiler's id): the current and the previous batch's CPU tensors by
    storage; ``found`` lists the scenarios where a copy came from the previous one."""

    def __init__(self) -> None:
        self._before: dict[int, dict[int, list[weakref.ref[torch.Tensor]]]] = {}
        self._looked: dict[str, int] = {}
        self.found: list[str] = []

    def arrived(self, scenario: str, rec: dict[str, Any], batch: Any) -> None:
        """A batch became current: its tensors by storage, to test its copies against (one walk), for
        the loader's first ``LOOKS`` batches unless found before."""
        looked = self._looked.get(scenario, 0)
        if looked < LOOKS and scenario not in self.found:
            self._looked[scenario] = looked + 1
            rec["_owners"] = owners(batch)

    def ended(self, key: int, rec: dict[str, Any]) -> None:
        """The batch of ``rec`` is no longer current: it becomes the loader's previous one."""
        self._before[key] = rec.pop("_owners", {})

    def copied(self, key: int, scenario: str, rec: dict[str, Any], src: torch.Tensor) -> None:
        """A copy of ``src`` in the current batch ``rec``: from the previous batch? Two lookups a
        copy; a weak reference is read only when the address is the previous batch's."""
        mine = rec.get("_owners")
        if mine is None:  # found already for this loader
            return
        ptr = storage_of(src)
        if ptr is None or ptr in mine:
            return
        refs = self._before.get(key, {}).get(ptr, ())
        if any(r() is not None for r in refs):  # still alive: the address is not a reused one
            self.found.append(scenario)
            rec.pop("_owners")
