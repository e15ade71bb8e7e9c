"""A tiny Lightning ``Trainer.fit`` (tests/test_profile.py). Nothing of pinprof in it.

python tests/scripts/lightning_fit.py [--steps 6] [--batch-size 8] [--iterable] [--unit-ms 0] [--val]
    [--accumulate N]

With ``--unit-ms U``, batch b's images carry k = b % 4 + 1 in their first value, and its training
step sleeps k x U ms: a step whose time is its own batch's (tests/test_in_flight.py).

With ``--val``, a validation loader (batches of 16) and Lightning's default sanity check: two
validation batches before the first training batch, the second left in flight (no ``StopIteration``).

With ``--accumulate N``, ``accumulate_grad_batches=N``: an optimizer step every N batches (``--steps``
counts optimizer steps, so N times as many batches run).

With ``--gan``, a GAN's training step by Lightning's manual optimization: a critic's loss backpropagated
(``manual_backward``) and its optimizer stepped, then the generator's; each player sleeps half of the
batch's k units (``--steps`` still counts batches).
"""

from __future__ import annotations

import argparse
import time
from collections.abc import Iterator
from typing import Any

import lightning as L
import torch
from torch import nn
from torch.utils.data import DataLoader, IterableDataset, TensorDataset


class Tiny(L.LightningModule):
    def __init__(self, raise_at: int = -1, unit_ms: float = 0.0, matmuls: int = 0) -> None:
        super().__init__()
        self.net = nn.Sequential(nn.Flatten(), nn.Linear(3 * 8 * 8, 10))
        self.raise_at, self.unit_ms, self.matmuls = raise_at, unit_ms, matmuls

    def training_step(self, batch: tuple[torch.Tensor, torch.Tensor], batch_idx: int) -> torch.Tensor:
        if batch_idx == self.raise_at:
            raise ValueError(f"the model's own error at batch {batch_idx}")
        x, y = batch
        k = int(x[0, 0, 0, 0]) if self.unit_ms or self.matmuls else 0
        if self.unit_ms:
            time.sleep(k * self.unit_ms / 1e3)
        loss = nn.functional.cross_entropy(self.net(x), y)
        if self.matmuls:  # k x M matmuls of 2048 x 2048 on the device: GPU work set by the batch
            w = torch.ones(2048, 2048, device=x.device) / 2048
            y2 = w
            for _ in range(k * self.matmuls):
                y2 = y2 @ w
            loss = loss + y2[0, 0] * 0
        return loss

    def validation_step(self, batch: tuple[torch.Tensor, torch.Tensor], batch_idx: int) -> None:
        x, y = batch
        self.log("val_loss", nn.functional.cross_entropy(self.net(x), y))

    def configure_optimizers(self) -> torch.optim.Optimizer:
        return torch.optim.SGD(self.parameters(), lr=0.1)


class Gan(Tiny):
    """Two players, each with its optimizer, stepped by hand (``automatic_optimization`` off): the
    critic's backward and step, then the generator's, each half the batch's k units."""

    def __init__(self, unit_ms: float) -> None:
        super().__init__(unit_ms=unit_ms)
        self.automatic_optimization = False
        self.critic = nn.Sequential(nn.Flatten(), nn.Linear(3 * 8 * 8, 1))

    def training_step(self, batch: tuple[torch.Tensor, torch.Tensor], batch_idx: int) -> None:  # type: ignore[override]
        x, _ = batch
        k = int(x[0, 0, 0, 0]) if self.unit_ms else 0
        optimizers = self.optimizers()
        assert isinstance(optimizers, list)  # the two of configure_optimizers
        generator, critic = optimizers
        for opt, net in ((critic, self.critic), (generator, self.net)):
            time.sleep(k * self.unit_ms / 2e3)
            opt.zero_grad()
            self.manual_backward(net(x).mean())
            opt.step()

    def configure_optimizers(self) -> list[torch.optim.Optimizer]:  # type: ignore[override]
        return [torch.optim.SGD(self.net.parameters(), lr=0.1), torch.optim.SGD(self.critic.parameters(), lr=0.1)]


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
    p.add_argument("--unit-ms", type=float, default=0.0, help="step of batch b sleeps (b %% 4 + 1) x this")
    p.add_argument("--val", action="store_true", help="a validation loader, with the default sanity check")
    p.add_argument("--matmuls", type=int, default=0, help="step of batch b runs (b %% 4 + 1) x this matmuls")
    p.add_argument("--accumulate", type=int, default=1, help="accumulate_grad_batches: an optimizer step every N")
    p.add_argument("--gan", action="store_true", help="two players stepped by hand (manual optimization)")
    args = p.parse_args()
    callbacks: list[Any] = []
    if args.callback_out:
        from profiler import PinprofCallback

        callbacks.append(PinprofCallback(out=args.callback_out, plots=False))
    gen = torch.Generator().manual_seed(0)
    images = torch.rand(200, 3, 8, 8, generator=gen)
    if args.unit_ms or args.matmuls:
        images[:, 0, 0, 0] = (torch.arange(200) // args.batch_size) % 4 + 1
    data = TensorDataset(images, torch.randint(0, 10, (200,), generator=gen))
    loader = DataLoader(Stream(data) if args.iterable else data, batch_size=args.batch_size, num_workers=0)
    trainer = L.Trainer(
        max_steps=2 * args.steps if args.gan else args.steps,  # a GAN's batch steps both optimizers
        logger=False,
        enable_checkpointing=False,
        enable_progress_bar=False,
        enable_model_summary=False,
        num_sanity_val_steps=2 if args.val else 0,
        accumulate_grad_batches=args.accumulate,
        callbacks=callbacks,
    )
    val = DataLoader(TensorDataset(images[:64], data.tensors[1][:64]), batch_size=16) if args.val else None
    model = Gan(args.unit_ms) if args.gan else Tiny(args.raise_at, args.unit_ms, args.matmuls)
    trainer.fit(model, loader, val)
    print(f"fit {trainer.global_step} steps")


if __name__ == "__main__":
    main()
