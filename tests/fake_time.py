"""Run a loop script under ``pinprof profile``'s hooks in this process with the host clock faked: time
moves only when the script sleeps (by exactly what it asked) and by 1 ns at each clock read, so the
hooks, torch and the frameworks take no time. A row's ``compute_ms`` is then exactly the sleeps of
the step it was given: attribution tested on the real hooks and the real loop, with no timing, so
the machine's load cannot move it.

    tl, loaders = profiled_fake(SCRIPTS / "ahead_loops.py", "--loop", "plain")
"""

from __future__ import annotations

import runpy
import sys
import threading
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

import pandas as pd

from profiler.capture import auto_hooks
from profiler.capture.auto_session import AutoSession

_REAL: dict[str, Callable[..., Any]] = {
    "perf_counter_ns": time.perf_counter_ns,
    "perf_counter": time.perf_counter,
    "sleep": time.sleep,
}


class FakeClock:
    """Nanoseconds that advance by a sleep's length, and by 1 at each read (strictly increasing)."""

    def __init__(self) -> None:
        self.ns = 10**12
        self._lock = threading.Lock()

    def perf_counter_ns(self) -> int:
        with self._lock:
            self.ns += 1
            return self.ns

    def perf_counter(self) -> float:
        return self.perf_counter_ns() / 1e9

    def sleep(self, seconds: float) -> None:
        with self._lock:
            self.ns += round(seconds * 1e9)
        _REAL["sleep"](0)  # let other threads run, as a sleep does


@contextmanager
def faked(clock: FakeClock) -> Iterator[None]:
    """``time``'s host clocks and ``sleep`` replaced by ``clock``'s, in ``time`` and wherever a module of
    pinprof bound them by name (``from time import perf_counter_ns``)."""
    patched: list[tuple[Any, str, Any]] = []

    def put(owner: Any, name: str, value: Any) -> None:
        patched.append((owner, name, getattr(owner, name)))
        setattr(owner, name, value)

    for name in _REAL:
        put(time, name, getattr(clock, name))
    for mod in list(sys.modules.values()):
        if getattr(mod, "__name__", "").startswith("profiler."):
            for name, real in _REAL.items():
                if getattr(mod, name, None) is real:
                    put(mod, name, getattr(clock, name))
    try:
        yield
    finally:
        for owner, name, value in reversed(patched):
            setattr(owner, name, value)


def profiled_fake(script: Path, *args: str, skip: int | None = 0) -> tuple[pd.DataFrame, dict[str, Any]]:
    """``script ARGS`` run as ``__main__`` under the hooks of a CPU session on the fake clock: its
    timeline, every row (none flagged warm-up with ``skip=0``), and what the session saw of each
    loader (meta.json's ``loaders``: pattern, row boundary, rows closed at each, batches fetched unused)."""
    clock = FakeClock()
    argv = sys.argv
    with faked(clock):
        session = AutoSession("cpu", nvtx=False, skip=skip)
        auto_hooks.start(session)
        try:
            sys.argv = [str(script), *args]
            runpy.run_path(str(script), run_name="__main__")
        finally:
            sys.argv = argv
            auto_hooks.stop()
        tl = session.close()
    assert auto_hooks.failure is None, auto_hooks.failure
    return tl, session.patterns.summary()
