"""At least 1,000 generated bad inputs through every reading verb and ``pinprof run``'s flags.

Each case is a command line whose input is wrong in one known way (a cell of the wrong type, an
infinite or negative time, 2**64, a meta.json key of the wrong type, a calibration or nsys column
made TEXT or NULL, a flag past its bound, a file that is not a file). Every one must end with exit
status 2 and one line on stderr that names the bad thing: no traceback, no hang, no output written.
The cases are generated from a fixed seed, so a failure names a case that can be run again.
"""

from __future__ import annotations

import contextlib
import io
import os
import random
from collections.abc import Callable, Iterator
from pathlib import Path

import pytest
from fuzz_cases import LINES, Case, calibration_cases, cell_cases, meta_cases, naming, nsys_cases, the_path, verb_argv

from profiler.cli import main


def run_flag_cases(rng: random.Random) -> Iterator[Case]:
    """``pinprof run`` flags past their bounds (refused before a folder or a dataset is made)."""
    cores = os.cpu_count() or 1
    bad = {
        "--batch-size": ["0", "-1", "x", "1.5", "16,16", "nan", "", "1,,2"],
        "--num-workers": ["-1", str(4 * cores + 1), "two", "1,1", "inf"],
        "--prefetch-factor": ["0", "65", "-2", "p"],
        "--cpu-work-ms": ["-1", "nan", "inf", "x", "1,1"],
        "--compute-ms": ["-0.5", "inf", "ms"],
        "--batches": ["0", "-4", "x", "2.5"],
        "--epochs": ["0", "-1", "e"],
        "--skip": ["-1", "w"],
        "--image-size": ["0", "5000", "-8", "big"],
        "--dataset-size": ["0", "100000000", "-5", "many"],
        "--nproc": ["0", str(cores + 1), "n"],
        "--modes": ["turbo", "pinned,turbo", ""],
        "--dataset": ["mnist"],
    }
    for flag, values in bad.items():
        for value in values:
            for extra in ([], ["--device", "cpu"], ["--no-plots", "--batches", "3"] if flag != "--batches" else []):
                if flag == "--epochs" and "--batches" in extra:
                    continue

                def make(folder: Path, flag: str = flag, value: str = value, extra: list[str] = extra) -> list[str]:
                    return ["run", "--out", str(folder / "out"), *extra, f"{flag}={value}"]

                yield Case(f"run {flag}={value!r} {extra}", make, naming(flag))
    combos = [
        (["--batch-size", "1024", "--dataset-size", "512"], "--batch-size"),
        (["--image-size", "2048", "--batch-size", "1024"], "--batch-size"),
        (["--dataset", "cifar10"], "--data-root"),
        (["--dataset", "imagefolder", "--data-root", "/nonexistent"], "--data-root"),
        (["--batches", "3", "--epochs", "1"], "--epochs"),
    ]
    for args, flag in combos:

        def combo(folder: Path, args: list[str] = args) -> list[str]:
            return ["run", "--out", str(folder / "out"), *args]

        yield Case(f"run {args}", combo, naming(flag))


def file_cases(rng: random.Random) -> Iterator[Case]:
    """Paths that are not a report: missing, empty, binary, a FIFO, a device, a folder without one."""
    verbs = ["diagnose", "plot", "trace", "nsys-import", "merge"]

    def fifo(folder: Path) -> Path:
        os.mkfifo(folder / "t.csv")
        return folder / "t.csv"

    def empty(folder: Path) -> Path:
        (folder / "t.csv").write_text("")
        return folder / "t.csv"

    def binary(folder: Path) -> Path:
        (folder / "t.csv").write_bytes(bytes(rng.randrange(256) for _ in range(300)))
        return folder / "t.csv"

    def torn_header(folder: Path) -> Path:
        (folder / "t.csv").write_text(LINES[0][:40])
        return folder / "t.csv"

    def emptydir(folder: Path) -> Path:
        (folder / "d").mkdir()
        return folder / "d"

    makers: dict[str, Callable[[Path], Path]] = {
        "missing": lambda f: f / "nothing.csv",
        "empty": empty,
        "binary": binary,
        "torn header": torn_header,
        "fifo": fifo,
        "device": lambda f: Path("/dev/zero"),
        "empty folder": emptydir,
    }
    for what, maker in makers.items():
        for verb in verbs:

            def make(folder: Path, maker: Callable[[Path], Path] = maker, verb: str = verb) -> list[str]:
                path = maker(folder)
                if verb == "nsys-import":
                    return ["nsys-import", str(path), "--out", str(folder / "o")]
                if verb == "merge":
                    return ["merge", str(path)]
                return verb_argv(path, verb, folder)

            yield Case(f"file {what} via {verb}", make, the_path)


def all_cases() -> list[Case]:
    rng = random.Random(20261203)
    out: list[Case] = []
    for gen in (cell_cases, meta_cases, calibration_cases, nsys_cases, run_flag_cases, file_cases):
        out.extend(gen(rng))
    return list({c.name: c for c in out}.values())  # one case per input (a flag may come up twice)


CASES = all_cases()
CHUNK = 50


def run_case(argv: list[str]) -> tuple[int | str | None, str, str]:
    out, err = io.StringIO(), io.StringIO()
    with contextlib.redirect_stdout(out), contextlib.redirect_stderr(err):
        try:
            code: int | str | None = main(argv)
        except SystemExit as exc:  # argparse
            code = exc.code
    return code, out.getvalue(), err.getvalue()


def test_at_least_a_thousand_cases() -> None:
    assert len(CASES) >= 1000, len(CASES)
    assert len({c.name for c in CASES}) == len(CASES)  # each names one input


@pytest.mark.parametrize("start", range(0, len(CASES), CHUNK))
def test_each_bad_input_is_exit_2_and_one_line(tmp_path: Path, start: int) -> None:
    failures = []
    for i, case in enumerate(CASES[start : start + CHUNK]):
        folder = tmp_path / str(i)
        folder.mkdir()
        argv = case.make(folder)
        code, _out, err = run_case(argv)
        lines = err.strip().splitlines()
        must = case.names(argv)
        left = argv[0] == "run" and (folder / "out").exists()  # a refused run makes no folder
        if code != 2 or len(lines) != 1 or "Traceback" in err or (must and must not in err) or left:
            failures.append(f"{case.name}: exit {code}, stderr {err[-400:]!r}")
    assert not failures, "\n".join(failures)
