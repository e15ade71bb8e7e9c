"""``pinprof tune [--steps N] [--skip N] [--budget-s S] [--only KNOBS] [--out DIR] -- python train.py ARGS``: try
the input pipeline's fixes on the unmodified script and measure what each buys (``profiler.drivers.tune``)."""

from __future__ import annotations

import argparse
import math
from collections.abc import Sequence
from pathlib import Path

from profiler.cli.args import Subparsers, nonneg_int, positive_int, script_target


def add(sub: Subparsers) -> None:
    p = sub.add_parser(
        "tune",
        help="run your script as it is and with each input-pipeline fix, and measure what each one buys",
        description="pinprof tune [options] -- [python] train.py ARGS: short runs of the unmodified script, "
        "each a process with one change applied through pinprof's hooks (DataLoader num_workers, "
        "pin_memory, prefetch_factor; non_blocking copies; a device prefetcher), the script as it is "
        "between them; a table of speedups with 95% intervals and the winner, as code to write.",
    )
    p.add_argument(
        "--out", type=Path, default=None, help="folder of the table and the runs (default reports/tune-<script>-<time>)"
    )
    p.add_argument("--steps", type=positive_int("--steps"), default=30, help="batches measured a run (default 30)")
    p.add_argument(
        "--skip",
        type=nonneg_int("--skip"),
        default=5,
        metavar="N",
        help="batches flagged warm-up at each run's start, left out (default 5)",
    )
    p.add_argument("--budget-s", type=float, default=900.0, help="seconds for all the runs (default 900)")
    p.add_argument(
        "--only",
        default=None,
        help="comma-separated knobs to try (num_workers,pin_memory,prefetch_factor,non_blocking,prefetcher: "
        "every trial that changes one), or trials by the name tune.md gives them (pin_memory=False) (default all)",
    )
    script_target(p)
    p.set_defaults(func=run)


def run(args: argparse.Namespace, argv: Sequence[str]) -> int:
    from profiler.errors import UsageError

    # refused before the driver imports torch (3 s on the CPU machine), as a bad flag is
    if not (args.budget_s > 0 and math.isfinite(args.budget_s)):
        raise UsageError(f"--budget-s {args.budget_s}: give a finite number of seconds, more than 0 (default 900)")
    from profiler.drivers.tune import tune

    only = [k.strip() for k in args.only.split(",") if k.strip()] if args.only else None
    return tune(
        args.command,
        args.out,
        steps=args.steps,
        warmup=args.skip,
        budget_s=args.budget_s,
        only=only,
        device=args.device,
    )
