#!/usr/bin/env python3
"""What the journal's appends cost the profiled loop, this checkout against an older one, side by side
in alternated processes (any machine; no GPU).

``pinprof profile`` of a loop whose step is many small torch ops (Python-bound, as a step that
launches kernels is), batches of 1 ms or so, for about ``--seconds``. The journal appends completed
rows from a thread of its own; building and writing them holds Python's lock, and a batch that runs
meanwhile waits. Per process it prints the median batch, the batches over ``STALL`` times the median
(stalled), their time beyond the median, and the loop's total; then the medians of the rounds.

    python scripts/bench_journal.py --baseline PATH [--rounds 3] [--seconds 20]   (PATH: git worktree add PATH <commit>)
"""

from __future__ import annotations

import argparse
import os
import statistics
import subprocess
import sys
import tempfile
from pathlib import Path

import pandas as pd

from profiler.bench import baseline

STALL = 10.0  # a batch over 10 times the median is a stall (the loop's own batches vary by under 2x)
LOOP = """
import sys, torch
from torch.utils.data import DataLoader, TensorDataset
n = int(sys.argv[1])
loader = DataLoader(TensorDataset(torch.randn(4 * n, 16), torch.randint(0, 2, (4 * n,))), batch_size=4)
w = torch.randn(16, 16)
p = torch.nn.Parameter(torch.randn(16))
opt = torch.optim.SGD([p], lr=0.01)
for x, y in loader:
    x = x.to("cpu")
    for _ in range(150):
        x = torch.tanh(x @ w)
    (x.sum() * p.sum()).backward()
    opt.step()
    opt.zero_grad()
"""


def one(env: dict[str, str], cwd: str, batches: int, work: Path) -> dict[str, float]:
    """One ``pinprof profile`` process; its stalls from the timeline it wrote."""
    out = Path(tempfile.mkdtemp(dir=work))
    script = work / "loop.py"
    cmd = [
        sys.executable,
        "-m",
        "profiler",
        "profile",
        "--out",
        str(out),
        "--no-plots",
        "--",
        str(script),
        str(batches),
    ]
    done = subprocess.run(cmd, env=env, cwd=cwd, capture_output=True, text=True, timeout=900)
    if done.returncode != 0:
        raise SystemExit(f"pinprof profile failed (rc {done.returncode}): {done.stderr[-800:]}")
    tl = pd.read_csv(out / "timeline.csv")
    tl = tl[~tl.warmup.astype(bool)]
    med = float(tl.batch_ms.median())
    stalled = tl[tl.batch_ms > STALL * med]
    return {
        "median_ms": med,
        "stalls": float(len(stalled)),
        "excess_ms": float((stalled.batch_ms - med).sum()),
        "total_ms": float(tl.batch_ms.sum()),
        "rows": float(len(tl)),
    }


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--baseline", required=True, help="an older checkout (git worktree add PATH <commit>)")
    ap.add_argument("--rounds", type=int, default=3, help="alternated processes per side (default 3)")
    ap.add_argument("--seconds", type=float, default=20.0, help="about how long each loop runs (default 20)")
    args = ap.parse_args()
    base = baseline.checkout(args.baseline)
    here = str(Path(__file__).resolve().parent.parent)
    env = {k: v for k, v in os.environ.items() if k != "PINPROF_FLUSH_S"}  # the default interval, as users run
    sides = [("HEAD", here, env), ("baseline", base, baseline.env_for(base, env))]
    work = Path(tempfile.mkdtemp(prefix="pinprof-journal-"))
    (work / "loop.py").write_text(LOOP, encoding="utf-8")
    probe = one(env, here, 500, work)  # how long a batch takes here, to size the loops
    batches = max(1000, int(args.seconds * 1e3 / probe["median_ms"]))
    got: dict[str, list[dict[str, float]]] = {}
    for r in range(args.rounds):
        for name, cwd, e in sides if r % 2 == 0 else sides[::-1]:
            res = one(e, cwd, batches, work)
            got.setdefault(name, []).append(res)
            print(
                f"round {r + 1} {name}: {res['rows']:.0f} batches, median {res['median_ms']:.3f} ms, "
                f"{res['stalls']:.0f} over {STALL:.0f}x it, {res['excess_ms']:.1f} ms beyond the median, "
                f"loop {res['total_ms'] / 1e3:.2f} s",
                flush=True,
            )
    print(f"journal stalls, median of {args.rounds} alternated processes a side ({batches} batches each):")
    for name, _, _ in sides:
        rs = got[name]
        print(
            f"  {name}: stalled batches {statistics.median(r['stalls'] for r in rs):.0f}, beyond the median "
            f"{statistics.median(r['excess_ms'] for r in rs):.1f} ms, loop {statistics.median(r['total_ms'] for r in rs) / 1e3:.3f} s"
        )
    h, b = got["HEAD"], got["baseline"]
    ratio = statistics.median(r["total_ms"] for r in h) / statistics.median(r["total_ms"] for r in b)
    print(f"  loop time HEAD / baseline: {ratio:.4f}")


if __name__ == "__main__":
    main()
