"""Two DataLoaders (train and validation) and a loop that copies x and y apart, each with its own call
(tests/test_profile.py). Nothing of pinprof in it.

    python tests/scripts/two_loaders.py [--train 40] [--val 24] [--batch-size 8]
"""

from __future__ import annotations

import argparse

import torch
from torch import nn
from torch.utils.data import DataLoader, Dataset


class Pairs(Dataset[dict[str, torch.Tensor]]):
    """Dict samples of a float image and a float target, random but fixed by the index."""

    def __init__(self, n: int, side: int) -> None:
        self.n, self.side = n, side

    def __len__(self) -> int:
        return self.n

    def __getitem__(self, i: int) -> dict[str, torch.Tensor]:
        gen = torch.Generator().manual_seed(i)
        return {"x": torch.rand(3, self.side, self.side, generator=gen), "y": torch.rand(4, generator=gen)}


class Held(Pairs):
    """The validation set: another class, smaller images."""


def main() -> None:
    p = argparse.ArgumentParser()
    p.add_argument("--train", type=int, default=40)
    p.add_argument("--val", type=int, default=24)
    p.add_argument("--batch-size", type=int, default=8)
    args = p.parse_args()
    device = torch.device("cuda" if torch.cuda.is_available() else "cpu")
    train = DataLoader(Pairs(args.train, 16), batch_size=args.batch_size, num_workers=1)
    val = DataLoader(Held(args.val, 8), batch_size=args.batch_size * 2, num_workers=0)
    model = nn.Sequential(nn.Flatten(), nn.LazyLinear(4)).to(device)
    opt = torch.optim.SGD(model.parameters(), lr=0.01)
    for batch in train:
        x = batch["x"].to(device)
        y = batch["y"].to(device)
        loss = nn.functional.mse_loss(model(x), y)
        opt.zero_grad()
        loss.backward()
        opt.step()
    small = nn.Sequential(nn.Flatten(), nn.Linear(3 * 8 * 8, 4)).to(device)
    with torch.no_grad():
        for batch in val:
            x, y = batch["x"].to(device), batch["y"].to(device)
            nn.functional.mse_loss(small(x), y)
    print("done")


if __name__ == "__main__":
    main()
