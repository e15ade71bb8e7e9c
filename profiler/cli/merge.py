"""``pinprof merge PATH``: merge per-rank reports (``rank<k>/`` folders from torchrun) into one."""

from __future__ import annotations

import argparse
from collections.abc import Sequence
from pathlib import Path

from profiler.cli.args import Subparsers


def add(sub: Subparsers) -> None:
    p = sub.add_parser("merge", help="merge per-rank reports (rank<k>/ folders from torchrun) into one")
    p.add_argument("path", type=Path, help="folder holding rank0/, rank1/, ...")
    p.set_defaults(func=run)


def run(args: argparse.Namespace, argv: Sequence[str]) -> int:
    from profiler.report.merge import merge, write_merged

    folder = write_merged(args.path)
    tl, meta = merge(folder)
    print(
        f"pinprof merge: {len(tl)} batches from ranks {meta['ranks']} -> {folder / 'timeline.csv'}"
        + ("" if meta["clock_aligned"] else " (ranks on different hosts: clocks not aligned)")
    )
    return 0
