"""Where a small copy's slow tail comes from: position in a loop, the source tensor, or the GPU's clock.

``tests/test_gpu_cupti.py``'s 1 MiB pinned blocking case compares p90s of ``h2d_gpu_ms`` and, on the
H100, both sides put nine tenths of their slowest copies in the second half of each round. This script
takes pinprof out of it: torch.profiler alone records the same loop (48 pinned 1 MiB batches, a blocking
``.to()``, one matmul, a sync) for a few rounds per variant, while ``nvidia-smi`` samples the SM clock, and
prints where the slow copies fall:

- ``fixed``: as in the test;
- ``reversed``: every other round walks the batches backwards (slow by position or by tensor?);
- ``busy``: eight matmuls a step instead of one (does a busier GPU keep its clock?);
- ``one``: one source tensor for every batch.

Run on a GPU: ``python scripts/copy_tail.py [--rounds 12]``.
"""

from __future__ import annotations

import argparse
import csv
import io
import shutil
import subprocess
import sys
import time

import numpy as np
import torch

from profiler.bench.cupti import trace_events

MiB = 1 << 20
DEV = torch.device("cuda")


def loop(batches: list[torch.Tensor], order: list[int], k: int, x: torch.Tensor, w: torch.Tensor) -> None:
    """The test's blocking loop: copy, k matmuls, sync."""
    for i in order:
        moved = batches[i].to(DEV)
        del moved
        y = x
        for _ in range(k):
            y = torch.tanh(y @ w)
        y.sum()
        torch.cuda.synchronize()


def copies(events: list[dict]) -> list[tuple[float, float]]:
    """(start us on the trace's clock, duration ms) of each 1 MiB host-to-device copy, in order."""
    out = [
        (float(e["ts"]), float(e.get("dur", 0)) / 1e3)
        for e in events
        if e.get("cat") == "gpu_memcpy"
        and "HtoD" in e.get("name", "")
        and int(e.get("args", {}).get("bytes", 0)) == MiB
    ]
    return sorted(out)


def clocks_from(text: str) -> list[tuple[float, float]]:
    """(unix s, SM MHz) samples of ``nvidia-smi --query-gpu=timestamp,clocks.sm --format=csv,noheader,nounits``."""
    rows = []
    for r in csv.reader(io.StringIO(text)):
        if len(r) < 2:
            continue
        try:
            stamp = time.mktime(time.strptime(r[0].strip().split(".")[0], "%Y/%m/%d %H:%M:%S"))
            frac = float("0." + r[0].strip().split(".")[1]) if "." in r[0] else 0.0
            rows.append((stamp + frac, float(r[1])))
        except ValueError:
            continue
    return rows


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--rounds", type=int, default=12, help="rounds of 48 batches per variant (default 12)")
    args = ap.parse_args()
    if args.rounds < 2:
        sys.exit(f"copy_tail.py: --rounds {args.rounds} is too few; give 2 or more")
    g = torch.Generator().manual_seed(1)
    n = 48
    batches = [torch.randint(0, 255, (MiB,), dtype=torch.uint8, generator=g).pin_memory() for _ in range(n)]
    x = torch.randn(256, 1024, device=DEV)
    w = torch.randn(1024, 1024, device=DEV) / 32
    loop(batches, list(range(3)), 1, x, w)  # warm: kernels loaded, allocator grown
    smi = None
    if shutil.which("nvidia-smi"):
        smi = subprocess.Popen(
            ["nvidia-smi", "--query-gpu=timestamp,clocks.sm", "--format=csv,noheader,nounits", "-lms", "20"],
            stdout=subprocess.PIPE,
            stderr=subprocess.DEVNULL,
            text=True,
        )
    spans: dict[str, list[tuple[float, float, np.ndarray, list[int]]]] = {}
    variants = ("fixed", "reversed", "busy", "one")
    for r in range(args.rounds):
        for v in variants:  # variants interleaved: each samples the same stretch of time
            order = list(range(n))
            src = batches
            if v == "reversed" and r % 2:
                order.reverse()
            if v == "one":
                src = [batches[0]] * n
            k = 8 if v == "busy" else 1
            t0 = time.time()
            events, _ = trace_events(lambda: loop(src, order, k, x, w), cpu=False, cuda=True)  # noqa: B023
            t1 = time.time()
            got = copies(events)
            if len(got) != n:
                sys.exit(f"copy_tail.py: {v} round {r} has {len(got)} 1 MiB copies, expected {n}")
            spans.setdefault(v, []).append((t0, t1, np.array([d for _, d in got]), order))
    clocks: list[tuple[float, float]] = []
    if smi is not None:
        smi.terminate()
        out, _ = smi.communicate(timeout=10)
        clocks = clocks_from(out)
    print(f"1 MiB pinned blocking copies, 48 a round, {args.rounds} rounds a variant, torch.profiler's records (ms)")
    for v in variants:
        dur = np.concatenate([d[2:] for _, _, d, _ in spans[v]])  # the test skips each round's first 2
        med, p90 = np.median(dur), np.quantile(dur, 0.9)
        per_round = [np.quantile(d[2:], 0.9) for _, _, d, _ in spans[v]]
        slow_pos = np.zeros(6, dtype=int)
        slow_tensor = np.zeros(2, dtype=int)
        for _, _, d, order in spans[v]:
            for pos in range(2, n):
                if d[pos] > 1.3 * med:
                    slow_pos[(pos - 2) * 6 // (n - 2)] += 1
                    slow_tensor[order[pos] * 2 // n] += 1
        half = len(dur) // 2
        print(
            f"  {v:9s} median {med:.4f} p90 {p90:.4f} | slow (>1.3x median) {np.mean(dur > 1.3 * med):.3f} | "
            f"halves' p90 {np.quantile(dur[:half], 0.9):.4f} / {np.quantile(dur[half:], 0.9):.4f}"
        )
        print(f"            slow by sixth of a round {slow_pos.tolist()}, by tensor half {slow_tensor.tolist()}")
        print(f"            p90 by round {' '.join(f'{p:.4f}' for p in per_round)}")
        if clocks:
            inside = [c for t0, t1, _, _ in spans[v] for (s, c) in clocks if t0 <= s <= t1]
            if inside:
                q = np.quantile(inside, [0, 0.1, 0.5, 0.9, 1])
                print(
                    f"            SM clock while it ran, MHz: min {q[0]:.0f} p10 {q[1]:.0f} median {q[2]:.0f} p90 {q[3]:.0f} max {q[4]:.0f}"
                )
    if not clocks:
        print("  (no SM clock samples: nvidia-smi missing or gave none)")


if __name__ == "__main__":
    main()
