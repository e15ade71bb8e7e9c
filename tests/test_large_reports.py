"""``pinprof diagnose`` and ``pinprof compare`` of 1,000,000-row timelines stay under 1 GB resident:
each verb run as a user runs it, a process of its own, its peak read from that process alone
(``scripts/bench_diagnose.py``: compare held 2.6 GB, diagnose 0.94-0.99 GB; the peak is the child's own
high-water mark, which a large test runner's fork does not inflate)."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest

SCRIPTS = Path(__file__).resolve().parents[1] / "scripts"
# One test process takes every test of this module (pytest-xdist, scripts/test.sh), and the million-row
# fixture lives as long as that process: made once for them, whichever tests of other modules the process
# runs between them (a module's fixture is made again after those, 12 s of CPU each time).
pytestmark = pytest.mark.xdist_group("large_reports")
ROWS = 1_000_000
LIMIT_MB = 1000


@pytest.fixture(scope="session")
def big(tmp_path_factory: pytest.TempPathFactory) -> Path:
    folder = tmp_path_factory.mktemp("big")
    # made in a process of its own, as the bench makes it: this one stays small
    code = f"import sys; sys.path.insert(0, {str(SCRIPTS)!r}); import bench_diagnose as b; from pathlib import Path; "
    code += f"b.make(Path({str(folder)!r}), {ROWS})"
    subprocess.run([sys.executable, "-c", code], check=True, timeout=600)
    return folder


@pytest.mark.parametrize("verb", ["diagnose", "compare"])
def test_a_million_rows_stay_under_a_gigabyte(big: Path, verb: str) -> None:
    sys.path.insert(0, str(SCRIPTS))
    try:
        from bench_diagnose import measure
    finally:
        sys.path.remove(str(SCRIPTS))
    argv = [verb, str(big)] + ([str(big)] if verb == "compare" else [])
    _, peak_mb, code = measure(argv)
    print(f"pinprof {verb} of {ROWS:,} rows: peak {peak_mb:.0f} MB resident")
    assert code == 0 and peak_mb < LIMIT_MB
