"""A training loop whose dataset keeps what it decoded as Python objects (a memo of each sample's
annotations: a dict of tuples), as many do: the objects the process keeps grow each batch, and
Python's full garbage collections, which walk all of them, come back longer each time. Nothing of
pinprof in it (tests/test_gc_pauses.py).

    python caching_dataset.py [--batches 160] [--step-ms 10] [--freeze]

--freeze: ``gc.collect(); gc.freeze()`` before the loop, as pinprof's GC finding advises.
"""

from __future__ import annotations

import argparse
import gc
import time

import torch
from torch.utils.data import DataLoader, Dataset


class Annotated(Dataset[tuple[torch.Tensor, int]]):
    """Images with annotations decoded on first use and kept (``memo``)."""

    def __init__(self, n: int) -> None:
        self.n = n
        self.memo: dict[int, dict[str, list[list[int]]]] = {}
        self.images = torch.randn(n, 3, 8, 8, generator=torch.Generator().manual_seed(0))

    def __len__(self) -> int:
        return self.n

    def __getitem__(self, i: int) -> tuple[torch.Tensor, int]:
        if i not in self.memo:  # "decoding": some hundred small objects a sample, kept for later epochs
            # lists, not tuples: CPython stops tracking a tuple of numbers, never a list
            self.memo[i] = {
                "boxes": [[i, k, k + 1, k + 2] for k in range(60)],
                "parts": [[k, i, 0, 1] for k in range(60)],
            }
        return self.images[i], len(self.memo[i]["boxes"])


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--batches", type=int, default=160)
    ap.add_argument("--step-ms", type=float, default=10.0)
    ap.add_argument("--freeze", action="store_true")
    args = ap.parse_args()
    loader = DataLoader(Annotated(args.batches * 32), batch_size=32)
    if args.freeze:
        gc.collect()
        gc.freeze()
    for x, y in loader:
        x, y = x.to("cpu"), y.to("cpu")
        (x.float().mean() + y.float().mean()).item()
        time.sleep(args.step_ms / 1e3)  # the step's wait


if __name__ == "__main__":
    main()
