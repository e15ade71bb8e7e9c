"""Training loops as frameworks run them, each step's time set by its own batch (tests/test_in_flight.py,
and on a GPU through scripts/gpu_check.sh). Nothing of pinprof in it.

    python tests/scripts/ahead_loops.py --loop accelerate|fetch-ahead|prefetcher|plain|timm|zipped|window
        [--batches 8] [--batch-size 4] [--unit-ms 15] [--matmuls 0] [--non-blocking] [--workers 0] [--eval]
        [--accumulate N]

Batch b carries k = b % 4 + 1 in every sample (``k``), so a step can read it: it sleeps k x
``--unit-ms`` on the host, or with ``--matmuls M`` runs k x M matmuls of 2048 x 2048 on the device
(then ``--unit-ms`` is 0 unless given). Loops:

- ``plain``: fetch, copy, step, as people write by hand;
- ``accelerate``: Hugging Face Accelerate's ``prepare()``d loader (it copies batch n, fetches n+1,
  then yields n), ``accelerator.backward``;
- ``fetch-ahead``: the same order written by hand;
- ``prefetcher``: a device prefetcher (batch n+1 fetched and copied, on a side stream on CUDA, before
  step n), as people write for CUDA;
- ``timm``: timm's ``PrefetchLoader`` on a CUDA device (its default in timm's train.py);
- ``window``: the batches of an accumulation window (``--accumulate N``) fetched first, then each
  copied and trained on in turn, then one step (as Hugging Face's ``Trainer`` does);
- ``zipped``: the plain loop over two loaders zipped, the batch's and one of its k alone (a second
  scenario, ``Targets``), both copied before the step they share.

With ``--accumulate N`` every loop steps its optimizer once every N batches (gradient accumulation:
Accelerate's ``accumulate()``, timm's train.py's own count, the others' a count of their own);
``--skip B,...`` skips the step of those batches in the loops written by hand (plain, fetch-ahead,
prefetcher), as GradScaler skips a step whose gradients overflowed (common in a run's first steps,
while it finds its scale); ``--clip`` clips the gradients' norm before each step, as most training
scripts do; ``--pass-over B,...`` makes the plain loop drop those batches before their copy;
``--by-hand`` updates the weights by hand after the backward (no ``torch.optim`` optimizer, as
tutorials write SGD); ``--no-copy`` leaves the plain loop's batch where the loader made it (a model
on the host, no ``.to()``); ``--backwards N`` backpropagates each batch's loss N times before its step (two losses, or a batch in
chunks); ``--optimizers 2`` (loops written by hand) steps a first optimizer after the backward, then
backpropagates a second loss of the same batch and steps the second (a GAN's two players): each
player's work is half the batch's k units, so a row that lost the second player's, or took its
neighbour's, is off by at least half a unit; with ``--same-optimizer`` one optimizer steps twice (two
updates on one batch, as PPO's epochs over a rollout make).

With ``--eval`` each loop evaluates instead: the step is the forward under ``torch.no_grad()``, with
no backward and no optimizer step (rows then end at a ``next()``).
"""

from __future__ import annotations

import argparse
import time
from collections.abc import Iterator
from typing import Any

import torch
from torch import nn
from torch.utils.data import DataLoader, Dataset

FEATURES = 32


class Items(Dataset[dict[str, torch.Tensor]]):
    """``n`` samples of random features, each with its batch's k (batches taken in order)."""

    def __init__(self, n: int, batch_size: int) -> None:
        self.n, self.batch_size = n, batch_size
        self.x = torch.rand(n, FEATURES, generator=torch.Generator().manual_seed(0))

    def __len__(self) -> int:
        return self.n

    def __getitem__(self, i: int) -> dict[str, torch.Tensor]:
        return {"x": self.x[i].clone(), "k": torch.tensor((i // self.batch_size) % 4 + 1)}


class Pairs(Dataset[tuple[torch.Tensor, torch.Tensor]]):
    """The same samples as (features, k) pairs: timm's loader takes (input, target)."""

    def __init__(self, items: Items) -> None:
        self.items = items

    def __len__(self) -> int:
        return len(self.items)

    def __getitem__(self, i: int) -> tuple[torch.Tensor, torch.Tensor]:
        d = self.items[i]
        return d["x"].view(1, FEATURES, 1), d["k"]  # an image's shape: timm normalizes by channel


class Targets(Dataset[torch.Tensor]):
    """Each sample's k alone: the second loader of ``--loop zipped``."""

    def __init__(self, items: Items) -> None:
        self.items = items

    def __len__(self) -> int:
        return len(self.items)

    def __getitem__(self, i: int) -> torch.Tensor:
        return self.items[i]["k"]


def main() -> None:
    p = argparse.ArgumentParser()
    p.add_argument(
        "--loop",
        choices=["plain", "accelerate", "fetch-ahead", "prefetcher", "timm", "zipped", "window"],
        required=True,
    )
    p.add_argument("--batches", type=int, default=8)
    p.add_argument("--batch-size", type=int, default=4)
    p.add_argument("--unit-ms", type=float, default=None)
    p.add_argument("--matmuls", type=int, default=0, help="matmuls of 2048x2048 per unit of k, on the device")
    p.add_argument("--non-blocking", action="store_true")
    p.add_argument("--workers", type=int, default=0)
    p.add_argument("--eval", action="store_true", help="the forward alone: no backward, no optimizer step")
    p.add_argument("--accumulate", type=int, default=1, help="an optimizer step every N batches")
    p.add_argument("--skip", default="", help="batches whose optimizer step is skipped, comma-separated")
    p.add_argument("--clip", action="store_true", help="clip_grad_norm_ before each optimizer step")
    p.add_argument("--pass-over", default="", help="plain: batches passed over before their copy, comma-separated")
    p.add_argument("--backwards", type=int, default=1, help="backward calls a batch (two losses, or chunks)")
    p.add_argument("--by-hand", action="store_true", help="the update written by hand, no torch.optim optimizer")
    p.add_argument("--no-copy", action="store_true", help="plain: no .to() of the batch (a model on the host)")
    p.add_argument("--same-optimizer", action="store_true", help="--optimizers 2: one optimizer steps twice")
    p.add_argument(
        "--optimizers",
        type=int,
        default=1,
        choices=(1, 2),
        help="2: a first optimizer steps after the backward, "
        "then a second loss is backpropagated and a second optimizer steps (a GAN's two players)",
    )
    args = p.parse_args()
    unit_ms = args.unit_ms if args.unit_ms is not None else (0.0 if args.matmuls else 15.0)
    dev = torch.device("cuda" if torch.cuda.is_available() else "cpu")
    items = Items(args.batches * args.batch_size, args.batch_size)
    pin = dev.type == "cuda"
    model = nn.Linear(FEATURES, 1).to(dev)
    opt = torch.optim.SGD(model.parameters(), lr=0.01)
    first = torch.optim.SGD(model.parameters(), lr=0.01)  # --optimizers 2
    weight = torch.rand(2048, 2048, device=dev) / 1024 if args.matmuls else None  # products stay near 1

    def work(k: int, x: torch.Tensor, share: float = 1.0) -> torch.Tensor:
        if unit_ms:
            time.sleep(share * k * unit_ms / 1e3)
        loss = model(x).sum()
        if weight is not None:
            y = weight
            for _ in range(k * args.matmuls):
                y = y @ weight
            loss = loss + y[0, 0] * 0
        return loss

    skipped = {int(b) for b in args.skip.split(",") if b}
    done = [0]  # batches stepped on so far

    def backward(loss: torch.Tensor, by: Any = None) -> None:
        """``--backwards N``: N backward calls on the batch's loss, as a step with N losses makes."""
        call = by or torch.Tensor.backward
        for j in range(args.backwards):
            call(loss, retain_graph=j < args.backwards - 1)  # the graph kept for the calls after

    def step(batch: dict[str, torch.Tensor]) -> None:
        if args.eval:
            with torch.no_grad():
                work(int(batch["k"][0]), batch["x"]).item()
            return
        share = 1.0 / args.optimizers  # --optimizers 2: each player does half the batch's work
        loss = work(int(batch["k"][0]), batch["x"], share)
        backward(loss)
        if args.optimizers == 2:
            (opt if args.same_optimizer else first).step()
            (opt if args.same_optimizer else first).zero_grad()
            work(int(batch["k"][0]), batch["x"], share).backward()
        done[0] += 1
        if args.by_hand:  # SGD as tutorials write it: nothing of torch.optim
            with torch.no_grad():
                for w in model.parameters():
                    if w.grad is not None:
                        w.sub_(0.01 * w.grad)
                        w.grad = None
            return
        if done[0] % args.accumulate == 0 and done[0] - 1 not in skipped:
            if args.clip:
                nn.utils.clip_grad_norm_(model.parameters(), 1.0)
            opt.step()
            opt.zero_grad()

    def to_dev(batch: dict[str, torch.Tensor]) -> dict[str, torch.Tensor]:
        return {key: v.to(dev, non_blocking=args.non_blocking) for key, v in batch.items()}

    loader: Any = DataLoader(items, batch_size=args.batch_size, num_workers=args.workers, pin_memory=pin)
    steps = 0
    passed = {int(b) for b in args.pass_over.split(",") if b}
    if args.loop == "plain":
        for b, batch in enumerate(loader):
            if b in passed:  # a bad batch, dropped before it is copied
                continue
            step(batch if args.no_copy else to_dev(batch))
            steps += 1
    elif args.loop == "accelerate":
        from accelerate import Accelerator
        from accelerate.utils import DataLoaderConfiguration

        acc = Accelerator(
            cpu=dev.type == "cpu",
            dataloader_config=DataLoaderConfiguration(non_blocking=args.non_blocking),
            gradient_accumulation_steps=args.accumulate,
        )
        model, opt, loader = acc.prepare(model, opt, loader)
        for batch in loader:
            if args.eval:
                step(batch)
            else:
                with acc.accumulate(model):  # the prepared optimizer steps once every N batches
                    loss = work(int(batch["k"][0]), batch["x"])
                    backward(loss, acc.backward)
                    opt.step()
                    opt.zero_grad()
            steps += 1
    elif args.loop == "fetch-ahead":
        it = iter(loader)
        cur: dict[str, torch.Tensor] | None = next(it)
        while cur is not None:
            cur = to_dev(cur)
            nxt = next(it, None)
            step(cur)
            steps += 1
            cur = nxt
    elif args.loop == "window":
        it = iter(loader)
        while window := [b for b in (next(it, None) for _ in range(args.accumulate)) if b is not None]:
            for batch in window:
                step(to_dev(batch))
                steps += 1
    elif args.loop == "zipped":
        targets = DataLoader(Targets(items), batch_size=args.batch_size, num_workers=args.workers, pin_memory=pin)
        for batch, k in zip(loader, targets):
            batch = to_dev(batch)
            k.to(dev, non_blocking=args.non_blocking)
            step(batch)
            steps += 1
    elif args.loop == "prefetcher":
        for batch in prefetched(loader, to_dev, dev):
            step(batch)
            steps += 1
    else:
        from timm.data.loader import PrefetchLoader

        pairs: Any = DataLoader(Pairs(items), batch_size=args.batch_size, num_workers=args.workers, pin_memory=pin)
        for x, k in PrefetchLoader(pairs, mean=(0.0,), std=(1.0,), channels=1, device=dev):
            if args.eval:
                step({"x": x.view(x.shape[0], FEATURES), "k": k})
            else:
                loss = work(int(k[0]), x.view(x.shape[0], FEATURES))
                backward(loss)
                if (steps + 1) % args.accumulate == 0:
                    opt.step()
                    opt.zero_grad()
            steps += 1
    if dev.type == "cuda":
        torch.cuda.synchronize()
    time.sleep(unit_ms / 1e3)  # work after the last step (an evaluation, a checkpoint): no batch's
    print(f"{args.loop}: {steps} steps")


def prefetched(loader: Any, to_dev: Any, dev: torch.device) -> Iterator[dict[str, torch.Tensor]]:
    """Batch n+1 fetched and copied (on a side stream on CUDA) before batch n is handed out."""
    side = torch.cuda.Stream(dev) if dev.type == "cuda" else None
    it = iter(loader)

    def ahead() -> dict[str, torch.Tensor] | None:
        batch = next(it, None)
        if batch is None:
            return None
        if side is None:
            return to_dev(batch)
        with torch.cuda.stream(side):
            return to_dev(batch)

    nxt = ahead()
    while nxt is not None:
        if side is not None:
            torch.cuda.current_stream(dev).wait_stream(side)
        cur, nxt = nxt, ahead()
        yield cur


if __name__ == "__main__":
    main()
