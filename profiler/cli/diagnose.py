"""``pinprof diagnose PATH``: name each scenario's bottleneck and the change that pays most."""

from __future__ import annotations

import argparse
from collections.abc import Sequence
from pathlib import Path

from profiler.cli.args import Subparsers, load_timeline


def add(sub: Subparsers) -> None:
    p = sub.add_parser("diagnose", help="name each scenario's bottleneck and the change that pays most")
    p.add_argument("path", type=Path, help="report folder or timeline CSV (pinprof's or nsys_timeline.csv)")
    p.add_argument("--json", action="store_true", help="print JSON instead of text")
    p.set_defaults(func=run)


def run(args: argparse.Namespace, argv: Sequence[str]) -> int:
    import json

    from profiler.render.json import diagnosis_json
    from profiler.report import files
    from profiler.report.folder import diagnosis_of, partial_label, write_diagnosis

    tl, folder = load_timeline(args.path)
    meta = files.read_meta(folder / files.META) if (folder / files.META).is_file() else {}
    diags, text = diagnosis_of(folder, tl, meta.get("cpu_count"))
    partial = partial_label(meta)
    if args.path.is_dir():
        write_diagnosis(folder, text, partial)
    if args.json:
        print(json.dumps([{**d, "partial": bool(partial)} for d in diagnosis_json(diags)], indent=2))
    else:
        print(f"{partial.strip()}\n\n{text}" if partial else text)
    return 0
