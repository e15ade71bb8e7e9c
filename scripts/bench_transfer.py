#!/usr/bin/env python3
"""Ways to move a pageable tensor to the GPU, side by side in one run, as ratios to the driver's path.

    pageable .to()          the driver stages it (the baseline, ratio 1)
    pin_memory().to()       pin a copy first, then a blocking copy
    loader-style            pin in a background thread (as the DataLoader's pin thread) while the
                            main thread copies the previous tensor non-blocking: a 2-stage pipeline
    staged                  pinprof's chunked, double-buffered pipeline (profiler.capture.staging)
    pinned .to()            the source is already pinned (the floor: no staging at all)
Per size: random data, one warm-up, median of --repeats rounds over --tensors distinct tensors,
each round ending in a synchronize. Prints ms per tensor, GB/s and the ratio to pageable.

    python scripts/bench_transfer.py [--sizes 16M,64M,256M,1G] [--repeats 5]
"""

from __future__ import annotations

import argparse
import statistics
import threading
import time
from collections.abc import Callable

import torch

from profiler.capture.staging import PinnedStager
from profiler.units import parse_size


def timed(fn: Callable[[], object]) -> float:
    torch.cuda.synchronize()
    t0 = time.perf_counter()
    fn()
    torch.cuda.synchronize()
    return (time.perf_counter() - t0) * 1e3


def loader_style(srcs: list[torch.Tensor], dev: torch.device, stream: torch.cuda.Stream) -> None:
    """Pin thread + main-thread non-blocking copies, one tensor apart."""
    import queue

    q: queue.Queue[torch.Tensor] = queue.Queue(maxsize=1)

    def pinner() -> None:
        for s in srcs:
            q.put(s.pin_memory())

    th = threading.Thread(target=pinner)
    th.start()
    with torch.cuda.stream(stream):
        for _ in srcs:
            q.get().to(dev, non_blocking=True)
    th.join()


def copy_methods(
    srcs: list[torch.Tensor],
    pinned: list[torch.Tensor],
    dev: torch.device,
    stream: torch.cuda.Stream,
    stager: PinnedStager,
) -> dict[str, Callable[[], object]]:
    """The ways to move ``srcs`` to ``dev``, each a call to time (what it returns is dropped)."""
    return {
        "pageable .to()": lambda: [s.to(dev) for s in srcs],
        "pin_memory().to()": lambda: [s.pin_memory().to(dev) for s in srcs],
        "loader-style": lambda: loader_style(srcs, dev, stream),
        "staged": lambda: [stager.copy(s) for s in srcs],
        "pinned .to()": lambda: [p.to(dev) for p in pinned],
    }


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--sizes", default="16M,64M,256M,1G")
    ap.add_argument("--repeats", type=int, default=5)
    ap.add_argument("--tensors", type=int, default=3)
    args = ap.parse_args()
    dev = torch.device("cuda")
    stream = torch.cuda.Stream(dev)
    stager = PinnedStager(dev)
    print(f"{'size':>6} {'method':<18} {'ms/tensor':>10} {'GB/s':>7} {'x pageable':>10}")
    for text in args.sizes.split(","):
        nbytes = parse_size(text)
        srcs = [torch.randint(0, 256, (nbytes,), dtype=torch.uint8) for _ in range(args.tensors)]
        pinned = [s.pin_memory() for s in srcs]
        methods = copy_methods(srcs, pinned, dev, stream, stager)
        ref = srcs[0].to(dev)
        assert torch.equal(stager.copy(srcs[0]).batch, ref), "staged copy differs from .to()"
        base = None
        for name, fn in methods.items():
            timed(fn)  # warm-up: allocators, buffers
            ms = statistics.median(timed(fn) for _ in range(args.repeats)) / args.tensors
            base = base or ms
            print(f"{text:>6} {name:<18} {ms:10.3f} {nbytes / ms / 1e6:7.1f} {base / ms:10.2f}")
        torch.cuda.empty_cache()
    stager.close()


if __name__ == "__main__":
    main()
