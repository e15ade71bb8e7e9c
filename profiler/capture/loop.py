"""What every loop over a loader shares: the scaffold around its batches and the timed fetch of one.

Used by ``TransferProfiler.batches``, the prefetch loop (``profiler.capture.prefetch``) and the
automatic hooks (``profiler.capture.auto_session``, which call the loader's ``next()`` themselves
and so take the fetch in its three steps).
"""

from __future__ import annotations

from collections.abc import Iterable, Iterator
from contextlib import contextmanager
from typing import TYPE_CHECKING, Any

from profiler.capture.clock import now_ms
from profiler.capture.hazards import HazardWatch
from profiler.capture.pin_hook import PIN_HOOK, take_pin
from profiler.capture.store import TEMPLATE
from profiler.errors import UsageError

if TYPE_CHECKING:
    from profiler.capture.profiler_state import ProfilerState

Record = dict[str, Any]


@contextmanager
def looping(prof: ProfilerState, loader: Iterable[Any], limit: int | None) -> Iterator[None]:
    """Around a loop's batches: the clock anchor and loader settings, the hazard watch, the pin hook,
    the NVTX range of the loop."""
    if limit is not None and limit < 0:
        raise UsageError(f"limit={limit} must be >= 0 or None")
    prof._begin(loader)
    watch = HazardWatch(lambda: prof._next_batch) if prof._hazards and prof.cuda else None
    if watch is not None:
        watch.__enter__()
    PIN_HOOK.install(prof.nvtx)
    # One range around the loop names the scenario, so an nsys import can tell loops apart.
    prof.nvtx.push(f"loop {prof.scenario or prof.mode}")
    try:
        yield
    finally:
        prof.nvtx.pop()
        PIN_HOOK.uninstall()
        if watch is not None:
            watch.__exit__(None, None, None)


def fetch(prof: ProfilerState, it: Iterator[Any], n: int) -> tuple[Record, Any] | None:
    """Batch ``n``'s new record and the batch, its ``next()`` timed and its pin taken from the hook;
    None at the loader's end."""
    rec = fetch_begin(prof, n)
    try:
        batch = next(it)
    except StopIteration:
        return None
    finally:
        fetch_end(prof, rec)
    arrived(rec, batch)
    return rec, batch


def fetch_begin(prof: ProfilerState, n: int) -> Record:
    rec = dict(TEMPLATE)
    rec["batch"], rec["warmup"], rec["epoch"] = n, n < prof.warmup, max(prof._epoch, 0)
    rec["fetch_s"] = now_ms()
    prof.nvtx.push("fetch")
    return rec


def fetch_end(prof: ProfilerState, rec: Record) -> None:
    prof.nvtx.pop()  # clock after the pop, as before the push: the NVTX range nests inside
    rec["fetch_e"] = now_ms()


def arrived(rec: Record, batch: Any) -> None:
    """The pin thread's record of ``batch``, if it pinned it."""
    pin = PIN_HOOK.pop(batch)
    if pin is not None:
        take_pin(rec, pin)
