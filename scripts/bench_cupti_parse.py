#!/usr/bin/env python3
"""What CUPTI's records cost the recorder's thread, this checkout against an older one (any machine; no
GPU). That thread parses each activity buffer and attributes its records to batches holding Python's
lock, so a loop whose own thread holds it (augmentation code, a short step) waits that long.

Each side runs in its own process, alternated (``--rounds``), and prints medians:
- ``parse``: ``layout.parse`` of buffers made here with the record sizes of the H200's CUPTI, in
  microseconds a batch: ``short-runs``, a resident loop's pattern (3 copies, then 4 kernels, a batch;
  225 batches a buffer, about half a second of that loop: CUPTI's flush period); ``long-runs``, a
  resnet-like step (2 copies, then 320 kernels; 12 batches a buffer);
- ``replay``: the H200 short step's recorded buffers (``tests/data/h200_thread_queues``: 249 batches,
  4 MiB of records) through ``Records`` as the recorder met them (``profiler.bench.cupti_replay``):
  parsing and attribution, microseconds a batch;
- ``late kernels``: a buffer of kernels that came back after their batches were written (an autograd
  thread's own queue: 40 for each of the last 60 batches), taken beside 300 and 4,500 written
  batches (the recorder keeps 30 s of them: 4,500 at 150 batches a second), microseconds a batch.

    python scripts/bench_cupti_parse.py [--baseline PATH] [--rounds 5]   (PATH: git worktree add PATH <commit>)
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys

from profiler.bench import baseline

HERE = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))

CHILD = r"""
import importlib.util, json, statistics, sys, time
from pathlib import Path
import profiler
from profiler.capture.clocks.cupti import layout

here = Path(sys.argv[1])
print("package", profiler.__file__, flush=True)
# The replay module of this checkout, run on the package of the side measured (an older one may lack it).
spec = importlib.util.spec_from_file_location("cupti_replay", here / "profiler" / "bench" / "cupti_replay.py")
replay = importlib.util.module_from_spec(spec)
spec.loader.exec_module(replay)
SIZES = replay.SIZES


def kernel(t, corr):
    return replay.kernel_record(t, t + 5_000, t - 2_000, corr)


def memcpy(t, corr):
    return replay.memcpy_record(t, t + 20_000, 1 << 20, 2, corr)


def buffer(batches, copies, kernels):
    parts, t, corr = [], 10**9, 1
    for _ in range(batches):
        for _ in range(copies):
            parts.append(memcpy(t, corr)); t += 30_000; corr += 1
        for _ in range(kernels):
            parts.append(kernel(t, corr)); t += 10_000; corr += 1
    return b"".join(parts)


def per_batch(fn, batches, repeats):
    fn()  # the first call imports and caches
    got = []
    for _ in range(repeats):
        t0 = time.perf_counter_ns()
        fn()
        got.append((time.perf_counter_ns() - t0) / 1e3 / batches)
    return statistics.median(got)


out = {}
for name, (batches, copies, kernels) in {"short-runs": (225, 3, 4), "long-runs": (12, 2, 320)}.items():
    buf = buffer(batches, copies, kernels)
    out[f"parse {name}"] = per_batch(lambda: layout.parse(buf, dict(SIZES)), batches, 15)
path = here / "tests" / "data" / "h200_thread_queues" / "recording.npz"
recording = replay.load(path)  # read and unpacked once: not the recorder's work
out["replay h200_thread_queues"] = per_batch(lambda: replay.replay_live(*recording), len(recording[1]["batches"]), 5)

# Kernels that come back after their batches were written (an autograd thread's own queue), against
# how many written batches the recorder keeps (30 s of them: 4,500 at 150 batches a second).
from profiler.capture.clocks.cupti.batches import Pending, Stats
from profiler.capture.clocks.cupti.records import Records
from profiler.capture.store import TEMPLATE, Store

MS, T0, LAST, PER = 10**6, 10**9, 60, 40


def kept(n):
    rec, store = Records(Stats()), Store()
    for b in range(n):
        row = dict(TEMPLATE)
        row["batch"] = b
        store.append(row)
        store.wait_for_gpu(b)
        t = T0 + b * 7 * MS
        rec.incoming.append(Pending(store, b, [], [(t, t + 6 * MS)], t + 6 * MS))
    rec.take(layout.parse(kernel(T0 + n * 7 * MS + 100 * MS, 1), dict(SIZES)), lambda v: v)
    rec.process(force=False)  # every batch written: its record came 100 ms after its end
    return rec


def late(n):
    parts, corr = [], 10
    for b in range(n - LAST, n):
        for k in range(PER):
            parts.append(kernel(T0 + b * 7 * MS + MS + k * 100_000 + 2_000, corr))  # launched in b's window
            corr += 1
    return layout.parse(b"".join(parts), dict(SIZES))


for n in (300, 4500):
    buf, got = late(n), []
    for _ in range(5):
        rec = kept(n)
        t0 = time.perf_counter_ns()
        rec.take(buf, lambda v: v)
        got.append((time.perf_counter_ns() - t0) / 1e3 / LAST)
    out[f"late kernels, {n} batches kept"] = statistics.median(got)
print("RESULT " + json.dumps(out), flush=True)
"""


def run(side: str, root: str) -> dict[str, float]:
    """One process with the package at ``root`` first on the path."""
    done = subprocess.run(
        [sys.executable, "-c", CHILD, HERE],
        env=baseline.env_for(root),
        cwd=root,
        capture_output=True,
        text=True,
        timeout=600,
    )
    if done.returncode != 0:
        raise SystemExit(f"{side}: the bench failed (rc {done.returncode}): {done.stderr[-800:]}")
    for line in done.stdout.splitlines():
        if line.startswith("package "):
            baseline.check_package(line, root, side)
        if line.startswith("RESULT "):
            return dict(json.loads(line[7:]))
    raise SystemExit(f"{side}: no result: {done.stdout[-400:]}")


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--baseline", help="an older checkout to run beside this one (git worktree add PATH <commit>)")
    ap.add_argument("--rounds", type=int, default=5, help="alternated processes per side (default 5)")
    args = ap.parse_args()
    sides = [("HEAD", HERE)]
    if args.baseline:
        sides.append(("baseline", baseline.checkout(args.baseline)))
    got: dict[str, dict[str, list[float]]] = {name: {} for name, _ in sides}
    for r in range(args.rounds):
        for name, root in sides if r % 2 == 0 else sides[::-1]:
            for k, v in run(name, root).items():
                got[name].setdefault(k, []).append(v)
        print(f"  round {r + 1}/{args.rounds}", file=sys.stderr, flush=True)
    print(f"CUPTI records on the recorder's thread, us a batch, median of {args.rounds} alternated processes:")
    for k in got["HEAD"]:
        row = " | ".join(
            f"{name} {statistics.median(got[name][k]):.1f} (rounds {', '.join(f'{v:.1f}' for v in got[name][k])})"
            for name, _ in sides
        )
        print(f"  {k}: {row}")
    if args.baseline:
        for k in got["HEAD"]:
            print(
                f"  {k}: HEAD / baseline {statistics.median(got['HEAD'][k]) / statistics.median(got['baseline'][k]):.3f}"
            )


if __name__ == "__main__":
    main()
