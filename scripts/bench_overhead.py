#!/usr/bin/env python3
"""Overhead of pinprof's recorder, measured side by side with the bare loop in one run.

1. Loop ratio: the "better benchmark" setup (scripts/better_benchmark.py: synthetic CIFAR-10, batch 1024, 6 workers,
   pin_memory=True, non_blocking copy on a side stream, 2 ms of CPU work, a loss read per step), with
   blocks of bare and instrumented steps interleaved on one loader; prints the ratio of medians.
   The same on batches resident in pinned memory (no loader noise).
2. Recorder CPU cost: a no-op loader (a list of small pinned tensors) so the loop is nothing but the
   recorder; prints (instrumented - bare) host time per batch, in microseconds.

3. ``--backends``: the recorder CPU cost of (2) with each GPU clock, CUDA events and CUPTI's records
   (``profiler.capture.clocks.choice``), in alternated processes of their own (CUPTI, once enabled, is
   process-wide: the bare loop beside it pays for it too, as a user's would), one-tensor and
   three-tensor (dict) batches; prints the medians side by side.

4. ``--backends --baseline PATH [--clock cupti]``: the same, CUDA events (or CUPTI, pinprof's default
   clock), this checkout against an older one at PATH
   (``git worktree add PATH <commit>``), whose ``profiler`` package the other processes import; so a
   regression shows in the commit that makes it.

    python scripts/bench_overhead.py [--rounds 20] [--batches 5]
                                     [--backends [--backend-rounds 5] [--baseline PATH [--clock events|cupti]]]
"""

from __future__ import annotations

import argparse
import itertools
import json
import os
import statistics
import subprocess
import sys
import time
from collections.abc import Callable
from typing import Any

import torch
from torch.utils.data import DataLoader

from profiler import TransferProfiler
from profiler.drivers.datasets import SyntheticImages
from profiler.drivers.workload import busy_cpu


def interleaved(
    loader, blocks: int, per_block: int, dev: torch.device, cpu_ms: float
) -> tuple[list[float], list[float]]:
    """Alternate blocks of bare and instrumented steps over ONE loader iterator.

    Both kinds of block see the same workers, the same prefetch state and the same machine noise, so
    the loader's own variance (tens of percent between separate runs) cancels in the ratio.
    """
    stream = torch.cuda.Stream(dev)
    it = iter(loader)
    for _ in range(3):
        next(it)  # worker start-up and first batches stay out of the figures
    bare: list[float] = []
    inst: list[float] = []
    prof = TransferProfiler("pinned_nb", dev)  # one profiler for the whole loop, as a user would have
    for k in range(2 * blocks):
        t0 = time.perf_counter()
        # ABBA order (bare, inst, inst, bare, ...): a drift or a block's position after the other
        # kind weighs on both kinds alike.
        if k % 4 in (0, 3):
            for _ in range(per_block):
                x, y = next(it)
                with torch.cuda.stream(stream):
                    x, y = x.to(dev, non_blocking=True), y.to(dev, non_blocking=True)
                torch.cuda.current_stream().wait_stream(stream)
                x.record_stream(torch.cuda.current_stream())
                busy_cpu(cpu_ms)
                x.float().mean().item()
            bare.append((time.perf_counter() - t0) / per_block)
        else:
            for batch in prof.batches(it, limit=per_block):
                x, y = prof.to_device(batch)
                with prof.cpu_work():
                    busy_cpu(cpu_ms)
                with prof.compute():
                    loss = x.float().mean()
                loss.item()
            inst.append((time.perf_counter() - t0) / per_block)
    prof.timeline()
    return bare, inst


def recorder_batches(leaves: int, n: int) -> list[Any]:
    """The recorder loop's loader: ``n`` batches drawn in turn from 64 made once, each one pinned
    uint8 tensor of 1 KiB, or a dict of ``leaves`` of them."""

    def batch(i: int) -> Any:
        gen = torch.Generator().manual_seed(i)
        ts = [torch.randint(0, 255, (1024,), dtype=torch.uint8, generator=gen).pin_memory() for _ in range(leaves)]
        return ts[0] if leaves == 1 else {f"t{k}": t for k, t in enumerate(ts)}

    data = [batch(i) for i in range(64)]
    return [data[i % 64] for i in range(n)]


def bare_recorder_loop(
    loader: list[Any], dev: torch.device, stream: torch.cuda.Stream, each: Callable[[], object] | None = None
) -> float:
    """The recorder loop without pinprof, us a batch: each batch copied on ``stream``, which the
    compute stream then waits on; ``each``: called once a batch besides (a benchmark's extra work)."""
    t0 = time.perf_counter_ns()
    for b in loader:
        with torch.cuda.stream(stream):
            if isinstance(b, dict):
                x = {k: v.to(dev, non_blocking=True) for k, v in b.items()}
            else:
                x = b.to(dev, non_blocking=True)
        torch.cuda.current_stream().wait_stream(stream)
        for t in x.values() if isinstance(x, dict) else (x,):
            t.record_stream(torch.cuda.current_stream())
        if each is not None:
            each()
    torch.cuda.synchronize()
    return (time.perf_counter_ns() - t0) / len(loader) / 1e3


def profiled_recorder_loop(loader: list[Any], dev: torch.device) -> tuple[float, TransferProfiler]:
    """The same loop through the library (``pinned_nb``, empty ``cpu_work()`` and ``compute()``), us a
    batch, and its profiler, whose ``timeline()`` is left to the caller (untimed)."""
    prof = TransferProfiler("pinned_nb", dev)
    t0 = time.perf_counter_ns()
    for b in prof.batches(loader):
        prof.to_device(b)
        with prof.cpu_work():
            pass
        with prof.compute():
            pass
    torch.cuda.synchronize()
    return (time.perf_counter_ns() - t0) / len(loader) / 1e3, prof


def recorder_cost_us(n: int, dev: torch.device, leaves: int = 1) -> tuple[float, float]:
    loader = recorder_batches(leaves, n)
    stream = torch.cuda.Stream(dev)

    def bare() -> float:
        return bare_recorder_loop(loader, dev, stream)

    def profiled() -> float:
        el, prof = profiled_recorder_loop(loader, dev)
        prof.timeline()
        return el

    bare(), profiled()  # warm-up
    b: list[float] = []
    p: list[float] = []
    for _ in range(7):  # alternate rounds, so a drift of the machine weighs on both alike
        b.append(bare())
        p.append(profiled())
    return statistics.median(b), statistics.median(p)


def sides(baseline: str | None, clock: str = "events") -> list[tuple[str, dict[str, str]]]:
    """(name, environment) of each kind of process: the two clocks, or this checkout and ``baseline``,
    both timed by ``clock``."""
    if baseline is None:
        return [(name, {**os.environ, "PINPROF_BACKEND": name}) for name in ("events", "cupti")]
    # here, not at the top: the baseline's processes run this file on an older package
    from profiler.bench.baseline import checkout, env_for

    env = {**os.environ, "PINPROF_BACKEND": clock}
    return [("HEAD", env), ("baseline", env_for(checkout(baseline), env))]


def backends(rounds: int, baseline: str | None = None, clock: str = "events") -> None:
    """(3) and (4): each side's recorder cost in processes of their own, alternated round by round."""
    got: dict[tuple[str, int], list[tuple[float, float]]] = {}
    kinds = sides(baseline, clock)
    for _ in range(rounds):
        for name, env in kinds:
            out = subprocess.run(
                [sys.executable, __file__, "--recorder-only"], env=env, capture_output=True, text=True, timeout=300
            )
            lines = [ln for ln in out.stdout.splitlines() if ln.startswith("RESULT ")]
            if not lines:
                print(f"{name}: no result (rc {out.returncode}): {out.stderr[-600:]}")
                continue
            res = json.loads(lines[0][7:])
            used = res.pop("clock", "?")
            wanted = clock if baseline is not None else name
            if used != wanted:  # a clock that fell back must not pass for the other
                print(f"{name}: this process was timed by {used}, not {wanted}; its round is left out")
                continue
            for leaves, (b, p) in res.items():
                got.setdefault((name, int(leaves)), []).append((b, p))
    what = "GPU clock" if baseline is None else f"checkout (baseline: {os.path.abspath(baseline)}, {clock} on both)"
    print(f"recorder CPU cost by {what}, us/batch (instrumented - bare), median of alternated processes:")
    for leaves in (1, 3):
        row = []
        for name, _env in kinds:
            v = got.get((name, leaves), [])
            cost = [p - b for b, p in v]
            row.append(
                f"{name} {statistics.median(cost):.1f} (rounds {', '.join(f'{c:.1f}' for c in cost)}; "
                f"bare {statistics.median(b for b, _ in v):.1f})"
                if v
                else f"{name} -"
            )
        print(f"  {leaves} tensor{'s' if leaves > 1 else ''}: " + " | ".join(row))


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--rounds", type=int, default=20, help="blocks of each kind (default 20)")
    ap.add_argument("--batches", type=int, default=5, help="batches per block (default 5)")
    ap.add_argument("--cpu-ms", type=float, default=2.0, help="CPU work per step, ms (default 2)")
    ap.add_argument("--backends", action="store_true", help="only (3): CUDA events against CUPTI, side by side")
    ap.add_argument("--backend-rounds", type=int, default=5, help="alternated processes per clock (default 5)")
    ap.add_argument(
        "--baseline",
        default=None,
        help="with --backends: an older checkout to compare with, timed by --clock on both (default: none)",
    )
    ap.add_argument(
        "--clock",
        choices=("events", "cupti"),
        default="events",
        help="with --baseline: the GPU clock of both sides (default events; cupti is what pinprof runs by default)",
    )
    ap.add_argument("--recorder-only", action="store_true", help=argparse.SUPPRESS)
    ap.add_argument(
        "--recorder-batches",
        type=int,
        default=2000,
        help="batches per side and round of the recorder cost (default 2000; more for a sampling profiler)",
    )
    args = ap.parse_args()
    if args.backends:
        backends(args.backend_rounds, args.baseline, args.clock)
        return
    dev = torch.device("cuda")
    if args.recorder_only:  # one process of (3)
        import profiler
        from profiler.capture.clocks import choice as backend

        # Before any CUDA work, as pinprof profile starts them: CUPTI's records asked for later fall
        # back to the events (profiler.capture.clocks.choice), and the CUPTI side would measure the events.
        # An older checkout (--baseline) may have no start(): its recorder starts them on first use.
        if hasattr(backend, "start"):
            backend.start(dev)
        res: dict[str, Any] = {str(leaves): recorder_cost_us(args.recorder_batches, dev, leaves) for leaves in (1, 3)}
        print(f"profiler from {profiler.__file__}", file=sys.stderr)
        clock = backend.describe()["backend"] if hasattr(backend, "describe") else "?"
        print("RESULT " + json.dumps({"clock": clock, **res}))
        return
    # The recorder's own cost first, before DataLoader workers share the machine.
    bare_us, prof_us = recorder_cost_us(2000, dev)
    print(
        f"no-op loader, 2000 batches: bare {bare_us:.1f} us/batch, instrumented {prof_us:.1f} us/batch, "
        f"recorder CPU cost {prof_us - bare_us:.1f} us/batch"
    )
    ds = SyntheticImages(size=1024 * (2 * args.rounds * args.batches + 4))  # one epoch covers every block
    loader = DataLoader(ds, batch_size=1024, num_workers=6, pin_memory=True, drop_last=True)
    # The same step on batches already in pinned memory (no loader): the loop is then nothing but
    # the copy, the CPU work and the step, so the recorder's share is not hidden by loader noise.
    resident = [
        (
            torch.randint(0, 256, (1024, 3, 32, 32), dtype=torch.uint8).pin_memory(),
            torch.randint(0, 10, (1024,)).pin_memory(),
        )
        for _ in range(8)
    ]
    bare, inst = interleaved(itertools.cycle(resident), 2 * args.rounds, 2 * args.batches, dev, args.cpu_ms)
    b, p = statistics.median(bare), statistics.median(inst)
    print(
        f"loop, batches resident in pinned memory (no loader), {2 * args.rounds} bare and {2 * args.rounds} "
        f"instrumented blocks of {2 * args.batches} batches: bare {b * 1e3:.3f} ms/batch, instrumented "
        f"{p * 1e3:.3f} ms/batch, ratio {p / b:.4f}"
    )
    bare, inst = interleaved(loader, args.rounds, args.batches, dev, args.cpu_ms)
    b, p = statistics.median(bare), statistics.median(inst)
    print(
        f"loop, better-benchmark setup, {args.rounds} bare and {args.rounds} instrumented blocks of "
        f"{args.batches} batches interleaved on one loader: bare {b * 1e3:.3f} ms/batch, instrumented "
        f"{p * 1e3:.3f} ms/batch, ratio {p / b:.4f}"
    )


if __name__ == "__main__":
    main()
