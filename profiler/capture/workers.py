"""How busy a loader's worker processes are: their CPU time against their wall time, from ``/proc``.

A loader whose workers wait (on a disk, a network, a lock, a sleep) gains from more workers than the
machine has cores: each waits in parallel, none competes for a core. One whose workers compute does
not: past the cores, more of them share the same cores. So the remedy for a loop that waits on its
loader depends on this share (``profiler.analysis.rules.pace``).

Read where it costs the loop nothing per batch: a loader's workers are noted when it starts a pass
(its iterator's ``_workers``: once an epoch, on the loop's thread) and read at each journal append
(the journal's thread, every ``PINPROF_FLUSH_S``) and at the run's end. A worker's process is known by
its pid and its start time, so a pid the system gave again to another process is not read as it.
What the reads cover: from a worker's first read to its last (a pass's last seconds, after the last
append, are not counted). Linux only; elsewhere nothing is measured and the advice stays as it was.
"""

from __future__ import annotations

import threading
import time
from pathlib import Path
from typing import Any

from profiler.capture.procstat import cpu_s, stat_fields


def read_cpu(pid: int) -> tuple[float, int, float] | None:
    """(CPU seconds, user and system, that process ``pid`` has used; its start time in ticks; seconds
    it spent runnable, queued for a core: NaN where the kernel keeps no schedstat), or None where it
    cannot be read (not Linux, the process has ended). A worker's process is one thread of work."""
    fields = stat_fields(f"/proc/{pid}/stat")
    try:
        if fields is None:
            return None
        cpu, start = cpu_s(fields), int(fields[19])
    except (ValueError, IndexError):
        return None
    try:
        queued = int(Path(f"/proc/{pid}/schedstat").read_text().split()[1]) / 1e9
    except (OSError, ValueError, IndexError):
        queued = float("nan")
    return cpu, start, queued


class WorkerWatch:
    """The worker processes of each loader (scenario), read at ``sample``; ``summary`` for meta.json."""

    def __init__(self) -> None:
        self._lock = threading.Lock()  # the loop's thread notes workers, the journal's thread reads them
        # (cpu s, start tick, queued s, time s), (cpu s, queued s, time s)
        self._first: dict[tuple[str, int], tuple[float, int, float, float]] = {}
        self._last: dict[tuple[str, int], tuple[float, float, float]] = {}

    def watch(self, scenario: str, it: Any) -> None:
        """A loader's pass has started with iterator ``it``: its worker processes are read from now."""
        pids = [getattr(w, "pid", None) for w in getattr(it, "_workers", None) or ()]
        for pid in pids:
            if isinstance(pid, int) and (scenario, pid) not in self._first:
                got = read_cpu(pid)
                if got is not None:
                    with self._lock:
                        self._first[(scenario, pid)] = (*got, time.monotonic())

    def sample(self) -> None:
        """Read every worker noted so far (one that has ended keeps its last reading)."""
        with self._lock:
            keys = list(self._first.items())
        for key, (_, start, _, _) in keys:
            got = read_cpu(key[1])
            if got is not None and got[1] == start:  # the same process, not a pid given again
                with self._lock:
                    self._last[key] = (got[0], got[2], time.monotonic())

    def summary(self) -> dict[str, dict[str, float]]:
        """Per scenario whose workers were read twice or more, summed over its workers:
        ``workers_cpu_s``, ``workers_queued_s`` (runnable, waiting for a core) and ``workers_wall_s``;
        ``workers_busy``, CPU over wall (1: workers that compute all the time), and
        ``workers_waiting``, the share of wall neither on a core nor queued for one (I/O, sleep, locks:
        where more workers than cores overlap more waits). No ``workers_waiting`` without schedstat."""
        sums: dict[str, list[float]] = {}
        with self._lock:
            for key, (cpu1, queued1, t1) in self._last.items():
                cpu0, _, queued0, t0 = self._first[key]
                if t1 > t0:
                    got = sums.setdefault(key[0], [0.0, 0.0, 0.0])
                    got[0] += cpu1 - cpu0
                    got[1] += queued1 - queued0  # NaN where either read had no schedstat
                    got[2] += t1 - t0
        out: dict[str, dict[str, float]] = {}
        for scenario, (cpu, queued, wall) in sums.items():
            out[scenario] = {"workers_cpu_s": round(cpu, 3), "workers_wall_s": round(wall, 3)}
            out[scenario]["workers_busy"] = round(cpu / wall, 4)
            if queued == queued:  # not NaN
                out[scenario]["workers_queued_s"] = round(queued, 3)
                out[scenario]["workers_waiting"] = round(max(0.0, 1 - (cpu + queued) / wall), 4)
        return out
