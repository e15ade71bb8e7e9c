"""Mode ``prefetch``: the next batch fetched and its copy issued before this step's compute.

A training step that ends in a synchronization (``loss.item()``, a metric, a log line) lets a
``pinned_nb`` loop issue copy n+1 only after step n's compute is done, so the copy runs on an idle GPU
and step n+1's compute waits for it: ``gpu_idle_ms`` (``profiler.timeline.idle``). Here batch n+1 is
fetched and copied on the side stream while step n's kernels are still queued, and the compute stream
waits on that copy only when batch n+1 is handed out, so the copy runs under step n's compute.

Rows stay one per batch: a row's fetch and copy happen during the previous row's step, its
``batch_start_ms`` is where the step that consumes it starts. NVTX: the ``fetch`` and ``h2d`` ranges
of batch n+1 nest inside the ``batch n`` range, where they run.
"""

from __future__ import annotations

from collections.abc import Iterable, Iterator
from typing import TYPE_CHECKING, Any

from profiler.capture.clock import now_ms
from profiler.capture.cuda.events import current_stream, wait
from profiler.capture.loop import fetch, looping

if TYPE_CHECKING:
    from profiler.capture.profiler_state import ProfilerState

Ahead = tuple[dict[str, Any], Any]  # (the batch's record, the batch on the device)


def _fetch_and_copy(prof: ProfilerState, it: Iterator[Any], n: int) -> Ahead | None:
    """Batch ``n`` fetched and its copy issued, the compute stream's wait on it left to its step;
    None at the loader's end."""
    got = fetch(prof, it, n)
    if got is None:
        return None
    rec, batch = got
    return rec, prof._copy_into(rec, batch, defer=True)


def prefetched(prof: ProfilerState, loader: Iterable[Any], limit: int | None) -> Iterator[Any]:
    """``TransferProfiler.device_batches`` in mode ``prefetch`` (see the module docstring)."""
    with looping(prof, loader, limit):
        nvtx = prof.nvtx
        it = iter(loader)
        prof._new_epoch(it)
        n = prof._next_batch
        ahead = _fetch_and_copy(prof, it, n) if limit != 0 else None
        step_start = ahead[0]["fetch_s"] if ahead is not None else 0.0  # the first step includes its fetch
        count = 0
        while ahead is not None:
            if len(prof._pending) >= 8:
                prof._pending.resolve(prof._anchor)
            rec, out = ahead
            rec["batch_s"] = step_start
            if nvtx.active:
                nvtx.push(f"batch {n}")
            try:
                count += 1
                n += 1
                # The point of the mode: the next copy is issued before this step's compute is queued.
                ahead = _fetch_and_copy(prof, it, n) if limit is None or count < limit else None
                for end in rec.pop("_ready", ()):
                    wait(end, current_stream(prof._index))  # GPU-side: this step's compute after its copy
                    prof._clocks.of(rec).waited(prof, end)
                prof._cur = rec
                yield out
            finally:
                nvtx.pop()
                if prof._cur is rec:
                    rec["batch_e"] = step_start = now_ms()
                    prof._commit(rec)
                    prof._cur = None
