#!/usr/bin/env python3
"""Could a step's kernels be found by correlation id instead of by launch time? Measured on the
recorded H200 CUPTI buffers (``tests/data/h200_*/recording.npz``), on any machine.

pinprof places each kernel in the step whose host window holds its launch time (``queued``: CUPTI's
latency timestamps). Those launch times take part in a driver deadlock (``profiler.capture.clocks.choice``)
and cost about 0.5 us a launch. CUPTI numbers every CUDA API call in the order the calls begin, on any
thread (its correlation id), and every kernel record carries its launch's. So a marker call made at
each window's edge (any call whose record carries its correlation id) would bound the window in
correlation ids, with no launch times. This script asks the recordings whether the two orders agree:

- **order**: kernels sorted by correlation id, how many were launched before an earlier-numbered
  kernel (on another thread: autograd's backward beside the main thread), and by how much;
- **rows**: a marker at host time t is given the correlation id just above every kernel launched by
  t (what a call made at t would get, as far as kernels show it). Each recorded window is then bounded
  by its edges' markers, and each row's kernels counted both ways.

    python scripts/corr_windows.py [RECORDING.npz ...]
"""

from __future__ import annotations

import argparse
from pathlib import Path

import numpy as np

from profiler.bench import corr_order, cupti_replay

HERE = Path(__file__).resolve().parent.parent


def report(path: Path) -> None:
    buffers, meta = cupti_replay.load(path)
    q, cid = cupti_replay.kernel_launches(buffers, meta)
    batches = meta["batches"]
    late = corr_order.out_of_order(q, cid)
    out = late > 0
    print(f"{path.relative_to(HERE) if path.is_relative_to(HERE) else path}: {len(q)} kernels with launch times")
    said = f", by median {np.median(late[out]) / 1e3:.1f} us, max {late[out].max() / 1e3:.1f} us" if out.any() else ""
    print(f"  order: {int(out.sum())} launched before a lower-numbered kernel{said}")
    rows = same = moved = worst = 0
    for b in batches:
        if not b["windows"] or b["windows"][-1][1] >= q.max():
            continue  # rows whose step ran past the recording's last launch (a recording of its first buffers)
        by_launch, by_corr = corr_order.counts(q, cid, [tuple(w) for w in b["windows"]])
        rows += 1
        same += by_launch == by_corr
        moved += abs(by_launch - by_corr)
        worst = max(worst, abs(by_launch - by_corr))
    print(
        f"  rows: {rows} whose steps the recording holds; {same} with the same kernel count both ways; "
        f"{moved} kernels moved, at most {worst} in a row"
    )


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("recordings", nargs="*", type=Path)
    args = ap.parse_args()
    for path in args.recordings or sorted((HERE / "tests" / "data").glob("h200_*/recording.npz")):
        report(path)


if __name__ == "__main__":
    main()
