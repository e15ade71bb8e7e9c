"""A batch as the CUPTI recorder holds it (``Pending`` until its records come, ``Done`` once written),
the recorder's counts (``Stats``), and what a batch's row reads of its records: its copies' times and
memory kind (``_copies``), the driver's staging around a pageable copy (``staging_ns``), its step's
kernels (``_in_windows``, ``_steps_ms``). Pure functions of records and host times."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

import numpy as np

from profiler.capture.clocks.cupti import attribute, layout
from profiler.capture.store import Store

# One copy call: host start and end (ns, perf_counter clock) and what it should have copied.
Call = tuple[int, int, tuple[attribute.Expect, ...]]


@dataclass
class Pending:
    """A batch waiting for its records: where to write them and what to look for."""

    store: Store
    row: int
    calls: list[Call]
    # host ns intervals whose kernel launches are the batch's step; None: CUDA events time its step
    windows: list[tuple[int, int]] | None
    end_ns: int

    @property
    def awaits_nothing(self) -> bool:
        """No copy call, and CUDA events time its step: no record to wait for. With the kernel records
        off, a loop that copies nothing would otherwise wait for a later copy's record, to the run's
        end (its rows kept from the journal till then)."""
        return not self.calls and self.windows is None


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
