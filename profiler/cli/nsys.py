"""``pinprof nsys -- COMMAND``: run a command under Nsight Systems and import the capture."""

from __future__ import annotations

import argparse
import sys
from collections.abc import Sequence
from pathlib import Path

from profiler.cli.args import Subparsers
from profiler.errors import PinprofError, UsageError


def add(sub: Subparsers) -> None:
    p = sub.add_parser(
        "nsys",
        help="run a command under Nsight Systems and import the capture",
        description="pinprof nsys [--out DIR] -- COMMAND ...: CUDA + NVTX tracing, then "
        "nsys_timeline.csv (and nsys_compare.csv when DIR holds a pinprof timeline).",
    )
    p.add_argument(
        "--out", type=Path, default=Path("nsys-report"), help="folder for the capture and tables (default: nsys-report)"
    )
    p.add_argument(
        "--capture-range",
        default=None,
        help="start capturing at this pinprof NVTX range, e.g. 'batch 10' (default: capture the whole run)",
    )
    p.add_argument(
        "--compare", type=Path, default=None, help="pinprof timeline (or report folder) to compare with (default: none)"
    )
    p.add_argument("command", nargs=argparse.REMAINDER, help="-- then the command to profile")
    p.set_defaults(func=run)


def run(args: argparse.Namespace, argv: Sequence[str]) -> int:
    import torch  # only to know whether to trace CUDA

    from profiler.nsys import run as nsys_run
    from profiler.render.compare import compare_lines

    command = args.command[1:] if args.command[:1] == ["--"] else args.command
    if not command:
        raise UsageError("give the command to profile after --, e.g. pinprof nsys -- python train.py")
    captured, code = nsys_run.profile(
        command, args.out, gpu=torch.cuda.is_available(), capture_range=args.capture_range
    )
    print(f"pinprof nsys: captured {captured}" + (f"; the program exited with {code}" if code else ""))
    if captured.suffix == ".qdstrm" and nsys_run.importer_for(nsys_run.find_nsys()) is None:
        print(
            f"pinprof nsys: this nsys has no importer; run `pinprof nsys-import {captured}` where Nsight "
            "Systems' host part is (scripts/get_nsys.sh)"
        )
        return code
    compare_with = args.compare or next(iter(sorted(args.out.rglob("timeline.csv"))), None)
    try:
        done = nsys_run.import_report(captured, args.out, compare_with)
    except PinprofError as err:
        if not code:
            raise
        # The program failed: its exit status is the news; what could not be imported is a note.
        print(f"pinprof nsys: nothing imported ({err})", file=sys.stderr)
        return code
    print(f"pinprof nsys: {len(done.table)} batches -> {done.out_dir / 'nsys_timeline.csv'}")
    if done.comparison is not None:
        print("\n".join(compare_lines(done.comparison)))
    return code  # the profiled program's exit status: a failing script fails here too
