"""Time the DataLoader's pin step on the thread that runs it, and hand the interval to the batch.

``torch.utils.data._utils.pin_memory.pin_memory(data, device)`` is what both the pin thread
(``num_workers > 0``) and the main thread (``num_workers == 0``) call; both look the name up in that
module at call time, so replacing the module attribute catches every pin. The function recurses
through the same global name, so only the outermost call on a thread is timed.

The pinned object the loop receives is the very object the pin step returned (it passes through a
``queue.Queue`` inside the process, not through pickling), so ``id(result)`` attributes the pin to
its batch. The entry is popped when the batch arrives, which keeps the object alive until then and
rules out id reuse.
"""

from __future__ import annotations

import threading
from collections.abc import Callable
from typing import Any

import torch.utils.data._utils.pin_memory as _pin_module

from profiler.capture.clock import now_ms
from profiler.capture.nvtx import NvtxEmitter

PinInterval = tuple[float, float]  # host ms: start, end


class PinHook:
    """Installed while at least one profiler iterates; records (start, end) per pinned batch."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._users = 0
        self._original: Callable[..., Any] | None = None
        self._local = threading.local()
        self._intervals: dict[int, PinInterval] = {}
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

    def pop(self, batch: Any) -> PinInterval | None:
        """The pin interval of ``batch``, if it was pinned while the hook was installed."""
        return self._intervals.pop(id(batch), None)

    def _wrapped(self, data: Any, device: Any = None) -> Any:
        original = self._original or _pin_module.pin_memory
        if getattr(self._local, "depth", 0):
            return original(data, device)
        nvtx = self._nvtx
        self._local.depth = 1
        start = now_ms()
        if nvtx is not None:
            nvtx.push("pin")
        try:
            result = original(data, device)
        finally:
            if nvtx is not None:
                nvtx.pop()
            self._local.depth = 0
        self._intervals[id(result)] = (start, now_ms())  # dict stores are atomic under the GIL
        return result


PIN_HOOK = PinHook()
