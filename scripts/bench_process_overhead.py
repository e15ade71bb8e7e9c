#!/usr/bin/env python3
"""What ``pinprof profile`` costs a script, process against process: the script bare, then under
``pinprof profile``, alternated round by round (ABBA order), each process reporting the median of its
own steady steps (a line ``steady step ms (median of N): X``, as ``scripts/resnet_train.py`` prints).

Why processes and not blocks of one process: CUPTI, once enabled, is process-wide, so a bare block
beside a profiled one would pay for its records too; and a run of ``pinprof profile`` is a process.

    python scripts/bench_process_overhead.py [--rounds 4] -- python3 scripts/resnet_train.py --steps 100
    python scripts/bench_process_overhead.py --baseline PATH -- ...   (also an older checkout's pinprof
        profile, in the same rounds, the three kinds' order rotated round by round)
    python scripts/bench_process_overhead.py --records-only -- ...   (also the script with CUPTI's records
        on and nothing else of pinprof's, ``scripts/records_only.py``: CUPTI's own share of the ratio;
        once with memcpy and kernel records, once with memcpy records alone; --memcpy-records: the latter
        alone)
    python scripts/bench_process_overhead.py --runner -- ...   (also the script run by pinprof's runner
        with no record, no hook: what the process costs before CUPTI or the hooks)
    python scripts/bench_process_overhead.py --bare-twice -- ...   (a second bare process each round: the
        ratio two identical processes read, against which the others' ratios are read)
    python scripts/bench_process_overhead.py --events -- ...   (also pinprof profile with the events as
        its GPU clock, PINPROF_BACKEND=events, in the same rounds)
    python scripts/bench_process_overhead.py --kernels -- ...   (also pinprof profile with CUPTI's kernel
        records on, PINPROF_KERNELS=1, in the same rounds)
"""

from __future__ import annotations

import argparse
import json
import os
import re
import statistics
import subprocess
import sys
import tempfile
from pathlib import Path

from profiler.bench import baseline
from profiler.bench.rounds import median_interval

STEADY = re.compile(r"steady step ms \(median of (\d+)\): ([0-9.]+)")
RECORDS_ONLY = Path(__file__).with_name("records_only.py")
WAIT = re.compile(r"steady wait ms \(median of (\d+)\): ([0-9.]+)")  # scripts/resnet_train.py's wait for a batch


def run(
    cmd: list[str], timeout: float, cwd: str | None = None, env: dict[str, str] | None = None
) -> tuple[float | None, float | None, str]:
    """(the process's steady step ms, or None; its steady wait for a batch, ms, where it prints one;
    the tail of its output)."""
    out = subprocess.run(cmd, capture_output=True, text=True, timeout=timeout, cwd=cwd, env=env)
    text = out.stdout + out.stderr
    m, w = STEADY.search(text), WAIT.search(text)
    return (float(m.group(2)) if m else None), (float(w.group(2)) if w else None), text[-800:]


def attribution(clock: dict[str, object], timeline: Path, threads: object = None) -> str:
    """What the profiled run's records say of their own attribution: copy calls left without a record,
    and rows whose step reads far more kernel time than the median row (a neighbour's kernels).
    ``threads``: meta.json's ``pinprof_threads_ms`` (CPU ms of pinprof's own threads, per part)."""
    said = (
        f"copy calls {clock.get('copy_calls', '-')}, unmatched {clock.get('unmatched_copy_calls', '-')}, "
        f"late records {clock.get('late_records', '-')}"
    )
    if not timeline.is_file():
        return said + "; no timeline.csv"
    import pandas as pd

    tl = pd.read_csv(timeline)
    # Where a profiled step's time went, so a ratio above 1 says which phase grew against the bare run
    # (the loader's wait, the pin thread's copy, pinprof's own time on the loop's thread, and its
    # threads' CPU time a batch beside it).
    parts = [
        f"{c} median {float(tl[c].median()):.3f}" for c in ("batch_ms", "wait_ms", "pin_ms", "pinprof_ms") if c in tl
    ]
    if isinstance(threads, dict) and len(tl):
        parts += [f"threads' {k} {float(v) / len(tl):.4f} ms a batch" for k, v in sorted(threads.items())]
    said = f"{said}; {', '.join(parts)}" if parts else said
    if "compute_ms" not in tl or tl["compute_ms"].isna().all():
        return said
    c = tl["compute_ms"].dropna()
    med = float(c.median())
    return (
        f"{said}; compute_ms median {med:.4f}, p99 {float(c.quantile(0.99)):.4f}, "
        f"rows above 1.5x median {int((c > 1.5 * med).sum())} of {len(c)}"
    )


def _absolute(cmd: list[str]) -> list[str]:
    """``cmd`` with each argument that names a file here made absolute: the baseline's processes run
    from its checkout (``--baseline``)."""
    return [str(Path(a).absolute()) if Path(a).is_file() else a for a in cmd]


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--rounds", type=int, default=4, help="bare/profiled pairs (default 4)")
    ap.add_argument("--timeout", type=float, default=120, help="seconds a process may take (default 120)")
    ap.add_argument("--keep", default=None, help="keep each round's pinprof output under KEEP/round-N (default: none)")
    ap.add_argument(
        "--baseline",
        default=None,
        help=f"also profile under the older checkout at PATH, in the same rounds ({baseline.HINT})",
    )
    ap.add_argument(
        "--records-only",
        action="store_true",
        help="also run the script with CUPTI's records on and no hooks, in the same rounds (scripts/records_only.py)",
    )
    ap.add_argument(
        "--memcpy-records",
        action="store_true",
        help="also run the script with CUPTI's memcpy records alone on and no hooks (records_only.py --memcpy-only)",
    )
    ap.add_argument(
        "--runner",
        action="store_true",
        help="also run the script by pinprof's runner alone, no records and no hooks (scripts/records_only.py --none)",
    )
    ap.add_argument(
        "--bare-twice",
        action="store_true",
        help="also run the bare script a second time each round: the ratio of two identical processes",
    )
    ap.add_argument(
        "--events",
        action="store_true",
        help="also run pinprof profile with the events as its GPU clock (PINPROF_BACKEND=events), in the same rounds",
    )
    ap.add_argument(
        "--kernels",
        action="store_true",
        help="also run pinprof profile with CUPTI's kernel records on (PINPROF_KERNELS=1), in the same rounds",
    )
    ap.add_argument("cmd", nargs=argparse.REMAINDER, help="-- the script's command line")
    args = ap.parse_args()
    cmd = args.cmd[1:] if args.cmd[:1] == ["--"] else args.cmd
    if not cmd:
        ap.error("give the script's command after --")
    # The profiled kinds: this checkout, and the baseline's, run from its folder (``python -m`` looks
    # in the working directory first) with its package first on PYTHONPATH.
    sides: dict[str, tuple[str | None, dict[str, str] | None]] = {"profiled": (None, None)}
    if args.baseline:
        root = baseline.checkout(args.baseline)
        sides["baseline"] = (root, baseline.env_for(root))
        cmd = _absolute(cmd)
    if args.events:
        sides["events"] = (None, {**os.environ, "PINPROF_BACKEND": "events"})
    if args.kernels:
        sides["kernels"] = (None, {**os.environ, "PINPROF_KERNELS": "1"})
    # Kinds run beside the bare script without pinprof profile: the bare script again, pinprof's runner
    # alone, CUPTI's records alone.
    plain: dict[str, list[str]] = {"bare2": cmd} if args.bare_twice else {}
    if args.runner:
        plain["runner"] = [sys.executable, str(RECORDS_ONLY), "--none", "--", *cmd]
    if args.records_only:
        plain["records"] = [sys.executable, str(RECORDS_ONLY), "--", *cmd]
    if args.records_only or args.memcpy_records:
        plain["memcpy"] = [sys.executable, str(RECORDS_ONLY), "--memcpy-only", "--", *cmd]
    steps: dict[str, list[float]] = {kind: [] for kind in ("bare", *plain, *sides)}
    backends: dict[str, str] = {}  # each profiled kind's GPU clock, as its meta.json names it
    for r in range(args.rounds):
        with tempfile.TemporaryDirectory(prefix="pinprof-bench-") as scratch:
            tmp = Path(args.keep) / f"round-{r}" if args.keep else Path(scratch)
            runs: list[tuple[str, list[str], str | None, dict[str, str] | None]] = [("bare", cmd, None, None)]
            runs += [(kind, c, None, None) for kind, c in plain.items()]
            for kind, (cwd, env) in sides.items():
                out = str((tmp / kind) if len(sides) > 1 else tmp)
                runs.append(
                    (
                        kind,
                        [sys.executable, "-m", "profiler", "profile", "--out", out, "--no-plots", "--", *cmd],
                        cwd,
                        env,
                    )
                )
            # ABBA, or a rotation of three: a drift of the machine weighs on every kind alike
            order = runs[::-1] if r % 2 and len(runs) == 2 else runs[r % len(runs) :] + runs[: r % len(runs)]
            got: dict[str, float] = {}
            waits: dict[str, float] = {}
            for kind, c, cwd, env in order:
                ms, wait, tail = run(c, args.timeout, cwd, env)
                if ms is None:
                    print(f"round {r}: {kind} gave no steady step line:\n{tail}", flush=True)
                    continue
                got[kind] = ms
                if wait is not None:
                    waits[kind] = wait
            for kind in sides:
                folder = (tmp / kind) if len(sides) > 1 else tmp
                meta = folder / "meta.json"
                if meta.is_file():
                    info = json.loads(meta.read_text())
                    clock = info.get("gpu_clock", {})
                    backends[kind] = str(clock.get("backend", "?"))
                    said = attribution(clock, folder / "timeline.csv", info.get("pinprof_threads_ms"))
                    print(f"round {r}: {kind}: {said}", flush=True)
        if len(got) == len(runs):
            for kind, ms in got.items():
                steps[kind].append(ms)
            for kind in plain:
                print(
                    f"round {r}: bare {got['bare']:.3f} ms, {kind} {got[kind]:.3f} ms, ratio {got[kind] / got['bare']:.4f}"
                )
            for kind in sides:
                # the script's own wait for its batches on each side: a profiled run slowed by its input
                # pipeline (the workers, the pin thread) shows it there, not in pinprof's own time
                said = (
                    f", wait bare {waits['bare']:.3f} ms, {kind} {waits[kind]:.3f} ms"
                    if "bare" in waits and kind in waits
                    else ""
                )
                print(
                    f"round {r}: bare {got['bare']:.3f} ms, {kind} {got[kind]:.3f} ms, "
                    f"ratio {got[kind] / got['bare']:.4f} (backend {backends.get(kind, '?')}){said}",
                    flush=True,
                )
    bare_ms = steps["bare"]
    if not bare_ms:
        return
    for kind in (*plain, *sides):
        ratios = [p / b for b, p in zip(bare_ms, steps[kind])]
        name = {
            "profiled": "pinprof profile",
            "bare2": "the bare script again",
            "runner": "pinprof's runner alone",
            "records": "CUPTI's records alone",
            "memcpy": "CUPTI's memcpy records alone",
            "events": "pinprof profile, events clock",
            "kernels": "pinprof profile --kernels",
        }.get(kind, f"pinprof profile of {args.baseline}")
        print(
            f"{name} / bare, median of {len(ratios)} rounds: {statistics.median(ratios):.4f} "
            f"(range {min(ratios):.4f}-{max(ratios):.4f}); steady step bare {statistics.median(bare_ms):.3f} ms, "
            f"{kind} {statistics.median(steps[kind]):.3f} ms; GPU clock {backends.get(kind, '-')}"
        )
        # What the rounds can tell: the median's interval, and the bare processes' own spread, which a
        # target of 1% must be read against (profiler.bench.rounds)
        got_ci = median_interval(ratios)
        ci = (
            f"{got_ci[0]:.4f}-{got_ci[1]:.4f} ({got_ci[2]:.1%} coverage)"
            if got_ci
            else f"none ({len(ratios)} rounds are too few for 90%)"
        )
        print(
            f"median ratio's interval (order statistics, 90% or more): {ci}; bare processes alone "
            f"{min(bare_ms):.3f}-{max(bare_ms):.3f} ms a step"
        )
    if "records" in plain and "profiled" in sides:
        # pinprof's own share: each round's profiled process against the same round's records-only one
        own = [p / c for c, p in zip(steps["records"], steps["profiled"])]
        print(
            f"pinprof profile / CUPTI's records alone, median of {len(own)} rounds: {statistics.median(own):.4f} "
            f"(range {min(own):.4f}-{max(own):.4f})"
        )


if __name__ == "__main__":
    main()
