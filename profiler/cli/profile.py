"""``pinprof profile [--out DIR] [--batches N] [--skip N] [--kernels] -- python train.py ARGS``: profile a program as it is."""

from __future__ import annotations

import argparse
import os
from collections.abc import Sequence
from pathlib import Path

from profiler.cli.args import Subparsers, nonneg_int, positive_int, refuse_locked_out, script_target
from profiler.settings import current


def add(sub: Subparsers) -> None:
    p = sub.add_parser(
        "profile",
        help="run an unmodified training script with the recorder attached, then write the report",
        description="pinprof profile [options] -- [python] train.py ARGS (or -m module ARGS): every "
        "DataLoader batch and host-to-device copy of the main thread is recorded, no code change; the "
        "report folder is written when the script ends, raises, or is stopped.",
    )
    p.add_argument("--out", type=Path, default=None, help="report folder (default reports/profile-<script>-<time>)")
    p.add_argument(
        "--batches",
        type=positive_int("--batches"),
        default=None,
        help="record at most N batches per loader (default: every batch)",
    )
    p.add_argument(
        "--skip",
        type=nonneg_int("--skip"),
        default=None,
        metavar="N",
        help="flag each loader's first N batches warm-up (default: found from the data, per loader and epoch)",
    )
    p.add_argument(
        "--kernels",
        action="store_true",
        help="record CUPTI's kernel records too (PINPROF_KERNELS=1): compute_ms is the step's kernels' busy "
        "time and the report tells the GPU's waits between launches, at about 1.2 us a kernel launch "
        "(default: CUPTI records the copies and CUDA events time the step)",
    )
    p.add_argument("--no-nvtx", action="store_true", help="emit no NVTX ranges (default: emit them)")
    p.add_argument("--no-plots", action="store_true", help="draw no PNGs (default: draw gantt.png and phases.png)")
    script_target(p)
    p.set_defaults(func=run)


def run(args: argparse.Namespace, argv: Sequence[str]) -> int:
    refuse_locked_out(args.out, current().world_size)
    from profiler.drivers.script import profile

    if args.kernels:
        # read where CUPTI starts (profiler.capture.clocks.cupti.recorder), and by a tune trial's process
        os.environ["PINPROF_KERNELS"] = "1"
        current.cache_clear()
    return profile(
        args.command,
        args.out,
        skip=args.skip,
        batches=args.batches,
        device=args.device,
        nvtx=not args.no_nvtx,
        plots=not args.no_plots,
    )
