"""``pinprof compare BEFORE AFTER``: did a change help? Per scenario and phase, the change of the mean
and median batch time and of each phase, judged against both runs' batch-to-batch noise
(``profiler.analysis.before_after``). A reading verb: it prints; ``--out DIR`` also writes
``compare.json`` and ``compare.html`` (AFTER's report page with a before-and-after section) there."""

from __future__ import annotations

import argparse
from collections.abc import Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Any

from profiler.cli.args import Subparsers, load_report

if TYPE_CHECKING:
    import pandas as pd


def add(sub: Subparsers) -> None:
    p = sub.add_parser("compare", help="compare two reports of one loop, before and after a change")
    p.add_argument("before", type=Path, help="report folder or timeline CSV of the run before the change")
    p.add_argument("after", type=Path, help="report folder or timeline CSV of the run after the change")
    p.add_argument("--json", action="store_true", help="print JSON instead of text (default: text)")
    p.add_argument(
        "--out",
        type=Path,
        default=None,
        help="folder to write compare.json and compare.html into (default: none, print only)",
    )
    p.set_defaults(func=run)


def _steady(path: Path) -> tuple[pd.DataFrame, Path, dict[str, Any]]:
    """The columns of ``path``'s timeline a comparison reads, with its start-up batches flagged as its
    diagnosis flags them (``analysis.warmup.settle``), its folder and meta.json."""
    from profiler.analysis.before_after import PHASES
    from profiler.analysis.warmup import RECORDED, settle

    columns = ["mode", "batch_size", "epoch", "warmup", *(f"{p}_ms" for p in PHASES)]
    tl, folder, meta = load_report(path, columns=columns)
    tl, _ = settle(tl, str(meta.get("warmup_policy", RECORDED)))
    return tl, folder, meta


def run(args: argparse.Namespace, argv: Sequence[str]) -> int:
    from profiler.analysis.before_after import as_json, compare, lines, size_notes, unpaired
    from profiler.atomic import to_json
    from profiler.errors import UsageError
    from profiler.report import files
    from profiler.report import folder as report

    # Each side read with the columns the comparison needs and its start-up batches flagged, before
    # the other is read: two 1,000,000-row timelines whole held 2.6 GB.
    before_tl, fb, _ = _steady(args.before)
    after_tl, fa, _ = _steady(args.after)
    changes, matched = compare(before_tl, after_tl)
    if not matched:
        raise UsageError(
            f"{args.before} and {args.after}: no scenario pairs with steady batches on both sides (paired by "
            "name, or by loop and mode)"
        )
    batches = [c for c in changes if c.phase == "batch"]
    if batches and all(c.before_mean_ms == 0 and c.after_mean_ms == 0 for c in batches):
        raise UsageError(f"{args.before} and {args.after}: every batch took 0 ms on both sides; nothing to compare")
    text = lines(changes, matched) + size_notes(before_tl, after_tl, matched)
    text += unpaired(before_tl, after_tl, matched)
    del before_tl, after_tl
    if args.out is not None:  # the page is AFTER's whole report: read whole
        ta, fa, ma = load_report(args.after)
        a_after, _ = report.diagnosis_of(fa, ta, ma)
        from profiler.names import clean
        from profiler.render.html import report_html

        args.out.mkdir(parents=True, exist_ok=True)
        files.write_json(
            {"before": str(args.before), "after": str(args.after), "changes": as_json(changes)},
            args.out / "compare.json",
        )
        title = f"{clean(fa.name)} (after) against {clean(fb.name)} (before)"
        files.write_text_atomic(args.out / "compare.html", report_html(title, a_after, ma, compare=text))
    if args.json:
        print(to_json(as_json(changes), indent=2))  # strict JSON: a figure with no value is null
    else:
        print("\n".join(text))
    return 0
