"""NVTX ranges in the ``pinprof`` domain that every Nsight Systems from 2022.4 on records.

The trap (DESIGN.md, "NVTX under old Nsight Systems"): from nvtx 0.2.11 on, ``nvtx.Domain``/``nvtx.push_range(domain=...)`` first ask
``nvtxDomainIsEnabled``; Nsight Systems 2022.4 and 2023.4 do not implement it, answer "disabled", and
the package silently hands back a dummy domain, so no range is recorded. We therefore call the
package's low-level handles (``nvtx._lib.lib``: ``nvtxDomainCreateA``, ``nvtxDomainRegisterStringA``,
``nvtxDomainRangePushEx``/``Pop``) directly. They skip that question, and every nsys records them.

A tool (Nsight Systems, Nsight Compute) attaches to NVTX through the ``NVTX_INJECTION64_PATH``
variable it sets for the profiled process. Without it every NVTX call is a no-op, so pinprof does not
make them at all (zero cost per batch); ``PINPROF_NVTX=1`` forces them on for tools that attach
another way. If the package is missing or its private API changes, we fall back to
``torch.cuda.nvtx`` (default domain, still recorded by all versions), and then to nothing.
"""

from __future__ import annotations

import threading
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from typing import Any, Literal

from profiler.render.palette import argb
from profiler.settings import current

DOMAIN = "pinprof"
Backend = Literal["nvtx", "torch", "none"]

# Phase colours as NVTX takes them, from the plots' palette.
COLORS: dict[str, int] = {
    p: argb(p) for p in ("batch", "fetch", "pin", "stage", "layout", "h2d", "cpu_work", "compute", "wait")
}


class NvtxEmitter:
    """Pushes and pops ranges in one domain. Thread-safe: NVTX range stacks are per thread."""

    def __init__(self, enabled: bool = True, backend: Backend | None = None) -> None:
        if backend is None and not tool_attached():
            backend = "none"
        self._lock = threading.Lock()
        self._strings: dict[str, Any] = {}
        self._push: Callable[[str], None]
        self._pop: Callable[[], None]
        self.backend: Backend = "none"
        if not enabled or backend == "none":
            self._push, self._pop = _noop_push, _noop_pop
            self.push, self.pop = self._push, self._pop  # type: ignore[method-assign]
            return
        if backend in (None, "nvtx") and self._init_nvtx():
            self.backend = "nvtx"
        elif backend in (None, "torch") and self._init_torch():
            self.backend = "torch"
        else:
            self._push, self._pop = _noop_push, _noop_pop
        # Bind the chosen functions as attributes: a per-batch call then skips one Python frame.
        self.push, self.pop = self._push, self._pop  # type: ignore[method-assign]

    def _init_nvtx(self) -> bool:
        try:
            from nvtx._lib import lib  # type: ignore[import-untyped]

            handle = lib.DomainHandle(DOMAIN)
            event_attributes, push_range, pop_range = lib.EventAttributes, lib.push_range, lib.pop_range
            string_handle = lib.StringHandle
        except (ImportError, AttributeError, TypeError):
            return False

        class _Registered:  # what EventAttributes expects of a message: a ``handle`` attribute
            __slots__ = ("handle",)

            def __init__(self, text: str) -> None:
                self.handle = string_handle(handle, text)

        # Phase names are registered now, not at their first push: under nsys a registration costs
        # 10-100 us (2.6 ms seen on a loaded CPU), which inside the first batch's phase window would
        # be counted as the user's time (cpu_work starts its clock before pushing).
        attrs_cache: dict[str, Any] = {
            phase: event_attributes(None, _Registered(phase), color)
            for phase, color in COLORS.items()
            if phase != "batch"
        }

        def push(name: str) -> None:
            attrs = attrs_cache.get(name)
            if attrs is None:
                phase = name.split(" ", 1)[0]
                attrs = event_attributes(None, _Registered(name), COLORS.get(phase, 0xFF7F7F7F))
                # Batch names are unique: caching them would grow without bound on long runs.
                if phase != "batch":
                    with self._lock:
                        attrs_cache[name] = attrs
            push_range(attrs, handle)

        def pop() -> None:
            pop_range(handle)

        self._handle = handle  # keep the domain alive as long as the emitter
        self._push, self._pop = push, pop
        return True

    def _init_torch(self) -> bool:
        try:
            import torch.cuda.nvtx as tnvtx

            tnvtx.range_push("pinprof")  # the C extension is present on CPU builds too
            tnvtx.range_pop()
        except (ImportError, RuntimeError, AttributeError):
            return False
        self._push = lambda name: tnvtx.range_push(name)
        self._pop = lambda: tnvtx.range_pop()
        return True

    @property
    def active(self) -> bool:
        """Whether pushes do anything (a caller can then skip formatting a range name)."""
        return self.push is not _noop_push

    def push(self, name: str) -> None:
        self._push(name)

    def pop(self) -> None:
        self._pop()

    @contextmanager
    def range(self, name: str) -> Iterator[None]:
        """A range closed in ``finally``, so an exception never leaves it open."""
        self._push(name)
        try:
            yield
        finally:
            self._pop()


def tool_attached() -> bool:
    """Whether an NVTX tool can be listening in this process (or the user forced NVTX on)."""
    return current().nvtx_wanted


def _noop_push(name: str) -> None:
    return None


def _noop_pop() -> None:
    return None
