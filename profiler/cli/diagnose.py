"""``pinprof diagnose PATH``: name each scenario's bottleneck and the change that pays most.

A reading verb: it prints and writes nothing, unless ``--write`` asks it to rewrite the report's
diagnosis.md, summary.json and report.html (after the analysis code changed, say).
"""

from __future__ import annotations

import argparse
from collections.abc import Sequence
from pathlib import Path

from profiler.cli.args import Subparsers, load_report, nonneg_int


def add(sub: Subparsers) -> None:
    p = sub.add_parser("diagnose", help="name each scenario's bottleneck and the change that pays most")
    p.add_argument("path", type=Path, help="report folder or timeline CSV (pinprof's or nsys_timeline.csv)")
    p.add_argument("--json", action="store_true", help="print JSON instead of text (default: text)")
    p.add_argument(
        "--skip",
        type=nonneg_int("--skip"),
        default=None,
        metavar="N",
        help="leave out each scenario's first N batches as warm-up instead of the ones found (default: found "
        "from the data: start-up batches of each loader and epoch)",
    )
    p.add_argument(
        "--write",
        action="store_true",
        help="also rewrite diagnosis.md, summary.json and report.html in the report folder (default: only print)",
    )
    p.set_defaults(func=run)


def run(args: argparse.Namespace, argv: Sequence[str]) -> int:
    import json
    import sys

    from profiler.render.json import diagnosis_json
    from profiler.report import folder as report

    tl, where, meta = load_report(args.path, args.skip)
    a, text = report.diagnosis_of(where, tl, meta)
    partial = report.partial_label(meta)
    if args.write:
        made = report.write_diagnosis(where, a, text, meta)
        print(f"pinprof diagnose: wrote {', '.join(str(p) for p in made)}", file=sys.stderr)
    if args.json:
        print(json.dumps([{**d, "partial": bool(partial)} for d in diagnosis_json(a.diags)], indent=2))
    else:
        print(f"{partial.strip()}\n\n{text}" if partial else text)
    return 0
