"""Two DataLoaders zipped, as semi-supervised and multi-modal loops read them: each step takes a batch
of both, copies each, and trains on the pair (tests/test_in_flight.py). Step k holds the host busy for
(1 + k % 3) units of ``--unit-ms``; ``--slow second`` makes each item of the second loader wait
``--io-ms`` (a slow disk). Nothing of pinprof in it.

    python tests/scripts/zipped_loaders.py [--steps 24] [--unit-ms 4] [--slow none|second] [--io-ms 2]
"""

from __future__ import annotations

import argparse
import time

import torch
from torch import nn
from torch.utils.data import DataLoader, Dataset


class Items(Dataset[torch.Tensor]):
    """``n`` items of ``width`` floats, each waiting ``io_s`` first."""

    def __init__(self, n: int, width: int, io_s: float) -> None:
        self.n, self.width, self.io_s = n, width, io_s

    def __len__(self) -> int:
        return self.n

    def __getitem__(self, i: int) -> torch.Tensor:
        if self.io_s:
            time.sleep(self.io_s)
        return torch.full((self.width,), float(i))


class Labels(Items):
    """The second loader's dataset: another class, so its scenario has its own name."""


def busy(ms: float) -> None:
    end = time.perf_counter() + ms / 1e3
    while time.perf_counter() < end:
        pass


def main() -> None:
    p = argparse.ArgumentParser()
    p.add_argument("--steps", type=int, default=24)
    p.add_argument("--unit-ms", type=float, default=4.0)
    p.add_argument("--slow", choices=("none", "second"), default="none")
    p.add_argument("--io-ms", type=float, default=2.0)
    args = p.parse_args()
    device = torch.device("cuda" if torch.cuda.is_available() else "cpu")
    batch = 8
    first = DataLoader(Items(args.steps * batch, 16, 0.0), batch_size=batch)
    io_s = args.io_ms / 1e3 if args.slow == "second" else 0.0
    second = DataLoader(Labels(args.steps * batch, 4, io_s), batch_size=batch)
    model = nn.Linear(16, 4).to(device)
    opt = torch.optim.SGD(model.parameters(), lr=0.01)
    for k, (x, y) in enumerate(zip(first, second)):
        x, y = x.to(device), y.to(device)
        busy(args.unit_ms * (1 + k % 3))
        loss = ((model(x) - y) ** 2).mean()
        opt.zero_grad()
        loss.backward()
        opt.step()


if __name__ == "__main__":
    main()
