"""``pinprof plot PATH``: gantt.png and phases.png (and bandwidth.png) for a report."""

from __future__ import annotations

import argparse
from collections.abc import Sequence
from pathlib import Path

from profiler.cli.args import Subparsers, load_report, positive_int


def add(sub: Subparsers) -> None:
    p = sub.add_parser("plot", help="write gantt.png and phases.png (and bandwidth.png) for a report")
    p.add_argument("path", type=Path, help="report folder or timeline CSV")
    p.add_argument("--out", type=Path, default=None, help="folder for the PNGs (default: the report folder)")
    p.add_argument(
        "--batches",
        type=positive_int("--batches"),
        default=6,
        help="steady batches per scenario in the Gantt (default: 6)",
    )
    p.set_defaults(func=run)


def run(args: argparse.Namespace, argv: Sequence[str]) -> int:
    from profiler.analysis.warmup import RECORDED, settle
    from profiler.render import plots

    tl, folder, meta = load_report(args.path)
    tl, _ = settle(tl, str(meta.get("warmup_policy", RECORDED)))  # the steady batches, as the report reads them
    out = args.out or folder
    out.mkdir(parents=True, exist_ok=True)
    made = plots.write_all(tl, out, source=folder, first=args.batches)
    print("pinprof plot: wrote " + ", ".join(str(p) for p in made))
    return 0
