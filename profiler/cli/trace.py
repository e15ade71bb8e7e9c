"""``pinprof trace PATH [-o FILE]``: the timeline as Chrome trace JSON (Perfetto, chrome://tracing), written
into the report folder unless ``-o`` says where."""

from __future__ import annotations

import argparse
from collections.abc import Sequence
from pathlib import Path

from profiler.cli.args import Subparsers, load_timeline


def add(sub: Subparsers) -> None:
    p = sub.add_parser("trace", help="write the timeline as Chrome trace JSON (Perfetto, chrome://tracing)")
    p.add_argument("path", type=Path, help="report folder or timeline CSV")
    p.add_argument(
        "-o",
        "--out",
        type=Path,
        default=None,
        help="the file to write (default: trace.json in the report folder, next to its timeline)",
    )
    p.set_defaults(func=run)


def run(args: argparse.Namespace, argv: Sequence[str]) -> int:
    from profiler.render import trace

    tl, folder = load_timeline(args.path)
    out = args.out if args.out is not None else folder / "trace.json"
    print(f"pinprof trace: wrote {trace.write(tl, out)} (open in https://ui.perfetto.dev or chrome://tracing)")
    return 0
