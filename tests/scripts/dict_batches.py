"""A detection-style training script as people write it, nothing of pinprof in it: dict batches
``{"image": uint8 NHWC, "label": int64, "meta": {"boxes": float32}}``, a DataLoader with workers, each
leaf sent with ``.to(device, non_blocking=True)``, a small conv net. ``tests/test_gpu_hidden_copies.py``
profiles it; run it alone with ``python tests/scripts/dict_batches.py``.

    python tests/scripts/dict_batches.py [--layout view|dense] [--no-pin] [--steps 80] [--workers 4]

``--layout view``: the collate stacks RGBA images and slices the alpha channel off, so the batch's
image is a non-dense view of its RGBA parent, and its boxes a transposed view; ``dense``: the same
collate with ``.contiguous()`` on each, the change pinprof suggests for the view. ``--no-pin``: the
loader's ``pin_memory`` off (the batch stays in pageable memory).
"""

from __future__ import annotations

import argparse
import time
from typing import Any

import torch
from torch import nn
from torch.utils.data import DataLoader, Dataset


class Rgba(Dataset):  # type: ignore[type-arg]
    """``n`` RGBA images (uint8, HWC) with a label and eight boxes each, made once (the workers only
    index them: the loader is not what this script is about)."""

    def __init__(self, n: int, size: int) -> None:
        g = torch.Generator().manual_seed(0)
        self.images = torch.randint(0, 256, (16, size, size, 4), dtype=torch.uint8, generator=g)
        self.boxes = torch.rand(16, 4, 8, generator=g)
        self.n = n

    def __len__(self) -> int:
        return self.n

    def __getitem__(self, i: int) -> tuple[torch.Tensor, int, torch.Tensor]:
        return self.images[i % 16], i % 10, self.boxes[i % 16]


def collate(dense: bool) -> Any:
    def fn(items: list[tuple[torch.Tensor, int, torch.Tensor]]) -> dict[str, Any]:
        image = torch.stack([im for im, _, _ in items])[..., :3]  # RGB: the alpha channel dropped
        boxes = torch.stack([b for _, _, b in items]).transpose(1, 2)  # (batch, 8 boxes, 4 coordinates)
        if dense:
            image, boxes = image.contiguous(), boxes.contiguous()
        label = torch.tensor([y for _, y, _ in items])
        return {"image": image, "label": label, "meta": {"boxes": boxes}}

    return fn


def main() -> None:
    p = argparse.ArgumentParser()
    p.add_argument("--layout", choices=("view", "dense"), default="view")
    p.add_argument("--no-pin", action="store_true")
    p.add_argument("--steps", type=int, default=80)
    p.add_argument("--warm", type=int, default=10, help="steps left out of the script's own mean")
    p.add_argument("--workers", type=int, default=4)
    p.add_argument("--batch-size", type=int, default=64)
    p.add_argument("--size", type=int, default=224)
    args = p.parse_args()
    torch.manual_seed(0)
    device = torch.device("cuda" if torch.cuda.is_available() else "cpu")
    loader = DataLoader(
        Rgba(args.steps * args.batch_size, args.size),
        batch_size=args.batch_size,
        num_workers=args.workers,
        collate_fn=collate(args.layout == "dense"),
        pin_memory=not args.no_pin and device.type == "cuda",
        persistent_workers=args.workers > 0,
    )
    model = nn.Sequential(
        nn.Conv2d(3, 32, 3, stride=2, padding=1),
        nn.ReLU(),
        nn.Conv2d(32, 64, 3, stride=2, padding=1),
        nn.ReLU(),
        nn.AdaptiveAvgPool2d(1),
        nn.Flatten(),
        nn.Linear(64, 10),
    ).to(device)
    head = nn.Linear(4, 10).to(device)
    opt = torch.optim.SGD([*model.parameters(), *head.parameters()], lr=0.01)
    times: list[float] = []
    t = time.perf_counter()
    for batch in loader:
        image = batch["image"].to(device, non_blocking=True)
        label = batch["label"].to(device, non_blocking=True)
        boxes = batch["meta"]["boxes"].to(device, non_blocking=True)
        x = image.permute(0, 3, 1, 2).float().div_(255)
        loss = nn.functional.cross_entropy(model(x) + head(boxes).mean(1), label)
        opt.zero_grad()
        loss.backward()
        opt.step()
        loss.item()
        now = time.perf_counter()
        times.append(now - t)
        t = now
    steady = sorted(times[args.warm :]) or [float("nan")]
    print(f"steady mean {1e3 * sum(steady) / len(steady):.3f} ms, median {1e3 * steady[len(steady) // 2]:.3f} ms")


if __name__ == "__main__":
    main()
