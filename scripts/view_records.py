"""Per copy, what pinprof's CUPTI records and torch.profiler's say of the non-dense view's batches.

``tests/test_gpu_cupti.py``'s view case (a dict of a 64x3x64x64 uint8 image sliced from RGBA, pinned,
and 64 int64 labels, ``.to(non_blocking=True)`` on a side stream) read pinprof's ``h2d_gpu_ms`` median
1.08% under torch.profiler's in six runs on H100s, with the hooks shown not to change the copies
(``scripts/hook_perturb.py``) and with or without CUPTI's API records. This script splits it: the
test's own loop and batches (``user_loop``, ``batches_of``), rounds alternated as in the test,
pinprof's raw memcpy records kept (the recorder's tap), and per copy size the median GPU duration in
pinprof's raw records, in pinprof's rows, and in torch.profiler's records.

Run on a GPU: ``python scripts/view_records.py [--rounds 8]``.
"""

from __future__ import annotations

import argparse
import os
import sys
from pathlib import Path

import numpy as np
import torch

from profiler.bench.cupti import trace_events
from profiler.capture.clocks import choice as backend
from profiler.capture.clocks.cupti import layout
from profiler.settings import current

sys.path.insert(0, str(Path(__file__).resolve().parent.parent / "tests"))
from test_gpu_cupti import DEV, batches_of, loader_of, profiled, user_loop

CASE = "view-0"


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--rounds", type=int, default=8, help="rounds a side (default 8)")
    args = ap.parse_args()
    os.environ["PINPROF_BACKEND"] = "cupti"
    current.cache_clear()
    rec = backend.start(DEV, late_ok=True)
    if rec is None:
        sys.exit(f"view_records.py: CUPTI did not start: {backend.describe()}")
    batches = batches_of(CASE, 48)
    sizes = {v.numel() * v.element_size() for v in batches[0].values()}
    w = torch.randn(1024, 1024, device=DEV) / 32
    one = lambda i: 1  # noqa: E731  # one matmul a step, as the test's agreement case
    user_loop(loader_of(batches[:3]), CASE, w, one)
    raw: dict[int, list[float]] = {s: [] for s in sizes}
    theirs: dict[int, list[float]] = {s: [] for s in sizes}
    rows: list[float] = []
    rates: list[float] = []
    for _ in range(args.rounds):
        rec.tap = []
        tl = profiled(batches, CASE, w, one)  # the test's pinprof side: the loop under the hooks
        rows.extend(tl[tl.batch >= 2].h2d_gpu_ms.tolist())
        tap, rec.tap = rec.tap or [], None
        for t in tap:
            if t[0] != "buffer":
                continue
            # CUPTI's ticks a ns: 1, or another where a client (torch.profiler) registered its own
            # timestamps (``cupti.clock.CuptiClock``); a duration in ms is ticks / rate / 1e6
            rate = float(t[3])
            rates.append(rate)
            mem = layout.parse(t[1], rec.sizes).get(layout.KIND_MEMCPY)
            if mem is None:
                continue
            for b, s, e in zip(mem["bytes"].tolist(), mem["start"].tolist(), mem["end"].tolist()):
                if b in raw:
                    raw[b].append((e - s) / rate / 1e6)
        ev, took_back = trace_events(lambda: user_loop(loader_of(batches), CASE, w, one), cpu=False, cuda=True)
        if not took_back:
            sys.exit(f"view_records.py: CUPTI not taken back from torch.profiler: {backend.describe()}")
        for e in ev:
            b = int(e.get("args", {}).get("bytes", 0) or 0)
            if e.get("cat") == "gpu_memcpy" and "HtoD" in e.get("name", "") and b in theirs:
                theirs[b].append(float(e.get("dur", 0)) / 1e3)
    print(f"view batches, {args.rounds} rounds a side; ms, medians (p90) per copy size")
    for s in sorted(sizes):
        r, t = np.array(raw[s]), np.array(theirs[s])
        print(
            f"  {s:7d} B: pinprof's raw records {np.median(r):.5f} ({np.quantile(r, 0.9):.5f}, n={len(r)}) | "
            f"torch.profiler {np.median(t):.5f} ({np.quantile(t, 0.9):.5f}, n={len(t)})"
        )
    print(
        f"  pinprof rows' h2d_gpu_ms {np.median(rows):.5f} (n={len(rows)}); CUPTI ticks a ns {min(rates):.4f}-{max(rates):.4f}"
    )


if __name__ == "__main__":
    main()
