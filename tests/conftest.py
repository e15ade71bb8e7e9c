from __future__ import annotations

import os
import shutil
import tempfile
from collections.abc import Iterator
from pathlib import Path

import pytest
import torch

CUDA = torch.cuda.is_available()
# Each GPU test is written for one clock: CUDA events here, CUPTI's records in tests/test_gpu_cupti.py
# (which sets cupti). pinprof's own default (auto) would give CUPTI to whichever test of a process came
# before its first CUDA work, and the events to the rest. A clock set from outside is kept.
os.environ.setdefault("PINPROF_BACKEND", "events")


# scripts/test.sh runs the suite in two passes: PINPROF_TEST_PASS=parallel (pytest-xdist, two processes
# at once) leaves out the tests marked real_clock, and PINPROF_TEST_PASS=real_clock runs those alone. A
# real_clock test times a real script's sleeps against the real clock, so a second test beside it on
# two cores moves its figures; every other test is free of timing. Unset: every test, in one pass.
PASSES = ("parallel", "real_clock")


def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    skip = pytest.mark.skip(reason="needs a CUDA device (run scripts/gpu_check.sh on the GPU machine)")
    for item in items:
        if "gpu" in item.keywords and not CUDA:
            item.add_marker(skip)
    wanted = os.environ.get("PINPROF_TEST_PASS")
    if not wanted:
        return
    if wanted not in PASSES:
        raise pytest.UsageError(f"PINPROF_TEST_PASS={wanted!r}: use one of {', '.join(PASSES)}, or leave it unset")
    keep: list[pytest.Item] = []
    drop: list[pytest.Item] = []
    for item in items:
        (keep if ("real_clock" in item.keywords) == (wanted == "real_clock") else drop).append(item)
    config.hook.pytest_deselected(items=drop)
    # pytest-xdist hands the tests out in this order: the modules whose single tests run longest
    # (tens of seconds each on the CI machine) go first, so that two processes do not end with one of
    # them idle while the other runs one.
    items[:] = sorted(keep, key=lambda item: _LONG_FIRST.get(item.path.name, len(_LONG_FIRST)))


# Longest single tests first (``--durations`` on a fresh clone): five and nine profiled runs, mypy, tune.
_LONG_FIRST = {
    name: rank
    for rank, name in enumerate(
        (
            "test_report.py",
            "test_compare_runs.py",
            "test_typing.py",
            "test_worker_busy.py",
            "test_tune.py",
            "test_tune_safety.py",
            "test_large_reports.py",
            "test_distributed.py",
            "test_gc_pauses.py",
        )
    )
}


@pytest.fixture
def short_tmp() -> Iterator[Path]:
    """A folder of the test's own in the system's temporary folder, removed after it, where
    ``tmp_path`` will not do:

    - for a loop whose DataLoader worker is killed: a worker that hands a tensor over binds a Unix
      socket in a ``pymp-*`` folder there, which a killed worker leaves behind. A socket's path holds
      107 bytes at most; in a folder of ``tmp_path`` it reached 108 once pytest numbered its folder
      101, and the worker hung (pytest's path alone, with a user name longer than root's, comes as close);
    - for a folder another user must reach: pytest's own is root's alone."""
    path = Path(tempfile.mkdtemp(prefix="pinprof-"))
    yield path
    shutil.rmtree(path, ignore_errors=True)


def sigint_as_at_a_terminal() -> None:
    """For ``Popen(preexec_fn=...)``: a child that gets SIGINT as a program started from a terminal.

    A job started in the background by a shell without job control (``cmd &`` in a script, CI
    runners) inherits SIGINT ignored, and Python then installs no KeyboardInterrupt handler; a test
    that sends SIGINT to a child must undo that in the child."""
    import signal

    signal.signal(signal.SIGINT, signal.SIG_DFL)


@pytest.fixture
def python_sigint() -> object:
    """Python's own SIGINT handler (KeyboardInterrupt) in this process for one test, however pytest
    was started (see ``sigint_as_at_a_terminal``); the handler found is put back after."""
    import signal

    before = signal.signal(signal.SIGINT, signal.default_int_handler)
    yield None
    signal.signal(signal.SIGINT, before)


def journal_writers(timeline: str | os.PathLike[str]) -> list[int]:
    """The pids of the journal processes (``profiler.report.journal_process``) that append to
    ``timeline``: after a ``kill -9`` of a run, its child still writes the rows it was handed."""
    wanted = os.fsencode(str(timeline))
    found = []
    for pid in filter(str.isdigit, os.listdir("/proc")):
        try:
            with open(f"/proc/{pid}/cmdline", "rb") as fh:
                argv = fh.read().split(b"\0")
        except OSError:
            continue  # gone meanwhile, or not ours to read
        if wanted in argv and any(b"journal_process" in a for a in argv):
            found.append(int(pid))
    return found


def wait_for_journal(timeline: str | os.PathLike[str], timeout: float = 60.0) -> None:
    """Until no journal process appends to ``timeline`` (each has written what it was handed)."""
    import time

    deadline = time.monotonic() + timeout
    while journal_writers(timeline) and time.monotonic() < deadline:
        time.sleep(0.05)
    assert not journal_writers(timeline), f"a journal process still writes {timeline} after {timeout} s"
