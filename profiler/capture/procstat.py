"""A process's or thread's ``/proc/.../stat`` line, read as its fields (Linux): the CPU time it has
used, for the stall watch (the loop's thread) and the loaders' workers (their processes)."""

from __future__ import annotations

import os
from pathlib import Path

TICK_S = 1 / os.sysconf("SC_CLK_TCK") if hasattr(os, "sysconf") else 0.01


def stat_fields(path: str) -> list[str] | None:
    """The fields of ``path`` after the name (in parentheses, it may hold spaces), from the state on:
    ``[11]`` and ``[12]`` are user and system ticks, ``[19]`` the start time; None where it cannot
    be read (not Linux, the process or thread has ended)."""
    try:
        text = Path(path).read_text()
        return text[text.rindex(")") + 2 :].split()
    except (OSError, ValueError):
        return None


def cpu_s(fields: list[str]) -> float:
    """CPU seconds, user and system, of a ``stat_fields`` line."""
    return (int(fields[11]) + int(fields[12])) * TICK_S
