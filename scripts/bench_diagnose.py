#!/usr/bin/env python3
"""``pinprof diagnose`` (and optionally ``trace`` and ``plot``) on a generated 1,000,000-row timeline:
wall time and peak memory of each verb, run as a user runs it (a process of its own).

The timeline is a recorded H200 report (``tests/data/h200_default``, 12 scenarios) repeated to the
row count asked, each scenario's batches numbered on, written by pinprof's own CSV writer.

    python scripts/bench_diagnose.py [--rows 1000000] [--folder /tmp/pinprof-big] [--trace] [--plot]
"""

from __future__ import annotations

import argparse
import resource
import shutil
import subprocess
import sys
import time
from pathlib import Path

import pandas as pd

HERE = Path(__file__).resolve().parent
DATA = HERE.parent / "tests" / "data" / "h200_default"


def make(folder: Path, rows: int) -> None:
    from profiler.report.files import read_timeline, write_csv

    one = read_timeline(DATA)
    big = pd.concat([one] * (rows // len(one) + 1), ignore_index=True).iloc[:rows]
    big["batch"] = big.groupby("scenario").cumcount()
    folder.mkdir(parents=True, exist_ok=True)
    write_csv(big, folder / "timeline.csv")
    shutil.copy(DATA / "meta.json", folder / "meta.json")


def measure(argv: list[str]) -> tuple[float, float, int]:
    """(seconds, peak resident MB, exit status) of ``python -m profiler ARGV`` in a child process."""
    before = resource.getrusage(resource.RUSAGE_CHILDREN).ru_maxrss
    t0 = time.perf_counter()
    proc = subprocess.run([sys.executable, "-m", "profiler", *argv], capture_output=True, text=True)
    elapsed = time.perf_counter() - t0
    peak = resource.getrusage(resource.RUSAGE_CHILDREN).ru_maxrss
    if peak <= before:
        print("  (peak memory: this child did not exceed an earlier one; its figure is at most the one printed)")
    if proc.returncode:
        print(proc.stderr[-2000:])
    return elapsed, max(peak, before) / 1024, proc.returncode


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--rows", type=int, default=1_000_000, help="rows of the timeline (default 1,000,000)")
    ap.add_argument("--folder", type=Path, default=Path("/tmp/pinprof-big"), help="where it is written")
    ap.add_argument("--trace", action="store_true", help="also time pinprof trace")
    ap.add_argument("--plot", action="store_true", help="also time pinprof plot")
    args = ap.parse_args()
    csv = args.folder / "timeline.csv"
    if not csv.is_file() or sum(1 for _ in open(csv, "rb")) != args.rows + 1:
        t0 = time.perf_counter()
        make(args.folder, args.rows)
        print(f"wrote {csv} ({csv.stat().st_size / 1e6:.0f} MB) in {time.perf_counter() - t0:.0f} s")
    verbs = [["diagnose", str(args.folder)]]
    if args.trace:
        verbs.append(["trace", str(args.folder), "-o", str(args.folder / "trace.json")])
    if args.plot:
        verbs.append(["plot", str(args.folder)])
    for argv in verbs:
        secs, mb, rc = measure(argv)
        print(f"pinprof {argv[0]} on {args.rows:,} rows: {secs:.1f} s, peak {mb:.0f} MB resident, exit {rc}")


if __name__ == "__main__":
    main()
