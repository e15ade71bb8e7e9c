"""``pinprof compare BEFORE AFTER``, or ``pinprof compare B1 B2 B3 -- A1 A2 A3``: did a change help? Per
scenario and phase, the change of the mean and median batch time and of each phase, judged against
the noise (``profiler.analysis.before_after``): with one run a side the batches' own spread, which
does not separate drift between runs (said under the result); with several runs a side the spread of
the runs' means. A reading verb: it prints; ``--out DIR`` also writes ``compare.json`` and
``compare.html`` (the first AFTER run's report page with a before-and-after section) there."""

from __future__ import annotations

import argparse
from collections.abc import Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Any

from profiler.cli.args import Subparsers, load_report
from profiler.errors import UsageError

if TYPE_CHECKING:
    import pandas as pd


def add(sub: Subparsers) -> None:
    p = sub.add_parser(
        "compare",
        help="compare reports of one loop before and after a change: BEFORE AFTER, or B1 B2 ... -- A1 A2 ...",
    )
    p.add_argument(
        "runs",
        type=Path,
        nargs="+",
        metavar="RUN",
        help="report folders or timeline CSVs: BEFORE AFTER (one run a side), or the runs before the change, "
        "--, the runs after it (at least two a side: their spread is the noise); options go before the runs",
    )
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


def sides(runs: list[Path], argv: Sequence[str]) -> tuple[list[Path], list[Path]]:
    """The runs before and after the change: split at ``--`` (argparse drops it, and reads every word
    after it as a run), else two runs, one a side."""
    argv = list(argv)
    if "--" in argv:
        k = len(argv) - argv.index("--") - 1
        before, after = runs[: len(runs) - k], runs[len(runs) - k :]
        if len(before) == len(after) == 1 or (len(before) >= 2 and len(after) >= 2):
            return before, after
        raise UsageError(
            f"{len(before)} run(s) before -- and {len(after)} after; give at least two a side "
            "(their spread is the noise), or one a side: pinprof compare before1 before2 before3 -- after1 after2 after3"
        )
    if len(runs) != 2:
        raise UsageError(
            f"{len(runs)} runs and no --; give BEFORE AFTER, or the runs of each side apart: "
            "pinprof compare before1 before2 before3 -- after1 after2 after3"
        )
    return runs[:1], runs[1:]


def run(args: argparse.Namespace, argv: Sequence[str]) -> int:
    from profiler.analysis.before_after import as_json, compare_runs, lines, one_run_a_side, size_notes, unpaired
    from profiler.atomic import to_json
    from profiler.report import files
    from profiler.report import folder as report

    befores, afters = sides(args.runs, argv)
    named = [files.resolve_timeline_path(p).resolve() for p in (*befores, *afters)]
    twice = sorted({str(p) for p in named if named.count(p) > 1})
    if twice and len(named) > 2:  # a run counted twice among repeats is no repetition: its spread reads as none
        raise UsageError(f"{', '.join(twice)}: named more than once; give each run once")
    before, after = befores[0], afters[0]
    # Each run read with the columns the comparison needs and its start-up batches flagged, one after
    # the other: two 1,000,000-row timelines whole held 2.6 GB.
    read_b = [_steady(p) for p in befores]
    before_tls, fb = [tl for tl, _, _ in read_b], read_b[0][1]
    after_tls = [_steady(p)[0] for p in afters]
    del read_b
    changes, matched = compare_runs(before_tls, after_tls)
    said = f"{before} and {after}" if len(befores) == 1 else f"{len(befores)} runs before and {len(afters)} after"
    if not matched:
        raise UsageError(
            f"{said}: no scenario pairs with steady batches on both sides (paired by name, or by loop and mode)"
        )
    batches = [c for c in changes if c.phase == "batch"]
    if batches and all(c.before_mean_ms == 0 and c.after_mean_ms == 0 for c in batches):
        raise UsageError(f"{said}: every batch took 0 ms on both sides; nothing to compare")
    if not batches:
        raise UsageError(f"{said}: no scenario has its batch time in at least two runs on each side")
    text = lines(changes, matched) + size_notes(before_tls[0], after_tls[0], matched)
    text += unpaired(before_tls[0], after_tls[0], matched)
    if len(befores) == 1:
        text.append(one_run_a_side())
    del before_tls, after_tls
    if args.out is not None:  # the page is the first AFTER run's whole report: read whole
        ta, fa, ma = load_report(after)
        a_after, _ = report.diagnosis_of(fa, ta, ma)
        from profiler.names import clean
        from profiler.render.html import report_html

        args.out.mkdir(parents=True, exist_ok=True)
        files.write_json(
            {"before": [str(p) for p in befores], "after": [str(p) for p in afters], "changes": as_json(changes)},
            args.out / "compare.json",
        )
        title = f"{clean(fa.name)} (after) against {clean(fb.name)} (before)"
        files.write_text_atomic(args.out / "compare.html", report_html(title, a_after, ma, compare=text))
    if args.json:
        print(to_json(as_json(changes), indent=2))  # strict JSON: a figure with no value is null
    else:
        print("\n".join(text))
    return 0
