#!/usr/bin/env python3
"""Does enabling pinprof's CUPTI records hang a loop that has already run backward? (on a GPU)

``scripts/bench_profile_overhead.py --cupti`` hung on the H200 (2026-12-03) in its first profiled
block: the autograd engine's thread in ``cuLaunchKernelEx`` waiting for a driver lock, while
``pinprof profile`` of the same script, whose records start before the first backward, ran. This
starts the recorder after ``--before`` training steps (0: before any) and runs ``--after`` more; a
watchdog ends a hung process with its stacks.

``--flush-mid forced|plain`` flushes CUPTI once in the middle of the ``--after`` steps, after a
synchronize, while the loader's workers and pin thread go on, as a session's close between blocks of
``bench_profile_overhead.py`` does (``forced``: ``TransferProfiler.timeline()``'s flush; ``plain``: the
unforced flush the journal used to make).

``--toggle N`` hands CUPTI over and takes it back (``CuptiRecorder.release`` then ``resume``, as a
torch.profiler started mid-run makes it, and as the bench does between its blocks) after every
``N``-th step, with the loader going on.

    python scripts/cupti_late_start.py --before 3 --after 20 [--flush-mid forced] [--toggle 2] [--watchdog 45]
"""

from __future__ import annotations

import argparse
import faulthandler
import os
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
os.environ["PINPROF_BACKEND"] = "cupti"

import torch
from resnet_train import batches, build, step

from profiler.capture.clocks import choice as backend
from profiler.capture.clocks.cupti.lib import FLUSH_FORCED


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--before", type=int, default=3, help="training steps before the records start (default 3)")
    ap.add_argument("--after", type=int, default=20, help="training steps after (default 20)")
    ap.add_argument("--workers", type=int, default=4, help="loader workers (default 4)")
    ap.add_argument("--batch-size", type=int, default=128, help="images a batch (default 128; the bench's 256)")
    ap.add_argument(
        "--flush-mid", choices=("none", "forced", "plain"), default="none", help="a flush halfway (default none)"
    )
    ap.add_argument("--toggle", type=int, default=0, help="release and resume after every N-th step (0: never)")
    ap.add_argument("--watchdog", type=float, default=45, help="seconds before a hung process exits (default 45)")
    args = ap.parse_args()
    faulthandler.dump_traceback_later(args.watchdog, exit=True)
    model, opt, loader = build(args.batch_size, args.workers, args.batch_size * (args.before + args.after + 2) + 10_000)
    it = batches(loader)
    for _ in range(args.before):
        step(model, opt, *next(it))
    t0 = time.perf_counter()
    rec = backend.start(torch.device("cuda"), late_ok=True)  # late on purpose
    print(
        f"recorder started after {args.before} steps: {rec is not None and rec.active} ({backend.describe()})",
        flush=True,
    )
    for k in range(args.after):
        step(model, opt, *next(it))
        if rec is not None and args.flush_mid != "none" and k == args.after // 2:
            torch.cuda.synchronize()
            rec.lib.call("cuptiActivityFlushAll", FLUSH_FORCED if args.flush_mid == "forced" else 0)
            print(f"flushed ({args.flush_mid}) after step {k}", flush=True)
        if rec is not None and args.toggle and (k + 1) % args.toggle == 0:
            rec.release("cupti_late_start: a toggle")
            print(f"released after step {k}", flush=True)
            step(model, opt, *next(it))  # a step with the records off, as the bench's bare block
            print(f"resumed: {rec.resume()}", flush=True)
    torch.cuda.synchronize()
    if rec is not None:
        rec.collect(force=True)
        print(f"records: {rec.summary()['records']}")
    print(f"{args.after} steps in {time.perf_counter() - t0:.1f} s: no hang", flush=True)


if __name__ == "__main__":
    main()
