#!/usr/bin/env python3
"""The recorder thread's cost a batch as the history it keeps grows, markers on, on a CPU.

``Records`` fed as a fast loop feeds it (``scripts/bench_overhead.py``'s no-op loader): a batch every
30 us, each with one 1 KiB copy call and two markers (``compute()``'s entry and exit, as the library
once issued them), its records in made-up buffers of ``--batches`` batches. Prints the time ``take`` and ``process`` spend a batch, for
the first and last five buffers and over all; with ``--no-markers``, the same loop placed by launch
times (no marker records). Run it at two commits to compare (``git worktree``, then this script there).

    python scripts/bench_marker_table.py [--batches 2000] [--buffers 60] [--no-markers]
"""

from __future__ import annotations

import argparse
import functools
import statistics
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from profiler.bench import cupti_replay as cr
from profiler.capture.clocks.cupti import layout
from profiler.capture.clocks.cupti.batches import Pending, Stats
from profiler.capture.clocks.cupti.records import Records
from profiler.capture.store import TEMPLATE, Store

STREAM = 99  # the markers' made-up stream id
STEP_NS = 30_000  # one batch every 30 us


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--batches", type=int, default=2000, help="batches a buffer")
    ap.add_argument("--buffers", type=int, default=60)
    ap.add_argument("--no-markers", action="store_true")
    args = ap.parse_args()
    marked = not args.no_markers
    records = Records(Stats())
    records.marked, records.marker_stream = marked, STREAM
    store = Store()
    ident = functools.partial(cr.to_host, p=0, c=0, rate=1.0)
    t_ns, corr, seq, row = 1_000_000_000, 1, 0, 0
    spent: list[float] = []
    for _ in range(args.buffers):
        raw = bytearray()
        for _ in range(args.batches):
            rec = dict(TEMPLATE)
            rec["batch"] = row
            store.append(rec)
            store.wait_for_gpu(row)
            raw += cr.memcpy_record(t_ns + 1000, t_ns + 2000, 1024, 2, corr)
            corr += 1
            edges = (t_ns + 10_000, t_ns + 20_000)
            for m in edges if marked else ():
                n = 1 + seq % 251
                seq += 1
                raw += cr.memcpy_record(m + 100, m + 200, n, 2, corr, stream=STREAM)
                corr += 1
                records.issued.append((m, n))
            records.incoming.append(Pending(store, row, [(t_ns, t_ns + 5000, ((1024,),))], [edges], t_ns + 25_000))
            row += 1
            t_ns += STEP_NS
        parsed = layout.parse(bytes(raw), dict(cr.SIZES))
        t0 = time.perf_counter()
        records.take(parsed, ident)
        records.process(force=False)
        spent.append((time.perf_counter() - t0) / args.batches * 1e6)
    print(
        f"{'markers' if marked else 'no markers'}, {args.buffers} buffers of {args.batches} batches: us a batch, "
        f"first 5 buffers {statistics.mean(spent[1:6]):.2f}, last 5 {statistics.mean(spent[-5:]):.2f}, "
        f"all {statistics.mean(spent[1:]):.2f} (copy calls unmatched: {records.stats.unmatched_calls})"
    )


if __name__ == "__main__":
    main()
