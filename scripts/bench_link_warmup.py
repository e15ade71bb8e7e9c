#!/usr/bin/env python3
"""Whether pinned copies run slowly after the link idled, and whether ``bandwidth.measure`` (which keeps
the link busy for ``LINK_WARM_S`` before it times a size) reads them at full speed.

Each line is one size's median per-copy time and rate (k back-to-back pinned copies between CUDA
events, median of 5 rounds after 2 warm-up rounds: ``bandwidth.measure``), after ``--idle`` seconds of
no GPU work: first without the sustained warm-up (``cold``, ``warm_link=False``: what the calibration
did once), then with it, then cold again. On an idle-sensitive link the cold lines read
the small sizes slower than the ``measure`` lines (``warm_link=True``).

    python scripts/bench_link_warmup.py [--idle 5]
"""

from __future__ import annotations

import argparse
import time

import torch

from profiler.drivers import bandwidth
from profiler.units import MiB

SIZES = (1 * MiB, 4 * MiB, 16 * MiB, 64 * MiB)


def timed(label: str, dev: torch.device, warm_link: bool) -> None:
    """One line a size: ``measure``'s pinned copy time and rate, with or without the sustained copies."""
    for n in SIZES:
        (row,) = bandwidth.measure(n, ("pinned_h2d",), dev, warm_link=warm_link)
        print(f"{label}: {n // MiB} MiB {float(row['ms']):.4f} ms {float(row['GBps']):.1f} GB/s", flush=True)


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--idle", type=float, default=5.0, help="seconds of no GPU work before each pass")
    args = ap.parse_args()
    dev = torch.device("cuda")
    torch.zeros(1, device=dev)
    print(f"{torch.cuda.get_device_name(dev)}; {args.idle:g} s idle before each pass", flush=True)
    for label, warm_link in (("cold", False), ("measure", True), ("cold again", False)):
        time.sleep(args.idle)
        timed(label, dev, warm_link)


if __name__ == "__main__":
    main()
