"""Fuzzing the readers and the CLI: every outcome is a clear error or a correct read.

Example counts are bounded so the whole file stays within seconds in CI.
"""

from __future__ import annotations

import json
import os
from pathlib import Path

import pandas as pd
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from profiler.cli import build_parser
from profiler.errors import ReportError
from profiler.nsys.importer import import_sqlite
from profiler.report.files import read_json, read_timeline

DATA = Path(__file__).parent / "data"
CSV = (DATA / "h200_default" / "timeline.csv").read_bytes()
META = (DATA / "h200_default" / "meta.json").read_bytes()
DB = (DATA / "h200_nsys" / "report.sqlite").read_bytes()
ORIGINAL = read_timeline(DATA / "h200_default")
SCALE = float(os.environ.get("PINPROF_FUZZ_SCALE", 1))  # raise to search longer than CI does
FUZZ = settings(
    max_examples=int(40 * SCALE), deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture]
)


def _read_or_error(path: Path) -> pd.DataFrame | None:
    try:
        return read_timeline(path)
    except ReportError as err:
        assert str(err).startswith(str(path))  # the message names the file
        return None


@FUZZ
@given(cut=st.integers(min_value=0, max_value=len(CSV)))
def test_truncated_timeline_is_an_error_or_a_prefix(tmp_path: Path, cut: int) -> None:
    path = tmp_path / "t.csv"
    path.write_bytes(CSV[:cut])
    frame = _read_or_error(path)
    if frame is not None:  # a torn last row is dropped: what is read is an exact prefix
        pd.testing.assert_frame_equal(frame, ORIGINAL.iloc[: len(frame)])


@FUZZ
@given(flips=st.lists(st.tuples(st.integers(0, len(CSV) - 1), st.integers(0, 255)), min_size=1, max_size=8))
def test_corrupted_timeline_never_crashes(tmp_path: Path, flips: list[tuple[int, int]]) -> None:
    data = bytearray(CSV)
    for pos, byte in flips:
        data[pos] = byte
    path = tmp_path / "t.csv"
    path.write_bytes(bytes(data))
    frame = _read_or_error(path)
    if frame is not None:
        assert list(frame.columns[: len(ORIGINAL.columns)]) == list(ORIGINAL.columns)


@FUZZ
@given(blob=st.binary(max_size=400))
def test_random_bytes_are_not_a_timeline(tmp_path: Path, blob: bytes) -> None:
    path = tmp_path / "t.csv"
    path.write_bytes(blob)
    _read_or_error(path)


@FUZZ
@given(cut=st.integers(min_value=0, max_value=len(META)))
def test_truncated_meta_json(tmp_path: Path, cut: int) -> None:
    path = tmp_path / "meta.json"
    path.write_bytes(META[:cut])
    try:
        data = read_json(path)
    except ReportError:
        return
    assert data == json.loads(META)


@settings(max_examples=int(15 * SCALE), deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(cut=st.integers(min_value=0, max_value=len(DB)), flips=st.lists(st.integers(0, len(DB) - 1), max_size=4))
def test_damaged_sqlite_export(tmp_path: Path, cut: int, flips: list[int]) -> None:
    data = bytearray(DB[:cut] if cut < len(DB) - 4096 else DB)
    for pos in flips:
        if pos < len(data):
            data[pos] ^= 0xFF
    path = tmp_path / "r.sqlite"
    path.write_bytes(bytes(data))
    try:
        table = import_sqlite(path)
    except ReportError:
        return
    assert set(table.scenario) <= {"pageable/bs1024/w0", "pinned_nb/bs1024/w0", ""}


VOCAB = [
    "--batch-size",
    "--num-workers",
    "--prefetch-factor",
    "--cpu-work-ms",
    "--compute-ms",
    "--batches",
    "--epochs",
    "--skip",
    "--modes",
    "--image-size",
    "--dataset-size",
]
VALUES = st.one_of(
    st.integers(-(10**6), 10**12).map(str),
    st.sampled_from(["", "x", "1,2", "0", "-0", "1e3", "nan", "inf", "64,abc", "all", "pinned,pageable"]),
)


@settings(max_examples=int(60 * SCALE), deadline=None)
@given(pairs=st.lists(st.tuples(st.sampled_from(VOCAB), VALUES), max_size=4))
def test_cli_arguments_are_parsed_or_refused_with_exit_2(pairs: list[tuple[str, str]]) -> None:
    argv = ["run"] + [x for pair in pairs for x in pair]
    try:
        args = build_parser().parse_args(argv)
    except SystemExit as exc:
        assert exc.code == 2
        return
    assert all(b > 0 for b in args.batch_size) and all(w >= 0 for w in args.num_workers)
    assert all(c >= 0 for c in args.cpu_work_ms) and (args.batches or args.epochs) > 0
