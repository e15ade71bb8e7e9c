#!/usr/bin/env python3
"""Where ``pinprof profile``'s own time goes on a real loop: each part of the hooks' per-batch path
timed from outside, on the loop's thread, while the script runs as ``pinprof profile`` runs it.

A part is a method of the session (``profiler.capture.auto_session``) or of the loader's recorder,
timed around each call; parts nest (``_commit`` is inside ``_close``, which is inside ``stepped`` or
``_at_next``), so their times do not add up. Each timer costs about a microsecond itself, so a part
called often reads a little high. Printed: calls, and the median and mean microseconds a call, from
the script's first batch on; then the ``pinprof_ms`` median of the report's steady rows.

A tight loop (``scripts/bench_cpu_recorder.py``) shows what the code costs with its data in the
caches; this shows what it costs between the real steps of a real loop, which evict it.

    python scripts/hook_parts.py [--out DIR] -- python train.py ARGS
"""

from __future__ import annotations

import argparse
import statistics
import tempfile
import threading
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

from profiler.capture.auto_session import AutoSession
from profiler.capture.clocks.by_cupti_copies import CuptiCopiesClock
from profiler.capture.clocks.by_events import EventsClock
from profiler.capture.clocks.cupti.recorder import CuptiRecorder
from profiler.capture.profiler import TransferProfiler
from profiler.drivers.script import profile
from profiler.report.files import read_timeline

PARTS: dict[type, tuple[str, ...]] = {
    AutoSession: (
        "begin",
        "arrived",
        "_at_next",
        "stepped",
        "_close",
        "_bump",
        "copy_begin",
        "copy_end",
        "copy_noted",
        "backward",
        "trained",
    ),
    TransferProfiler: ("_commit",),
    # the clocks' own parts, named by class (the copies clock's open and commit call the events' too)
    CuptiCopiesClock: ("open", "noted", "commit"),
    EventsClock: ("open", "copy_begin", "copy_end", "start_step", "end_step", "commit"),
    CuptiRecorder: ("add",),
}
PLAIN = (AutoSession, TransferProfiler)  # their parts keep their bare names


def label(cls: type, name: str) -> str:
    return name if cls in PLAIN else f"{cls.__name__}.{name}"


def timed(name: str, fn: Callable[..., Any], got: dict[str, list[int]]) -> Callable[..., Any]:
    main = threading.get_ident()

    def part(*args: Any, **kwargs: Any) -> Any:
        if threading.get_ident() != main:
            return fn(*args, **kwargs)
        t0 = time.perf_counter_ns()
        try:
            return fn(*args, **kwargs)
        finally:
            got.setdefault(name, []).append(time.perf_counter_ns() - t0)

    return part


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--out", type=Path, default=None, help="report folder (default: a new temporary one)")
    ap.add_argument("command", nargs=argparse.REMAINDER, help="-- python SCRIPT ARGS")
    args = ap.parse_args()
    out = args.out or Path(tempfile.mkdtemp(prefix="pinprof-parts-")) / "report"
    got: dict[str, list[int]] = {}
    # A part an older package (PYTHONPATH=PATH of a worktree) does not have is left out, not an error.
    # The session's parts as it finds them (its mixins' too); a clock's only where the class itself
    # defines it, so that a part a subclass inherits is timed once, under the class that defines it.
    originals = [
        (cls, name, getattr(cls, name) if cls in PLAIN else cls.__dict__[name])
        for cls, names in PARTS.items()
        for name in names
        if (hasattr(cls, name) if cls in PLAIN else name in cls.__dict__)
    ]
    for cls, name, fn in originals:
        setattr(cls, name, timed(label(cls, name), fn, got))
    try:
        code = profile(args.command, out, plots=False)
    finally:
        for cls, name, fn in originals:
            setattr(cls, name, fn)
    print(f"pinprof profile's parts on the loop's thread (exit status {code}; report in {out}):")
    print(f"  {'part':<24} {'calls':>7} {'median us':>10} {'mean us':>9}")
    for name in (label(cls, n) for cls, names in PARTS.items() for n in names):
        ns = got.get(name, [])
        if ns:
            print(f"  {name:<24} {len(ns):>7} {statistics.median(ns) / 1e3:>10.1f} {statistics.mean(ns) / 1e3:>9.1f}")
    tl = read_timeline(out / "timeline.csv")
    steady = tl[~tl.warmup.astype(bool)]
    if not len(steady):
        raise SystemExit(f"no steady batch was recorded (the script's exit status: {code})")
    print(
        f"  pinprof_ms median {steady.pinprof_ms.median() * 1e3:.1f} us over {len(steady)} steady rows (timers included)"
    )


if __name__ == "__main__":
    main()
