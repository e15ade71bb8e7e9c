#!/usr/bin/env python3
"""A real training step: torchvision's resnet50, bf16 autocast, SGD, pinned non_blocking copies and a
``loss.item()`` per step, fed by a 12-worker DataLoader. Nothing of pinprof in it: it is what
``pinprof profile`` is measured on (``scripts/bench_profile_overhead.py``, README). ``--model small
--image-size 96 --batch-size 128``: a short step instead, a four-layer CNN on 96x96 images, where
pinprof's cost per batch weighs most; ``--model resnet18 --image-size 96 --batch-size 128 --workers 6``:
a short step of many launches (about 375 kernels a step), where CUPTI's per-launch record weighs most.

The images are 64 random float32 tensors made once (never zeros) and served in turn as an epoch of
``--images`` samples, so the workers only collate, the step (not decoding) sets the pace, and no
epoch ends within a benchmark (an epoch's first batches wait for the workers to start over).

It prints the median of its own steps' host time after ``--warm`` steps (a step ends at its loss
read, so host time is the step's whole time): what ``scripts/bench_process_overhead.py`` compares;
and the median of its waits for a batch (the ``next()`` of the loader); and the mean step from wall
time after the warm-up. ``--log-every N`` reads the loss every N steps instead of each (the advice of
pinprof's "GPU waits for the host between steps" finding), where only that mean is a step's time.

    python scripts/resnet_train.py [--steps 60] [--batch-size 256] [--workers 12] [--images 100000] [--warm 20]
                                   [--model resnet50|resnet18|small] [--image-size 224] [--log-every 1]
"""

from __future__ import annotations

import argparse
import statistics
import time
from collections.abc import Callable, Iterator
from typing import Any

import torch
import torchvision
from torch import nn
from torch.utils.data import DataLoader, Dataset

STORED = 64


class Images(Dataset[tuple[torch.Tensor, int]]):
    """``size`` samples of 64 stored random 3 x side x side images, in turn, with fixed random labels."""

    def __init__(self, size: int, side: int = 224) -> None:
        gen = torch.Generator().manual_seed(0)
        self.size = size
        self.images = torch.rand(STORED, 3, side, side, generator=gen)
        self.labels = torch.randint(0, 1000, (size,), generator=gen).tolist()

    def __len__(self) -> int:
        return self.size

    def __getitem__(self, i: int) -> tuple[torch.Tensor, int]:
        return self.images[i % STORED], self.labels[i]


def small_cnn() -> nn.Module:
    """Four strided 3x3 convolutions (64 to 512 channels), pooled, and a linear head of 1000 classes."""
    layers: list[nn.Module] = []
    width = 3
    for out in (64, 128, 256, 512):
        layers += [nn.Conv2d(width, out, 3, stride=2, padding=1), nn.BatchNorm2d(out), nn.ReLU(inplace=True)]
        width = out
    return nn.Sequential(*layers, nn.AdaptiveAvgPool2d(1), nn.Flatten(), nn.Linear(width, 1000))


def build(
    batch_size: int,
    workers: int,
    images: int,
    worker_init_fn: Callable[[int], None] | None = None,
    model_name: str = "resnet50",
    side: int = 224,
) -> tuple[nn.Module, torch.optim.Optimizer, DataLoader[Any]]:
    data = Images(images, side)
    loader = DataLoader(
        data,
        batch_size=batch_size,
        num_workers=workers,
        pin_memory=True,
        drop_last=True,
        persistent_workers=workers > 0,
        worker_init_fn=worker_init_fn,
    )
    net = {"resnet50": torchvision.models.resnet50, "resnet18": torchvision.models.resnet18}.get(
        model_name, small_cnn
    )()
    model = net.cuda().to(memory_format=torch.channels_last)
    opt = torch.optim.SGD(model.parameters(), lr=0.01, momentum=0.9)
    return model, opt, loader


def batches(loader: DataLoader[Any]) -> Iterator[Any]:
    """The loader's batches, epoch after epoch."""
    while True:
        yield from loader


def step(
    model: nn.Module, opt: torch.optim.Optimizer, images: torch.Tensor, labels: torch.Tensor, read: bool = True
) -> float:
    images = images.cuda(non_blocking=True).to(memory_format=torch.channels_last)
    labels = labels.cuda(non_blocking=True)
    with torch.autocast("cuda", dtype=torch.bfloat16):
        loss = nn.functional.cross_entropy(model(images), labels)
    opt.zero_grad(set_to_none=True)
    loss.backward()
    opt.step()
    # the loss logged each step: one sync per step, as training loops have (``--log-every``: fewer)
    return float(loss.item()) if read else float("nan")


def main() -> None:
    p = argparse.ArgumentParser()
    p.add_argument("--steps", type=int, default=60)
    p.add_argument("--batch-size", type=int, default=256)
    p.add_argument("--workers", type=int, default=12)
    p.add_argument("--images", type=int, default=100_000)
    p.add_argument("--warm", type=int, default=20, help="steps left out of the printed median (default 20)")
    p.add_argument("--model", choices=("resnet50", "resnet18", "small"), default="resnet50")
    p.add_argument("--image-size", type=int, default=224, help="side of the square images (default 224)")
    p.add_argument(
        "--log-every",
        type=int,
        default=1,
        help="read the loss every N steps (default 1: each step); --steps and --warm must be multiples of N",
    )
    args = p.parse_args()
    n = args.log_every
    if n < 1 or args.steps % n or args.warm % n:
        p.error(f"--log-every {n}: give N >= 1 that divides --steps ({args.steps}) and --warm ({args.warm})")
    model, opt, loader = build(args.batch_size, args.workers, args.images, None, args.model, args.image_size)
    it = batches(loader)
    times: list[float] = []
    waits: list[float] = []  # the step's wait for its batch: what a slower input pipeline shows in
    warm_at = 0.0
    for i in range(args.steps):
        if i == args.warm:
            warm_at = time.perf_counter()  # after a loss read: every step before it has run
        t0 = time.perf_counter()
        images, labels = next(it)
        t1 = time.perf_counter()
        loss = step(model, opt, images, labels, read=(i + 1) % n == 0)
        times.append((time.perf_counter() - t0) * 1e3)
        waits.append((t1 - t0) * 1e3)
    end = time.perf_counter()  # the last step read its loss: all of its work has run
    print(f"{args.steps} steps, last loss {loss:.3f}")
    if len(times) > args.warm:
        k = len(times) - args.warm
        if n == 1:  # a step's host time is its whole time only where each step reads its loss
            print(f"steady step ms (median of {k}): {statistics.median(times[args.warm :]):.3f}")
        print(f"steady wait ms (median of {k}): {statistics.median(waits[args.warm :]):.3f}")
        print(f"steady mean step ms ({k} steps, loss read every {n}): {(end - warm_at) / k * 1e3:.3f}")


if __name__ == "__main__":
    main()
