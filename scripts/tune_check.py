#!/usr/bin/env python3
"""Does ``pinprof tune``'s winner hold? For each case of ``scripts/tune_targets.py``: ``pinprof tune``
of the script as written; then the winner applied by hand (the script's own flags, as a person would
edit the code) timed against the original, alternated processes, each printing its mean step
(``STEP_MS``); the measured speedup beside the interval tune gave.

    python scripts/tune_check.py --out DIR [--cases naive,better,resnet,loader] [--rounds 3]
        [--tune-steps 30] [--steps 100] [--budget-s 300] [--device cuda] [--only KNOB,...]

Writes ``DIR/<case>/tune/`` (tune's folder) and prints, per case, the tune table's winner and
``applied by hand: speedup X (original A ms, applied B ms a step, medians of R alternated rounds);
tune said S (LO-HI)``, and whether X >= LO.
"""

from __future__ import annotations

import argparse
import statistics
import subprocess
import sys
from pathlib import Path

import pandas as pd

HERE = Path(__file__).resolve().parent
TARGETS = HERE / "tune_targets.py"
# tune's knobs (profiler.capture.knobs) -> the target script's flags
FLAGS = {
    "num_workers": lambda v: ["--workers", str(int(v))],
    "pin_memory": lambda v: ["--pin-memory", "1" if str(v) == "True" else "0"],
    "non_blocking": lambda v: ["--non-blocking", "1" if str(v) == "True" else "0"],
    "prefetch_factor": lambda v: ["--prefetch-factor", str(int(v))],
    "prefetcher": lambda v: ["--prefetcher"] if str(v) == "True" else [],
}


def flags(changes: str) -> list[str]:
    """``k=v, k=v`` (tune.csv's ``changes``) as the target script's flags."""
    out: list[str] = []
    for part in filter(None, (p.strip() for p in changes.split(","))):
        key, _, value = part.partition("=")
        if key not in FLAGS:
            raise SystemExit(f"tune_check: no flag of tune_targets.py for {key!r} (in {changes!r})")
        out += FLAGS[key](value)
    return out


def step_ms(cmd: list[str], timeout: float) -> float:
    run = subprocess.run(cmd, capture_output=True, text=True, timeout=timeout)
    line = [ln for ln in run.stdout.splitlines() if ln.startswith("STEP_MS ")]
    if run.returncode != 0 or not line:
        raise SystemExit(f"tune_check: {' '.join(cmd)} failed (exit {run.returncode}): {run.stderr[-1500:]}")
    return float(line[-1].split()[1])


def check(case: str, out: Path, args: argparse.Namespace) -> None:
    script = [sys.executable, str(TARGETS), "--case", case, "--device", args.device]
    folder = out / case / "tune"
    tune = [sys.executable, "-m", "profiler", "tune", "--out", str(folder), "--steps", str(args.tune_steps)]
    tune += ["--budget-s", str(args.budget_s), "--device", args.device]
    tune += ["--only", args.only] if args.only else []
    tune += ["--", *script, "--steps", "100000"]
    print(f"== {case}: {' '.join(tune)}", flush=True)
    done = subprocess.run(tune, text=True, timeout=args.budget_s + 300)
    if done.returncode != 0:
        print(f"{case}: pinprof tune exited {done.returncode}")
        return
    table = pd.read_csv(folder / "tune.csv", keep_default_na=False)
    print(table.to_string(index=False))
    faster = table[table.verdict == "faster"]
    if faster.empty:
        print(f"{case}: tune named no winner: nothing to apply")
        return
    best = faster.loc[pd.to_numeric(faster.speedup).idxmax()]
    applied = flags(str(best.changes))
    timed = [*script, "--steps", str(args.steps)]
    got: dict[str, list[float]] = {"original": [], "applied": []}
    for r in range(args.rounds):
        order = [("original", timed), ("applied", timed + applied)]
        for name, cmd in order if r % 2 == 0 else order[::-1]:
            got[name].append(step_ms(cmd, timeout=600))
    a, b = statistics.median(got["original"]), statistics.median(got["applied"])
    lo, sp, hi = (float(best[k]) for k in ("speedup_lo", "speedup", "speedup_hi"))
    print(
        f"{case}: winner {best.trial} ({best.changes}) applied by hand ({' '.join(applied)}): speedup {a / b:.3f} "
        f"(original {a:.3f} ms, applied {b:.3f} ms a step, medians of {args.rounds} alternated rounds: "
        f"{got}); tune said {sp:.3f} ({lo:.3f}-{hi:.3f}): {'holds' if a / b >= lo else 'BELOW its interval'}",
        flush=True,
    )


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--out", type=Path, required=True)
    ap.add_argument("--cases", default="naive,better,resnet,loader")
    ap.add_argument("--rounds", type=int, default=3, help="alternated processes per side (default 3)")
    ap.add_argument("--tune-steps", type=int, default=30, help="pinprof tune --steps (default 30)")
    ap.add_argument("--steps", type=int, default=100, help="steps timed in each side-by-side process (default 100)")
    ap.add_argument("--budget-s", type=float, default=300.0, help="pinprof tune --budget-s (default 300)")
    ap.add_argument("--device", default="cuda")
    ap.add_argument("--only", default="", help="pinprof tune --only KNOB,... (default: every knob)")
    args = ap.parse_args()
    for case in filter(None, (c.strip() for c in args.cases.split(","))):
        check(case, args.out, args)


if __name__ == "__main__":
    main()
