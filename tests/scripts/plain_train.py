"""A plain training script, as people write them: nothing of pinprof in it (tests/test_profile.py).

python tests/scripts/plain_train.py [--epochs 1] [--batch-size 16] [--workers 2] [--raise-at N]
"""

from __future__ import annotations

import argparse

import torch
from torch import nn
from torch.utils.data import DataLoader, TensorDataset


def main() -> None:
    p = argparse.ArgumentParser()
    p.add_argument("--epochs", type=int, default=1)
    p.add_argument("--batch-size", type=int, default=16)
    p.add_argument("--workers", type=int, default=2)
    p.add_argument("--raise-at", type=int, default=-1, help="raise a ValueError at this step")
    args = p.parse_args()
    device = torch.device("cuda" if torch.cuda.is_available() else "cpu")
    gen = torch.Generator().manual_seed(0)
    data = TensorDataset(torch.rand(100, 3, 8, 8, generator=gen), torch.randint(0, 10, (100,), generator=gen))
    loader = DataLoader(data, batch_size=args.batch_size, num_workers=args.workers, pin_memory=True)
    model = nn.Sequential(nn.Flatten(), nn.Linear(3 * 8 * 8, 10)).to(device)
    opt = torch.optim.SGD(model.parameters(), lr=0.1)
    step = 0
    for _ in range(args.epochs):
        for images, labels in loader:
            images, labels = images.to(device, non_blocking=True), labels.to(device, non_blocking=True)
            loss = nn.functional.cross_entropy(model(images), labels)
            opt.zero_grad()
            loss.backward()
            opt.step()
            if step == args.raise_at:
                raise ValueError(f"the script's own error at step {step}")
            step += 1
    print(f"trained {step} steps, last loss {loss.item():.3f}")


if __name__ == "__main__":
    main()
