"""The bad inputs of ``test_fuzz_cli`` that are files: timelines, meta.json, calibrations, nsys
exports, each wrong in one known way (see that module)."""

from __future__ import annotations

import json
import random
import shutil
import sqlite3
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from pathlib import Path

from profiler.timeline.schema import DURATIONS, SCHEMA

DATA = Path(__file__).parent / "data"
LINES = (DATA / "h200_default" / "timeline.csv").read_text().splitlines()[:25]  # 24 rows: fast to read
HEADER = LINES[0].split(",")
META = json.loads((DATA / "h200_default" / "meta.json").read_text())
CAL = (DATA / "h200_default" / "calibration.csv").read_text()
DB = DATA / "h200_nsys" / "report.sqlite"


@dataclass(frozen=True)
class Case:
    """One bad input: how to lay it out in a folder, the command line, and what the error must name."""

    name: str
    make: Callable[[Path], list[str]]  # builds the input under the folder, returns argv
    names: Callable[[list[str]], str]  # from the argv: the text the one error line must hold


def naming(text: str) -> Callable[[list[str]], str]:
    """What the error must hold: ``text``, whatever the command line."""
    return lambda argv: text


def the_path(argv: list[str]) -> str:
    """What the error must hold: the path the command reads."""
    return argv[1]


def _timeline(
    folder: Path, lines: list[str], meta: dict[str, object] | None = None, cal: str | None = CAL, name: str = "rep"
) -> Path:
    rep = folder / name
    rep.mkdir()
    (rep / "timeline.csv").write_text("\n".join(lines) + "\n")
    (rep / "meta.json").write_text(json.dumps(META if meta is None else meta))
    if cal is not None:
        (rep / "calibration.csv").write_text(cal)
    return rep


def verb_argv(rep: Path, verb: str, folder: Path) -> list[str]:
    return {
        "diagnose": ["diagnose", str(rep)],
        "plot": ["plot", str(rep), "--out", str(folder / "png")],
        "trace": ["trace", str(rep), "-o", str(folder / "trace.json")],
        "nsys-compare": ["nsys-compare", str(rep), str(DATA / "h200_nsys" / "timeline.csv")],
        "merge": ["merge", str(rep.parent)],
    }[verb]


def _bad_cells(col: str) -> list[str]:
    kind = SCHEMA[col]
    if kind == "float64":
        return ["abc", "inf", "-inf", "1e400", "0x1p3q", *(["-0.5", "-1e9"] if col in DURATIONS else [])]
    if kind in ("int64", "Int64"):
        return ["abc", "1.5", "18446744073709551616", "-3", "1e400", "inf", *([""] if kind == "int64" else [])]
    if kind in ("bool", "boolean"):
        return ["maybe", "2", "yes please"]
    return []


def cell_cases(rng: random.Random) -> Iterator[Case]:
    """A timeline with one cell (or a whole column) of a wrong value, through each reading verb."""
    for col in HEADER:
        if col not in SCHEMA:
            continue
        for value in _bad_cells(col):
            # each bad cell through two verbs drawn at random, in one row or in the whole column
            for verb in rng.sample(["diagnose", "trace", "plot", "nsys-compare", "merge"], 2):
                for whole in (False, True):
                    row = rng.randrange(1, len(LINES))

                    def make(
                        folder: Path,
                        col: str = col,
                        value: str = value,
                        row: int = row,
                        whole: bool = whole,
                        verb: str = verb,
                    ) -> list[str]:
                        lines = list(LINES)
                        j = HEADER.index(col)
                        for i in range(1, len(lines)) if whole else [row]:
                            cells = lines[i].split(",")
                            cells[j] = value
                            lines[i] = ",".join(cells)
                        rep = _timeline(folder, lines, name="rank0" if verb == "merge" else "rep")
                        return verb_argv(rep, verb, folder)

                    where = "every row" if whole else f"row {row}"
                    yield Case(f"cell {col}={value!r} {where} via {verb}", make, naming(col))


META_BAD: dict[str, list[object]] = {
    "cpu_count": ["four", -2, 0, 1.5, [4], {"n": 4}, 10**30, True],
    "rank": ["zero", -1, 1.5, [0]],
    "world_size": ["x", 0, -1, 2.5],
    "origin_monotonic_ms": ["noon", [1], {"t": 1}, True],
    "partial": ["yes", 1, [True]],
    "status": [3, ["running"]],
    "interrupted_by": [7, ["SIGINT"]],
    "host": [1, ["vm"]],
}


def meta_cases(rng: random.Random) -> Iterator[Case]:
    """meta.json with one key of the wrong type, or not a JSON object at all, read by diagnose and merge."""
    for key, values in META_BAD.items():
        for value in values:
            for verb in ("diagnose", "merge"):

                def make(folder: Path, key: str = key, value: object = value, verb: str = verb) -> list[str]:
                    rep = _timeline(folder, LINES, {**META, key: value}, name="rank0" if verb == "merge" else "rep")
                    return verb_argv(rep, verb, folder)

                yield Case(f"meta {key}={value!r} via {verb}", make, naming(key))
    for text in ["[]", '"x"', "3", "{", "{}}", "\xff", "[" * 100_000, '{"a": ' * 5000]:

        def make_raw(folder: Path, text: str = text) -> list[str]:
            rep = _timeline(folder, LINES)
            (rep / "meta.json").write_text(text, encoding="utf-8", errors="surrogateescape")
            return ["diagnose", str(rep)]

        yield Case(f"meta text {text[:12]!r}", make_raw, naming("meta.json"))


def calibration_cases(rng: random.Random) -> Iterator[Case]:
    """calibration.csv without its columns, or with a bad value in one, read by diagnose."""
    header, *rows = CAL.splitlines()
    cols = header.split(",")
    for col in ("bytes", "pinned_GBps"):
        for value in ["", "abc", "inf", "-1", "0", "nan"]:
            row = rng.randrange(len(rows))

            def make(folder: Path, col: str = col, value: str = value, row: int = row) -> list[str]:
                lines = [header, *rows]
                cells = lines[row + 1].split(",")
                cells[cols.index(col)] = value
                lines[row + 1] = ",".join(cells)
                return ["diagnose", str(_timeline(folder, LINES, cal="\n".join(lines) + "\n"))]

            yield Case(f"calibration {col}={value!r}", make, naming("calibration.csv"))

        def without(folder: Path, col: str = col) -> list[str]:
            return ["diagnose", str(_timeline(folder, LINES, cal=CAL.replace(col, "renamed")))]

        yield Case(
            f"calibration without {col}",
            without,
            naming("calibration.csv"),
        )


def _not_null(table: str) -> set[str]:
    """Columns the export's schema declares NOT NULL (an UPDATE to NULL there is refused by SQLite)."""
    con = sqlite3.connect(DB)
    try:
        return {r[1] for r in con.execute(f"PRAGMA table_info({table})") if r[3]}
    finally:
        con.close()


# Columns pinprof reads from each table (the others may hold anything without changing the import).
READ = {
    "NVTX_EVENTS": ("start", "eventType"),
    "CUPTI_ACTIVITY_KIND_MEMCPY": ("start", "end", "bytes", "srcKind"),
}
ROWS_READ = {"NVTX_EVENTS": "", "CUPTI_ACTIVITY_KIND_MEMCPY": " WHERE copyKind = 1"}  # HtoD copies only


def nsys_cases(rng: random.Random) -> Iterator[Case]:
    """An nsys export with a column pinprof reads made TEXT, BLOB or NULL (in every row or in one)."""
    for table, cols in READ.items():
        for col in cols:
            for value in ["'abc'", "x'00ff'", "NULL", "'12abc'", "1.5"]:
                if value == "NULL" and col in _not_null(table):
                    continue
                for where in ("", f" WHERE rowid = (SELECT min(rowid) FROM {table}{ROWS_READ[table]})"):

                    def make(
                        folder: Path, table: str = table, col: str = col, value: str = value, where: str = where
                    ) -> list[str]:
                        db = folder / "cap.sqlite"
                        shutil.copy(DB, db)
                        con = sqlite3.connect(db)
                        con.execute(f"UPDATE {table} SET {col} = {value}{where}")
                        con.commit()
                        con.close()
                        return ["nsys-import", str(db), "--out", str(folder / "o")]

                    yield Case(f"nsys {table}.{col}={value}{where[:6]}", make, naming(col))
