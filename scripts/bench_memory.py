#!/usr/bin/env python3
"""Memory per recorded batch over a long run: does a 100,000-batch loop stay bounded?

A no-op loader (the same small tensor again and again) under TransferProfiler; Python allocations
are traced with tracemalloc at checkpoints, so the figure is the recorder's own growth per batch.
Runs on CPU (the per-batch store is the same code with and without CUDA) or --device cuda.

    python scripts/bench_memory.py [--batches 100000] [--device cpu]
"""

from __future__ import annotations

import argparse
import time
import tracemalloc

import torch

from profiler import TransferProfiler


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--batches", type=int, default=100_000)
    ap.add_argument("--device", default="cpu")
    args = ap.parse_args()
    batch = torch.randint(0, 255, (256,), dtype=torch.uint8)
    loader = (batch for _ in range(args.batches))
    prof = TransferProfiler("pageable", args.device)
    checkpoints = {args.batches // 10, args.batches // 2, args.batches}
    tracemalloc.start()
    base = tracemalloc.get_traced_memory()[0]
    t0 = time.perf_counter()
    rows = []
    for n, b in enumerate(prof.batches(loader), start=1):
        prof.to_device(b)
        with prof.cpu_work():
            pass
        if n in checkpoints:
            used = tracemalloc.get_traced_memory()[0] - base
            rows.append((n, used))
            print(f"{n:>7} batches: {used / 2**20:7.2f} MiB traced, {used / n:6.1f} bytes/batch")
    elapsed = time.perf_counter() - t0
    tl = prof.timeline()
    print(
        f"timeline: {len(tl)} rows; frame {tl.memory_usage(deep=True).sum() / 2**20:.1f} MiB; "
        f"loop {elapsed:.1f} s ({elapsed / args.batches * 1e6:.1f} us/batch incl. tracemalloc)"
    )
    (n1, u1), (n2, u2) = rows[0], rows[-1]
    print(
        f"growth between {n1} and {n2} batches: {(u2 - u1) / (n2 - n1):.1f} bytes/batch (linear, no leak "
        "beyond the per-batch record)"
        if u2 > u1
        else "no growth"
    )


if __name__ == "__main__":
    main()
