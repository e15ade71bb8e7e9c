"""``pinprof nsys-import REPORT``: turn an nsys capture into nsys_timeline.csv."""

from __future__ import annotations

import argparse
from collections.abc import Sequence
from pathlib import Path

from profiler.cli.args import Subparsers


def add(sub: Subparsers) -> None:
    p = sub.add_parser("nsys-import", help="turn an nsys capture (.sqlite, .nsys-rep, .qdstrm) into nsys_timeline.csv")
    p.add_argument("report", type=Path, help="the capture: report.qdstrm, report.nsys-rep or its SQLite export")
    p.add_argument(
        "--compare", type=Path, default=None, help="pinprof timeline (or report folder) to compare with (default: none)"
    )
    p.add_argument("--out", type=Path, default=None, help="folder for the tables (default: next to the report)")
    p.set_defaults(func=run)


def run(args: argparse.Namespace, argv: Sequence[str]) -> int:
    from profiler.nsys import run as nsys_run
    from profiler.render.compare import compare_lines

    done = nsys_run.import_report(args.report, args.out, args.compare)
    print(
        done.table[
            ["scenario", "batch", "bytes", "src_memory", "h2d_ms", "api_ms", "h2d_call_ms", "fetch_ms", "batch_ms"]
        ]
        .head(12)
        .to_string(index=False)
    )
    print(f"pinprof nsys-import: {len(done.table)} batches -> {done.out_dir / 'nsys_timeline.csv'}")
    if done.comparison is not None:
        print("\n".join(compare_lines(done.comparison)))
    return 0
