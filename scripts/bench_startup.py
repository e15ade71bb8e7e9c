#!/usr/bin/env python3
"""Wall time of the reading verbs, whole process included: ``pinprof diagnose`` on a committed report,
``pinprof --help``, and ``import torch`` alone for scale, and a ``pinprof run`` of four small CPU
batches, each run N times side by side (ABAB order), medians printed. The reading verbs must not pay
for torch (target: diagnose under 1 s on the 2-core CPU machine). ``--baseline PATH`` (a worktree of
an older commit) runs its ``pinprof run`` in the same rounds.

    python scripts/bench_startup.py [--repeats 7] [--report tests/data/h200_default] [--baseline PATH]
"""

from __future__ import annotations

import argparse
import os
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]


def wall_s(cmd: list[str], root: Path = ROOT) -> float:
    t0 = time.perf_counter()
    env = {**os.environ, "PYTHONPATH": str(root)}
    subprocess.run(cmd, check=True, cwd=root, env=env, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    return time.perf_counter() - t0


def run_cmd(out: Path) -> list[str]:
    """``pinprof run`` of four batches of 16 synthetic items on the CPU, no workers: mostly its start."""
    small = "--batches 4 --skip 1 --batch-size 16 --num-workers 0 --dataset-size 256 --modes pageable"
    return [sys.executable, "-m", "profiler", "run", "--out", str(out), "--force", "--device", "cpu", *small.split()]


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--repeats", type=int, default=7)
    ap.add_argument("--report", type=Path, default=ROOT / "tests" / "data" / "h200_default")
    ap.add_argument("--baseline", type=Path, default=None, help="an older checkout whose pinprof run to time too")
    args = ap.parse_args()
    with tempfile.TemporaryDirectory() as tmp:
        report = Path(tmp) / "report"  # a copy: diagnose rewrites diagnosis.md in a report folder
        shutil.copytree(args.report, report)
        cmds = {
            "pinprof diagnose": [sys.executable, "-m", "profiler", "diagnose", str(report)],
            "pinprof --help": [sys.executable, "-m", "profiler", "--help"],
            "import torch": [sys.executable, "-c", "import torch"],
            "pinprof run": run_cmd(Path(tmp) / "run"),
        }
        roots = {name: ROOT for name in cmds}
        if args.baseline is not None:
            cmds["pinprof run (baseline)"] = run_cmd(Path(tmp) / "run-baseline")
            roots["pinprof run (baseline)"] = args.baseline.resolve()
        wall_s(cmds["pinprof diagnose"])  # warm the file cache first
        times: dict[str, list[float]] = {k: [] for k in cmds}
        for _ in range(args.repeats):
            for name, cmd in cmds.items():
                times[name].append(wall_s(cmd, roots[name]))
    for name, ts in times.items():
        print(f"{name:22s} median {statistics.median(ts):.3f} s  (min {min(ts):.3f}, max {max(ts):.3f}, n={len(ts)})")
    diag = statistics.median(times["pinprof diagnose"])
    print(f"pinprof diagnose: {diag:.3f} s, {'under' if diag < 1.0 else 'OVER'} the 1 s target")
    return 0


if __name__ == "__main__":
    sys.exit(main())
