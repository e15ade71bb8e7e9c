"""Run a command under Nsight Systems with flags for transfer profiling, and turn the capture into tables.

Flags: ``--trace=cuda,nvtx`` (``nvtx`` alone without a GPU), ``--sample=none --cpuctxsw=none``; never
``osrt``, which made a 2 GB capture of a small script on the H200 (DESIGN.md, "Nsight Systems").

Where only Nsight Systems' target part is installed (as on a GPU machine with the 40 MB target
package), ``nsys`` leaves a ``.qdstrm`` that it cannot turn into a report; ``pinprof nsys-import``
converts it where the host part is (``QdstrmImporter``), then exports and imports it.
"""

from __future__ import annotations

import os
import re
import shutil
import subprocess
import sys
import tempfile
from collections.abc import Sequence
from pathlib import Path
from typing import NamedTuple

import pandas as pd

from profiler.atomic import TempFile, check_file, check_target
from profiler.errors import NsysError
from profiler.nsys.compare import compare
from profiler.nsys.importer import import_sqlite
from profiler.nsys.schema import MAX_EXPORT_BYTES
from profiler.report import files as report_io
from profiler.settings import current

HOW_TO_GET = (
    "Nsight Systems (nsys) was not found on PATH or at $PINPROF_NSYS. Install it from NVIDIA, or unpack "
    "Debian's 2023.4 build without root: `bash scripts/get_nsys.sh` (it prints the path), then "
    "`export PINPROF_NSYS=<that path>`"
)


def find_nsys() -> Path:
    """nsys on PATH, then $PINPROF_NSYS (the binary or a folder holding it)."""
    on_path = shutil.which("nsys")
    if on_path:
        return Path(on_path)
    env = current().nsys
    if env:
        p = Path(env)
        for cand in (p, p / "nsys", p / "bin" / "nsys"):
            if cand.is_file() and os.access(cand, os.X_OK):
                return cand
        raise NsysError(f"$PINPROF_NSYS={env!r} is not an nsys binary or a folder with one. {HOW_TO_GET}")
    raise NsysError(HOW_TO_GET)


def _tail(res: subprocess.CompletedProcess[str]) -> str:
    """The last lines a failed step printed, for its error message."""
    return " | ".join((res.stderr or res.stdout).strip().splitlines()[-3:])


_TELLING = re.compile(r"error|wrong|fail|unable|cannot|could not|not found|invalid|unsupported", re.I)


def cause(output: str) -> str:
    """The lines of a tool's output that say what went wrong: the first and last that name an error in words
    (Nsight Systems' importer ends its output with the closing braces of a status dump, which said
    nothing as the last lines: ``} | } | }``); the last line with a word in it when none does."""
    lines = [ln.replace('"', "").strip().strip(",{}[]").strip() for ln in output.splitlines()]
    worded = [ln for ln in lines if re.search(r"[A-Za-z]{3}", ln)]
    telling = [ln for ln in worded if _TELLING.search(ln)]
    # the first such line is often a summary ("Importation failed."), a later one the reason: both
    return " / ".join(dict.fromkeys(telling[:1] + telling[-1:]) if telling else (worded or ["no output"])[:1])[:300]


def _run(args: Sequence[str], what: str) -> subprocess.CompletedProcess[str]:
    res = subprocess.run(list(args), capture_output=True, text=True)
    if res.returncode != 0:
        raise NsysError(f"{what} failed (exit {res.returncode}): {_tail(res)}")
    return res


def profile_args(nsys: Path, out: Path, command: Sequence[str], gpu: bool, capture_range: str | None) -> list[str]:
    args = [
        str(nsys),
        "profile",
        f"--trace={'cuda,nvtx' if gpu else 'nvtx'}",
        "--sample=none",
        "--cpuctxsw=none",
        "--force-overwrite=true",
        "-o",
        str(out / "report"),
    ]
    if capture_range:
        args += ["--capture-range=nvtx", f"--nvtx-capture={capture_range}@pinprof"]
    return [*args, *command]  # nsys takes no "--" separator: the first non-option starts the command


def _private(folder: Path) -> Path:
    """A new folder of ours inside ``folder``: nsys and its importer write there, never through a name
    someone else could plant a link or a FIFO at (``_place`` moves their files out)."""
    return Path(tempfile.mkdtemp(prefix=".pinprof-nsys-", dir=folder))


def _place(made: Path, target: Path) -> Path:
    """``made`` renamed over ``target``, refused (in one line) where ``target`` is a link, a FIFO, a
    device or a folder: the rename would replace a link itself, never write through it."""
    check_target(target)
    shutil.move(str(made), target)  # a rename within the folder; a copy from /tmp for nsys's own capture
    check_target(target)
    return target


def importer_for(nsys: Path) -> Path | None:
    """QdstrmImporter next to a target's nsys (Debian and NVIDIA layouts)."""
    real = nsys.resolve()
    for cand in (real.parent.parent / "host-linux-x64" / "QdstrmImporter", real.parent / "QdstrmImporter"):
        if cand.is_file():
            return cand
    return None


def to_sqlite(path: Path, nsys: Path | None = None) -> Path:
    """.qdstrm -> .nsys-rep -> .sqlite as needed; returns the .sqlite path."""
    path = Path(path)
    if path.suffix not in (".sqlite", ".nsys-rep", ".qdstrm"):
        raise NsysError(f"{path}: expected a .sqlite, .nsys-rep or .qdstrm file (what nsys writes)")
    check_file(path, MAX_EXPORT_BYTES, "Nsight Systems capture")  # before looking for nsys: the first thing to say
    if path.suffix == ".sqlite":
        return path
    nsys = nsys or find_nsys()
    if path.suffix == ".qdstrm":
        importer = importer_for(nsys)
        if importer is None:
            raise NsysError(
                f"{path}: converting a .qdstrm needs Nsight Systems' host part (QdstrmImporter); "
                "scripts/get_nsys.sh unpacks one"
            )
        rep = path.with_suffix(".nsys-rep")
        check_target(rep)
        private = _private(path.parent)
        try:
            made = private / rep.name
            res = subprocess.run(
                [str(importer), "-i", str(path), "-o", str(made), "-f"], capture_output=True, text=True
            )
            if made.is_file():
                _place(made, rep)
        finally:
            shutil.rmtree(private, ignore_errors=True)
        if not rep.is_file():
            raise NsysError(
                f"Nsight Systems' importer could not turn {path.name} into a report (exit {res.returncode}): "
                f"{cause((res.stderr or '') + chr(10) + (res.stdout or ''))}. The capture is kept at {path}: "
                "open it with another Nsight Systems version (its importer, or File > Import in the GUI), or "
                "measure without Nsight Systems (pinprof profile -- python train.py)"
            )
        if res.returncode != 0:
            # It exits 3 when some raw events could not be processed but still writes the report
            # (seen importing an H200 capture here); the tables we read are then usually intact.
            print(
                f"pinprof: QdstrmImporter reported errors (exit {res.returncode}) but wrote {rep.name}; "
                "open it in the GUI's Diagnostics Summary for details",
                file=sys.stderr,
            )
        path = rep
    if path.suffix != ".nsys-rep":
        raise NsysError(f"{path}: expected a .sqlite, .nsys-rep or .qdstrm file")
    out = path.with_suffix(".sqlite")
    check_target(out)
    private = _private(path.parent)
    try:
        made = private / out.name
        _run(
            [str(nsys), "export", "--type", "sqlite", "--force-overwrite", "true", "-o", str(made), str(path)],
            "nsys export",
        )
        return _place(made, out)
    finally:
        shutil.rmtree(private, ignore_errors=True)


class Imported(NamedTuple):
    table: pd.DataFrame  # nsys_timeline.csv
    comparison: pd.DataFrame | None  # nsys_compare.csv, when a pinprof timeline was given
    out_dir: Path  # where both were written


def import_report(path: Path, out_dir: Path | None = None, compare_with: Path | None = None) -> Imported:
    """Import a capture, write nsys_timeline.csv (and nsys_compare.csv) into ``out_dir`` (default:
    next to the capture)."""
    sqlite = to_sqlite(Path(path))
    table = import_sqlite(sqlite)
    out_dir = Path(out_dir or sqlite.parent)
    out_dir.mkdir(parents=True, exist_ok=True)
    report_io.write_csv(table, out_dir / "nsys_timeline.csv")
    comparison = None
    if compare_with is not None:
        comparison = compare(report_io.read_timeline(compare_with), table)
        report_io.write_csv(comparison, out_dir / "nsys_compare.csv")
    return Imported(table, comparison, out_dir)


class Capture(NamedTuple):
    path: Path  # the .nsys-rep, or the .qdstrm nsys left for an importer elsewhere
    returncode: int  # the profiled program's exit status (nsys passes it on)


# nsys names the raw capture it writes: "Generating '/tmp/nsys-report-c6c4.qdstrm'"
_GENERATING = re.compile(r"Generating '([^']+\.qdstrm)'")


def profile(command: Sequence[str], out: Path, gpu: bool, capture_range: str | None = None) -> Capture:
    """Run ``command`` under nsys into ``out``, its output shown as it comes and kept in nsys.log.

    Only the capture this nsys names as its own is taken: never another run's ``/tmp`` file."""
    nsys = find_nsys()
    out = Path(out).absolute()  # the program may change directory
    out.mkdir(parents=True, exist_ok=True)
    rep, kept = out / "report.nsys-rep", out / "report.qdstrm"
    for target in (rep, kept):
        check_target(target)  # refused before the program runs
    private = _private(out)
    try:
        return _profile(nsys, out, private, command, gpu, capture_range)
    finally:
        shutil.rmtree(private, ignore_errors=True)


def _profile(
    nsys: Path, out: Path, private: Path, command: Sequence[str], gpu: bool, capture_range: str | None
) -> Capture:
    named: list[str] = []
    # Written under a temporary name and renamed at the end (profiler.atomic): never through a planted
    # link or into a FIFO named nsys.log.
    log_file = TempFile(out / "nsys.log")
    try:
        with log_file.file as log:
            proc = subprocess.Popen(
                profile_args(nsys, private, command, gpu, capture_range),
                stdout=subprocess.PIPE,
                stderr=subprocess.STDOUT,
                text=True,
                errors="replace",
            )
            assert proc.stdout is not None
            for line in proc.stdout:
                sys.stdout.write(line)
                log.write(line)
                named += _GENERATING.findall(line)
            code = proc.wait()
    finally:
        log_file.commit()  # interrupted too: the log of what ran is kept
    if (private / "report.nsys-rep").is_file():
        return Capture(_place(private / "report.nsys-rep", out / "report.nsys-rep"), code)
    raw = [Path(n) for n in named if Path(n).is_file()] or sorted(private.glob("*.qdstrm"))
    if raw:
        return Capture(_place(raw[-1], out / "report.qdstrm"), code)
    raise NsysError(f"nsys profile made no report (exit {code}); see {out / 'nsys.log'}")
