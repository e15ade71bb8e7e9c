#!/usr/bin/env python3
"""A short loop with nothing but pinprof to pay for: resident pinned dict batches of three leaves,
copied with ``non_blocking=True``, 2 ms of CPU work (the GIL held, as augmentation code holds it) and
a loss read a step. The loader is a DataLoader with no workers over batches already in pinned memory,
so no worker, pin thread or disk noise hides the recorder's cost.

Plain, it is a script ``pinprof profile`` runs unmodified, and it prints the median of its own steady
steps (``steady step ms (median of N): X``) for ``scripts/bench_process_overhead.py``, which runs it
bare and profiled in alternated processes.

With ``--library`` it measures the library path (``TransferProfiler``) instead, in one process: blocks
of bare and instrumented steps alternated in ABBA order over the same batches, the ratio of their
medians printed, with the GPU clock that timed the instrumented blocks.

With ``--hooks`` it measures ``pinprof profile``'s hooks alone, in one process: bare blocks and blocks
under the hooks (an ``AutoSession`` with NVTX and a journal, as ``pinprof profile`` sets one up), each
hooked block's ratio to the mean of its two bare neighbours. CUPTI, where it runs, is started once
before the warm-up and stays on for both kinds (it is process-wide: the bare processes of
``bench_process_overhead.py`` pay nothing of it), so what this ratio leaves out of the process ratio is
CUPTI's own cost in the driver and its thread.

``--device cpu`` runs the plain loop or ``--hooks`` on a machine with no GPU (nothing pinned, the
copies ``.to("cpu")``, the step on the host: the hooks' Python alone, beside real steps).

    python scripts/resident_loop.py [--steps 1500] [--warm 100] [--cpu-ms 2] [--device cpu] [--library [--blocks 40]]
    python scripts/resident_loop.py --hooks [--blocks 40] [--device cpu]
"""

from __future__ import annotations

import argparse
import statistics
import sys
import time
from typing import Any

import torch
from torch.utils.data import DataLoader, Dataset

from profiler.drivers.workload import busy_cpu

LEAVES = ("image", "label", "weight")


class Resident(Dataset[dict[str, torch.Tensor]]):
    """``n`` batches made once, pinned; item i is batch i mod 8 (``batch_size=None``: no collation)."""

    def __init__(self, n: int, pin: bool = True) -> None:
        gen = torch.Generator().manual_seed(0)
        self.n = n

        def made(t: torch.Tensor) -> torch.Tensor:
            return t.pin_memory() if pin else t  # no pinned memory without CUDA

        self.batches = [
            {
                "image": made(torch.randint(0, 256, (256, 3, 64, 64), dtype=torch.uint8, generator=gen)),
                "label": made(torch.randint(0, 1000, (256,), generator=gen)),
                "weight": made(torch.rand(256, generator=gen)),
            }
            for _ in range(8)
        ]

    def __len__(self) -> int:
        return self.n

    def __getitem__(self, i: int) -> dict[str, torch.Tensor]:
        return self.batches[i % 8]


def step(batch: dict[str, torch.Tensor], dev: torch.device, cpu_ms: float) -> float:
    """One training-like step; returns its loss (read on the host, as a logger reads it)."""
    x = {k: v.to(dev, non_blocking=True) for k, v in batch.items()}
    busy_cpu(cpu_ms)
    loss = (x["image"].float().mean() + x["weight"].mean()) * x["label"].float().mean()
    return float(loss.item())


def plain(args: argparse.Namespace, dev: torch.device) -> None:
    loader = DataLoader(Resident(args.steps, pin=dev.type == "cuda"), batch_size=None, num_workers=0)
    times: list[float] = []
    t0 = time.perf_counter()
    for batch in loader:
        step(batch, dev, args.cpu_ms)
        t1 = time.perf_counter()
        times.append((t1 - t0) * 1e3)
        t0 = t1
    print(f"steady step ms (median of {len(times) - args.warm}): {statistics.median(times[args.warm :]):.3f}")


def library(args: argparse.Namespace, dev: torch.device) -> None:
    from profiler import TransferProfiler
    from profiler.capture.clocks import choice as backend

    backend.start(dev)  # before any CUDA work, as pinprof profile starts CUPTI; PINPROF_BACKEND picks
    per_block = 10
    data = Resident(2 * args.blocks * per_block + args.warm)
    it = iter(DataLoader(data, batch_size=None, num_workers=0))
    for _ in range(args.warm):
        step(next(it), dev, args.cpu_ms)
    prof = TransferProfiler("pinned_nb", dev)
    bare: list[float] = []
    inst: list[float] = []
    for k in range(2 * args.blocks):
        t0 = time.perf_counter()
        if k % 4 in (0, 3):  # ABBA: a drift weighs on both kinds alike
            for _ in range(per_block):
                step(next(it), dev, args.cpu_ms)
            bare.append((time.perf_counter() - t0) / per_block * 1e3)
        else:
            for batch in prof.batches(it, limit=per_block):
                x = prof.to_device(batch)
                with prof.cpu_work():
                    busy_cpu(args.cpu_ms)
                with prof.compute():
                    loss = (x["image"].float().mean() + x["weight"].mean()) * x["label"].float().mean()
                loss.item()
            inst.append((time.perf_counter() - t0) / per_block * 1e3)
    tl = prof.timeline()
    b, p = statistics.median(bare), statistics.median(inst)
    info: dict[str, Any] = backend.describe()
    print(
        f"resident three-leaf loop, library, {args.blocks} bare and {args.blocks} instrumented blocks of "
        f"{per_block} steps (ABBA): bare {b:.3f} ms/step, instrumented {p:.3f} ms/step, ratio {p / b:.4f}; "
        f"{len(tl)} rows; GPU clock {info.get('backend', '?')}, copy calls {info.get('copy_calls', '-')}, "
        f"unmatched {info.get('unmatched_copy_calls', '-')}"
    )


def hooks(args: argparse.Namespace, dev: torch.device) -> None:
    import tempfile
    from pathlib import Path

    from profiler.capture import auto_hooks
    from profiler.capture.auto_session import AutoSession
    from profiler.capture.clocks import choice as backend
    from profiler.capture.rows import FlushClock
    from profiler.report.journal import Journal
    from profiler.report.journal_process import JournalProcess

    if dev.type == "cuda":
        backend.start(dev)  # before any CUDA work, as pinprof profile starts CUPTI; PINPROF_BACKEND picks
    per_block = 10
    data = Resident((2 * args.blocks + 1) * per_block + args.warm, pin=dev.type == "cuda")
    it = iter(DataLoader(data, batch_size=None, num_workers=0))
    for _ in range(args.warm):
        step(next(it), dev, args.cpu_ms)
    # One session for every hooked block, as one run of pinprof profile: its journal's thread runs
    # throughout, and its paced appends wait for a hooked batch's arrival (AutoSession.arrived).
    journal = Journal(Path(tempfile.mkdtemp(prefix="pinprof-resident-")) / "timeline.csv")
    session = AutoSession(
        dev, nvtx=True, run="bench", journal=journal, appender=JournalProcess(journal), flush=FlushClock.from_settings()
    )

    def timed(hooked: bool) -> float:
        if hooked:
            auto_hooks.start(session)
        if dev.type == "cuda":
            torch.cuda.synchronize()
        t0 = time.perf_counter()
        try:
            for _ in range(per_block):
                step(next(it), dev, args.cpu_ms)
            if dev.type == "cuda":
                torch.cuda.synchronize()
        finally:
            ms = (time.perf_counter() - t0) / per_block * 1e3
            if hooked:
                auto_hooks.stop()
                session.close_in_flight()  # the block's last batch ends with it, not in a bare block
        return ms

    kinds = ["bare" if k % 2 == 0 else "hooks" for k in range(2 * args.blocks + 1)]  # bare, hooks, ..., bare
    got: list[float] = []
    for k, kind in enumerate(kinds):
        got.append(timed(kind == "hooks"))
        if (k + 1) % 20 == 0:
            print(f"  block {k + 1}/{len(kinds)}", file=sys.stderr, flush=True)
    rows = session.close()
    ratios = sorted(got[i] / ((got[i - 1] + got[i + 1]) / 2) for i in range(1, len(got), 2))
    bare, inst = statistics.median(got[0::2]), statistics.median(got[1::2])
    info: dict[str, Any] = backend.describe() if dev.type == "cuda" else {"backend": "none (CPU)"}
    print(
        f"resident three-leaf loop, hooks, {args.blocks} hooked blocks of {per_block} steps, each between two "
        f"bare ones: bare {bare:.3f} ms/step, hooked {inst:.3f} ms/step; ratio to its neighbours median "
        f"{statistics.median(ratios):.4f} (min {ratios[0]:.4f}, max {ratios[-1]:.4f}); {len(rows)} rows, "
        f"pinprof_ms median {rows.pinprof_ms.median() * 1e3:.1f} us, mean {rows.pinprof_ms.mean() * 1e3:.1f} us; "
        f"GPU clock {info.get('backend', '?')}"
    )


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--steps", type=int, default=1500, help="steps of the plain loop (default 1500)")
    ap.add_argument("--warm", type=int, default=100, help="steps left out of the figures (default 100)")
    ap.add_argument("--cpu-ms", type=float, default=2.0, help="CPU work per step, ms (default 2)")
    ap.add_argument("--library", action="store_true", help="bare against TransferProfiler blocks, one process")
    ap.add_argument("--hooks", action="store_true", help="bare against pinprof profile's hooks, one process")
    ap.add_argument(
        "--blocks", type=int, default=40, help="with --library or --hooks: blocks of each kind (default 40)"
    )
    ap.add_argument(
        "--device",
        default="cuda",
        help="cuda (default), or cpu on a machine with no GPU (nothing pinned; not --library)",
    )
    args = ap.parse_args()
    if args.warm < 0 or args.steps <= args.warm:
        ap.error(f"--steps {args.steps} must exceed --warm {args.warm} (the median is over the steps after it)")
    if args.library and args.hooks:
        ap.error("--library and --hooks each measure one path: give one")
    dev = torch.device(args.device)
    if dev.type != "cuda" and args.library:
        ap.error(f"--device {args.device}: --library times the GPU; run it on a GPU, or give --hooks or neither")
    if args.library:
        library(args, dev)
    elif args.hooks:
        hooks(args, dev)
    else:
        plain(args, dev)


if __name__ == "__main__":
    main()
