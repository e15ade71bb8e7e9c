"""``pinprof trace PATH -o trace.json``: the timeline as Chrome trace JSON (Perfetto, chrome://tracing)."""

from __future__ import annotations

import argparse
from collections.abc import Sequence
from pathlib import Path

from profiler.cli.args import Subparsers, load_timeline


def add(sub: Subparsers) -> None:
    p = sub.add_parser("trace", help="write the timeline as Chrome trace JSON (Perfetto, chrome://tracing)")
    p.add_argument("path", type=Path, help="report folder or timeline CSV")
    p.add_argument("-o", "--out", type=Path, default=Path("trace.json"))
    p.set_defaults(func=run)


def run(args: argparse.Namespace, argv: Sequence[str]) -> int:
    from profiler.render import trace

    tl, _ = load_timeline(args.path)
    print(f"pinprof trace: wrote {trace.write(tl, args.out)} (open in https://ui.perfetto.dev or chrome://tracing)")
    return 0
