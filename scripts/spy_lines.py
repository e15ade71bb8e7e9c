#!/usr/bin/env python3
"""Sum a py-spy raw profile (``py-spy record -f raw``) by function, inside one function's samples.

    python scripts/spy_lines.py spy-events.txt --inside "profiled (bench_overhead.py" [--top 40]

Prints, over the samples whose stack holds ``--inside``: each function's inclusive share (the sample's
stack holds it) and self share (it is the innermost frame), and, per line of pinprof's own code
(``profiler/``), the innermost such line: where the recorder's time goes, C calls included in the
line that made them.
"""

from __future__ import annotations

import argparse
import collections
import re

FRAME = re.compile(r"^(?P<func>.*) \((?P<file>[^():]*):(?P<line>\d+)\)$")


def frames(stack: str) -> list[tuple[str, str, str]]:
    out = []
    for f in stack.split(";"):
        m = FRAME.match(f.strip())
        out.append((m["func"], m["file"], m["line"]) if m else (f.strip(), "", ""))
    return out


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("raw", help="py-spy record -f raw output")
    ap.add_argument("--inside", required=True, help="text of the frame whose samples count")
    ap.add_argument("--top", type=int, default=40, help="rows per table (default 40)")
    args = ap.parse_args()
    incl: collections.Counter[str] = collections.Counter()
    own: collections.Counter[str] = collections.Counter()
    line: collections.Counter[str] = collections.Counter()
    total = 0
    with open(args.raw) as fh:
        for raw in fh:
            stack, _, count = raw.rstrip("\n").rpartition(" ")
            if args.inside not in stack:
                continue
            n = int(count)
            total += n
            fs = frames(stack[stack.index(args.inside) :])
            for key in {f"{fn} ({fl})" for fn, fl, _ in fs[1:]}:
                incl[key] += n
            fn, fl, ln = fs[-1]
            own[f"{fn} ({fl}:{ln})"] += n
            mine = [f for f in fs if f[1].startswith("profiler/")]
            line[f"{mine[-1][0]} ({mine[-1][1]}:{mine[-1][2]})" if mine else "(outside profiler/)"] += n
    if not total:
        raise SystemExit(f"no sample holds {args.inside!r}")
    for title, c in (("inclusive", incl), ("self", own), ("innermost pinprof line", line)):
        print(f"== {title}, of {total} samples")
        for key, n in c.most_common(args.top):
            print(f"{100 * n / total:6.1f}%  {key}")


if __name__ == "__main__":
    main()
