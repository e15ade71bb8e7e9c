"""``pinprof nsys-compare TIMELINE NSYS_TIMELINE``: pinprof's h2d_ms next to CUPTI's, per batch."""

from __future__ import annotations

import argparse
from collections.abc import Sequence
from pathlib import Path

from profiler.cli.args import Subparsers
from profiler.errors import ReportError, UsageError


def add(sub: Subparsers) -> None:
    p = sub.add_parser("nsys-compare", help="pinprof's CUDA-event h2d_ms next to CUPTI's, per batch")
    p.add_argument("timeline", type=Path, help="pinprof timeline.csv or report folder")
    p.add_argument("nsys_timeline", type=Path, help="nsys_timeline.csv from nsys-import")
    p.set_defaults(func=run)


def run(args: argparse.Namespace, argv: Sequence[str]) -> int:
    import numpy as np
    import pandas as pd

    from profiler.atomic import check_file
    from profiler.nsys.compare import compare
    from profiler.render.compare import compare_lines
    from profiler.report import files

    ours = files.read_timeline(args.timeline)
    # The second file through the same reader and checks as the first (a FIFO, /dev/zero, a cell of
    # text or an infinite time are refused in one line), then its own columns checked the same way.
    if not args.nsys_timeline.is_dir():  # a file: not through a link, nor a FIFO (profiler.atomic)
        check_file(args.nsys_timeline, files.MAX_CSV_BYTES, "nsys timeline CSV")
    theirs = files.read_timeline(args.nsys_timeline)
    if "api_ms" not in theirs:
        raise UsageError(
            f"{args.nsys_timeline}: not an nsys_timeline.csv (no api_ms column); make one with pinprof nsys-import"
        )
    for col in ("api_ms", "h2d_span_ms", "memcpy_count"):
        if col not in theirs:
            continue
        try:
            values = pd.to_numeric(theirs[col], errors="raise").astype(float)
        except (ValueError, TypeError):
            raise ReportError(f"{args.nsys_timeline}: column {col} holds values that are not numbers") from None
        if not (np.isfinite(values.dropna()).all() and (values.dropna() >= 0).all()):
            raise ReportError(f"{args.nsys_timeline}: column {col} holds a negative or infinite value")
        theirs[col] = values
    theirs = theirs.assign(scenario=theirs.scenario.fillna("").astype(str))
    table = compare(ours.assign(scenario=ours.scenario.fillna("").astype(str)), theirs)
    print("\n".join(compare_lines(table)))
    return 0
