"""A training loop whose step waits, as a GPU step waits in ``loss.item()``: the main thread lets go
of the GIL for ``--step-ms`` each batch. Nothing of pinprof in it (tests/test_own_time.py).

    python waiting_steps.py [--batches 30] [--step-ms 40]
"""

from __future__ import annotations

import argparse
import time

import torch
from torch.utils.data import DataLoader, TensorDataset


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--batches", type=int, default=30)
    ap.add_argument("--step-ms", type=float, default=40.0)
    args = ap.parse_args()
    g = torch.Generator().manual_seed(0)
    data = TensorDataset(
        torch.randn(args.batches * 16, 3, 16, 16, generator=g), torch.randint(0, 9, (args.batches * 16,))
    )
    for x, y in DataLoader(data, batch_size=16):
        x, y = x.to("cpu"), y.to("cpu")
        (x.float().mean() + y.float().mean()).item()
        time.sleep(args.step_ms / 1e3)  # the step's wait: no GIL held, as in a CUDA synchronize


if __name__ == "__main__":
    main()
