"""Finding a loop that fetches one batch ahead of its copies (``pinprof profile``).

Lightning's fetcher on a dataset of no length calls the loader's ``next()`` for batch n+1 before the
step of batch n copies it, so a row cut at each ``next()`` holds batch n+1's fetch with batch n's
copies and compute. Such a loop shows itself by a copy whose source is a tensor of the loader's
previous batch, still alive (a freed tensor's address may be reused by any new one, so it says
nothing), and not one of the current batch's. ``AutoSession`` asks this once per copy until found.
"""

from __future__ import annotations

import weakref
from typing import Any

import torch

from profiler.capture.batch_tree import alive_storages, cpu_refs, storage_of, storages


class OneAhead:
    """Per loader (keyed by its profiler's id): the current and the previous batch's CPU tensors; ``found``
    lists the scenarios where a copy came from the previous one."""

    def __init__(self) -> None:
        self._before: dict[int, list[weakref.ref[torch.Tensor]]] = {}
        self.found: list[str] = []

    def arrived(self, scenario: str, rec: dict[str, Any], batch: Any) -> None:
        """A batch became current: its storages (to test copies against) and weak references."""
        if scenario not in self.found:
            rec["_storages"], rec["_refs"] = storages(batch), cpu_refs(batch)

    def ended(self, key: int, rec: dict[str, Any]) -> None:
        """The batch of ``rec`` is no longer current: it becomes the loader's previous one."""
        rec.pop("_storages", None)
        self._before[key] = rec.pop("_refs", [])

    def copied(self, key: int, scenario: str, rec: dict[str, Any], src: torch.Tensor) -> None:
        """A copy of ``src`` in the current batch ``rec``: from the previous batch?"""
        mine = rec.get("_storages")
        if mine is None:  # found already for this loader, or no batch tensors to test against
            return
        ptr = storage_of(src)
        if ptr is not None and ptr not in mine and ptr in alive_storages(self._before.get(key, [])):
            self.found.append(scenario)
            rec.pop("_storages")
