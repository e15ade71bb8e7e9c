"""Sizes ``pinprof run`` can serve on this machine, checked before anything is allocated: a value past
them would run the machine out of memory (or make no batch at all) instead of profiling."""

from __future__ import annotations

import os

from profiler.drivers.options import RunOptions
from profiler.errors import UsageError
from profiler.units import format_size

# ImageNet's training set is 1.28 M images: ten million is past any real dataset a run stands in for,
# and its labels alone (kept as Python ints) are about 0.3 GB.
MAX_DATASET_SIZE = 10_000_000
MAX_IMAGE_SIZE = 4096  # a 4096x4096 RGB float32 item is 201 MB
CHANNELS, ITEM_BYTES = 3, 4  # the synthetic items: RGB float32, as torchvision's ToTensor gives


def host_memory() -> int | None:
    """Physical memory of this machine in bytes, or None where the OS does not say."""
    try:
        return os.sysconf("SC_PHYS_PAGES") * os.sysconf("SC_PAGE_SIZE")
    except (ValueError, OSError, AttributeError):
        return None


def batch_bytes(batch_size: int, image_size: int) -> int:
    return batch_size * CHANNELS * image_size * image_size * ITEM_BYTES


def check(opts: RunOptions, memory: int | None = None) -> None:
    """Raise ``UsageError`` naming the flag and its bound when a size cannot be served."""
    if opts.dataset == "synthetic":
        if opts.dataset_size > MAX_DATASET_SIZE:
            raise UsageError(f"--dataset-size {opts.dataset_size}: at most {MAX_DATASET_SIZE:,} synthetic items")
        small = [b for b in opts.batch_sizes if b > opts.dataset_size]
        if small:
            raise UsageError(
                f"--batch-size {small[0]} is larger than --dataset-size {opts.dataset_size}: no whole batch "
                "(the loader drops the last, incomplete one); lower it or raise --dataset-size"
            )
    side = opts.image_size or 32
    if side > MAX_IMAGE_SIZE:
        raise UsageError(f"--image-size {side}: at most {MAX_IMAGE_SIZE}")
    memory = host_memory() if memory is None else memory
    if memory is None:
        return
    # Batches alive at once: each worker's prefetched ones, the one in the loop, and its pinned copy.
    for bs in opts.batch_sizes:
        for workers in opts.num_workers:
            for pf in opts.prefetch_factors:
                alive = max(workers, 1) * pf + 2
                need = batch_bytes(bs, side) * alive
                if need > memory // 2:
                    raise UsageError(
                        f"--batch-size {bs} of {side}x{side} images with --num-workers {workers} and "
                        f"--prefetch-factor {pf} holds about {format_size(need)} of batches at once, more than "
                        f"half of this machine's {format_size(memory)}: lower one of them"
                    )
