"""Nsight Systems on the CPU: a real capture of a pinprof-instrumented loop, exported and imported.

This fails if NVTX ranges silently vanish (the nvtx-package trap: profiler/DESIGN.md): no `batch <n>` range
in the export is an error, not an empty table.
"""

from __future__ import annotations

import os
import shutil
import sqlite3
import subprocess
import sys
from pathlib import Path

import pandas as pd
import pytest

from profiler.errors import NsysError
from profiler.nsys.importer import import_sqlite
from profiler.nsys.run import find_nsys
from profiler.nsys.schema import read_nvtx

# One test process takes every test of this module (pytest-xdist, scripts/test.sh): the capture fixture
# runs nsys once for them.
pytestmark = pytest.mark.xdist_group("nsys")

HERE = Path(__file__).parent

# Each range edge is one NVTX call away from pinprof's own clock read, so a column's typical gap
# (its median over batches) is two such edges. What an edge costs depends on the machine: 4-8 us here
# idle, 13-21 us in one fresh-clone CI run, where a fixed 20 us bound failed. So the median is bounded
# by the capture's own measure of it: the time from a batch range's start to its fetch range's start,
# which holds a whole NVTX push plus pinprof's fetch bookkeeping and clock read, so at least any single
# edge (``edge_us``). A single batch may also lose the CPU, so each gets 0.1 ms; a
# lost or moved edge is off by a whole phase (0.5 ms or more). The outliers once blamed on descheduling
# (26 us in CI, up to 2.6 ms under load, always batch 0) were NVTX string registrations made at a
# phase's first push, inside its clock window; phase names are now registered up front
# (tests/test_nvtx_ranges.py).
TOLERANCE_MS = 0.1


def nsys_or_skip() -> Path:
    try:
        return find_nsys()
    except NsysError as err:
        if os.environ.get("CI"):
            raise AssertionError(f"CI must run the nsys tests: {err}") from err
        pytest.skip(str(err))


@pytest.fixture(scope="module")
def capture(tmp_path_factory: pytest.TempPathFactory) -> Path:
    nsys_or_skip()
    out = tmp_path_factory.mktemp("nsys")
    res = subprocess.run(
        [
            sys.executable,
            "-m",
            "profiler",
            "nsys",
            "--out",
            str(out),
            "--",
            sys.executable,
            str(HERE / "nsys_cpu_loop.py"),
            str(out),
        ],
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert res.returncode == 0, res.stderr + res.stdout
    return out


@pytest.mark.nsys
def test_every_batch_has_its_range_with_phases_nested(capture: Path) -> None:
    con = sqlite3.connect(capture / "report.sqlite")
    ranges = read_nvtx(con)
    con.close()
    batches = ranges[ranges.name.str.match(r"^batch \d+$")]
    assert len(batches) >= 8, "NVTX ranges vanished: is the nvtx-package trap back?"
    for b in batches.itertuples():
        inner = ranges[(ranges.tid == b.tid) & (ranges.start >= b.start) & (ranges.end <= b.end)]
        names = set(inner.name) - {b.name}
        if b.name == "batch 8":
            assert names == {"fetch"}  # the exhausted next() at the loop's end
        else:
            assert names == {"fetch", "cpu_work", "compute"}, (b.name, names)


def edge_us(report: Path) -> float:
    """The median time from each batch range's start to its fetch range's start, in us: one NVTX push
    and pinprof's bookkeeping before the fetch's clock read, on this machine under this capture."""
    con = sqlite3.connect(report)
    ranges = read_nvtx(con)
    con.close()
    batches = ranges[ranges.name.str.match(r"^batch \d+$")]
    fetches = ranges[ranges.name == "fetch"]
    gaps = [
        fetches[(fetches.tid == b.tid) & (fetches.start >= b.start) & (fetches.end <= b.end)].start.min() - b.start
        for b in batches.itertuples()
    ]
    return float(pd.Series(gaps).median()) / 1e3


@pytest.mark.nsys
def test_imported_durations_agree_with_pinprof_host_figures(capture: Path) -> None:
    theirs = pd.read_csv(capture / "nsys_timeline.csv")
    ours = pd.read_csv(capture / "timeline.csv")
    assert list(theirs.batch) == list(ours.batch) == list(range(8))
    assert set(theirs.scenario) == {"pageable/cpu-test"} and set(theirs["mode"]) == {"pageable"}
    edge = edge_us(capture / "report.sqlite")
    print(f"one range edge, as this capture measures it: {edge:.1f} us")
    # an edge as long as a batch's whole bound would make the median bound say nothing
    assert 0 < edge < TOLERANCE_MS * 1e3, "no batch range holds its fetch range at its start, or NVTX is slow"
    for col in ("fetch_ms", "cpu_work_ms", "compute_ms", "batch_ms"):
        signed = theirs[col] - ours[col]
        diff = signed.abs()
        print(f"{col}: |nsys - pinprof| median {diff.median() * 1e3:.1f} us, max {diff.max() * 1e3:.1f} us")
        assert diff.median() * 1e3 < 2 * edge and (diff < TOLERANCE_MS).all(), col
        # Phase ranges nest inside our clock reads. The batch range does not (no one-sided check): it
        # is pushed before the fetch's clock read, as it holds the fetch range, and popped before the
        # batch's end is read, so it is wider at its start and narrower at its end.
        if col != "batch_ms":
            assert (signed <= TOLERANCE_MS).all(), col


@pytest.mark.nsys
def test_import_works_without_registered_strings(capture: Path, tmp_path: Path) -> None:
    """Older exports and other emitters put names inline in NVTX_EVENTS.text, with no textId column."""
    src = sqlite3.connect(capture / "report.sqlite")
    dst_path = tmp_path / "inline.sqlite"
    dst = sqlite3.connect(dst_path)
    rows = src.execute(
        "SELECT e.start, e.end, e.eventType, COALESCE(e.text, s.value), e.globalTid, e.domainId "
        "FROM NVTX_EVENTS e LEFT JOIN StringIds s ON s.id = e.textId"
    ).fetchall()
    dst.execute("CREATE TABLE NVTX_EVENTS (start INT, end INT, eventType INT, text TEXT, globalTid INT, domainId INT)")
    dst.executemany("INSERT INTO NVTX_EVENTS VALUES (?, ?, ?, ?, ?, ?)", rows)
    dst.commit()
    src.close()
    dst.close()
    inline = import_sqlite(dst_path)
    original = pd.read_csv(capture / "nsys_timeline.csv")
    assert list(inline.batch) == list(original.batch)
    assert (inline.fetch_ms - original.fetch_ms).abs().max() < 1e-9


@pytest.mark.nsys
def test_pinprof_nsys_shows_the_programs_output_and_returns_its_exit_code(tmp_path: Path) -> None:
    nsys_or_skip()
    out = tmp_path / "failing"
    app = "import sys; print('hello from the profiled program', flush=True); sys.exit(3)"
    res = subprocess.run(
        [sys.executable, "-m", "profiler", "nsys", "--out", str(out), "--", sys.executable, "-c", app],
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert res.returncode == 3, res.stdout + res.stderr  # was 0: a failing script looked profiled
    assert "hello from the profiled program" in res.stdout  # was hidden in nsys.log only
    assert "the program exited with 3" in res.stdout
    assert "hello from the profiled program" in (out / "nsys.log").read_text()


@pytest.mark.real_clock
@pytest.mark.nsys
def test_an_unmodified_script_under_nsys_and_pinprof_profile_gives_the_same_batches(tmp_path: Path) -> None:
    """``pinprof nsys -- pinprof profile -- python train.py``: the hooks' NVTX ranges come back from the
    capture as the profile's own rows, loader by loader (two loaders, one interleaved range each)."""
    nsys_or_skip()
    out = tmp_path / "nsys"
    profile = [sys.executable, "-m", "profiler", "profile", "--out", str(out / "profile"), "--no-plots", "--"]
    script = [sys.executable, str(HERE / "scripts" / "two_loaders.py"), "--train", "40", "--val", "24"]
    res = subprocess.run(
        [sys.executable, "-m", "profiler", "nsys", "--out", str(out), "--", *profile, *script],
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert res.returncode == 0, res.stderr + res.stdout
    ours = pd.read_csv(out / "profile" / "timeline.csv")
    theirs = pd.read_csv(out / "nsys_timeline.csv")
    key = ["scenario", "batch"]
    assert sorted(map(tuple, theirs[key].to_numpy())) == sorted(map(tuple, ours[key].to_numpy()))
    assert set(ours.scenario) == {"Pairs/bs8/w1", "Held/bs16/w0"} and len(ours) == 5 + 2
    both = ours.merge(theirs, on=key, suffixes=("", "_nsys"))
    edge = edge_us(out / "report.sqlite")
    print(f"one range edge, as this capture measures it: {edge:.1f} us")
    for col in ("fetch_ms", "batch_ms"):
        diff = (both[f"{col}_nsys"] - both[col]).abs()
        print(f"{col}: |nsys - pinprof profile| median {diff.median() * 1e3:.1f} us, max {diff.max() * 1e3:.1f} us")
        # Same batches: a range edge lost or moved to a neighbour would be off by a whole batch. Not the
        # 0.1 ms bound of the loop above: this run has a worker process and a second profiler process
        # beside nsys on 2 cores, and a fresh-clone CI run saw one fetch 0.74 ms apart (median 3.8 us).
        assert diff.median() * 1e3 < 2 * edge and (diff < 0.5 * both.batch_ms).all(), col


@pytest.mark.nsys
@pytest.mark.parametrize("planted", ["report.nsys-rep", "report.qdstrm"])
def test_a_link_planted_at_the_capture_is_refused_before_the_program_runs(tmp_path: Path, planted: str) -> None:
    nsys_or_skip()
    victim = tmp_path / "victim.txt"
    victim.write_text("precious\n")
    out = tmp_path / "out"
    out.mkdir()
    (out / planted).symlink_to(victim)
    ran = tmp_path / "ran"
    res = subprocess.run(
        [sys.executable, "-m", "profiler", "nsys", "--out", str(out), "--", "touch", str(ran)],
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert res.returncode != 0 and "not a regular file" in res.stderr, res.stderr[-2000:]
    assert victim.read_text() == "precious\n" and not ran.exists()


@pytest.mark.nsys
def test_a_link_planted_at_the_export_is_refused_and_not_written_through(capture: Path, tmp_path: Path) -> None:
    victim = tmp_path / "victim.txt"
    victim.write_text("precious\n")
    shutil.copy(capture / "report.nsys-rep", tmp_path / "report.nsys-rep")
    (tmp_path / "report.sqlite").symlink_to(victim)
    res = subprocess.run(
        [sys.executable, "-m", "profiler", "nsys-import", str(tmp_path / "report.nsys-rep")],
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert res.returncode != 0 and "not a regular file" in res.stderr, res.stderr[-2000:]
    assert victim.read_text() == "precious\n"
    assert not [p for p in tmp_path.iterdir() if p.name.startswith(".pinprof-nsys-")]  # its own folder removed
