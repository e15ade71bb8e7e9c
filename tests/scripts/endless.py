"""A training loop that runs until it is stopped (tests/test_profile.py sends it SIGTERM or SIGINT).
Prints "step" after each batch, so the test knows batches were iterated. ``--collect``: each step is a
full garbage collection instead of a 10 ms sleep, so a signal can land as one ends (where pinprof
profile's watch of full collections, a Python callback, runs next)."""

from __future__ import annotations

import gc
import sys
import time

import torch
from torch.utils.data import DataLoader, TensorDataset


def main() -> None:
    data = TensorDataset(torch.rand(64, 3, 8, 8, generator=torch.Generator().manual_seed(0)))
    loader = DataLoader(data, batch_size=8)
    while True:
        for (x,) in loader:
            x = x.to("cpu")
            if "--collect" in sys.argv:
                gc.collect()
            else:
                time.sleep(0.01)
            print("step", flush=True)


if __name__ == "__main__":
    main()
