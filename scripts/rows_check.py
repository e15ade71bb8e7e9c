#!/usr/bin/env python3
"""Whose step each row holds, on a GPU: ``pinprof profile`` of loops that fetch ahead, each step running
k x M matmuls of 2048 x 2048 (k = b % 4 + 1, read from batch b), against CUPTI's time for one unit.

The scripts are the test scripts (``tests/scripts/ahead_loops.py``: plain, Accelerate blocking and
``non_blocking``, timm's ``PrefetchLoader``, a hand-written prefetcher, Accelerate's and timm's loaders
in evaluation loops (``--eval``) and with gradient accumulation (``--accumulate 2``), two loaders
zipped (``--loop zipped``: both loaders' rows are judged), hand-written loops with gradient
accumulation or skipped steps (``--accumulate 2``, ``--skip``);
``tests/scripts/lightning_fit.py --iterable`` and ``--val``), run unmodified under ``pinprof profile``.
One unit's kernel time comes from torch.profiler's CUPTI records of the same matmuls in this process
(median of 20 units, after a warm-up). Per loop it prints, over the rows after the first four: the median and the worst of
compute_ms / (k x unit), the same against the neighbour's k (a row holding the step before its own),
the loop pattern pinprof saw and the headline of its diagnosis.

    python scripts/rows_check.py --out DIR [--matmuls 10] [--batches 24]
"""

from __future__ import annotations

import argparse
import json
import statistics
import subprocess
import sys
from pathlib import Path

import torch

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))
from profiler.report.files import read_timeline  # noqa: E402

LOOPS = {
    "plain": ["tests/scripts/ahead_loops.py", "--loop", "plain"],
    "accelerate": ["tests/scripts/ahead_loops.py", "--loop", "accelerate"],
    "accelerate-nb": ["tests/scripts/ahead_loops.py", "--loop", "accelerate", "--non-blocking"],
    "timm": ["tests/scripts/ahead_loops.py", "--loop", "timm"],
    "prefetcher": ["tests/scripts/ahead_loops.py", "--loop", "prefetcher", "--non-blocking"],
    "lightning-iterable": ["tests/scripts/lightning_fit.py", "--iterable"],
    # a validation loader and Lightning's default sanity check: its second batch is left in flight
    "lightning-val": ["tests/scripts/lightning_fit.py", "--val"],
    # evaluation loops (no optimizer step) over the frameworks' loaders that fetch ahead
    "accelerate-eval": ["tests/scripts/ahead_loops.py", "--loop", "accelerate", "--eval"],
    "timm-eval": ["tests/scripts/ahead_loops.py", "--loop", "timm", "--eval"],
    # an optimizer step every second batch over the same loaders
    "accelerate-accum": ["tests/scripts/ahead_loops.py", "--loop", "accelerate", "--accumulate", "2"],
    "timm-accum": ["tests/scripts/ahead_loops.py", "--loop", "timm", "--accumulate", "2"],
    # two loaders zipped: each loader's rows (both /bs64/) hold the step their batches share
    "zipped": ["tests/scripts/ahead_loops.py", "--loop", "zipped"],
    # hand-written loops with a step every second batch, and steps skipped as GradScaler skips them
    "plain-accum": ["tests/scripts/ahead_loops.py", "--loop", "plain", "--accumulate", "2"],
    "prefetcher-accum": ["tests/scripts/ahead_loops.py", "--loop", "prefetcher", "--non-blocking", "--accumulate", "2"],
    "plain-skip": ["tests/scripts/ahead_loops.py", "--loop", "plain", "--skip", "5,6,11"],
    # a window's batches fetched before any is trained (Hugging Face's Trainer's order)
    "window": ["tests/scripts/ahead_loops.py", "--loop", "window", "--accumulate", "2"],
    # Lightning with accumulate_grad_batches=2 (--steps counts optimizer steps: twice the batches)
    "lightning-accum": ["tests/scripts/lightning_fit.py", "--accumulate", "2"],
}

BATCH_SIZE = 64  # every loop's training batch: its loader's scenario name holds /bs64/ (a validation loader's another)


def unit_ms(matmuls: int) -> float:
    """CUPTI's kernel time of ``matmuls`` chained 2048 x 2048 matmuls, ms (median of 20)."""
    w = torch.rand(2048, 2048, device="cuda") / 1024
    for _ in range(3):
        y = w
        for _ in range(matmuls):
            y = y @ w
    torch.cuda.synchronize()
    from torch.profiler import ProfilerActivity, profile

    units = []
    for _ in range(20):
        with profile(activities=[ProfilerActivity.CUDA]) as prof:
            y = w
            for _ in range(matmuls):
                y = y @ w
            torch.cuda.synchronize()
        units.append(sum(e.device_time for e in prof.events() if e.device_time > 0) / 1e3)
    return statistics.median(units)


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--out", required=True)
    ap.add_argument("--matmuls", type=int, default=10)
    ap.add_argument("--batches", type=int, default=24)
    args = ap.parse_args()
    unit = unit_ms(args.matmuls)
    print(f"one unit ({args.matmuls} matmuls of 2048x2048, fp32), CUPTI kernel time: {unit:.4f} ms")
    for name, script in LOOPS.items():
        out = Path(args.out) / name
        size = (
            ["--steps", str(args.batches), "--batch-size", str(BATCH_SIZE)]
            if "lightning" in script[0]
            else ["--batches", str(args.batches), "--batch-size", str(BATCH_SIZE), "--workers", "2"]
        )
        cmd = [
            sys.executable,
            "-m",
            "profiler",
            "profile",
            "--out",
            str(out),
            "--no-plots",
            "--",
            sys.executable,
            *script,
            "--matmuls",
            str(args.matmuls),
            *size,
        ]
        run = subprocess.run(cmd, capture_output=True, text=True, timeout=300, cwd=ROOT)
        if run.returncode != 0:
            print(f"{name}: rc {run.returncode}\n{run.stderr[-1500:]}")
            continue
        tl = read_timeline(out)
        # The training loader's rows only: a validation loader's batches (lightning-val's, of 16) run
        # no matmuls, so their compute_ms is no k x unit (its rows on the H200 read 0.002 units).
        rows = tl[(tl.copies > 0) & tl.scenario.str.contains(f"/bs{BATCH_SIZE}/", regex=False)]
        own, other, where = [], [], []
        for b, ms, host in zip(rows.batch, rows.compute_ms, rows.batch_ms):
            if b < 4:
                continue
            k, before = b % 4 + 1, (b - 1) % 4 + 1
            own.append(ms / (k * unit))
            other.append(ms / (before * unit))
            where.append((int(b), float(host)))
        loaders = json.loads((out / "meta.json").read_text()).get("loaders", {})
        head = next((ln for ln in (out / "diagnosis.md").read_text().splitlines() if ln.startswith("**")), "?")
        i = max(range(len(own)), key=lambda j: abs(own[j] - 1))
        # The worst row's batch and its host time: a row far over its k with a host time to match is a
        # stall inside its step (an event span holds the GPU's idle time), not a neighbour's step.
        b, host = where[i]
        print(
            f"{name}: {len(tl)} rows ({len(rows)} of the training loader with copies), clock {tl.gpu_clock.iloc[-1]}, "
            f"compute_ms / (k x unit): median {statistics.median(own):.4f}, worst {own[i]:.4f} (batch {b}, "
            f"batch_ms {host:.3f} against a median {statistics.median(h for _, h in where):.3f}), last "
            f"{own[-1]:.4f}; against the batch before's k: median {statistics.median(other):.4f}; "
            f"{ {s: (v['pattern'], v['row_boundary']) for s, v in loaders.items()} }\n  headline: {head}"
        )


if __name__ == "__main__":
    main()
