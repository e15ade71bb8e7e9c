#!/usr/bin/env python3
"""Where the library's CUPTI recorder cost goes, part by part, in one process.

The loop is ``scripts/bench_overhead.py``'s recorder loop (a no-op loader of small pinned tensors,
``pinned_nb``, empty ``cpu_work()`` and ``compute()`` blocks), with CUPTI's records started before any
CUDA work as ``pinprof profile`` starts them. Blocks of ``--batches`` batches alternate, round by round,
between these variants:

- ``bare``: the loop without pinprof;
- ``bare+2 markers``: the bare loop issuing two markers a batch (a ``compute()`` block's entry and
  exit, as the library once issued them; it now issues the exit's alone where the batch copied);
- ``profiled``: the library, as a user runs it;
- ``no markers``: the library with its markers replaced by a clock read (kernels then go unplaced:
  a cost split, not a way to run);
- ``no drain``: the library with the recorder's thread kept from reading CUPTI's buffers during the
  block (they are read after it, untimed): what the thread's work costs the loop's thread;
- ``neither``: both taken away.

Prints the median us a batch of each over rounds, and each less ``bare``, for one tensor and for a dict
of three.

    python scripts/bench_recorder_parts.py [--rounds 9] [--batches 2000]
"""

from __future__ import annotations

import argparse
import statistics
import sys
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

import torch  # noqa: E402
from bench_overhead import bare_recorder_loop, profiled_recorder_loop, recorder_batches  # noqa: E402

from profiler.capture.clocks import choice as backend  # noqa: E402
from profiler.capture.clocks.cupti.recorder import CuptiRecorder  # noqa: E402


@contextmanager
def no_markers(rec: CuptiRecorder) -> Iterator[None]:
    # every marker goes through the recorder's mark: an instance attribute shadows the method meanwhile
    rec.mark = lambda device: None  # type: ignore[method-assign]
    try:
        yield
    finally:
        del rec.mark


@contextmanager
def no_drain(rec: CuptiRecorder) -> Iterator[None]:
    # the thread calls self.drain() every DRAIN_S: an instance attribute shadows the method meanwhile
    rec.drain = lambda: None  # type: ignore[method-assign]
    try:
        yield
    finally:
        del rec.drain


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--rounds", type=int, default=9)
    ap.add_argument("--batches", type=int, default=2000)
    args = ap.parse_args()
    dev = torch.device("cuda")
    rec = backend.start(dev)
    if rec is None:
        sys.exit(f"CUPTI did not start: {backend.describe()}")
    stream = torch.cuda.Stream(dev)

    def run(loader: list[Any], variant: str) -> float:
        if variant == "bare":
            return bare_recorder_loop(loader, dev, stream)
        if variant == "bare+2 markers":
            return bare_recorder_loop(loader, dev, stream, lambda: (backend.edge_ms(dev), backend.edge_ms(dev)))
        with no_markers(rec) if variant in ("no markers", "neither") else _nothing():
            with no_drain(rec) if variant in ("no drain", "neither") else _nothing():
                us, prof = profiled_recorder_loop(loader, dev)
        prof.timeline()  # untimed: the records are read and the rows written here
        return us

    variants = ["bare", "bare+2 markers", "profiled", "no markers", "no drain", "neither"]
    print(f"{torch.cuda.get_device_name()}, torch {torch.__version__}, {backend.describe().get('backend')}")
    for leaves in (1, 3):
        loader = recorder_batches(leaves, args.batches)
        for v in variants:  # warm
            run(loader[:200], v)
        got: dict[str, list[float]] = {v: [] for v in variants}
        for _ in range(args.rounds):
            for v in variants:
                got[v].append(run(loader, v))
        print(
            f"{leaves} tensor{'s' if leaves > 1 else ''}, us a batch, median of {args.rounds} rounds of {args.batches}:"
        )
        for v, xs in got.items():
            med = statistics.median(xs)
            less = statistics.median(x - b for x, b in zip(xs, got["bare"], strict=True))
            print(f"  {v:15s} {med:7.1f}  less bare (paired) {less:6.1f}  (rounds {min(xs):.1f}-{max(xs):.1f})")
    summary = rec.summary()
    print(f"  markers: {summary.get('markers')}")


@contextmanager
def _nothing() -> Iterator[None]:
    yield


if __name__ == "__main__":
    main()
