"""A clock around ``pinprof profile``'s hooks from outside them: the independent check of what the
hooks cost the loop's thread (``scripts/bench_profile_overhead.py`` on the GPU, ``tests/test_own_time.py``
against the ``pinprof_ms`` column)."""

from __future__ import annotations

import threading
import time
from typing import Any


def timers(own: dict[str, float]) -> tuple[Any, Any]:
    """(a wrapper for a hook, a wrapper for an original it calls): main-thread seconds in the
    outermost hook are added to ``own[hook]``, and the originals' seconds inside it taken off again."""
    now: list[str] = []  # the outermost hook running on the main thread
    main = threading.get_ident()  # the loader's pin thread calls pin_memory through the hooks too

    def outer(name: str, fn: Any) -> Any:  # the outermost only: pinprof's own copy_ goes through a hook
        def timed(*args: Any, **kwargs: Any) -> Any:
            if now or threading.get_ident() != main:
                return fn(*args, **kwargs)
            now.append(name)
            own.setdefault(name, 0.0)
            start = time.perf_counter()
            try:
                return fn(*args, **kwargs)
            finally:
                own[name] += time.perf_counter() - start
                now.clear()

        return timed

    def inner(fn: Any) -> Any:
        def timed(*args: Any, **kwargs: Any) -> Any:
            if not now or threading.get_ident() != main:
                return fn(*args, **kwargs)
            start = time.perf_counter()
            try:
                return fn(*args, **kwargs)
            finally:
                own[now[0]] -= time.perf_counter() - start  # the script's own call: not pinprof's

        return timed

    return outer, inner
