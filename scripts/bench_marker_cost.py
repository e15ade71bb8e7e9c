#!/usr/bin/env python3
"""What one marker costs the loop's thread (``profiler.capture.clocks.cupti.marker``), CUPTI's records on.

In one process, pinprof's CUPTI recorder started before any CUDA work (as ``pinprof profile`` does),
alternated rounds of: an empty marker kernel (``PINPROF_MARKER=kernel``), a marker copy of a few bytes
(``copy``), a CUDA event recorded (what the events clock records a batch, two or more), and a clock
read (the floor). Each round times ``--calls`` calls in chunks of 128, the device synchronized between
chunks (untimed), so the launch queue never fills. Prints the median us a call of each, over rounds.

    python scripts/bench_marker_cost.py [--rounds 9] [--calls 2048]
"""

from __future__ import annotations

import argparse
import statistics
import sys
import time
from collections.abc import Callable
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

import torch  # noqa: E402

from profiler.capture.clock import now_ms  # noqa: E402
from profiler.capture.clocks import choice as backend  # noqa: E402
from profiler.capture.clocks.cupti.marker import Marker  # noqa: E402

CHUNK = 128


def per_call_us(fn: Callable[[], object], calls: int) -> float:
    spent = 0
    done = 0
    while done < calls:
        n = min(CHUNK, calls - done)
        torch.cuda.synchronize()
        t0 = time.perf_counter_ns()
        for _ in range(n):
            fn()
        spent += time.perf_counter_ns() - t0
        done += n
    torch.cuda.synchronize()
    return spent / calls / 1e3


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--rounds", type=int, default=9)
    ap.add_argument("--calls", type=int, default=2048)
    args = ap.parse_args()
    dev = torch.device("cuda")
    rec = backend.start(dev)
    if rec is None:
        sys.exit(f"CUPTI did not start: {backend.describe()}")
    kernel, copy = Marker(rec.lib, rec.shim, dev, "kernel"), Marker(rec.lib, rec.shim, dev, "copy")
    ev = torch.cuda.Event(enable_timing=True)
    stream = torch.cuda.current_stream()
    torch.randn(64, device=dev).sum()  # the process's first CUDA work, after the records started
    ways: dict[str, Callable[[], object]] = {
        "marker kernel": kernel.mark,
        "marker copy": copy.mark,
        "event record": lambda: ev.record(stream),
        "clock read": now_ms,
    }
    for fn in ways.values():
        per_call_us(fn, CHUNK)  # warm
    got: dict[str, list[float]] = {k: [] for k in ways}
    for _ in range(args.rounds):
        for name, fn in ways.items():
            got[name].append(per_call_us(fn, args.calls))
        kernel.issued.clear()
        copy.issued.clear()
    print(
        f"{torch.cuda.get_device_name()}, torch {torch.__version__}, CUPTI records on "
        f"({backend.describe().get('backend')}); us a call, median of {args.rounds} alternated rounds of {args.calls}:"
    )
    for name, v in got.items():
        print(f"  {name:14s} {statistics.median(v):7.2f}  (rounds {min(v):.2f}-{max(v):.2f})")
    if kernel.failure or copy.failure:
        print(f"  failures: kernel {kernel.failure}, copy {copy.failure}")


if __name__ == "__main__":
    main()
