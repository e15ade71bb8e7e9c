#!/usr/bin/env python3
"""Whether pinned copies run slowly after the link idled, and whether ``bandwidth.measure`` (which keeps
the link busy for ``LINK_WARM_S`` before it times a size) reads them at full speed.

Each line is one size's median per-copy time and rate (k back-to-back pinned copies between CUDA
events, median of 5 rounds after 2 warm-up rounds, as ``measure`` times them), after ``--idle`` seconds
of no GPU work: first without the sustained warm-up (``cold``: what the calibration did before
``72147a3``), then through ``measure``, then cold again. On an idle-sensitive link the cold lines read
the small sizes slower than the ``measure`` lines.

    python scripts/bench_link_warmup.py [--idle 5]
"""

from __future__ import annotations

import argparse
import time

import torch

from profiler.bench import bandwidth
from profiler.units import MiB

SIZES = (1 * MiB, 4 * MiB, 16 * MiB, 64 * MiB)


def cold(label: str, dev: torch.device) -> None:
    """The sizes in turn with only ``measure``'s own two warm-up rounds, not the sustained copies."""
    stream = torch.cuda.Stream(dev)
    for n in SIZES:
        src = [bandwidth._random(n, pin=True) for _ in range(2)]
        dst = torch.empty(n, dtype=torch.uint8, device=dev)
        k = max(1, min(50, (64 * MiB) // n))

        def copy(i: int, dst: torch.Tensor = dst, src: list[torch.Tensor] = src) -> object:
            return dst.copy_(src[i % 2], non_blocking=True)

        for _ in range(2):
            bandwidth._per_copy_ms(k, copy, True, stream)
        ms = sorted(bandwidth._per_copy_ms(k, copy, True, stream) for _ in range(5))[2]
        print(f"{label}: {n // MiB} MiB {ms:.4f} ms {n / ms / 1e6:.1f} GB/s", flush=True)


def warm(label: str, dev: torch.device) -> None:
    for n in SIZES:
        (row,) = bandwidth.measure(n, ("pinned_h2d",), dev)
        print(f"{label}: {n // MiB} MiB {float(row['ms']):.4f} ms {float(row['GBps']):.1f} GB/s", flush=True)


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--idle", type=float, default=5.0, help="seconds of no GPU work before each pass")
    args = ap.parse_args()
    dev = torch.device("cuda")
    torch.zeros(1, device=dev)
    print(f"{torch.cuda.get_device_name(dev)}; {args.idle:g} s idle before each pass", flush=True)
    for label, run in (("cold", cold), ("measure", warm), ("cold again", cold)):
        time.sleep(args.idle)
        run(label, dev)


if __name__ == "__main__":
    main()
