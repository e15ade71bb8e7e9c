#!/usr/bin/env python3
"""What one journal append costs the thread that makes it, this checkout against an older one (any
machine; no GPU).

An append builds the timeline of the batches completed since the last (``rows.completed``) and formats
and writes them (``Journal.append``), holding Python's lock all the while, so the profiled loop waits.
Each side runs in its own process: a CPU loop of ``--batches`` recorded by ``TransferProfiler``, then
``--repeats`` appends of the last N rows for each N of ``--rows``; it prints the medians in ms. Then
the formatter alone (``atomic.csv_rows``) on the largest count of rows an H200 run wrote
(``tests/data/h200_short_step``, repeated), whose GPU fields are filled, as a CUDA run's rows are.

    python scripts/bench_append.py [--baseline PATH] [--rows 10 165 2000] [--repeats 9]   (PATH: git worktree add PATH <commit>)
"""

from __future__ import annotations

import argparse
import subprocess
import sys
from pathlib import Path

from profiler.bench import baseline

CHILD = """
import profiler, statistics, sys, tempfile, time
from pathlib import Path
import torch
from profiler import TransferProfiler
from profiler.capture import rows
from profiler.report.journal import Journal

counts, repeats = [int(x) for x in sys.argv[1].split(",")], int(sys.argv[2])
print("package", profiler.__file__, flush=True)
total = max(counts) + 10
prof = TransferProfiler(mode="pageable", device="cpu", scenario="bench/append")
for b in prof.batches([torch.randn(8, 8) for _ in range(total)]):
    prof.to_device(b)
    with prof.cpu_work():
        pass
    with prof.compute():
        pass
journal = Journal(Path(tempfile.mkdtemp()) / "timeline.csv")
journal.start()
rows.completed(prof, total - 2)  # the first build imports and caches: not an append's steady cost
for n in counts:
    build, write = [], []
    for _ in range(repeats):
        t0 = time.perf_counter()
        frame, _ = rows.completed(prof, total - n)
        t1 = time.perf_counter()
        journal.append(frame)
        t2 = time.perf_counter()
        build.append((t1 - t0) * 1e3)
        write.append((t2 - t1) * 1e3)
    print(f"{n} {statistics.median(build):.2f} {statistics.median(write):.2f}", flush=True)
# The formatter alone on rows an H200 run wrote (every GPU field filled, as a CUDA run's rows are),
# the recording repeated to the largest count; "-" for a checkout without it.
import pandas as pd
from profiler.atomic import csv_rows
from profiler.report.files import read_timeline
from profiler.timeline.schema import COLUMNS
try:
    rec = read_timeline(Path("tests/data/h200_short_step"))[list(COLUMNS)]
except Exception:
    print("gpu -", flush=True)
else:
    n = max(counts)
    frame = pd.concat([rec] * (n // len(rec) + 1)).head(n).reset_index(drop=True)
    took = []
    for _ in range(repeats):
        t0 = time.perf_counter()
        csv_rows(frame)
        took.append((time.perf_counter() - t0) * 1e3)
    print(f"gpu {n} {statistics.median(took):.2f}", flush=True)
"""


def run(side: str, root: str, counts: list[int], repeats: int) -> tuple[list[tuple[int, float, float]], str]:
    """One process of the checkout at ``root``: (rows, build ms, format and write ms) per row count,
    and the formatter's ms on a recorded H200 run's rows ("-" where the checkout has no recording)."""
    cmd = [sys.executable, "-c", CHILD, ",".join(map(str, counts)), str(repeats)]
    # Run from the checkout with it first on the path: ``-c`` puts the working folder first, and an
    # editable install's finder comes after both, so each side imports its own package.
    done = subprocess.run(cmd, env=baseline.env_for(root), cwd=root, capture_output=True, text=True, timeout=900)
    if done.returncode != 0:
        raise SystemExit(f"{side}: the append bench failed (rc {done.returncode}): {done.stderr[-800:]}")
    out, gpu = [], "-"
    for line in done.stdout.split("\n"):
        if line.startswith("package "):
            baseline.check_package(line, root, side)
        elif line.startswith("gpu "):
            gpu = line.split()[-1]
        elif line.strip():
            n, build, write = line.split()
            out.append((int(n), float(build), float(write)))
    return out, gpu


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--baseline", help="an older checkout to run beside this one (git worktree add PATH <commit>)")
    ap.add_argument(
        "--rows", type=int, nargs="+", default=[10, 165, 2000], help="rows an append holds (default 10 165 2000)"
    )
    ap.add_argument("--repeats", type=int, default=9, help="appends timed per row count (default 9)")
    args = ap.parse_args()
    if any(n < 1 for n in args.rows) or args.repeats < 1:
        raise SystemExit(f"--rows {args.rows} and --repeats {args.repeats} must be 1 or more")
    sides = [("HEAD", str(Path(__file__).resolve().parent.parent))]
    if args.baseline is not None:
        sides.append(("baseline", baseline.checkout(args.baseline)))
    got = {name: run(name, root, args.rows, args.repeats) for name, root in sides}
    print(f"one journal append, median of {args.repeats} (ms): build the rows' timeline | format and write them")
    for i, n in enumerate(args.rows):
        cells = "   ".join(f"{name} {got[name][0][i][1]:.1f} | {got[name][0][i][2]:.1f}" for name, _ in sides)
        print(f"  {n:>5} rows: {cells}")
    cells = "   ".join(f"{name} {got[name][1]}" for name, _ in sides)
    print(f"formatting {max(args.rows)} rows of an H200 run (tests/data/h200_short_step, repeated), ms: {cells}")


if __name__ == "__main__":
    main()
