"""A plain training script of the kind people write first, nothing of pinprof in it: torchvision's
FakeData (3x64x64 images made on the fly), a small CNN, a DataLoader with workers, two epochs
(tests/test_report.py profiles it; run it alone with ``python tests/scripts/fake_cnn.py``).

    python tests/scripts/fake_cnn.py [--workers 2] [--epochs 2] [--size 320] [--persistent] [--io-ms 0]

``--io-ms``: each item also waits this long, as a read from a slow disk would (no CPU spent).
"""

from __future__ import annotations

import argparse
import time

import torch
import torchvision
from torch import nn
from torch.utils.data import DataLoader, Dataset


class SlowReads(Dataset):  # type: ignore[type-arg]
    """``data``, each item ``io_ms`` late."""

    def __init__(self, data: Dataset, io_ms: float) -> None:  # type: ignore[type-arg]
        self.data, self.io_s = data, io_ms / 1e3

    def __len__(self) -> int:
        return len(self.data)  # type: ignore[arg-type]

    def __getitem__(self, i: int) -> object:
        time.sleep(self.io_s)
        return self.data[i]


def main() -> None:
    p = argparse.ArgumentParser()
    p.add_argument("--workers", type=int, default=2)
    p.add_argument("--epochs", type=int, default=2)
    p.add_argument("--size", type=int, default=320)
    p.add_argument("--batch-size", type=int, default=16)
    p.add_argument("--persistent", action="store_true")
    p.add_argument("--io-ms", type=float, default=0.0)
    args = p.parse_args()
    torch.manual_seed(0)
    data = torchvision.datasets.FakeData(
        size=args.size, image_size=(3, 64, 64), num_classes=10, transform=torchvision.transforms.ToTensor()
    )
    loader = DataLoader(
        SlowReads(data, args.io_ms) if args.io_ms else data,
        batch_size=args.batch_size,
        num_workers=args.workers,
        persistent_workers=args.persistent and args.workers > 0,
    )
    device = torch.device("cuda" if torch.cuda.is_available() else "cpu")
    model = nn.Sequential(
        nn.Conv2d(3, 16, 3, padding=1),
        nn.ReLU(),
        nn.MaxPool2d(2),
        nn.Conv2d(16, 32, 3, padding=1),
        nn.ReLU(),
        nn.AdaptiveAvgPool2d(1),
        nn.Flatten(),
        nn.Linear(32, 10),
    ).to(device)
    opt = torch.optim.SGD(model.parameters(), lr=0.01)
    for epoch in range(args.epochs):
        total = 0.0
        for x, y in loader:
            x, y = x.to(device), y.to(device)
            loss = nn.functional.cross_entropy(model(x), y)
            opt.zero_grad()
            loss.backward()
            opt.step()
            total += loss.item()
        print(f"epoch {epoch}: loss {total:.3f}")


if __name__ == "__main__":
    main()
