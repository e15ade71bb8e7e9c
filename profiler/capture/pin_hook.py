"""Time the DataLoader's pin step on the thread that runs it, and hand the interval to the batch.

``torch.utils.data._utils.pin_memory.pin_memory(data, device)`` is what both the pin thread
(``num_workers > 0``) and the main thread (``num_workers == 0``) call; both look the name up in that
module at call time, so replacing the module attribute catches every pin. The function recurses
through the same global name, so only the outermost call on a thread is timed.

The pinned object the loop receives is the very object the pin step returned (it passes through a
``queue.Queue`` inside the process, not through pickling), so ``id(result)`` attributes the pin to
its batch. The entry is popped when the batch arrives, which keeps the object alive until then and
rules out id reuse.

Besides the interval, each pin records what tells its causes apart (``PinRecord``): the thread's CPU
time (wall time minus it is time the thread waited, for the GIL or a core), its minor page faults
(the first read of the worker's shared memory faults its pages in, up to 64 KiB a fault with Linux's
fault-around), and the pinned
allocator's new blocks and time in cudaHostAlloc (``torch.cuda.host_memory_stats``).
"""

from __future__ import annotations

import resource
import threading
import time
from collections.abc import Callable
from typing import Any, NamedTuple

import torch
import torch.utils.data._utils.pin_memory as _pin_module

from profiler.capture.clock import now_ms
from profiler.capture.nvtx import NvtxEmitter

NAN = float("nan")


class PinRecord(NamedTuple):
    """One pin step: host ms start and end, thread CPU ms, minor faults, pinned blocks created, ms in
    their allocation (the last two NaN when the allocator cannot be read)."""

    start: float
    end: float
    cpu_ms: float
    faults: float
    allocs: float
    alloc_ms: float


def _faults() -> int:
    # RUSAGE_THREAD: this thread's faults only (Linux); elsewhere the process's, which still count them.
    who = getattr(resource, "RUSAGE_THREAD", resource.RUSAGE_SELF)
    return resource.getrusage(who).ru_minflt


def _host_allocs() -> tuple[float, float]:
    """(blocks the pinned allocator has created, microseconds spent creating them) so far."""
    try:
        stats = torch.cuda.memory.host_memory_stats_as_nested_dict()
        return float(stats["num_host_alloc"]), float(stats["host_alloc_time"]["total"])
    except Exception:  # an older torch, or no CUDA: the cause stays unknown, the pin is still timed
        return NAN, NAN


class PinHook:
    """Installed while at least one profiler iterates; records (start, end) per pinned batch."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._users = 0
        self._original: Callable[..., Any] | None = None
        self._local = threading.local()
        self._intervals: dict[int, PinRecord] = {}
        self._nvtx: NvtxEmitter | None = None

    def install(self, nvtx: NvtxEmitter) -> None:
        with self._lock:
            self._users += 1
            self._nvtx = nvtx
            if self._original is None:
                self._original = _pin_module.pin_memory
                _pin_module.pin_memory = self._wrapped

    def uninstall(self) -> None:
        with self._lock:
            self._users -= 1
            if self._users <= 0 and self._original is not None:
                _pin_module.pin_memory = self._original
                self._original = None
                self._users = 0
                self._intervals.clear()

    def pop(self, batch: Any) -> PinRecord | None:
        """The pin record of ``batch``, if it was pinned while the hook was installed."""
        return self._intervals.pop(id(batch), None)

    def _wrapped(self, data: Any, device: Any = None) -> Any:
        original = self._original or _pin_module.pin_memory
        if getattr(self._local, "depth", 0):
            return original(data, device)
        nvtx = self._nvtx
        self._local.depth = 1
        allocs, alloc_us = _host_allocs()  # outside the timed interval: not part of the pin
        faults = _faults()
        cpu = time.thread_time()
        start = now_ms()
        if nvtx is not None:
            nvtx.push("pin")
        try:
            result = original(data, device)
        finally:
            if nvtx is not None:
                nvtx.pop()
            self._local.depth = 0
        end = now_ms()
        cpu_ms = (time.thread_time() - cpu) * 1e3
        faults = _faults() - faults
        allocs_after, alloc_us_after = _host_allocs()
        record = PinRecord(start, end, cpu_ms, faults, allocs_after - allocs, (alloc_us_after - alloc_us) / 1e3)
        self._intervals[id(result)] = record  # dict stores are atomic under the GIL
        return result


PIN_HOOK = PinHook()


def take_pin(rec: dict[str, Any], pin: PinRecord) -> None:
    """Put one pin step's record into its batch's raw record (``profiler.timeline.schema.RAW_PIN``)."""
    rec["pin_s"], rec["pin_e"], rec["pin_cpu"], rec["pin_faults"], rec["pin_allocs"], rec["pin_alloc"] = pin
