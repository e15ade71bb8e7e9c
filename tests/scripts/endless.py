"""A training loop that runs until it is stopped (tests/test_profile.py sends it SIGTERM or SIGINT).
Prints "step" after each batch, so the test knows batches were iterated."""

from __future__ import annotations

import time

import torch
from torch.utils.data import DataLoader, TensorDataset


def main() -> None:
    data = TensorDataset(torch.rand(64, 3, 8, 8, generator=torch.Generator().manual_seed(0)))
    loader = DataLoader(data, batch_size=8)
    while True:
        for (x,) in loader:
            x = x.to("cpu")
            time.sleep(0.01)
            print("step", flush=True)


if __name__ == "__main__":
    main()
