#!/usr/bin/env python3
"""What ``pinprof profile``'s automatic hooks cost on a real training step, and whether their per-batch
copy times agree with CUPTI; on a GPU (``scripts/gpu_check.sh``, step ``profile``).

One process, one model and one loader (``scripts/resnet_train.py``: resnet50, bf16, batch 256, 12
workers). After a warm-up long enough to fill the pinned-memory cache (the first 25 pins of this loop
each allocate), blocks of ``--steps`` steps run as bare, profiled, bare, profiled, ..., bare. A profiled
block has the hooks on, NVTX ranges and the journal: what ``pinprof profile`` attaches. A block's time
is wall clock from its first ``next()`` to a synchronize after its last step; a profiled block's ratio
is to the mean of its two bare neighbours, and the median ratio is printed with its range. The
journal's clock of each kind runs only while its blocks do, so they pay the appends a run of their
length would. ``--ablate`` adds kinds with one part taken away. Then one more profiled block runs under
torch.profiler (CUPTI), and each batch's ``h2d_gpu_ms`` is compared with CUPTI's memcpy records.

``--cupti --handover none``: CUPTI's records on for the whole process, bare blocks included, so the ratio
is what the hooks cost beside CUPTI as the GPU clock (CUPTI's own cost, which the bare script does not
pay, is ``scripts/bench_process_overhead.py``'s to measure).

    python scripts/bench_profile_overhead.py [--steps 40] [--rounds 10] [--ablate] [--cupti-steps 12]
                                             [--cupti [--handover pause|full|none]]
"""

from __future__ import annotations

import argparse
import functools
import itertools
import os
import statistics
import sys
import tempfile
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import numpy as np
import torch

sys.path.insert(0, str(Path(__file__).resolve().parent))
from resnet_train import batches, build, step

from profiler.bench import cupti
from profiler.bench.hook_timers import timers
from profiler.capture import auto_hooks
from profiler.capture.auto_session import AutoSession
from profiler.capture.clock import now_ms
from profiler.capture.clocks import choice as backend
from profiler.capture.rows import FlushClock
from profiler.report.journal import Journal
from profiler.report.journal_process import JournalProcess
from profiler.settings import current

JOURNAL = Path(tempfile.mkdtemp(prefix="pinprof-bench-"))
_blocks = itertools.count()
DEVICE = "cuda"


class UserCopies(AutoSession):
    """Every copy is the script's own call, timed by events around it (no own gated copy)."""

    def takes_over(self, src: torch.Tensor, device: torch.device | None, dtype: Any, extra: bool) -> bool:
        return False


# One journal clock per kind, paused while other blocks run: each kind's blocks together see the
# appends a run of their length would (the first after PINPROF_FLUSH_S, then as FlushClock stretches).
_clocks: dict[str, tuple[FlushClock, float]] = {}


def session(kind: str) -> AutoSession:
    """The session of a profiled block. ``profiled``: as ``pinprof profile`` sets it up (NVTX ranges on,
    completed batches journaled as FlushClock says); the others take one part away, to find a cost."""
    journal = None if kind == "no-journal" else Journal(JOURNAL / f"{next(_blocks)}.csv")
    clock, paused = _clocks.get(kind) or (FlushClock.from_settings(), now_ms())
    clock.due_ms += now_ms() - paused
    make = UserCopies if kind == "user-copies" else AutoSession
    appender = None if journal is None else JournalProcess(journal)
    return make(DEVICE, nvtx=True, journal=journal, appender=appender, flush=clock, gate=kind != "ungated")


def block(model: torch.nn.Module, opt: torch.optim.Optimizer, it: Iterator[Any], n: int) -> tuple[float, float]:
    """(ms per step, of which ms per step in the loader's ``next()``)."""
    torch.cuda.synchronize()
    start = time.perf_counter()
    waited = 0.0
    for _ in range(n):
        t = time.perf_counter()
        images, labels = next(it)
        waited += time.perf_counter() - t
        step(model, opt, images, labels)
    torch.cuda.synchronize()
    return (time.perf_counter() - start) / n * 1e3, waited / n * 1e3


def profiled(
    model: torch.nn.Module, opt: torch.optim.Optimizer, it: Iterator[Any], n: int, kind: str = "profiled"
) -> tuple[tuple[float, float], AutoSession]:
    s = session(kind)
    auto_hooks.start(s)
    try:
        ms = block(model, opt, it, n)
    finally:
        auto_hooks.stop()
        _clocks[kind] = (s.clock, now_ms())
    return ms, s


Block = tuple[str, float, float]  # kind, ms per step, ms per step in next()


def run_blocks(
    model: torch.nn.Module,
    opt: torch.optim.Optimizer,
    it: Iterator[Any],
    kinds: list[str],
    rounds: int,
    steps: int,
    handover: str = "pause",
) -> tuple[list[Block], Any]:
    """bare, k1, bare, k2, ..., bare: every profiled block sits between two bare ones, and its ratio is
    to their mean. Blocks of this loop drift by several ms/step (the loader's pin thread, host
    contention with 12 workers), so a ratio of medians over separate blocks is mostly that drift.
    Returns the blocks and the last ``profiled`` block's timeline."""
    order = [k for _ in range(rounds) for kind in kinds for k in ("bare", kind)] + ["bare"]
    got: list[Block] = []
    tl = None
    # CUPTI, once on, is process-wide: a bare block after a profiled one would pay for its records
    # too. So it is handed back before each bare block and taken again before each profiled one
    # (outside the timed blocks), as the bare script and the profiled script would run.
    # --handover pause (the default) enables the records again under the callbacks already registered;
    # full registers them again, as take_back does after torch.profiler. Either way, 8 rounds or more
    # hung on the H200 (2026-12-04), and 4 ran. --handover none keeps the records on throughout: the
    # bare blocks pay CUPTI's own cost too, so the ratio is the hooks' cost with CUPTI as the clock,
    # and nothing is handed over; that hung too on an H100, in its 4th block, in every run with kernels'
    # launch times on, and in none without (2026-12-05: a driver deadlock, reports/README.md).
    rec = backend.start(torch.device(DEVICE), late_ok=True)  # started before the warm-up unless --late-cupti
    hand = rec if handover != "none" else None
    for i, kind in enumerate(order):
        if kind == "bare":
            if hand is not None:
                hand.release("bench: a bare block", paused=handover == "pause")
            got.append((kind, *block(model, opt, it, steps)))
        else:
            if hand is not None:
                hand.resume()
            ms, s = profiled(model, opt, it, steps, kind)
            got.append((kind, *ms))
            rows = s.close()
            tl = rows if kind == "profiled" else tl
        # progress, so a run stopped by --watchdog shows how far it came
        print(f"  block {i + 1}/{len(order)} {kind}: {got[-1][1]:.3f} ms/step", file=sys.stderr, flush=True)
    return got, tl


def report(got: list[Block], kinds: list[str]) -> None:
    bare = [ms for k, ms, _ in got if k == "bare"]
    spread = statistics.median(abs(x - statistics.median(bare)) for x in bare) * 1.4826
    print(
        f"  bare         {statistics.median(bare):8.3f} ms/step (block to block: 1.4826 x MAD {spread:.3f} ms/step), "
        f"next() {statistics.median(w for k, _, w in got if k == 'bare'):7.3f} ms/step"
    )
    for kind in kinds:
        at = [i for i, (k, _, _) in enumerate(got) if k == kind]
        ratios = sorted(got[i][1] / ((got[i - 1][1] + got[i + 1][1]) / 2) for i in at)
        print(
            f"  {kind:12s} {statistics.median(got[i][1] for i in at):8.3f} ms/step, next() "
            f"{statistics.median(got[i][2] for i in at):7.3f} ms/step, ratio median {statistics.median(ratios):.4f} "
            f"(min {ratios[0]:.4f}, max {ratios[-1]:.4f})"
        )


PATCHED = ("to", "cuda", "copy_", "pin_memory")  # the Tensor methods auto_hooks patches


def own_time(model: torch.nn.Module, opt: torch.optim.Optimizer, it: Iterator[Any], steps: int) -> dict[str, float]:
    """Microseconds per step the main thread spends in pinprof's hooks, less the script's own calls
    they make (the loader's ``next()``, the copies the script asked for), by hook, and the journal's
    appends among them (``flush``, with ``appends`` their count): one more profiled block with a timer
    around each hook and around each original the hooks call. pinprof's own copy of a pinned tensor
    replaces the script's call, so its whole host time counts (the allocation included). An upper
    bound of what the hooks add: their time includes waits for the GIL, and their work before the
    loader's ``next()`` overlaps the wait for the pin thread's batch, which ``next()`` then skips (on
    the H200 the hooked ``next()`` took 0.25 ms a step more than the bare one, seen from outside,
    while the hook's own part of it read 0.78 ms)."""
    own: dict[str, float] = {}
    outer, inner = timers(own)
    places = {"next": (auto_hooks._Iter, "__next__")} | {m: (torch.Tensor, m) for m in PATCHED}
    s = session("profiled")
    flush = s.flush

    def timed_flush() -> None:
        start = time.perf_counter()
        flush()
        own["flush"] = own.get("flush", 0.0) + time.perf_counter() - start
        own["appends"] = own.get("appends", 0.0) + 1e-6 * steps  # a count, once scaled back below

    s.flush = timed_flush  # type: ignore[method-assign]
    auto_hooks.start(s)
    real = dict(auto_hooks._ORIGINAL)
    try:
        for name, (owner, attr) in places.items():
            setattr(owner, attr, outer(name, getattr(owner, attr)))
            auto_hooks._ORIGINAL[name] = inner(real[name])
        block(model, opt, it, steps)
    finally:
        auto_hooks._ORIGINAL.update(real)  # stop() puts these back
        auto_hooks.stop()
    s.close()
    return {k: v / steps * 1e6 for k, v in own.items()}


def against_cupti(model: torch.nn.Module, opt: torch.optim.Optimizer, it: Iterator[Any], steps: int) -> None:
    holder: list[AutoSession] = []
    trace = cupti.capture(lambda: holder.append(profiled(model, opt, it, steps)[1]), host_ops=False)
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


def _on_cores(cores: list[int], worker_id: int) -> None:
    os.sched_setaffinity(0, cores)


def main() -> None:
    p = argparse.ArgumentParser()
    p.add_argument("--steps", type=int, default=40)
    p.add_argument("--rounds", type=int, default=10)
    p.add_argument("--cupti-steps", type=int, default=12)
    p.add_argument("--batch-size", type=int, default=256)
    p.add_argument("--workers", type=int, default=12)
    p.add_argument(
        "--ablate",
        action="store_true",
        help="also blocks without the gate (ungated), without pinprof's own copy (user-copies), "
        "without the journal (no-journal)",
    )
    p.add_argument(
        "--isolate",
        action="store_true",
        help="the main process (step and pin thread) on cores 0-2, the workers on the others",
    )
    p.add_argument(
        "--cupti",
        action="store_true",
        help="time the GPU with CUPTI (PINPROF_BACKEND=cupti); the blocks hand it over and take it back, which hung "
        "on the H200 in every run of 8 rounds or more (4 ran): for resnet50 under CUPTI, scripts/bench_process_overhead.py",
    )
    p.add_argument(
        "--late-cupti",
        action="store_true",
        help="with --cupti: start CUPTI's records after the warm-up, not before the model is built (this hung "
        "on the H200: profiler.capture.clocks.choice)",
    )
    p.add_argument(
        "--handover",
        choices=("pause", "full", "none"),
        default="pause",
        help="with --cupti, between blocks: pause the records (enable them again under the same callbacks), "
        "hand CUPTI over in full (register the callbacks again, as after torch.profiler), or none: keep them on "
        "for the bare blocks too, so the ratio is the hooks' cost with CUPTI as the clock, not CUPTI's own",
    )
    p.add_argument(
        "--watchdog",
        type=float,
        default=0.0,
        help="after S seconds, print every thread's stack and exit (a hang shows where it waits); 0: off",
    )
    args = p.parse_args()
    if args.watchdog > 0:
        import faulthandler

        faulthandler.dump_traceback_later(args.watchdog, exit=True)
    # The clock is the flag's, not pinprof's default (auto): the blocks hand CUPTI back and take it
    # again (run_blocks), a late start that hung on the H200 unless the bench asks for it by --cupti.
    os.environ["PINPROF_BACKEND"] = "cupti" if args.cupti else "events"
    current.cache_clear()
    if args.cupti and not args.late_cupti:
        backend.start(torch.device(DEVICE))  # before any CUDA work, as pinprof profile starts them
    init = None
    if args.isolate:  # the workers inherit the main process's cores when they start: give them the rest
        cores = sorted(os.sched_getaffinity(0))
        os.sched_setaffinity(0, cores[:3])
        init = functools.partial(_on_cores, cores[3:])
    model, opt, loader = build(args.batch_size, args.workers, 100_000, init)
    it = batches(loader)
    block(model, opt, it, 40)  # warm-up: cuDNN autotuning, workers started, allocators grown
    kinds = ["profiled"] + (["ungated", "user-copies", "no-journal"] if args.ablate else [])
    got, tl = run_blocks(model, opt, it, kinds, args.rounds, args.steps, args.handover)
    print(
        f"resnet50 bs{args.batch_size} bf16, {args.workers} workers{' (isolated)' * args.isolate}, blocks of "
        f"{args.steps} steps, each profiled "
        f"block between two bare ones ({args.rounds} per kind); ratio: to the mean of its two bare neighbours"
    )
    info = backend.describe()
    print(
        f"  GPU clock: {info.get('backend')}, {info.get('records')}, unmatched copy calls "
        f"{info.get('unmatched_copy_calls')}{f', CUPTI handed over between blocks: {args.handover}' * args.cupti}"
        f"{' (none: on for the bare blocks too)' * (args.cupti and args.handover == 'none')}"
    )
    report(got, kinds)
    print(
        f"  last profiled block: {len(tl)} rows, median h2d_gpu_ms {tl.h2d_gpu_ms.median():.4f}, bytes {int(tl.bytes.median())}"
    )
    own = own_time(model, opt, it, args.steps)
    bare = statistics.median(ms for k, ms, _ in got if k == "bare")
    total = sum(v for k, v in own.items() if k not in ("flush", "appends"))
    parts = ", ".join(f"{k} {v:.1f}" for k, v in own.items() if k not in ("flush", "appends"))
    flush, appends = own.get("flush", 0.0), round(own.get("appends", 0.0))
    print(
        f"  pinprof's own host time in its hooks ({args.steps} steps): {total:.1f} us/step, {total / 1e3 / bare:.2%} "
        f"of the bare step ({parts}); of it, {appends} journal appends: {flush:.1f} us/step"
    )
    against_cupti(model, opt, it, args.cupti_steps)


if __name__ == "__main__":
    main()
