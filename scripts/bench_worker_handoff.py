#!/usr/bin/env python3
"""What a DataLoader worker's handoff costs a batch: an in-memory TensorDataset (small images and
labels) read with 0, 1 and 2 workers (persistent, warmed by one pass), and with whole batches indexed in
one call (``sampler=BatchSampler(...)``, ``batch_size=None``), the loop doing nothing else. With no
workers a batch is the dataset's indexing and the collate in the loop's process; with workers it is
also pickled, queued and rebuilt from shared memory. The rule that keeps "raise num_workers" from an
in-memory loader with no workers (``profiler.analysis.rules.pace.HANDOFF_MS``) reads this.

    python scripts/bench_worker_handoff.py [--passes 5] [--items 4000]
"""

from __future__ import annotations

import argparse
import os
import time

import torch
from torch.utils.data import BatchSampler, DataLoader, RandomSampler, TensorDataset


def per_batch_ms(loader: DataLoader, passes: int) -> float:  # type: ignore[type-arg]
    """Mean ms a batch over ``passes`` passes, after one pass unmeasured (workers started, warm)."""
    for _ in loader:
        pass
    n, start = 0, time.perf_counter()
    for _ in range(passes):
        for _ in loader:
            n += 1
    return 1e3 * (time.perf_counter() - start) / n


def main() -> None:
    p = argparse.ArgumentParser()
    p.add_argument("--passes", type=int, default=5)
    p.add_argument("--items", type=int, default=4000)
    args = p.parse_args()
    gen = torch.Generator().manual_seed(0)
    data = TensorDataset(
        torch.rand(args.items, 3, 8, 8, generator=gen), torch.randint(0, 10, (args.items,), generator=gen)
    )
    print(f"{os.cpu_count()} CPU cores, torch {torch.__version__}, {args.items} items, {args.passes} passes")
    for bs in (16, 256):
        line = []
        for w in (0, 1, 2):
            loader = DataLoader(data, batch_size=bs, num_workers=w, persistent_workers=w > 0)
            line.append(f"{w} workers {per_batch_ms(loader, args.passes):.3f}")
        whole = DataLoader(data, sampler=BatchSampler(RandomSampler(data), bs, False), batch_size=None)
        line.append(f"whole batches indexed {per_batch_ms(whole, args.passes):.3f}")
        print(f"batch {bs}: ms a batch: " + ", ".join(line))


if __name__ == "__main__":
    main()
