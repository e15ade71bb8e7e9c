"""A profiled loop that stops moving: one line on stderr, once a stall, saying so and what to do.

Why: on an H100 (2026-12-05, ``scripts/cupti_hang.py``; reports/README.md, "The CUPTI hang") a
resnet50
loop with CUPTI's records on deadlocked inside the CUDA driver: the main thread's kernel launch
waited to write-lock a driver lock, a thread of CUPTI's own to read-lock one (once the pin thread's
pinned allocation, ``cuMemHostAlloc``, waited too). It happened in each of six runs with kernels' launch times on
(``cuptiActivityEnableLatencyTimestamps``, ``PINPROF_CUPTI_LATENCY=1``; no longer the default) and in
none of three without. A
thread so blocked never comes back to Python, so Ctrl-C does not stop the program, and nothing tells
the user why their run stopped.

So ``pinprof profile`` watches its loop. When a batch is in flight (fetched, its row not yet closed),
no new batch has come for ``PINPROF_STALL_S`` seconds (120 by default), and the loop's thread used
almost no CPU meanwhile (so it is blocked, not busy in an evaluation or a checkpoint), this says so
once: where the rows appended so far are, and what to run instead. Outside a loader's loop (before
the first batch, after the last) nothing is watched: a program may wait there for a barrier or a
file.
"""

from __future__ import annotations

import os
import sys
import threading
import time
from collections.abc import Callable
from pathlib import Path

from profiler.capture import own_threads
from profiler.capture.procstat import cpu_s, stat_fields

# Below this share of the stall spent on the CPU, the loop's thread is taken as blocked: a thread in
# an evaluation loop or a checkpoint's serialisation burns CPU most of that time.
CPU_SHARE = 0.01
CHECK_S = 15.0  # the most seconds between two looks


def thread_cpu_s(native_id: int) -> float | None:
    """CPU seconds (user and system) that thread ``native_id`` of this process has used, from
    ``/proc``; None where that cannot be read (not Linux, the thread has ended)."""
    fields = stat_fields(f"/proc/self/task/{native_id}/stat")
    try:
        return None if fields is None else cpu_s(fields)
    except (ValueError, IndexError):
        return None


class StallWatch(threading.Thread):
    """Looks at ``batches()`` (how many rows the loop has closed) and ``in_loop()`` (a batch is in
    flight) every ``CHECK_S`` seconds at most, and says ``advice`` through ``say`` once a stall. A
    stall is ``after_s`` seconds in a loop with no new row, while thread ``native_id`` used less than
    ``CPU_SHARE`` of that time on the CPU (where its CPU time can be read). A new row, or leaving the
    loop, ends it."""

    def __init__(
        self,
        batches: Callable[[], int],
        in_loop: Callable[[], bool],
        native_id: int,
        after_s: float,
        advice: str,
        say: Callable[[str], None] | None = None,
        cpu: Callable[[int], float | None] = thread_cpu_s,
        clock: Callable[[], float] = time.monotonic,
    ) -> None:
        super().__init__(name="pinprof-stall", daemon=True)
        self._batches, self._in_loop, self._tid = batches, in_loop, native_id
        self.after_s, self.advice = after_s, advice
        self._say = say or (lambda line: print(line, file=sys.stderr, flush=True))
        self._cpu, self._clock = cpu, clock
        self._stopped = threading.Event()
        self._n = -1  # batches at the last change
        self._since = 0.0  # when they last changed
        self._cpu0: float | None = None  # the thread's CPU seconds then
        self._told = False

    def check(self) -> str | None:
        """The line to say now, or None."""
        now, n, cpu = self._clock(), self._batches(), self._cpu(self._tid)
        if not self._in_loop():
            self._n = -1  # outside a loop: a stall starts counting once a batch is in flight again
            return None
        if n != self._n:
            self._n, self._since, self._cpu0, self._told = n, now, cpu, False
            return None
        waited = now - self._since
        if self._told or waited < self.after_s:
            return None
        used = None if cpu is None or self._cpu0 is None else cpu - self._cpu0
        if used is not None and used > CPU_SHARE * waited:
            return None  # the loop's thread is working, elsewhere than in the loader
        self._told = True
        spent = "" if used is None else f"; the loop's thread used {used:.2f} s of CPU meanwhile: it is blocked"
        return f"pinprof: no new batch for {waited:.0f} s ({n} rows closed so far){spent}. {self.advice}"

    def run(self) -> None:
        period = max(0.01, min(self.after_s / 4, CHECK_S))
        while not self._stopped.wait(period):
            try:
                with own_threads.working(own_threads.STALL):
                    line = self.check()
            except Exception:
                return  # a watch that fails stops watching; it never troubles the program
            if line is not None:
                self._say(line)

    def stop(self) -> None:
        self._stopped.set()


def advice(timeline: Path | None, launch_times: bool) -> str:
    """What the stall line tells the user to do: how to stop the program keeping its rows, and, where
    CUPTI records kernels' launch times, how to run without them."""
    pid = os.getpid()
    kept = f"`kill -9 {pid}` keeps the rows appended to {timeline}" if timeline else f"`kill -9 {pid}` stops it"
    where = f"`py-spy dump --native --pid {pid}` shows where each thread waits"
    if not launch_times:
        return f"If it stays so, {where}; {kept}."
    return (
        f"If it stays so, and only under pinprof, it may be the deadlock between CUPTI's kernel launch times and "
        f"the CUDA driver (a kernel launch waiting for a driver lock, as a thread of CUPTI's does; {where}). "
        f"Ctrl-C cannot stop it; {kept}. Then run without PINPROF_CUPTI_LATENCY=1 (the default places kernels "
        "by markers instead) or with PINPROF_BACKEND=events."
    )
