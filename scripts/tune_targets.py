#!/usr/bin/env python3
"""Four training scripts as people write them, for ``pinprof tune`` to work on (``scripts/tune_check.py``):
nothing of pinprof in them unless ``--prefetcher`` asks for ``profiler.prefetch``, the fix tune may name.

    python scripts/tune_targets.py --case naive|better|resnet|loader [--steps 200] [--warm 20]
        [--workers N] [--pin-memory 0|1] [--non-blocking 0|1] [--prefetch-factor N] [--prefetcher]
        [--device cuda]

- ``naive``: the benchmark people quote: CIFAR-10-shaped images (3x32x32 uint8, made float in
  ``__getitem__``), batch 64, no workers, blocking ``.cuda()``, a small CNN.
- ``better``: the "better" one: batch 1024, 6 workers, ``pin_memory`` and ``non_blocking``, 100 ms of
  CPU work a batch (a busy loop on the main thread), the same CNN.
- ``resnet``: torchvision's resnet50 under bf16 autocast, batch 128 of 3x224x224 uint8 images from
  8 pinned workers, ``non_blocking`` copies issued after the step's ``loss.item()``: the copy is
  exposed, nothing of the GPU runs under it.
- ``loader``: a dataset that decodes each item on the CPU (2 ms of sleep, as a slow read, and a
  3x64x64 image made from a seeded generator), batch 32, no workers, the small CNN: loader bound.

Each case's defaults are the script as written; the flags change one setting, as a person applying
tune's winner would. The script prints ``STEP_MS <mean>``: the wall time of its last ``--steps``
steps (the GPU synchronized at both ends of that window, not inside it) divided by their number.
"""

from __future__ import annotations

import argparse
import time
from collections.abc import Iterable, Iterator
from typing import Any

import torch
from torch import nn
from torch.utils.data import DataLoader, Dataset

from profiler.capture.trial import queued

CASES: dict[str, dict[str, Any]] = {
    "naive": {"batch": 64, "workers": 0, "pin": False, "nb": False, "items": 50_000, "shape": (3, 32, 32)},
    "better": {"batch": 1024, "workers": 6, "pin": True, "nb": True, "items": 50_000, "shape": (3, 32, 32)},
    "resnet": {"batch": 128, "workers": 8, "pin": True, "nb": True, "items": 50_000, "shape": (3, 224, 224)},
    "loader": {"batch": 32, "workers": 0, "pin": False, "nb": False, "items": 50_000, "shape": (3, 64, 64)},
}


# Every case has CIFAR-10's 50,000 items a epoch: an epoch's start (the workers' queue refilled) is
# then rare, as in training. The loader case had 128 batches an epoch at first: by hand 16 workers ran
# 15.0x where tune, measuring inside the first epoch, said 19.0x (18.3-19.8). resnet's 224x224 images
# repeat after 2,048 (0.3 GB in memory, not 7.5).
UNIQUE = {"resnet": 2_048}


class Images(Dataset[tuple[torch.Tensor, int]]):
    """uint8 images held in memory (``unique`` of them, repeated), made float in ``__getitem__`` as a
    transform would."""

    def __init__(self, n: int, shape: tuple[int, ...], unique: int | None = None) -> None:
        g = torch.Generator().manual_seed(0)
        self.n = n
        self.images = torch.randint(0, 256, (min(n, unique or n), *shape), dtype=torch.uint8, generator=g)
        self.labels = torch.randint(0, 10, (n,), generator=g)

    def __len__(self) -> int:
        return self.n

    def __getitem__(self, i: int) -> tuple[torch.Tensor, int]:
        return self.images[i % len(self.images)].float().div_(255), int(self.labels[i])


class Decoded(Dataset[tuple[torch.Tensor, int]]):
    """Items read and decoded one by one: a 2 ms wait, then an image from a generator seeded by ``i``."""

    def __init__(self, n: int, shape: tuple[int, ...]) -> None:
        self.n, self.shape = n, shape

    def __len__(self) -> int:
        return self.n

    def __getitem__(self, i: int) -> tuple[torch.Tensor, int]:
        time.sleep(0.002)
        g = torch.Generator().manual_seed(i)
        return torch.rand(self.shape, generator=g), i % 10


def small_cnn() -> nn.Module:
    return nn.Sequential(
        nn.Conv2d(3, 32, 3, padding=1),
        nn.ReLU(),
        nn.Conv2d(32, 64, 3, padding=1, stride=2),
        nn.ReLU(),
        nn.AdaptiveAvgPool2d(1),
        nn.Flatten(),
        nn.Linear(64, 10),
    )


def busy(ms: float) -> None:
    """CPU work on the main thread: a busy loop, as augmentation or logging in the loop would be."""
    end = time.perf_counter() + ms / 1e3
    while time.perf_counter() < end:
        pass


def forever(loader: Iterable[Any]) -> Iterator[Any]:
    """Epoch after epoch."""
    while True:
        yield from loader


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--case", choices=sorted(CASES), required=True)
    ap.add_argument("--steps", type=int, default=200, help="steps timed (default 200)")
    ap.add_argument(
        "--warm", type=int, default=20, help="steps before the timed ones, beside the loader's queue (default 20)"
    )
    ap.add_argument("--workers", type=int, default=None)
    ap.add_argument("--pin-memory", type=int, choices=(0, 1), default=None)
    ap.add_argument("--non-blocking", type=int, choices=(0, 1), default=None)
    ap.add_argument("--prefetch-factor", type=int, default=None)
    ap.add_argument("--prefetcher", action="store_true", help="for batch in profiler.prefetch(loader, device)")
    ap.add_argument("--device", default="cuda")
    args = ap.parse_args()
    case = CASES[args.case]
    workers = case["workers"] if args.workers is None else args.workers
    pin = case["pin"] if args.pin_memory is None else bool(args.pin_memory)
    nb = case["nb"] if args.non_blocking is None else bool(args.non_blocking)
    device = torch.device(args.device)
    if args.case == "loader":
        data: Dataset[tuple[torch.Tensor, int]] = Decoded(case["items"], case["shape"])
    else:
        data = Images(case["items"], case["shape"], UNIQUE.get(args.case))
    extra: dict[str, Any] = {}
    if workers > 0:
        extra["persistent_workers"] = True
        if args.prefetch_factor is not None:
            extra["prefetch_factor"] = args.prefetch_factor
    loader = DataLoader(data, batch_size=case["batch"], shuffle=True, num_workers=workers, pin_memory=pin, **extra)
    if args.case == "resnet":
        import torchvision

        model: nn.Module = torchvision.models.resnet50(num_classes=10)
    else:
        model = small_cnn()
    model = model.to(device)
    opt = torch.optim.SGD(model.parameters(), lr=0.01, momentum=0.9)
    batches: Iterable[Any] = forever(loader)
    if args.prefetcher:
        import profiler

        batches = profiler.prefetch(forever(loader), device)
    cuda = device.type == "cuda"
    # The batches the workers queue while the first steps are slow are read faster than the workers
    # make them: they are warm-up, as pinprof tune's trials count them.
    warm = args.warm + queued({"num_workers": loader.num_workers, "prefetch_factor": loader.prefetch_factor})
    started = 0.0
    for step, (x, y) in enumerate(batches):
        if step == warm:
            if cuda:
                torch.cuda.synchronize(device)
            started = time.perf_counter()
        if step == warm + args.steps:
            break
        x, y = x.to(device, non_blocking=nb), torch.as_tensor(y).to(device, non_blocking=nb)
        if args.case == "better":
            busy(100.0)
        with torch.autocast(device.type, dtype=torch.bfloat16, enabled=args.case == "resnet"):
            loss = nn.functional.cross_entropy(model(x), y)
        opt.zero_grad(set_to_none=True)
        loss.backward()
        opt.step()
        loss.item()  # the step's end, as a loop that logs its loss waits for it
    if cuda:
        torch.cuda.synchronize(device)
    print(f"STEP_MS {(time.perf_counter() - started) * 1e3 / args.steps:.4f}")


if __name__ == "__main__":
    main()
