#!/usr/bin/env python3
"""Overhead of pinprof's recorder, measured side by side with the bare loop in one run.

1. Loop ratio: the "better benchmark" setup from FACTS.md (synthetic CIFAR-10, batch 1024, 6 workers,
   pin_memory=True, non_blocking copy on a side stream, 2 ms of CPU work, a loss read per step), run
   bare and instrumented in alternation; prints median instrumented/bare time per batch.
2. Recorder CPU cost: a no-op loader (a list of small pinned tensors) so the loop is nothing but the
   recorder; prints (instrumented - bare) host time per batch, in microseconds.

    python scripts/bench_overhead.py [--rounds 5] [--batches 40]
"""
from __future__ import annotations

import argparse
import statistics
import time

import torch
from torch.utils.data import DataLoader

from profiler import TransferProfiler
from profiler.datasets import SyntheticImages
from profiler.workload import busy_cpu


def bare_loop(loader, batches: int, dev: torch.device, stream: torch.cuda.Stream, cpu_ms: float) -> float:
    it = iter(loader)
    next(it)  # worker start-up is outside the timed part, as for the profiled loop below
    t0 = time.perf_counter()
    for _ in range(batches):
        x, y = next(it)
        with torch.cuda.stream(stream):
            x, y = x.to(dev, non_blocking=True), y.to(dev, non_blocking=True)
        torch.cuda.current_stream().wait_stream(stream)
        busy_cpu(cpu_ms)
        x.float().mean().item()
    return (time.perf_counter() - t0) / batches


def profiled_loop(loader, batches: int, dev: torch.device, cpu_ms: float) -> float:
    prof = TransferProfiler("pinned_nb", dev)
    gen = prof.batches(loader)
    next(gen)
    t0 = time.perf_counter()
    for _ in range(batches):
        x, y = prof.to_device(next(gen))
        with prof.cpu_work():
            busy_cpu(cpu_ms)
        with prof.compute():
            loss = x.float().mean()
        loss.item()
    elapsed = (time.perf_counter() - t0) / batches
    gen.close()
    prof.timeline()
    return elapsed


def recorder_cost_us(n: int, dev: torch.device) -> tuple[float, float]:
    data = [torch.randint(0, 255, (1024,), dtype=torch.uint8).pin_memory() for _ in range(64)]
    stream = torch.cuda.Stream(dev)
    loader = [data[i % 64] for i in range(n)]

    def bare() -> float:
        t0 = time.perf_counter_ns()
        for b in loader:
            with torch.cuda.stream(stream):
                x = b.to(dev, non_blocking=True)
            torch.cuda.current_stream().wait_stream(stream)
            x.record_stream(torch.cuda.current_stream())
        torch.cuda.synchronize()
        return (time.perf_counter_ns() - t0) / n / 1e3

    def profiled() -> float:
        prof = TransferProfiler("pinned_nb", dev)
        t0 = time.perf_counter_ns()
        for b in prof.batches(loader):
            prof.to_device(b)
            with prof.cpu_work():
                pass
            with prof.compute():
                pass
        torch.cuda.synchronize()
        el = (time.perf_counter_ns() - t0) / n / 1e3
        prof.timeline()
        return el

    bare(), profiled()  # warm-up
    b = [bare() for _ in range(5)]
    p = [profiled() for _ in range(5)]
    return statistics.median(b), statistics.median(p)


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--rounds", type=int, default=5)
    ap.add_argument("--batches", type=int, default=40)
    ap.add_argument("--cpu-ms", type=float, default=2.0)
    args = ap.parse_args()
    dev = torch.device("cuda")
    ds = SyntheticImages()
    loader = DataLoader(ds, batch_size=1024, num_workers=6, pin_memory=True, drop_last=True)
    stream = torch.cuda.Stream(dev)
    ratios = []
    for r in range(args.rounds):
        b = bare_loop(loader, args.batches, dev, stream, args.cpu_ms)
        p = profiled_loop(loader, args.batches, dev, args.cpu_ms)
        ratios.append(p / b)
        print(f"round {r}: bare {b * 1e3:.3f} ms/batch, instrumented {p * 1e3:.3f} ms/batch, ratio {p / b:.4f}")
    print(f"loop ratio instrumented/bare (median of {args.rounds} rounds, {args.batches} batches each): "
          f"{statistics.median(ratios):.4f}")
    bare_us, prof_us = recorder_cost_us(2000, dev)
    print(f"no-op loader, 2000 batches: bare {bare_us:.1f} us/batch, instrumented {prof_us:.1f} us/batch, "
          f"recorder CPU cost {prof_us - bare_us:.1f} us/batch")


if __name__ == "__main__":
    main()
