"""The data a scenario loads: a CIFAR-10-shaped synthetic default, torchvision's CIFAR10, ImageFolder."""

from __future__ import annotations

from pathlib import Path
from typing import Any, Literal

import numpy as np
import torch
from PIL import Image
from torch.utils.data import Dataset

from profiler.errors import DatasetError

DatasetName = Literal["synthetic", "cifar10", "imagefolder"]
DATASETS: tuple[str, ...] = ("synthetic", "cifar10", "imagefolder")

# Above this many bytes the synthetic images are made per item from a per-index seed instead of held
# in memory: 50,000 CIFAR images are 150 MB, 50,000 224x224 ones would be 7.5 GB.
_PREGENERATE_LIMIT = 1 << 30


class SyntheticImages(Dataset[tuple[torch.Tensor, int]]):
    """CIFAR-10-shaped random uint8 images with labels, decoded the way torchvision's CIFAR10 is.

    Each item goes through ``PIL.Image.fromarray`` and ``ToTensor``'s steps (``to_tensor``) as
    ``CIFAR10.__getitem__`` does, so the per-item CPU cost is realistic; the pixels are deterministic for
    a given seed. Items are float32 tensors of shape (3, image_size, image_size) in [0, 1], and an int
    label.
    """

    def __init__(self, size: int = 50_000, image_size: int = 32, classes: int = 10, seed: int = 0) -> None:
        if size <= 0 or image_size <= 0 or classes <= 0:
            raise DatasetError(f"size={size}, image_size={image_size}, classes={classes}: all must be positive")
        self.size, self.image_size, self.seed = size, image_size, seed
        rng = np.random.default_rng(seed)
        self.targets = rng.integers(0, classes, size=size).tolist()
        shape = (size, image_size, image_size, 3)
        nbytes = int(np.prod(shape))
        self.data = rng.integers(0, 256, size=shape, dtype=np.uint8) if nbytes <= _PREGENERATE_LIMIT else None

    def __len__(self) -> int:
        return self.size

    def __getitem__(self, index: int) -> tuple[torch.Tensor, int]:
        if self.data is not None:
            img = self.data[index]
        else:
            side = self.image_size
            img = np.random.default_rng((self.seed, index)).integers(0, 256, (side, side, 3), dtype=np.uint8)
        return to_tensor(Image.fromarray(img)), self.targets[index]


def to_tensor(pic: Image.Image) -> torch.Tensor:
    """An RGB ``pic`` as torchvision's ``ToTensor`` makes it, step for step (a copy out of the image, HWC
    to CHW made contiguous, float in [0, 1]): ``import torchvision`` imports its ops and, through them,
    ``torch._dynamo``, about 2 s of every ``pinprof run``'s start on the CPU machine (reports/README.md),
    for this alone."""
    img = torch.from_numpy(np.array(pic, np.uint8, copy=True))
    img = img.view(pic.size[1], pic.size[0], len(pic.getbands())).permute((2, 0, 1)).contiguous()
    return img.to(dtype=torch.get_default_dtype()).div(255)


def build(
    name: str,
    data_root: str | None = None,
    *,
    size: int = 50_000,
    image_size: int | None = None,
    download: bool = False,
) -> Dataset[Any]:
    """Build a dataset by name; ``DatasetError`` names the bad value and the fix."""
    if name == "synthetic":
        return SyntheticImages(size=size, image_size=image_size or 32)
    if name not in DATASETS:
        raise DatasetError(f"unknown dataset {name!r}; choose from {', '.join(DATASETS)}")
    if not data_root:
        raise DatasetError(f"--dataset {name} needs --data-root PATH")
    root = Path(data_root)
    if not root.is_dir() and not (name == "cifar10" and download):
        raise DatasetError(f"--data-root {data_root!r} is not a folder")
    from torchvision import datasets, transforms

    if name == "cifar10":
        try:
            return datasets.CIFAR10(str(root), train=True, download=download, transform=transforms.ToTensor())
        except RuntimeError as err:
            raise DatasetError(
                f"--data-root {data_root!r} holds no CIFAR-10 (cifar-10-batches-py): {err} "
                "Pass --download to fetch it, or point at the folder that holds it"
            ) from err
    side = image_size or 224
    tf = transforms.Compose([transforms.Resize(side * 8 // 7), transforms.CenterCrop(side), transforms.ToTensor()])
    try:
        return datasets.ImageFolder(str(root), transform=tf)
    except (FileNotFoundError, RuntimeError) as err:
        raise DatasetError(f"--data-root {data_root!r}: {err}") from err
