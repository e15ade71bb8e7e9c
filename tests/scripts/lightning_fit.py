"""A tiny Lightning ``Trainer.fit`` (tests/test_profile.py). Nothing of pinprof in it.

python tests/scripts/lightning_fit.py [--steps 6] [--batch-size 8] [--iterable]
"""

from __future__ import annotations

import argparse
from collections.abc import Iterator
from typing import Any

import lightning as L
import torch
from torch import nn
from torch.utils.data import DataLoader, IterableDataset, TensorDataset


class Tiny(L.LightningModule):
    def __init__(self, raise_at: int = -1) -> None:
        super().__init__()
        self.net = nn.Sequential(nn.Flatten(), nn.Linear(3 * 8 * 8, 10))
        self.raise_at = raise_at

    def training_step(self, batch: tuple[torch.Tensor, torch.Tensor], batch_idx: int) -> torch.Tensor:
        if batch_idx == self.raise_at:
            raise ValueError(f"the model's own error at batch {batch_idx}")
        x, y = batch
        return nn.functional.cross_entropy(self.net(x), y)

    def configure_optimizers(self) -> torch.optim.Optimizer:
        return torch.optim.SGD(self.parameters(), lr=0.1)


class Stream(IterableDataset[tuple[torch.Tensor, torch.Tensor]]):
    """A dataset's samples in order, with no ``__len__``: Lightning's fetcher then runs one batch ahead."""

    def __init__(self, data: TensorDataset) -> None:
        self.data = data

    def __iter__(self) -> Iterator[tuple[torch.Tensor, torch.Tensor]]:
        return (self.data[i] for i in range(len(self.data)))


def main() -> None:
    p = argparse.ArgumentParser()
    p.add_argument("--steps", type=int, default=6)
    p.add_argument("--batch-size", type=int, default=8)
    p.add_argument("--raise-at", type=int, default=-1)
    p.add_argument("--callback-out", default=None)
    p.add_argument("--iterable", action="store_true", help="the same samples from a dataset of no length")
    args = p.parse_args()
    callbacks: list[Any] = []
    if args.callback_out:
        from profiler import PinprofCallback

        callbacks.append(PinprofCallback(out=args.callback_out, plots=False))
    gen = torch.Generator().manual_seed(0)
    data = TensorDataset(torch.rand(200, 3, 8, 8, generator=gen), torch.randint(0, 10, (200,), generator=gen))
    loader = DataLoader(Stream(data) if args.iterable else data, batch_size=args.batch_size, num_workers=0)
    trainer = L.Trainer(
        max_steps=args.steps,
        logger=False,
        enable_checkpointing=False,
        enable_progress_bar=False,
        enable_model_summary=False,
        num_sanity_val_steps=0,
        callbacks=callbacks,
    )
    trainer.fit(Tiny(args.raise_at), loader)
    print(f"fit {trainer.global_step} steps")


if __name__ == "__main__":
    main()
