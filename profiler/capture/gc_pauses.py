"""Python's full garbage collections in this process, as intervals on ``now_ms``'s clock.

A collection holds the GIL from start to end, so whichever thread runs it (the loop's, the loader's
pin thread, pinprof's journal), the loop's thread can run no Python meanwhile. A full one (generation
2) walks every object the process keeps, hundreds of thousands once torch is imported: on this
project's 2-core CPU machine a ``gc.collect()`` took 100-150 ms (``tests/test_gc_pauses.py`` prints
it), and one such pause in a fresh-clone CI run of ``tests/test_own_time.py`` made a 41 ms batch read
167 ms. The timeline's ``gc_ms`` column says how much of each batch such pauses took, so that a long
batch is not blamed on the input pipeline (``profiler.analysis.rules.pace.GC_PAUSES``).

Only full collections are kept: they are rare (CPython starts one when the objects that survived the
younger generations since the last full one reach a quarter of those it keeps), so the record stays
small over any run. The callback still runs around every younger collection and returns at once: 1.5-
1.8 us a collection on this project's CPU machine (``scripts/bench_cpu_recorder.py --gc``). A training
loop makes few: tensors and autograd's graph are not objects the collector tracks, and
``tests/scripts/fake_cnn.py --epochs 1`` (FakeData through PIL transforms, a small CNN, backward) ran
one or two young collections in 21 batches, with 0 or 2 loader workers; the dataset that keeps a
Python memo of every sample (``tests/scripts/caching_dataset.py``) 5.6 a batch, some 9 us of watch
(``scripts/bench_cpu_recorder.py --gc-count SCRIPT``).

pinprof's own allocations (the journal's appends, the report at the end) count towards the next full
collection like any other: they may bring one forward into the loop that the bare script would have
run later, or not at all.
"""

from __future__ import annotations

import gc
from array import array
from time import perf_counter_ns
from typing import Any

import numpy as np

# Python's oldest generation: a collection of it walks everything.
FULL = 2
# At most this many pauses are kept (8 bytes a bound); a full collection takes milliseconds, so this is
# days of them. Past it the newest are dropped and ``gc_ms`` undercounts: meta.json's ``gc`` says how
# many (``summary``).
KEEP = 1_000_000

_starts = array("d")
_ends = array("d")
_began: list[int] = [0]
_dropped: list[int] = [0]


def _on_gc(phase: str, info: dict[str, Any]) -> None:
    # Called by CPython around every collection, on the collecting thread, with the GIL held.
    if info["generation"] != FULL:
        return
    if phase == "start":
        _began[0] = perf_counter_ns()
    elif len(_ends) < KEEP:
        # Both bounds are appended here, at the end, so a reader never sees a start without its end.
        _starts.append(_began[0] / 1e6)
        _ends.append(perf_counter_ns() / 1e6)
    else:
        _dropped[0] += 1


def watch() -> None:
    """Start recording full collections (once per process; later calls do nothing)."""
    if _on_gc not in gc.callbacks:
        gc.callbacks.append(_on_gc)


def unwatch() -> None:
    """Stop recording; what was recorded is kept."""
    if _on_gc in gc.callbacks:
        gc.callbacks.remove(_on_gc)


def watching() -> bool:
    return _on_gc in gc.callbacks


def summary() -> dict[str, Any]:
    """meta.json's ``gc``: whether full collections were watched, how many were kept, and how many
    were not because ``KEEP`` were already (``gc_ms`` misses those)."""
    return {"watched": watching(), "full_collections": len(_ends), "not_kept": _dropped[0]}


def pauses() -> tuple[np.ndarray, np.ndarray]:
    """(starts, ends) of the full collections so far, ms on ``now_ms``'s clock, in time order."""
    n = len(_ends)  # the journal's thread may read while a collection appends: a consistent prefix
    return np.asarray(_starts[:n], dtype=float), np.asarray(_ends[:n], dtype=float)
