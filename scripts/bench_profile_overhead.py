#!/usr/bin/env python3
"""What ``pinprof profile``'s automatic hooks cost on a real training step, and whether their per-batch
copy times agree with CUPTI; on a GPU (``scripts/gpu_check.sh``, step ``profile``).

One process, one model and one loader (``scripts/resnet_train.py``: resnet50, bf16, batch 256, 12
workers). After a warm-up, blocks of ``--steps`` steps alternate bare and profiled (an ``AutoSession``
with the hooks on, exactly what ``pinprof profile`` attaches), ``--rounds`` times each; a block's time
is wall clock from its first ``next()`` to a synchronize after its last step. Prints the median
ms/step of each and their ratio. Then one more profiled block runs under torch.profiler (CUPTI), and
each batch's ``h2d_gpu_ms`` is compared with CUPTI's memcpy records of that batch.

    python scripts/bench_profile_overhead.py [--steps 20] [--rounds 5] [--cupti-steps 12]
"""

from __future__ import annotations

import argparse
import statistics
import sys
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import numpy as np
import torch

sys.path.insert(0, str(Path(__file__).resolve().parent))
from resnet_train import batches, build, step

from profiler.bench import cupti
from profiler.capture import auto_hooks
from profiler.capture.auto_session import AutoSession


def block(model: torch.nn.Module, opt: torch.optim.Optimizer, it: Iterator[Any], n: int) -> float:
    torch.cuda.synchronize()
    start = time.perf_counter()
    for _ in range(n):
        images, labels = next(it)
        step(model, opt, images, labels)
    torch.cuda.synchronize()
    return (time.perf_counter() - start) / n * 1e3


def profiled(
    model: torch.nn.Module, opt: torch.optim.Optimizer, it: Iterator[Any], n: int
) -> tuple[float, AutoSession]:
    session = AutoSession("cuda", nvtx=False)
    auto_hooks.start(session)
    try:
        ms = block(model, opt, it, n)
    finally:
        auto_hooks.stop()
    return ms, session


def main() -> None:
    p = argparse.ArgumentParser()
    p.add_argument("--steps", type=int, default=20)
    p.add_argument("--rounds", type=int, default=5)
    p.add_argument("--cupti-steps", type=int, default=12)
    p.add_argument("--batch-size", type=int, default=256)
    p.add_argument("--workers", type=int, default=12)
    args = p.parse_args()
    model, opt, loader = build(args.batch_size, args.workers, 100_000)
    it = batches(loader)
    block(model, opt, it, 15)  # warm-up: cuDNN autotuning, workers started, allocator grown
    bare, prof = [], []
    for _ in range(args.rounds):
        bare.append(block(model, opt, it, args.steps))
        ms, session = profiled(model, opt, it, args.steps)
        prof.append(ms)
        tl = session.close()
    b, q = statistics.median(bare), statistics.median(prof)
    print(
        f"resnet50 bs{args.batch_size} bf16, {args.workers} workers, {args.rounds} bare and {args.rounds} profiled "
        f"blocks of {args.steps} steps interleaved: bare {b:.3f} ms/step, profiled {q:.3f} ms/step, ratio {q / b:.4f}"
    )
    print(
        f"  last profiled block: {len(tl)} rows, median h2d_gpu_ms {tl.h2d_gpu_ms.median():.4f}, bytes {int(tl.bytes.median())}"
    )

    holder: list[AutoSession] = []
    trace = cupti.capture(lambda: holder.append(profiled(model, opt, it, args.cupti_steps)[1]), host_ops=False)
    tl = holder[0].close()
    h2d = trace[(trace.kind == "memcpy") & trace.name.str.contains("HtoD")]
    copies = int(tl.copies.iloc[0])
    if len(h2d) != len(tl) * copies:
        print(f"  CUPTI saw {len(h2d)} HtoD memcpys for {len(tl)} batches of {copies} copies: not compared")
        return
    cupti_ms = h2d.dur_us.to_numpy().reshape(len(tl), copies).sum(axis=1) / 1e3
    ours = tl.h2d_gpu_ms.to_numpy()
    rel = np.abs(ours - cupti_ms) / cupti_ms
    print(
        f"  per batch, {len(tl)} batches: h2d_gpu_ms median {np.median(ours):.4f} ms, CUPTI memcpy sum "
        f"{np.median(cupti_ms):.4f} ms, |rel| median {np.median(rel):.4f}, max {rel.max():.4f}"
    )


if __name__ == "__main__":
    main()
