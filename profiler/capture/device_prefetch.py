"""``profiler.prefetch(loader, device)``: batches copied to the device one step ahead, on a side stream.

    from profiler import prefetch
    for images, labels in prefetch(loader, "cuda"):   # instead of: for images, labels in loader:
        ...                                           # the batch is on the device already

What the diagnosis advises a loop whose GPU idles for its copy, and what ``pinprof tune`` tries; it
needs nothing else of pinprof. While step n runs, batch n+1 is fetched and its copy issued on a
stream of its own; the step's stream waits for that copy only when batch n+1 is handed out, so the
DMA runs under step n's kernels. Each tensor handed out is marked as used by the consumer's stream
(``record_stream``), so the caching allocator never gives its memory to a later batch while a
kernel may still read it.

Batches may nest dicts, lists, tuples, namedtuples and dataclasses (``batch_tree.map_tensors``);
other leaves pass through. A pinned tensor is copied with ``non_blocking=True``; a pageable one is
copied as torch copies it (the driver stages it on the host first), still on the side stream; a
non-dense view is copied as ``.to()`` copies it. On a CPU device (or with no CUDA) the batches are
moved with ``.to(device)`` in order, with nothing ahead. An error of the loader reaches the loop at
the batch it belongs to; a loop that stops early leaves no copy behind that it could observe.
"""

from __future__ import annotations

from collections.abc import Iterable, Iterator
from typing import Any

import torch

from profiler.capture.batch_tree import iter_tensors, map_tensors
from profiler.capture.devices import resolve_device

_END = object()


class _Failed:
    """A batch the loader failed to make: its error, kept until the loop asks for that batch."""

    def __init__(self, error: Exception) -> None:
        self.error = error


def prefetch(loader: Iterable[Any], device: str | torch.device | None = None) -> Iterator[Any]:
    """The batches of ``loader`` on ``device`` (default: cuda if available), each copied while the
    step before it runs (see the module docstring)."""
    dev = resolve_device(device)
    if dev.type != "cuda":
        for batch in loader:
            yield map_tensors(batch, lambda t: t.to(dev))
        return
    side = torch.cuda.Stream(dev)
    it = iter(loader)

    def copy(t: torch.Tensor) -> torch.Tensor:
        return t.to(dev, non_blocking=t.is_pinned()) if t.device != dev else t

    def ahead() -> Any:
        try:
            batch = next(it, _END)
        except Exception as err:  # the loader's error: raised where the loop asks for this batch
            return _Failed(err)
        if batch is _END:
            return _END
        # The side stream starts after the work queued so far: memory freed by the steps before may be
        # handed to these copies' destinations.
        side.wait_stream(torch.cuda.current_stream(dev))
        with torch.cuda.stream(side):
            return map_tensors(batch, copy)

    nxt = ahead()
    while nxt is not _END:
        if isinstance(nxt, _Failed):
            raise nxt.error
        cur = nxt
        consumer = torch.cuda.current_stream(dev)
        consumer.wait_stream(side)  # the consumer's work on cur starts after cur's copies
        for t in iter_tensors(cur):
            if t.is_cuda:
                t.record_stream(consumer)
        nxt = ahead()  # batch n+1's copy issued before step n's kernels
        yield cur
