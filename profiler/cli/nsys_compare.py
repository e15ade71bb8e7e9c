"""``pinprof nsys-compare TIMELINE NSYS_TIMELINE``: pinprof's h2d_ms next to CUPTI's, per batch."""

from __future__ import annotations

import argparse
from collections.abc import Sequence
from pathlib import Path

from profiler.cli.args import Subparsers
from profiler.errors import UsageError


def add(sub: Subparsers) -> None:
    p = sub.add_parser("nsys-compare", help="pinprof's CUDA-event h2d_ms next to CUPTI's, per batch")
    p.add_argument("timeline", type=Path, help="pinprof timeline.csv or report folder")
    p.add_argument("nsys_timeline", type=Path, help="nsys_timeline.csv from nsys-import")
    p.set_defaults(func=run)


def run(args: argparse.Namespace, argv: Sequence[str]) -> int:
    import pandas as pd

    from profiler.nsys.compare import compare
    from profiler.render.compare import compare_lines
    from profiler.report import files

    ours = files.read_timeline(args.timeline)
    theirs = pd.read_csv(args.nsys_timeline)
    if "api_ms" not in theirs:
        raise UsageError(
            f"{args.nsys_timeline}: not an nsys_timeline.csv (no api_ms column); make one with pinprof nsys-import"
        )
    theirs = theirs.assign(scenario=theirs.scenario.fillna("").astype(str))
    table = compare(ours.assign(scenario=ours.scenario.fillna("").astype(str)), theirs)
    print("\n".join(compare_lines(table)))
    return 0
