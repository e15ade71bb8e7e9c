#!/usr/bin/env python3
"""The recorder's host cost per batch on a CPU device, this checkout against an older one, in
alternated processes: what a change to the hot path costs, measurable on any machine (the GPU's own
figures come from ``scripts/bench_overhead.py --backends --baseline PATH`` on a GPU).

Four loops over small tensors (nothing but the recorder runs): ``library``,
``TransferProfiler.batches`` with ``to_device``, ``cpu_work()`` and ``compute()``; ``hooks``,
``pinprof profile``'s hooks (``auto_hooks``) around a DataLoader's ``next()`` and two ``.to()``
calls a batch; ``hooks-dict``, the hooks on dict batches of three leaves and no optimizer step (the
shape of ``scripts/resident_loop.py``); ``hooks-accelerate``, the same batches through Accelerate's
own loader, which fetches ahead (the hooks then mark each batch's step start as well). Each prints
(instrumented - bare) microseconds a batch, median of alternated rounds.

With ``--script``, the loop is a real script's instead (``tests/scripts/fake_cnn.py``, say): each
process is ``pinprof profile --no-plots`` of it, and what is compared is its report's ``pinprof_ms``
over the steady batches (median and mean, microseconds): the hooks' own clocks, beside real steps
that evict their code and data from the caches, where a tight loop keeps them.

    python scripts/bench_cpu_recorder.py --baseline PATH [--rounds 5]   (PATH: git worktree add PATH <commit>)
    python scripts/bench_cpu_recorder.py --baseline PATH --script python SCRIPT ARGS   (a real loop, below)
    python scripts/bench_cpu_recorder.py --per-call   (a .to() hook's cost against what pinprof_ms counts of it; a backward hook's)
    python scripts/bench_cpu_recorder.py --gc   (what the garbage-collection watch adds to each collection)
    python scripts/bench_cpu_recorder.py --gc-count SCRIPT [ARGS...]   (how many collections a script's loop makes)
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import time
from typing import Any

N = 3000


def _library(n: int) -> tuple[float, float]:
    import torch

    from profiler import TransferProfiler

    data = [torch.full((256,), float(i)) for i in range(64)]
    loader = [data[i % 64] for i in range(n)]
    dev = torch.device("cpu")

    def bare() -> float:
        t0 = time.perf_counter_ns()
        for b in loader:
            b.to(dev)
        return (time.perf_counter_ns() - t0) / n / 1e3

    def profiled() -> float:
        prof = TransferProfiler("pageable", dev)
        t0 = time.perf_counter_ns()
        for b in prof.batches(loader):
            prof.to_device(b)
            with prof.cpu_work():
                pass
            with prof.compute():
                pass
        el = (time.perf_counter_ns() - t0) / n / 1e3
        prof.timeline()
        return el

    return _rounds(bare, profiled)


def _hooks(n: int) -> tuple[float, float]:
    import torch
    from torch.utils.data import DataLoader, TensorDataset

    from profiler.capture import auto_hooks
    from profiler.capture.auto_session import AutoSession

    data = TensorDataset(torch.randn(n, 64), torch.zeros(n))
    dev = torch.device("cpu")

    def loop() -> None:
        for x, y in DataLoader(data, batch_size=1):
            x.to(dev), y.to(dev)

    def bare() -> float:
        t0 = time.perf_counter_ns()
        loop()
        return (time.perf_counter_ns() - t0) / n / 1e3

    def profiled() -> float:
        s = AutoSession(dev, run="bench")
        auto_hooks.start(s)
        t0 = time.perf_counter_ns()
        try:
            loop()
        finally:
            el = (time.perf_counter_ns() - t0) / n / 1e3
            auto_hooks.stop()
        s.close()
        return el

    return _rounds(bare, profiled)


def _three_leaves(n: int) -> Any:
    """A dataset of ``n`` dict batches of three small leaves (eight made once, handed out in turn): the
    resident loop's shape, with nothing but the recorder to pay for."""
    import torch
    from torch.utils.data import Dataset

    made = [{k: torch.zeros(16) for k in ("image", "label", "weight")} for _ in range(8)]

    class Items(Dataset[dict[str, torch.Tensor]]):
        def __len__(self) -> int:
            return n

        def __getitem__(self, i: int) -> dict[str, torch.Tensor]:
            return made[i % 8]

    return Items()


def _hooks_dict(n: int) -> tuple[float, float]:
    """The hooks on the resident loop's shape (``scripts/resident_loop.py``): dict batches of three
    leaves from a DataLoader with no collation (``batch_size=None``), one ``.to()`` a leaf, no
    optimizer step (two batches in flight at each copy). One session for all rounds, as a run has:
    a loader's first batches are read more closely (``in_flight.LOOKS``)."""
    import torch
    from torch.utils.data import DataLoader

    from profiler.capture import auto_hooks
    from profiler.capture.auto_session import AutoSession

    dev = torch.device("cpu")
    it = iter(DataLoader(_three_leaves(1 << 40), batch_size=None, num_workers=0))
    s = AutoSession(dev, run="bench")

    def bare() -> float:
        t0 = time.perf_counter_ns()
        for _ in range(n):
            for v in next(it).values():
                v.to(dev, non_blocking=True)
        return (time.perf_counter_ns() - t0) / n / 1e3

    def profiled() -> float:
        auto_hooks.start(s)
        try:
            return bare()
        finally:
            auto_hooks.stop()
            s.close_in_flight()

    try:
        return _rounds(bare, profiled)
    finally:
        s.close()


def _hooks_accelerate(n: int) -> tuple[float, float]:
    """The hooks on Accelerate's own loader (``Accelerator(cpu=True).prepare``), which fetches one batch
    ahead and copies each with its ``send_to_device``: dict batches of three leaves, no optimizer step
    (an evaluation loop). Each of its batches gets the mark of where its step starts (``_ahead``), the
    per-batch work a loader that fetches ahead adds (``timeline.schema.FETCHES_AHEAD``)."""
    import torch
    from accelerate import Accelerator
    from torch.utils.data import DataLoader

    from profiler.capture import auto_hooks
    from profiler.capture.auto_session import AutoSession

    dl = Accelerator(cpu=True).prepare(DataLoader(_three_leaves(n), batch_size=None, num_workers=0))

    def bare() -> float:
        t0 = time.perf_counter_ns()
        for _ in dl:
            pass
        return (time.perf_counter_ns() - t0) / n / 1e3

    def profiled() -> float:
        s = AutoSession(torch.device("cpu"), run="bench")
        auto_hooks.start(s)
        try:
            return bare()
        finally:
            auto_hooks.stop()
            s.close()

    return _rounds(bare, profiled)


def per_call(calls: int = 2000) -> None:
    """One ``.to()`` hook from outside (hooked against the original, in one batch) and what
    ``pinprof_ms`` counts of it: the difference is what no clock inside the hook sees. Then the
    ``backward`` hook's own cost, around an original that does nothing."""
    import torch
    from torch.utils.data import DataLoader, TensorDataset

    from profiler.capture import auto_hooks
    from profiler.capture.auto_session import AutoSession

    s = AutoSession(torch.device("cpu"), run="bench")
    auto_hooks.start(s)
    original = auto_hooks._ORIGINAL["to"]
    try:
        for (b,) in DataLoader(TensorDataset(torch.randn(16, 3, 32, 32)), batch_size=8):
            rec = s.cur[1]  # type: ignore[index]
            counted = rec["own_sum"]
            t0 = time.perf_counter_ns()
            for _ in range(calls):
                b.to("cpu")
            hooked = (time.perf_counter_ns() - t0) / calls / 1e3
            counted = (rec["own_sum"] - counted) / calls * 1e3
            t0 = time.perf_counter_ns()
            for _ in range(calls):
                original(b, "cpu")
            bare = (time.perf_counter_ns() - t0) / calls / 1e3
            print(
                f"a .to() hook: {hooked - bare:.2f} us from outside (hooked {hooked:.2f}, original {bare:.2f}), pinprof_ms counts {counted:.2f} us"
            )
            # The backward hook around a stand-in original that does nothing: a real backward's own
            # time (tens of us, drifting) would hide the hook's few.
            back = auto_hooks._ORIGINAL["backward"]
            auto_hooks._ORIGINAL["backward"] = nothing = lambda *a, **k: None
            took: dict[str, list[float]] = {"hooked": [], "original": []}
            try:
                for _ in range(5):
                    for name, fn in (("hooked", torch.autograd.backward), ("original", nothing)):
                        t0 = time.perf_counter_ns()
                        for _ in range(calls):
                            fn(b)
                        took[name].append((time.perf_counter_ns() - t0) / calls / 1e3)
            finally:
                auto_hooks._ORIGINAL["backward"] = back
            hooked, bare = statistics.median(took["hooked"]), statistics.median(took["original"])
            print(f"a backward hook: {hooked - bare:.2f} us from outside, the original taken as nothing")
            break
    finally:
        auto_hooks.stop()
        s.close()


def gc_watch(rounds: int = 9, calls: int = 200_000) -> None:
    """``profiler.capture.gc_pauses``'s callback runs around every collection of every generation.
    What it adds to one: ``calls`` collections of the youngest generation (``gc.collect(0)``, nearly
    empty: the collection itself is short, so the callback's part shows), with the watch and without,
    alternated; the difference per collection. Young collections come every 700 new objects; a full
    one, which the watch records, takes milliseconds."""
    import gc

    import torch  # noqa: F401  # the process a loop runs in

    from profiler.capture import gc_pauses

    def loop() -> float:
        t0 = time.perf_counter_ns()
        for _ in range(calls):
            gc.collect(0)
        return (time.perf_counter_ns() - t0) / calls / 1e3

    loop()
    on, off = [], []
    for _ in range(rounds):
        gc_pauses.unwatch()
        off.append(loop())
        gc_pauses.watch()
        on.append(loop())
    gc_pauses.unwatch()
    a, b = statistics.median(off), statistics.median(on)
    print(
        f"garbage-collection watch: {b - a:.3f} us a young collection ({a:.3f} us without, {b:.3f} us with; "
        f"median of {rounds} alternated rounds of {calls} gc.collect(0))"
    )


def gc_count(script: list[str]) -> None:
    """Run ``script`` (a path and its arguments) as ``python`` would, counting the collections of each
    generation from its first DataLoader ``next()`` on (its imports left out): how often a real loop
    pays what ``gc_watch`` measures."""
    import gc
    import runpy

    import torch.utils.data.dataloader as dl

    counts, batches = [0, 0, 0], [0]

    def count(phase: str, info: dict[str, int]) -> None:
        if phase == "start" and batches[0]:
            counts[info["generation"]] += 1

    original = dl._BaseDataLoaderIter.__next__

    def counted(self: dl._BaseDataLoaderIter) -> object:
        batches[0] += 1
        return original(self)

    dl._BaseDataLoaderIter.__next__ = counted  # type: ignore[method-assign]
    gc.callbacks.append(count)
    sys.argv = list(script)
    try:
        runpy.run_path(script[0], run_name="__main__")
    finally:
        gc.callbacks.remove(count)
        dl._BaseDataLoaderIter.__next__ = original  # type: ignore[method-assign]
        n = max(batches[0], 1)
        print(
            f"collections from the first next(): {counts} by generation (0, 1, 2) over {batches[0]} next() "
            f"calls: {sum(counts) / n:.2f} a call"
        )


def side_cwd(name: str, here: str, base: str | None) -> str:
    """Where a side's processes run: this checkout for HEAD, the baseline's for the other."""
    return here if name == "HEAD" else os.path.abspath(str(base))


def script_rounds(
    command: list[str], sides: list[tuple[str, dict[str, str]]], rounds: int, here: str, base: str | None
) -> None:
    """``pinprof profile`` of ``command`` in alternated processes of each side: its steady batches'
    ``pinprof_ms``, median and mean."""
    import tempfile

    import pandas as pd

    argv = command[1:] if command[:1] == ["--"] else command
    # the script's own path made absolute: each side runs from its own checkout
    argv = [os.path.abspath(a) if a.endswith(".py") and os.path.exists(a) else a for a in argv]
    from profiler.bench import baseline

    for name, env in sides:  # each side's python -m profiler imports its own checkout's package, or none runs
        asked = [sys.executable, "-c", "import profiler; print('package', profiler.__file__)"]
        cwd = side_cwd(name, here, base)
        line = subprocess.run(asked, env=env, cwd=cwd, capture_output=True, text=True, check=True).stdout
        baseline.check_package(line, cwd, name)
    got: dict[str, list[tuple[float, float]]] = {}
    for r in range(rounds):
        for name, env in sides if r % 2 == 0 else sides[::-1]:
            out = os.path.join(tempfile.mkdtemp(prefix="pinprof-bench-"), "report")
            cwd = side_cwd(name, here, base)
            cmd = [sys.executable, "-m", "profiler", "profile", "--out", out, "--no-plots", "--", *argv]
            done = subprocess.run(cmd, env=env, cwd=cwd, capture_output=True, text=True)
            if done.returncode != 0:
                print(f"{name}: pinprof profile failed (rc {done.returncode}): {done.stderr[-600:]}")
                continue
            tl = pd.read_csv(os.path.join(out, "timeline.csv"))
            own = tl.loc[~tl.warmup.astype(bool), "pinprof_ms"] * 1e3
            got.setdefault(name, []).append((float(own.median()), float(own.mean())))
        print(f"  round {r + 1}/{rounds}", file=sys.stderr, flush=True)
    print(f"pinprof_ms of the steady batches of {' '.join(argv)}, us a batch (median, mean), by process:")
    for name, _ in sides:
        if name in got:
            med = statistics.median(m for m, _ in got[name])
            runs = ", ".join(f"{m:.1f}/{a:.1f}" for m, a in got[name])
            print(f"  {name}: median of medians {med:.1f} (rounds {runs})")


def _rounds(bare: object, profiled: object) -> tuple[float, float]:
    bare(), profiled()  # type: ignore[operator]  # warm-up
    b, p = [], []
    for _ in range(5):
        b.append(bare())  # type: ignore[operator]
        p.append(profiled())  # type: ignore[operator]
    return statistics.median(b), statistics.median(p)


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--baseline", required=False, help="an older checkout (git worktree add PATH <commit>)")
    ap.add_argument("--rounds", type=int, default=5, help="alternated processes per side (default 5)")
    ap.add_argument("--per-call", action="store_true", help="only: one .to() hook from outside against pinprof_ms")
    ap.add_argument("--gc", action="store_true", help="only: what the garbage-collection watch adds to a collection")
    ap.add_argument(
        "--gc-count", nargs=argparse.REMAINDER, metavar="SCRIPT", help="only: a script's collections a batch"
    )
    ap.add_argument(
        "--script", nargs=argparse.REMAINDER, metavar="python SCRIPT", help="a real loop: its reports' pinprof_ms"
    )
    ap.add_argument("--one", action="store_true", help=argparse.SUPPRESS)
    args = ap.parse_args()
    if args.gc_count:
        gc_count(args.gc_count)
        return
    if args.per_call:
        per_call()
        return
    if args.gc:
        gc_watch()
        return
    if args.one:
        import profiler

        print("package", profiler.__file__)  # checked by the parent (baseline.check_package)
        print(
            "RESULT "
            + json.dumps(
                {
                    "library": _library(N),
                    "hooks": _hooks(N),
                    "hooks-dict": _hooks_dict(N),
                    "hooks-accelerate": _hooks_accelerate(N),
                }
            )
        )
        return
    sides = [("HEAD", dict(os.environ))]
    if args.baseline:
        # here, not at the top: the baseline's processes run this file on an older package
        from profiler.bench import baseline

        sides.append(("baseline", baseline.env_for(baseline.checkout(args.baseline))))
    here = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
    if args.script:
        script_rounds(args.script, sides, args.rounds, here, args.baseline)
        return
    got: dict[tuple[str, str], list[float]] = {}
    for r in range(args.rounds):
        for name, env in sides if r % 2 == 0 else sides[::-1]:
            cwd = side_cwd(name, here, args.baseline)
            out = subprocess.run(
                [sys.executable, os.path.abspath(__file__), "--one"], env=env, cwd=cwd, capture_output=True, text=True
            )
            package = [ln for ln in out.stdout.splitlines() if ln.startswith("package ")]
            if package:
                from profiler.bench import baseline

                baseline.check_package(package[0], cwd, name)
            line = [ln for ln in out.stdout.splitlines() if ln.startswith("RESULT ")]
            if not line:
                print(f"{name}: no result (rc {out.returncode}): {out.stderr[-600:]}")
                continue
            for loop, (b, p) in json.loads(line[0][7:]).items():
                got.setdefault((name, loop), []).append(p - b)
    print("recorder host cost on a CPU device, us a batch (instrumented - bare), median of alternated processes:")
    for loop in ("library", "hooks", "hooks-dict", "hooks-accelerate"):
        row = [
            f"{name} {statistics.median(got[(name, loop)]):.1f} (rounds {', '.join(f'{v:.1f}' for v in got[(name, loop)])})"
            for name, _ in sides
            if (name, loop) in got
        ]
        print(f"  {loop}: " + " | ".join(row))


if __name__ == "__main__":
    main()
