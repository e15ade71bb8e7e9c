"""A loop whose DataLoader workers either wait or compute for each item: ``--work sleep`` waits 6 ms
an item (as a slow disk or a network does), ``--work burn`` computes for 6 ms; the loop's own step is
short, so the loop waits on its loader either way. Nothing of pinprof in it
(tests/test_worker_busy.py).

    python tests/scripts/worker_loader.py [--work sleep|burn] [--workers 2] [--items 480] [--epochs 1]
"""

from __future__ import annotations

import argparse
import time

import torch
from torch.utils.data import DataLoader, Dataset


class Items(Dataset[torch.Tensor]):
    def __init__(self, n: int, work: str) -> None:
        self.n, self.work = n, work

    def __len__(self) -> int:
        return self.n

    def __getitem__(self, i: int) -> torch.Tensor:
        if self.work == "sleep":
            time.sleep(0.006)
        else:
            end = time.perf_counter() + 0.006
            while time.perf_counter() < end:
                pass
        return torch.full((16,), float(i))


def main() -> None:
    p = argparse.ArgumentParser()
    p.add_argument("--work", choices=("sleep", "burn"), default="sleep")
    p.add_argument("--workers", type=int, default=2)
    p.add_argument("--items", type=int, default=480)
    p.add_argument("--epochs", type=int, default=1)
    args = p.parse_args()
    loader = DataLoader(Items(args.items, args.work), batch_size=4, num_workers=args.workers)
    for _ in range(args.epochs):
        for x in loader:
            x.to("cpu").sum()


if __name__ == "__main__":
    main()
