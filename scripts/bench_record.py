#!/usr/bin/env python3
"""The per-batch record on the hot path: a dict (what the recorder uses) against a typed slotted
dataclass with the same fields, side by side in one run (ABAB rounds, best of each).

Each call makes one batch's record, sets the fields a pinned_nb batch sets (keys by name, as the phase
contexts do), tests one NaN and extracts the numeric fields the store appends. Prints microseconds
per record and the ratio typed / dict.

    python scripts/bench_record.py [--rounds 6] [--number 100000]
"""

from __future__ import annotations

import argparse
import timeit
from dataclasses import field, make_dataclass
from operator import attrgetter, itemgetter
from typing import Any

from profiler.capture.store import NUMERIC, TEMPLATE

EXTRA = ("_h2d", "_stream", "_comp_start", "_comp_end")
NAMES = list(dict.fromkeys([*NUMERIC, *TEMPLATE]))
Typed = make_dataclass(
    "Typed",
    [(k, Any, field(default=TEMPLATE.get(k, 0))) for k in NAMES] + [(k, Any, field(default=None)) for k in EXTRA],
    slots=True,
)
_items, _attrs = itemgetter(*NUMERIC), attrgetter(*NUMERIC)


def as_dict() -> tuple[Any, ...]:
    r = dict(TEMPLATE)
    r["batch"], r["fetch_s"], r["fetch_e"], r["call_s"], r["call_e"] = 1, 1.0, 2.0, 3.0, 4.0
    key = "cpu_s"
    if r[key] != r[key]:
        r[key], r["cpu_sum"] = 5.0, 1.0
    r["cpu_e"], r["_h2d"] = 6.0, (None, None)
    return _items(r)


def as_typed() -> tuple[Any, ...]:
    r = Typed()
    r.batch, r.fetch_s, r.fetch_e, r.call_s, r.call_e = 1, 1.0, 2.0, 3.0, 4.0
    key = "cpu_s"
    if getattr(r, key) != getattr(r, key):
        setattr(r, key, 5.0)
        r.cpu_sum = 1.0
    r.cpu_e, r._h2d = 6.0, (None, None)
    return _attrs(r)


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--rounds", type=int, default=6)
    ap.add_argument("--number", type=int, default=100_000)
    args = ap.parse_args()
    assert as_dict() == as_typed()
    best = {"dict": float("inf"), "typed": float("inf")}
    for _ in range(args.rounds):
        for name, fn in (("dict", as_dict), ("typed", as_typed)):
            best[name] = min(best[name], timeit.timeit(fn, number=args.number) / args.number * 1e6)
    print(
        f"dict {best['dict']:.3f} us/record, typed dataclass {best['typed']:.3f} us/record, "
        f"ratio typed/dict {best['typed'] / best['dict']:.2f}"
    )


if __name__ == "__main__":
    main()
