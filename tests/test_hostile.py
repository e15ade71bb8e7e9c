"""Hostile folders, files, values, names and scripts: generated cases for each class pinprof was broken by.

Each case runs a verb in a process of its own, under a time limit and a memory limit (``prlimit
--data``), and asserts one outcome: refused with exit 2 and one line that names the bad input (no
traceback, no hang, memory bounded), or, for ``pinprof profile``, the same exit status, standard output
and files as the script run bare. The classes (the numbers of the issue that listed them):

1. lock: a planted ``.pinprof.lock`` (a link to /dev/zero or to a file outside, a FIFO, a 1 GB file,
   a folder, a dangling link)
2. outputs: a link, a FIFO or a folder planted where pinprof writes (plots, trace, the report's
   files), in a folder another user could have made
3. disk: a full disk under ``profile`` (``test_a_full_disk_under_profile_keeps_*``)
4. kill: ``kill -9`` and ``os._exit`` under ``profile`` (``test_kill_9_*``, ``os._exit`` cases here)
5. world: what the script sees under ``profile`` against bare Python (``sys.path[0]``, ``__file__``,
   ``__loader__``, ``__package__``, ``__spec__``, ``__builtins__``, stdout, ``-m``, spawn workers)
6. nsys inputs: the second ``nsys-compare`` input, SQLite views, odd NVTX names, damaged exports
7. plot: all warm-up, no scenario column, bad ``bandwidth.csv``, a huge name, thousands of scenarios
8. values: huge or deeply nested JSON, duplicate keys, denormal and huge times, bad rank variables,
   duplicate rows, odd ``rank*`` folders
9. scale: many scenarios and long names here; a 1,000,000-row timeline in ``scripts/bench_diagnose.py``
10. names: spreadsheet formulas, HTML and Markdown headings in names, through to every output

``test_planted_files_as_another_user`` repeats the planted files of classes 1 and 2 with the folder made
by one user and pinprof run by another (``setpriv``), and checks that no file outside it changed.
"""

from __future__ import annotations

import json
import os
import shutil
import signal
import sqlite3
import subprocess
import sys
import time
from collections import Counter
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

import pandas as pd
import pytest
from conftest import wait_for_journal

from profiler.report.files import read_timeline

ROOT = Path(__file__).resolve().parent.parent
DATA = Path(__file__).parent / "data"
HOSTILE = Path(__file__).parent / "hostile"
REPORT = DATA / "h200_default"
TIMELINE = (REPORT / "timeline.csv").read_text().splitlines()[:31]  # 30 rows: quick to read
DB = DATA / "h200_nsys" / "report.sqlite"
PY = sys.executable
READ_MEM = 1_000_000_000  # bytes of data a reading verb may take (prlimit --data)
TORCH_MEM = 3_000_000_000  # a verb that imports torch


@dataclass(frozen=True)
class Case:
    klass: str
    name: str
    check: Callable[[Path], None]


def run_cli(
    argv: list[str],
    *,
    cwd: Path | None = None,
    env: dict[str, str] | None = None,
    timeout: float = 90,
    mem: int = READ_MEM,
    user: int | None = None,
) -> subprocess.CompletedProcess[str]:
    """``python -m profiler ARGV`` in a process of its own, time- and memory-limited."""
    who = [] if user is None else ["setpriv", f"--reuid={user}", f"--regid={user}", "--clear-groups"]
    cmd = ["prlimit", f"--data={mem}", *who, PY, "-m", "profiler", *argv]
    full_env = {**os.environ, "PYTHONPATH": str(ROOT), **(env or {})}
    try:
        return subprocess.run(cmd, cwd=cwd or ROOT, env=full_env, capture_output=True, text=True, timeout=timeout)
    except subprocess.TimeoutExpired as err:
        raise AssertionError(f"{argv[:3]} did not end within {timeout} s (a hang)") from err


def refused(res: subprocess.CompletedProcess[str], *names: str) -> None:
    """Exit 2, one line on stderr that names the bad input, no traceback."""
    lines = [ln for ln in res.stderr.splitlines() if ln.strip()]
    assert res.returncode == 2, f"exit {res.returncode}; stderr: {res.stderr[-1500:]}"
    assert "Traceback" not in res.stderr and "MemoryError" not in res.stderr, res.stderr[-1500:]
    assert len(lines) == 1, f"{len(lines)} lines: {res.stderr[-1500:]}"
    for name in names:
        assert name in lines[0], f"{name!r} not named in: {lines[0]}"


def report_copy(folder: Path, rows: list[str] | None = None) -> Path:
    folder.mkdir(parents=True, exist_ok=True)
    (folder / "timeline.csv").write_text("\n".join(rows or TIMELINE) + "\n")
    shutil.copy(REPORT / "meta.json", folder / "meta.json")
    return folder


def edited(col: str, value: str, rows: list[str] | None = None, where: int | None = None) -> list[str]:
    """The sample timeline with ``col`` set to ``value`` in data row ``where`` (None: every row)."""
    rows = list(rows or TIMELINE)
    head = rows[0].split(",")
    j = head.index(col)
    frame = pd.read_csv(pd.io.common.StringIO("\n".join(rows)), dtype=str, keep_default_na=False)
    for i in range(len(frame)) if where is None else [where]:
        frame.iat[i, j] = value
    return [",".join(head)] + [
        ",".join(f'"{c}"' if "," in c or "\n" in c or '"' in c else c for c in r) for r in frame.itertuples(index=False)
    ]


# -- planted things ----------------------------------------------------------------------------------
SENTINEL_TEXT = "a file of someone's that pinprof must never touch\n"


def sentinel(tmp: Path) -> Path:
    outside = tmp / "outside"
    outside.mkdir(exist_ok=True)
    path = outside / "precious.txt"
    path.write_text(SENTINEL_TEXT)
    return path


def plant(kind: str, path: Path, tmp: Path) -> None:
    """Put something that is not a plain file of pinprof's at ``path``."""
    if kind == "link-devzero":
        path.symlink_to("/dev/zero")
    elif kind == "link-outside":
        path.symlink_to(sentinel(tmp))
    elif kind == "link-dangling":
        path.symlink_to(tmp / "nowhere" / "x")
    elif kind == "fifo":
        os.mkfifo(path)
    elif kind == "folder":
        path.mkdir()
    elif kind == "large":
        with open(path, "wb") as fh:
            fh.truncate(1 << 30)  # sparse: 1 GB read back as zeros
    elif kind == "link-fifo":
        os.mkfifo(tmp / "a-fifo")
        path.symlink_to(tmp / "a-fifo")
    else:
        raise ValueError(kind)


def untouched(tmp: Path) -> None:
    p = tmp / "outside" / "precious.txt"
    if p.exists():
        assert p.read_text() == SENTINEL_TEXT, "a file outside the folder was written through a link"


# -- class 1: the lock ---------------------------------------------------------------------------
LOCK_KINDS = ["link-devzero", "link-outside", "fifo", "folder", "large", "link-fifo"]


def lock_cases() -> list[Case]:
    out = []
    for kind in LOCK_KINDS:
        for verb in ("profile", "run"):

            def check(tmp: Path, kind: str = kind, verb: str = verb) -> None:
                folder = tmp / "shared"
                folder.mkdir()
                plant(kind, folder / ".pinprof.lock", tmp)
                if verb == "profile":
                    argv = [
                        "profile",
                        "--out",
                        str(folder),
                        "--",
                        "python",
                        str(HOSTILE / "steady_loop.py"),
                        str(tmp / "log"),
                        "3",
                    ]
                else:
                    argv = ["run", "--out", str(folder), "--force", "--device", "cpu", "--batches", "2", "--no-plots"]
                res = run_cli(argv, mem=TORCH_MEM)
                refused(res, ".pinprof.lock")
                untouched(tmp)
                assert not (tmp / "log").exists(), "the program ran although the folder was refused"

            out.append(Case("1 lock", f"{verb} {kind}", check))
    return out


# -- class 2: outputs --------------------------------------------------------------------------
OUTPUT_KINDS = ["link-outside", "link-devzero", "fifo", "folder", "link-dangling"]


def output_cases() -> list[Case]:
    out = []
    targets = [
        ("plot", "gantt.png", lambda rep, out: ["plot", str(rep), "--out", str(out)]),
        ("plot", "phases.png", lambda rep, out: ["plot", str(rep), "--out", str(out)]),
        ("trace", "trace.json", lambda rep, out: ["trace", str(rep), "-o", str(out / "trace.json")]),
        ("merge", "timeline.csv", None),
        ("merge", "summary.csv", None),
        ("merge", "meta.json", None),
    ]
    for verb, name, argv_of in targets:
        for kind in OUTPUT_KINDS:

            def check(tmp: Path, verb: str = verb, name: str = name, argv_of=argv_of, kind: str = kind) -> None:
                if verb == "merge":
                    folder = tmp / "job"
                    report_copy(folder / "rank0")
                    report_copy(folder / "rank1", edited("rank", "1"))
                    meta = json.loads((REPORT / "meta.json").read_text())
                    (folder / "rank1" / "meta.json").write_text(json.dumps({**meta, "rank": 1}))
                    plant(kind, folder / name, tmp)
                    res = run_cli(["merge", str(folder)])
                else:
                    rep = report_copy(tmp / "rep")
                    out = tmp / "shared"
                    out.mkdir()
                    plant(kind, out / name, tmp)
                    res = run_cli(argv_of(rep, out), mem=READ_MEM if verb != "plot" else 2 * READ_MEM)
                refused(res, name)
                untouched(tmp)

            out.append(Case("2 outputs", f"{verb} {name} as {kind}", check))
    return out


# -- class 4 (os._exit) and 5: the script's world ------------------------------------------------------
def bare_and_profiled(
    tmp: Path, cmd: list[str], cwd: Path, between: Callable[[], None] | None = None
) -> tuple[subprocess.CompletedProcess[str], ...]:
    """The command run bare, then under ``pinprof profile`` (``between`` runs in between)."""
    env = {**os.environ, "PYTHONPATH": str(ROOT)}
    bare = subprocess.run([PY, *cmd], cwd=cwd, env=env, capture_output=True, text=True, timeout=120)
    if between is not None:
        between()
    prof = subprocess.run(
        [PY, "-m", "profiler", "profile", "--out", str(tmp / "rep"), "--no-plots", "--", "python", *cmd],
        cwd=cwd,
        env=env,
        capture_output=True,
        text=True,
        timeout=180,
    )
    return bare, prof


def world_cases() -> list[Case]:
    out = []
    for ctx in ("", "spawn", "forkserver"):
        for how in ("relative", "absolute"):

            def check(tmp: Path, ctx: str = ctx, how: str = how) -> None:
                shutil.copytree(HOSTILE, tmp / "prog")
                script = "prog/world.py" if how == "relative" else str(tmp / "prog" / "world.py")
                written = tmp / "prog" / "world_out.json"
                kept: list[str] = []

                def swap() -> None:  # the bare run's file put aside: the profiled run must write its own
                    kept.append(written.read_text())
                    written.unlink()

                bare, prof = bare_and_profiled(tmp, [script, *([ctx] if ctx else [])], tmp, swap)
                assert bare.returncode == 0, bare.stderr[-2000:]
                assert prof.returncode == bare.returncode, prof.stderr[-2000:]
                assert prof.stdout == bare.stdout  # the script's output alone, the same world seen
                assert written.read_text() == kept[0]  # the file it wrote: the same, in the same place
                assert json.loads(prof.stdout)["batches"] == [[[0], [1]], [[4], [9]]]
                assert len(pd.read_csv(tmp / "rep" / "timeline.csv")) == 2

            out.append(Case("5 world", f"script {how} path, loader {ctx or 'no workers'}", check))

    for ctx in ("", "spawn"):

        def module(tmp: Path, ctx: str = ctx) -> None:
            pkg = tmp / "mypkg"
            pkg.mkdir()
            (pkg / "__init__.py").write_text("")
            shutil.copy(HOSTILE / "world.py", pkg / "train.py")
            shutil.copy(HOSTILE / "world_cfg.txt", pkg / "world_cfg.txt")
            bare, prof = bare_and_profiled(tmp, ["-m", "mypkg.train", *([ctx] if ctx else [])], tmp)
            assert bare.returncode == 0, bare.stderr[-2000:]
            assert prof.returncode == 0, prof.stderr[-2000:]
            assert prof.stdout == bare.stdout

        out.append(Case("5 world", f"python -m mypkg.train, loader {ctx or 'no workers'}", module))

    def named_like_python(tmp: Path) -> None:
        script = tmp / "python_train.py"
        shutil.copy(HOSTILE / "steady_loop.py", script)
        res = run_cli(["profile", "--out", str(tmp / "rep"), "--", str(script), str(tmp / "log"), "3"], mem=TORCH_MEM)
        assert res.returncode == 0, res.stderr[-2000:]
        assert len(pd.read_csv(tmp / "rep" / "timeline.csv")) == 3

    out.append(Case("5 world", "a script named python_train.py, no interpreter given", named_like_python))

    for code in (0, 3, 5):

        def exits(tmp: Path, code: int = code) -> None:
            cmd = [str(HOSTILE / "steady_loop.py"), str(tmp / "log"), "8", f"_exit{code}"]
            bare, prof = bare_and_profiled(tmp, cmd, tmp)
            assert bare.returncode == prof.returncode == code, prof.stderr[-2000:]
            assert prof.stdout == bare.stdout == ""
            assert len(pd.read_csv(tmp / "rep" / "timeline.csv")) == 4  # os._exit after 4 batches: all 4 kept

        out.append(Case("4 kill", f"os._exit({code}) after 4 batches", exits))
    for code in (0, 1, 4):

        def exits_normally(tmp: Path, code: int = code) -> None:
            cmd = [str(HOSTILE / "steady_loop.py"), str(tmp / "log"), "6", str(code)]
            bare, prof = bare_and_profiled(tmp, cmd, tmp)
            assert bare.returncode == prof.returncode == code, prof.stderr[-2000:]
            assert prof.stdout == bare.stdout == ""
            assert len(pd.read_csv(tmp / "rep" / "timeline.csv")) == 6

        out.append(Case("5 world", f"sys.exit({code}): same status, nothing on stdout", exits_normally))
    return out


# -- class 6: nsys inputs ---------------------------------------------------------------------------
def nsys_cases() -> list[Case]:
    out = []

    def with_api(rows: list[str], value: str) -> str:
        head, *body = rows
        return "\n".join([head + ",api_ms", *(r + "," + value for r in body)]) + "\n"

    bad_second: dict[str, Callable[[Path], object]] = {
        "fifo": lambda p: os.mkfifo(p),
        "link to /dev/zero": lambda p: p.symlink_to("/dev/zero"),
        "empty": lambda p: p.write_text(""),
        "binary": lambda p: p.write_bytes(bytes(range(256)) * 64),
        "latin-1": lambda p: p.write_bytes("scenario,batch,mode,bytes\nmod\xe9,0,x,1\n".encode("latin-1")),
        "bad quoting": lambda p: p.write_text('mode,batch,bytes,api_ms\n"x,0,1,2\n'),
        "missing columns": lambda p: p.write_text("a,b\n1,2\n"),
        "text in api_ms": lambda p: p.write_text(with_api(TIMELINE, "abc")),
        "negative api_ms": lambda p: p.write_text(with_api(TIMELINE, "-1")),
        "inf api_ms": lambda p: p.write_text(with_api(TIMELINE, "inf")),
        "inf h2d_ms": lambda p: p.write_text("\n".join(edited("h2d_ms", "inf"))),
        "5e-324 h2d_ms": lambda p: p.write_text("\n".join(edited("h2d_ms", "5e-324"))),
        "1e308 fetch_ms": lambda p: p.write_text("\n".join(edited("fetch_ms", "1e308"))),
        "folder": lambda p: p.mkdir(),
    }
    for what, make in bad_second.items():

        def check(tmp: Path, make=make, what: str = what) -> None:
            rep = report_copy(tmp / "rep")
            second = tmp / "nsys_timeline.csv"
            make(second)
            refused(run_cli(["nsys-compare", str(rep), str(second)]), "nsys_timeline.csv")

        out.append(Case("6 nsys inputs", f"nsys-compare second input: {what}", check))

    def sql(tmp: Path, statements: list[str]) -> Path:
        db = tmp / "report.sqlite"
        shutil.copy(DB, db)
        con = sqlite3.connect(db)
        for st in statements:
            con.execute(st)
        con.commit()
        con.close()
        return db

    bad_exports = {
        "NVTX_EVENTS a recursive view": [
            "ALTER TABLE NVTX_EVENTS RENAME TO nv",
            "CREATE VIEW NVTX_EVENTS AS WITH RECURSIVE r(x) AS (SELECT 1 UNION ALL SELECT x+1 FROM r) SELECT * FROM r",
        ],
        "memcpy a recursive view": [
            "ALTER TABLE CUPTI_ACTIVITY_KIND_MEMCPY RENAME TO m",
            "CREATE VIEW CUPTI_ACTIVITY_KIND_MEMCPY AS WITH RECURSIVE r(x) AS (SELECT 1 UNION ALL SELECT x+1 FROM r) SELECT * FROM r",
        ],
        "batch 10**25": ["UPDATE StringIds SET value = 'batch 10000000000000000000000000' WHERE value = 'batch 3'"],
        "batch 2**63": ["UPDATE StringIds SET value = 'batch 9223372036854775808' WHERE value = 'batch 4'"],
    }
    for what, statements in bad_exports.items():

        def export(tmp: Path, statements: list[str] = statements, what: str = what) -> None:
            db = sql(tmp, statements)
            refused(
                run_cli(["nsys-import", str(db), "--out", str(tmp / "out")], timeout=60),
                "report.sqlite" if "view" in what else "",
            )

        out.append(Case("6 nsys inputs", f"nsys-import: {what}", export))
    for offset in (100, 4096, 8192, 50_000):

        def flipped(tmp: Path, offset: int = offset) -> None:
            db = tmp / "report.sqlite"
            raw = bytearray(DB.read_bytes())
            for k in range(offset, min(offset + 512, len(raw))):
                raw[k] ^= 0xFF
            db.write_bytes(bytes(raw))
            res = run_cli(["nsys-import", str(db), "--out", str(tmp / "out")], timeout=60)
            assert res.returncode in (0, 2) and "Traceback" not in res.stderr, res.stderr[-2000:]
            if res.returncode == 2:
                refused(res)

        out.append(Case("6 nsys inputs", f"nsys-import: 512 bytes flipped at {offset}", flipped))
    return out


# -- class 7 and 9: plot --------------------------------------------------------------------------
def plot_cases() -> list[Case]:
    out = []

    def all_warmup(tmp: Path) -> None:
        rep = report_copy(tmp / "rep", edited("warmup", "True"))
        refused(run_cli(["plot", str(rep)], mem=2 * READ_MEM), "warm-up")

    out.append(Case("7 plot", "every row warm-up", all_warmup))

    def no_scenario(tmp: Path) -> None:
        frame = pd.read_csv(pd.io.common.StringIO("\n".join(TIMELINE))).drop(columns=["scenario"])
        rep = tmp / "rep"
        rep.mkdir()
        frame.to_csv(rep / "timeline.csv", index=False)
        res = run_cli(["plot", str(rep)], mem=2 * READ_MEM)
        assert res.returncode == 0 and (rep / "gantt.png").stat().st_size > 1000, res.stderr[-2000:]

    out.append(Case("7 plot", "no scenario column: each mode named", no_scenario))
    sweeps = {
        "empty": "",
        "binary": "\x00\x01\x02" * 100,
        "no GBps": "method,bytes\npinned,1024\n",
        "text bytes": "method,bytes,GBps\npinned,abc,1.0\n",
        "negative": "method,bytes,GBps\npinned,1024,-5\n",
        "inf": "method,bytes,GBps\npinned,inf,1\n",
        "2**64 bytes": "method,bytes,GBps\npinned,18446744073709551616,1\n",
    }
    for what, text in sweeps.items():

        def sweep(tmp: Path, text: str = text) -> None:
            rep = report_copy(tmp / "rep")
            (rep / "bandwidth.csv").write_text(text)
            refused(run_cli(["plot", str(rep)], mem=2 * READ_MEM), "bandwidth.csv")

        out.append(Case("7 plot", f"bandwidth.csv {what}", sweep))
    for kind in ("fifo", "link-devzero"):

        def sweep_planted(tmp: Path, kind: str = kind) -> None:
            rep = report_copy(tmp / "rep")
            plant(kind, rep / "bandwidth.csv", tmp)
            refused(run_cli(["plot", str(rep)], mem=2 * READ_MEM), "bandwidth.csv")

        out.append(Case("7 plot", f"bandwidth.csv a {kind}", sweep_planted))
    for size in (1001, 100_000, 1_000_000):

        def huge_name(tmp: Path, size: int = size) -> None:
            rep = report_copy(tmp / "rep", edited("scenario", "s" * size, where=0))
            for verb in ("plot", "diagnose", "trace"):
                refused(
                    run_cli(
                        [verb, str(rep), *(["-o", str(tmp / "t.json")] if verb == "trace" else [])],
                        mem=2 * READ_MEM,
                        timeout=60,
                    ),
                    "scenario",
                )

        out.append(Case("9 scale", f"a scenario name of {size:,} characters", huge_name))
    for count in (40, 1000, 3000):

        def many(tmp: Path, count: int = count) -> None:
            frame = pd.read_csv(pd.io.common.StringIO("\n".join(TIMELINE)))
            rows = pd.concat([frame.head(6).assign(scenario=f"s{k}") for k in range(count)], ignore_index=True)
            rep = tmp / "rep"
            rep.mkdir()
            rows.to_csv(rep / "timeline.csv", index=False)
            t0 = time.monotonic()
            res = run_cli(["plot", str(rep)], mem=2 * READ_MEM, timeout=120)
            assert res.returncode == 0, res.stderr[-2000:]
            from PIL import Image

            for name in ("gantt.png", "phases.png"):
                with Image.open(rep / name) as im:
                    assert im.width * im.height < 20_000_000, (name, im.size)  # a viewer opens it
            assert time.monotonic() - t0 < 120

        out.append(Case("9 scale", f"plot of {count} scenarios", many))
    return out


# -- class 8: values --------------------------------------------------------------------------------
def value_cases() -> list[Case]:
    out = []
    meta = json.loads((REPORT / "meta.json").read_text())
    metas = {
        "a 5,000-digit integer": json.dumps(meta)[:-1] + ', "cpu_count": ' + "9" * 5000 + "}",
        "a key nested 950 deep": json.dumps({**meta, "x": 0})[:-1].replace('"x": 0', '"x": ' + "[" * 950 + "]" * 950)
        + "}",
        "a key nested 40 deep": json.dumps({**meta, "x": 0}).replace(
            '"x": 0', '"x": ' + '{"a": ' * 40 + "1" + "}" * 40
        ),
        "a duplicate key": json.dumps(meta)[:-1] + ', "partial": true, "partial": false}',
        "a 1e400 origin": json.dumps(meta)[:-1] + ', "origin_monotonic_ms": 1e400}',
    }
    for what, text in metas.items():
        for verb in ("diagnose", "merge"):

            def check(tmp: Path, text: str = text, verb: str = verb) -> None:
                if verb == "merge":
                    folder = tmp / "job"
                    report_copy(folder / "rank0")
                    (folder / "rank0" / "meta.json").write_text(text)
                    target = folder
                else:
                    target = report_copy(tmp / "rep")
                    (target / "meta.json").write_text(text)
                refused(run_cli([verb, str(target)]), "meta.json")

            out.append(Case("8 values", f"{verb}: meta.json with {what}", check))
    cells = {
        ("h2d_ms", "5e-324"): "h2d_ms",
        ("h2d_ms", "-5e-324"): "h2d_ms",
        ("fetch_ms", "1e308"): "fetch_ms",
        ("batch_ms", "1e10"): "batch_ms",
        ("compute_ms", "1e-300"): "compute_ms",
        ("bytes", "9007199254740993"): "bytes",
    }
    for (col, value), named in cells.items():
        for verb in ("diagnose", "plot", "trace"):

            def cell(tmp: Path, col: str = col, value: str = value, verb: str = verb, named: str = named) -> None:
                rep = report_copy(tmp / "rep", edited(col, value, where=2))
                argv = [verb, str(rep), *(["-o", str(tmp / "t.json")] if verb == "trace" else [])]
                refused(run_cli(argv, mem=2 * READ_MEM), named)

            out.append(Case("8 values", f"{verb}: {col}={value}", cell))

    def duplicate_rows(tmp: Path) -> None:
        rep = report_copy(tmp / "rep", [*TIMELINE, TIMELINE[5]])
        refused(run_cli(["diagnose", str(rep)]), "more than once")

    out.append(Case("8 values", "a batch written twice", duplicate_rows))
    for var, value in (("WORLD_SIZE", "0"), ("WORLD_SIZE", "-2"), ("RANK", "5"), ("RANK", "-1"), ("LOCAL_RANK", "9")):

        def ranks(tmp: Path, var: str = var, value: str = value) -> None:
            env = {"WORLD_SIZE": "2", "RANK": "0", "LOCAL_RANK": "0", var: value}
            argv = [
                "profile",
                "--out",
                str(tmp / "rep"),
                "--",
                "python",
                str(HOSTILE / "steady_loop.py"),
                str(tmp / "log"),
                "3",
            ]
            refused(run_cli(argv, env=env, mem=TORCH_MEM), var)
            assert not (tmp / "rep" / "timeline.csv").exists()

        out.append(Case("8 values", f"profile with {var}={value}", ranks))
    for name in ("rank-1", "rank_evil", "rankings", "rank01", "rank1x", "rank0-link"):

        def rank_folder(tmp: Path, name: str = name) -> None:
            job = tmp / "job"
            report_copy(job / "rank0")
            if name == "rank0-link":
                shutil.rmtree(job / "rank0")
                report_copy(tmp / "elsewhere")
                (job / "rank0").symlink_to(tmp / "elsewhere")
                refused(run_cli(["merge", str(job)]), "rank")
                return
            report_copy(job / name, edited("rank", "1"))
            res = run_cli(["merge", str(job)])
            assert res.returncode == 0, res.stderr[-2000:]
            merged = json.loads((job / "meta.json").read_text())
            assert merged["merged_from"] == [str(job / "rank0")], merged["merged_from"]

        out.append(Case("8 values", f"merge beside a folder named {name}", rank_folder))
    return out


# -- class 10: names ----------------------------------------------------------------------------------
NAMES = {
    "formula =": "=cmd|' /C calc'!A0",
    "formula +": '+HYPERLINK("http://x")',
    "formula @": "@SUM(1+1)",
    "formula -": "-2+3",
    "script tag": "<script>alert(1)</script>",
    "img onerror": '<img src=x onerror="alert(1)">',
    "newline heading": "a\n# injected heading",
    "escape sequence": "a\x1b[31mred",
    "pipe": "a|b|c",
}


def name_cases() -> list[Case]:
    out = []
    for what, name in NAMES.items():

        def through_report(tmp: Path, name: str = name) -> None:
            frame = pd.read_csv(pd.io.common.StringIO("\n".join(TIMELINE)))
            frame["scenario"] = frame.scenario.where(frame.scenario != frame.scenario.iloc[0], name)
            rep = tmp / "rep"
            rep.mkdir()
            frame.to_csv(rep / "timeline.csv", index=False)
            shutil.copy(REPORT / "meta.json", rep / "meta.json")
            res = run_cli(["diagnose", str(rep), "--write"])
            assert res.returncode == 0, res.stderr[-2000:]
            text = (rep / "diagnosis.md").read_text()
            assert "<script" not in text and "<img" not in text and "\n# injected" not in text
            page = (rep / "report.html").read_text()  # one script, pinprof's own; the name stays text
            assert page.count("<script") == 1 and "<img" not in page and "\x1b" not in page
            assert "\x1b" not in text and "\x1b" not in res.stdout
            job = tmp / "job"
            shutil.copytree(rep, job / "rank0")
            res = run_cli(["merge", str(job)])
            assert res.returncode == 0, res.stderr[-2000:]
            for csv in ("timeline.csv", "summary.csv"):
                for line in (job / csv).read_text().splitlines()[1:]:
                    for cell in line.split(","):
                        assert not cell.startswith(("=", "+", "@", "-2+3")), (csv, cell)

        out.append(Case("10 names", f"scenario {what}, diagnose and merge", through_report))

    def through_profile(tmp: Path) -> None:
        # one pinprof profile run, one loader a name: each Dataset's name is its scenario's
        out_dir = tmp / "rep\n# heading"
        script = tmp / "named.py"
        script.write_text(
            "import torch\nfrom torch.utils.data import DataLoader, Dataset\n"
            "class D(Dataset):\n    def __len__(self): return 4\n    def __getitem__(self, i): return torch.ones(2)\n"
            f"for name in {list(NAMES.values())!r}:\n"
            "    named = type(name, (D,), {})\n"
            "    for b in DataLoader(named(), batch_size=2): b.to('cpu')\n"
        )
        res = run_cli(["profile", "--out", str(out_dir), "--no-plots", "--", "python", str(script)], mem=TORCH_MEM)
        assert res.returncode == 0, res.stderr[-2000:]
        for md in ("diagnosis.md", "summary.md"):
            text = (out_dir / md).read_text()
            assert (
                "<script" not in text
                and "<img" not in text
                and "\n# injected" not in text
                and "\n# heading" not in text
            )
        lines = (out_dir / "timeline.csv").read_text().splitlines()[1:]
        assert len(lines) == 2 * len(NAMES)  # every loader's two batches
        for line in lines:
            assert not line.split(",")[1].startswith(("=", "+", "@")), line

    out.append(Case("10 names", "a Dataset of each name, through pinprof profile", through_profile))
    return out


CASES = lock_cases() + output_cases() + world_cases() + nsys_cases() + plot_cases() + value_cases() + name_cases()


@pytest.mark.parametrize("case", CASES, ids=[f"{c.klass}: {c.name}" for c in CASES])
def test_hostile(case: Case, tmp_path: Path) -> None:
    case.check(tmp_path)


def test_every_class_has_generated_cases() -> None:
    counts = Counter(c.klass for c in CASES)
    print(dict(sorted(counts.items())))
    for klass in (
        "1 lock",
        "2 outputs",
        "4 kill",
        "5 world",
        "6 nsys inputs",
        "7 plot",
        "8 values",
        "9 scale",
        "10 names",
    ):
        assert counts[klass] >= 3, (klass, counts[klass])


# -- class 3 and 4: a full disk, kill -9 -----------------------------------------------------------------
def test_kill_9_after_5_s_keeps_nine_tenths_of_what_was_iterated_2_s_before(tmp_path: Path) -> None:
    """Default settings (no PINPROF_FLUSH_S): the journal's thread appends every 2 s."""
    log, out = tmp_path / "iterated.log", tmp_path / "rep"
    env = {k: v for k, v in os.environ.items() if k != "PINPROF_FLUSH_S"}
    env["PYTHONPATH"] = str(ROOT)
    proc = subprocess.Popen(
        [
            PY,
            "-m",
            "profiler",
            "profile",
            "--out",
            str(out),
            "--",
            "python",
            str(HOSTILE / "steady_loop.py"),
            str(log),
            "100000",
        ],
        cwd=ROOT,
        env=env,
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
    )
    try:
        deadline = time.monotonic() + 60
        while not log.exists() and time.monotonic() < deadline:
            time.sleep(0.05)
        time.sleep(5)  # the journal appends every 2 s: rows of more than 2 s before the kill are on disk
    finally:
        killed_at = time.time()
        proc.send_signal(signal.SIGKILL)
        proc.wait(timeout=30)
    wait_for_journal(out / "timeline.csv")  # the rows handed to its journal's process are written still
    iterated = [float(line.split()[1]) for line in log.read_text().splitlines() if len(line.split()) == 2]
    old = sum(1 for t in iterated if t <= killed_at - 2.0)
    rows = len(pd.read_csv(out / "timeline.csv"))
    print(f"iterated {len(iterated)}, of them more than 2 s before the kill {old}; rows on disk {rows}")
    assert old > 500 and rows >= 0.9 * old


def _unshare_works() -> bool:
    if shutil.which("unshare") is None:
        return False
    return subprocess.run(["unshare", "-rm", "true"], capture_output=True).returncode == 0


@pytest.mark.skipif(not _unshare_works(), reason="needs `unshare -rm` (user namespaces) to mount a small tmpfs")
@pytest.mark.parametrize("size_k", [64, 200, 1200])
def test_a_full_disk_under_profile_keeps_the_exit_status_and_the_flushed_batches(tmp_path: Path, size_k: int) -> None:
    mnt = tmp_path / "mnt"
    mnt.mkdir()
    out = mnt / "rep"
    log = tmp_path / "iterated.log"
    cmd = (
        f"mount -t tmpfs -o size={size_k}k none {mnt} && cd {ROOT} && PYTHONPATH={ROOT} PINPROF_FLUSH_S=0.2 "
        f"{PY} -m profiler profile --out {out} --no-plots -- python {HOSTILE / 'steady_loop.py'} {log} 3000 3 1; "
        f"echo rc=$?; cp -r {out} {tmp_path}/kept 2>/dev/null; true"
    )
    res = subprocess.run(["unshare", "-rm", "sh", "-c", cmd], capture_output=True, text=True, timeout=300)
    assert "rc=3" in res.stdout, res.stdout + res.stderr[-3000:]  # the program's own status
    lines = [ln for ln in res.stderr.splitlines() if ln.startswith("pinprof:")]
    assert any("timeline.csv" in ln and "batches" in ln for ln in lines), res.stderr[-3000:]
    kept = tmp_path / "kept" / "timeline.csv"
    if kept.exists():  # a 64 KiB disk may not hold the header and meta.json both
        text = kept.read_text()
        rows = text.count("\n") - 1
        assert text.endswith("\n") or rows == 0
        assert rows >= 0
        said = [ln for ln in lines if "batches" in ln]
        print(f"{size_k} KiB: {rows} rows kept; {said[-1] if said else ''}")


@pytest.mark.skipif(not _unshare_works(), reason="needs `unshare -rm` (user namespaces) to mount a small tmpfs")
@pytest.mark.parametrize(
    ("verb", "size_k", "steps"), [("profile", 1200, 6000), ("profile", 3072, 12000), ("run", 1200, 6000)]
)
def test_a_full_disk_keeps_nine_tenths_of_the_rows_it_could_hold_and_finishes_meta_as_partial(
    tmp_path: Path, verb: str, size_k: int, steps: int
) -> None:
    """More batches than the disk holds, all measured before the first append (profile: 6,000 in a
    burst, then exit 3) or appended as the run goes (run): the timeline keeps at least 90% of the
    rows the free space could hold, the rest are counted in one line, and meta.json says partial."""
    mnt = tmp_path / "mnt"
    mnt.mkdir()
    out = mnt / "rep"
    if verb == "profile":
        what = f"profile --out {out} --no-plots -- python {HOSTILE / 'burst_loop.py'} {steps} 3"
    else:
        what = f"run --out {out} --no-plots --modes pageable --batch-size 8 --num-workers 0 --batches {steps} --image-size 8"
    cmd = (
        f"mount -t tmpfs -o size={size_k}k none {mnt} && cd {ROOT} && PYTHONPATH={ROOT} {PY} -m profiler {what}; "
        f"echo rc=$?; df -k {mnt} | tail -n 1; cp -r {out} {tmp_path}/kept 2>/dev/null; true"
    )
    res = subprocess.run(["unshare", "-rm", "sh", "-c", cmd], capture_output=True, text=True, timeout=300)
    assert ("rc=3" if verb == "profile" else "rc=1") in res.stdout, res.stdout + res.stderr[-3000:]
    kept = tmp_path / "kept"
    text = (kept / "timeline.csv").read_bytes()
    tl = read_timeline(kept)
    row_bytes = (len(text) - text.index(b"\n") - 1) / max(len(tl), 1)
    could = (size_k * 1024 - 16384 - text.index(b"\n") - 1) / row_bytes  # meta.json's room and the header aside
    print(f"{verb} on {size_k} KiB: {len(tl)} rows kept, the disk could hold {could:.0f}")
    assert len(tl) >= 0.9 * could
    assert list(tl.batch) == list(range(len(tl))) or verb == "run"
    meta = json.loads((kept / "meta.json").read_text())
    assert meta["partial"] is True and meta["status"] == "disk_full"
    said = [ln for ln in res.stderr.splitlines() if "timeline.csv" in ln and str(len(tl)) in ln]
    assert said, res.stderr[-3000:]
    assert "could not be written" in said[-1]  # the rest counted
    if verb == "profile":
        assert meta["batches_measured"] == steps and meta["batches_not_written"] == steps - len(tl)
        assert f"keeps {len(tl)} of the {steps} batches measured" in said[-1]


@pytest.mark.parametrize("planted", ["fifo", "fifo-read"])
def test_a_fifo_put_in_place_of_the_timeline_while_profile_runs_stops_the_appends_and_never_blocks(
    tmp_path: Path, planted: str
) -> None:
    """timeline.csv swapped for a FIFO mid-run (with no reader, or one that reads it): the appends stop
    with one line, nothing is written into the FIFO, and the run ends with the program's own status."""
    out, loop, log = tmp_path / "rep", HOSTILE / "steady_loop.py", str(tmp_path / "it.log")
    cmd = [PY, "-m", "profiler", "profile", "--out", str(out), "--no-plots", "--", "python", str(loop), log]
    proc = subprocess.Popen(
        [*cmd, "1500", "3", "2"],  # 1,500 steps of 2 ms, then exit 3
        cwd=ROOT,
        env={**os.environ, "PYTHONPATH": str(ROOT), "PINPROF_FLUSH_S": "0.5"},
        stdout=subprocess.DEVNULL,
        stderr=subprocess.PIPE,
        text=True,
    )
    reader = None
    try:
        timeline = out / "timeline.csv"
        deadline = time.monotonic() + 120
        while time.monotonic() < deadline and (not timeline.is_file() or timeline.read_text().count("\n") < 3):
            time.sleep(0.1)  # until an append has reached the disk
        timeline.unlink()
        os.mkfifo(timeline)
        if planted == "fifo-read":  # someone reads what would be written through it
            reader = os.open(timeline, os.O_RDONLY | os.O_NONBLOCK)
        _, err = proc.communicate(timeout=60)  # the loop takes about 4 s
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait()
    assert proc.returncode == 3, err[-3000:]
    assert any("timeline.csv" in ln and "not a regular file" in ln for ln in err.splitlines()), err[-3000:]
    if reader is not None:
        try:
            assert os.read(reader, 1 << 16) == b""  # nothing went through it
        except BlockingIOError:
            pass  # nothing there to read: nothing went through it either
        finally:
            os.close(reader)


# -- planted files in a folder another user made -------------------------------------------------------
ATTACKER, VICTIM = 45001, 45002


def _setpriv_works() -> bool:
    if os.geteuid() != 0 or shutil.which("setpriv") is None:
        return False
    probe = subprocess.run(
        ["setpriv", f"--reuid={VICTIM}", f"--regid={VICTIM}", "--clear-groups", PY, "-c", "import pandas, profiler"],
        cwd=ROOT,
        env={**os.environ, "PYTHONPATH": str(ROOT)},
        capture_output=True,
    )
    return probe.returncode == 0


def _nsys() -> str | None:
    return shutil.which("nsys") or os.environ.get("PINPROF_NSYS")


TARGETS = [".pinprof.lock", "gantt.png", "phases.png", "trace.json", "timeline.csv", "nsys_timeline.csv"]
TARGETS += ["nsys.log"] if _nsys() else []  # pinprof nsys looks for nsys before it opens its log


@pytest.mark.skipif(not _setpriv_works(), reason="needs root, setpriv, and the checkout readable by another user")
@pytest.mark.parametrize("kind", ["link-outside", "link-devzero", "fifo"])
@pytest.mark.parametrize("target", TARGETS)
def test_planted_files_as_another_user(short_tmp: Path, kind: str, target: str) -> None:
    """A sticky, world-writable folder made by one user (as /tmp is), with a planted link or FIFO; pinprof
    run by another user, non-root: refused in one line, and the victim's own file elsewhere unchanged."""
    tmp_path = short_tmp  # another user reaches it: pytest's own is root's alone
    tmp_path.chmod(0o755)
    home = tmp_path / "victim"
    home.mkdir()
    precious = home / "precious.txt"
    precious.write_text(SENTINEL_TEXT)
    precious.chmod(0o600)
    rep = report_copy(home / "rep")
    for p in (home, precious, rep, *rep.iterdir()):
        os.chown(p, VICTIM, VICTIM)
    shared = tmp_path / "shared"
    shared.mkdir()
    shared.chmod(0o1777)
    os.chown(shared, ATTACKER, ATTACKER)
    planted = shared / target
    if kind == "link-outside":
        planted.symlink_to(precious)
    elif kind == "link-devzero":
        planted.symlink_to("/dev/zero")
    else:
        os.mkfifo(planted)
    os.lchown(planted, ATTACKER, ATTACKER)
    before = {p: (p.stat().st_mtime_ns, p.read_bytes()) for p in (precious, rep / "timeline.csv")}
    if target == ".pinprof.lock":
        argv = ["run", "--out", str(shared), "--force", "--device", "cpu", "--batches", "2", "--no-plots"]
        mem = TORCH_MEM
    elif target == "trace.json":
        argv, mem = ["trace", str(rep), "-o", str(planted)], READ_MEM
    elif target == "nsys_timeline.csv":  # a second input planted for the victim to compare with
        argv, mem = ["nsys-compare", str(rep), str(planted)], READ_MEM
    elif target == "nsys.log":
        argv, mem = ["nsys", "--out", str(shared), "--", "true"], READ_MEM
    elif target == "timeline.csv":
        argv, mem = ["merge", str(shared)], READ_MEM
        sub = shared / "rank0"
        report_copy(sub)
        for p in (sub, *sub.iterdir()):
            os.lchown(p, ATTACKER, ATTACKER)
    else:
        argv, mem = ["plot", str(rep), "--out", str(shared)], 2 * READ_MEM
    res = run_cli(argv, mem=mem, user=VICTIM, cwd=ROOT, env={"HOME": str(home)})
    refused(res, target)
    after = {p: (p.stat().st_mtime_ns, p.read_bytes()) for p in before}
    assert after == before, "a file outside the shared folder changed"
