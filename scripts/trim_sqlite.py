#!/usr/bin/env python3
"""Copy the tables pinprof's importer reads out of an Nsight Systems SQLite export (for tests/data).

python scripts/trim_sqlite.py report.sqlite tests/data/h200_nsys/report.sqlite [--copies-only]

--copies-only: no kernel records, and of the runtime calls only those behind a memcpy record (what the
importer joins); for a capture of a real model, whose kernel launches are most of the file.
"""

from __future__ import annotations

import argparse
import sqlite3
from pathlib import Path

KEEP = (
    "StringIds",
    "NVTX_EVENTS",
    "CUPTI_ACTIVITY_KIND_MEMCPY",
    "CUPTI_ACTIVITY_KIND_RUNTIME",
    "CUPTI_ACTIVITY_KIND_KERNEL",
    "TARGET_INFO_GPU",
    "ENUM_CUDA_MEM_KIND",
)


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("src", type=Path)
    ap.add_argument("dst", type=Path)
    ap.add_argument("--copies-only", action="store_true", help="drop kernels and runtime calls of no memcpy")
    args = ap.parse_args()
    args.dst.unlink(missing_ok=True)
    con = sqlite3.connect(args.dst)
    con.execute("ATTACH DATABASE ? AS src", (str(args.src),))
    have = {r[0]: r[1] for r in con.execute("SELECT name, sql FROM src.sqlite_master WHERE type='table'")}
    keep = [t for t in KEEP if t in have and not (args.copies_only and t == "CUPTI_ACTIVITY_KIND_KERNEL")]
    for table in keep:
        con.execute(have[table])  # same schema (column names and types) as the export
        where = ""
        if args.copies_only and table == "CUPTI_ACTIVITY_KIND_RUNTIME":
            where = " WHERE correlationId IN (SELECT correlationId FROM src.CUPTI_ACTIVITY_KIND_MEMCPY)"
        con.execute(f"INSERT INTO main.{table} SELECT * FROM src.{table}{where}")
    con.commit()
    con.execute("DETACH DATABASE src")
    con.execute("VACUUM")
    con.close()
    print(f"{args.dst}: {', '.join(keep)}; {args.dst.stat().st_size} bytes")


if __name__ == "__main__":
    main()
