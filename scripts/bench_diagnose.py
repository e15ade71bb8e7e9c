#!/usr/bin/env python3
"""``pinprof diagnose`` (and optionally ``compare``, ``trace`` and ``plot``) on a generated 1,000,000-row timeline:
wall time and peak memory of each verb, run as a user runs it (a process of its own).

The timeline is a recorded H200 report (``tests/data/h200_default``, 12 scenarios) repeated to the
row count asked, each scenario's batches numbered on: pinprof's CSV writer's own lines, repeated.

    python scripts/bench_diagnose.py [--rows 1000000] [--folder /tmp/pinprof-big] [--compare] [--trace] [--plot]

``--compare``: ``pinprof compare`` of the timeline against itself, two timelines of that many rows.
"""

from __future__ import annotations

import argparse
import csv
import io
import shutil
import subprocess
import sys
import tempfile
import time
from pathlib import Path

HERE = Path(__file__).resolve().parent
DATA = HERE.parent / "tests" / "data" / "h200_default"


def make(folder: Path, rows: int) -> None:
    """``rows`` rows of the recorded report in ``folder``: its timeline written once by pinprof's CSV
    writer, then its lines repeated with each scenario's batches numbered on (the same file as writing
    the repeated frame, in a second instead of half a minute on the 2-core machine)."""
    from profiler.report.files import read_timeline, write_csv

    folder.mkdir(parents=True, exist_ok=True)
    one = read_timeline(DATA)
    one["batch"] = one.groupby("scenario").cumcount()
    small = folder / "timeline.csv"
    write_csv(one, small)
    header, *lines = small.read_text().splitlines()
    col = next(csv.reader([header])).index("batch")
    per = one.scenario.value_counts().to_dict()  # each repeat numbers a scenario's batches on by this
    parts = []  # (text before the batch, the row's batch and scenario, text after) of each line
    for line, batch, scenario in zip(lines, one.batch, one.scenario):
        fields = next(csv.reader([line]))
        before, after = _row(fields[:col]), _row(fields[col + 1 :])
        parts.append(
            (before + "," if col else "", int(batch), per[scenario], "," + after if col + 1 < len(fields) else "")
        )
    # the first repeat is the writer's own text, or the lines were not cut where the batch is
    assert [f"{b}{n}{a}" for b, n, _, a in parts] == lines, "the batch column could not be cut out of the CSV"
    out = [header]
    for k in range(rows // len(parts) + 1):
        out.extend(f"{b}{n + k * m}{a}" for b, n, m, a in parts)
    small.write_text("\n".join(out[: rows + 1]) + "\n")
    shutil.copy(DATA / "meta.json", folder / "meta.json")


def _row(fields: list[str]) -> str:
    buf = io.StringIO()
    csv.writer(buf, lineterminator="").writerow(fields)
    return buf.getvalue()


def _hwm_kb(pid: int) -> int:
    """The process's resident high-water mark (``VmHWM``, kB), 0 where it cannot be read."""
    try:
        for line in open(f"/proc/{pid}/status"):
            if line.startswith("VmHWM:"):
                return int(line.split()[1])
    except (OSError, ValueError):
        pass
    return 0


def measure(argv: list[str]) -> tuple[float, float, int]:
    """(seconds, peak resident MB, exit status) of ``python -m profiler ARGV`` in a child process. The
    peak is the child's own memory's high-water mark (``VmHWM``), read every 20 ms until it ends: the
    rusage of a child counts the pages of the process it was forked from (a 1 GB test runner read
    1,010 MB for every verb)."""
    t0 = time.perf_counter()
    with tempfile.TemporaryFile("w+") as log:  # a file, not a pipe: a child that says much never blocks
        proc = subprocess.Popen([sys.executable, "-m", "profiler", *argv], stdout=subprocess.DEVNULL, stderr=log)
        peak = 0
        while proc.poll() is None:
            peak = max(peak, _hwm_kb(proc.pid))
            time.sleep(0.02)
        log.seek(0)
        err = log.read()
    elapsed = time.perf_counter() - t0
    if proc.returncode:
        print(err[-2000:])
    return elapsed, peak / 1024, proc.returncode


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--rows", type=int, default=1_000_000, help="rows of the timeline (default 1,000,000)")
    ap.add_argument("--folder", type=Path, default=Path("/tmp/pinprof-big"), help="where it is written")
    ap.add_argument("--compare", action="store_true", help="also time pinprof compare of the timeline with itself")
    ap.add_argument("--trace", action="store_true", help="also time pinprof trace")
    ap.add_argument("--plot", action="store_true", help="also time pinprof plot")
    args = ap.parse_args()
    csv = args.folder / "timeline.csv"
    if not csv.is_file() or sum(1 for _ in open(csv, "rb")) != args.rows + 1:
        t0 = time.perf_counter()
        # In a process of its own: a child forked from a process that built the table starts with its
        # resident pages, and the peaks measured after would read them (1.7 GB for a 0.9 GB verb).
        code = f"import sys; sys.path[:0] = {[str(HERE), str(HERE.parent)]!r}; import bench_diagnose as b; "
        code += f"from pathlib import Path; b.make(Path({str(args.folder)!r}), {args.rows})"
        subprocess.run([sys.executable, "-c", code], check=True)
        print(f"wrote {csv} ({csv.stat().st_size / 1e6:.0f} MB) in {time.perf_counter() - t0:.0f} s")
    verbs = [["diagnose", str(args.folder)]]
    if args.compare:
        verbs.append(["compare", str(args.folder), str(args.folder)])
    if args.trace:
        verbs.append(["trace", str(args.folder), "-o", str(args.folder / "trace.json")])
    if args.plot:
        verbs.append(["plot", str(args.folder)])
    for argv in verbs:
        secs, mb, rc = measure(argv)
        print(f"pinprof {argv[0]} on {args.rows:,} rows: {secs:.1f} s, peak {mb:.0f} MB resident, exit {rc}")


if __name__ == "__main__":
    main()
