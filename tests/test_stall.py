"""The stall watch of ``pinprof profile`` (``profiler.capture.stall``): when a batch is in flight, no
new one comes and the loop's thread is blocked, one line says so, once a stall, with what to do; a
busy thread, a program outside a loader's loop, and ``PINPROF_STALL_S=0`` get no line."""

from __future__ import annotations

import os
import subprocess
import sys
import threading
import time
from pathlib import Path

import pytest

from profiler.capture import stall
from profiler.errors import UsageError
from profiler.settings import load

HERE = Path(__file__).parent


class Fake:
    """A clock, a batch count and a thread's CPU seconds, set by the test."""

    def __init__(self) -> None:
        self.now, self.batches, self.cpu, self.in_loop = 0.0, 0, 0.0, True

    def watch(self, after_s: float = 100.0) -> stall.StallWatch:
        return stall.StallWatch(
            lambda: self.batches,
            lambda: self.in_loop,
            1,
            after_s,
            "ADVICE",
            cpu=lambda tid: self.cpu,
            clock=lambda: self.now,
        )


def test_a_blocked_loop_is_said_once_a_stall_and_again_after_a_new_batch() -> None:
    f = Fake()
    w = f.watch()
    f.batches = 5
    assert w.check() is None  # a new batch: the stall's clock starts
    f.now = 99.0
    assert w.check() is None  # not yet long enough
    f.now, f.cpu = 100.5, 0.5  # 0.5 s of CPU in 100.5 s: under 1%
    line = w.check()
    assert line is not None
    assert line.startswith("pinprof: no new batch for 100 s (5 rows closed so far)")
    assert "used 0.50 s of CPU meanwhile: it is blocked" in line and line.endswith("ADVICE")
    f.now = 300.0
    assert w.check() is None  # said once a stall
    f.batches = 6
    assert w.check() is None
    f.now, f.cpu = 401.0, 0.6
    again = w.check()
    assert again is not None and "(6 rows closed so far)" in again


def test_a_busy_thread_or_a_wait_outside_the_loop_is_no_stall() -> None:
    f = Fake()
    f.in_loop = False
    w = f.watch()
    assert w.check() is None
    f.now = 1000.0  # no batch in flight: loading data, building the model, a barrier after the loop
    assert w.check() is None
    f.in_loop = True  # the first batch fetched: its step may hang before any row closed
    assert w.check() is None
    f.now = 1101.0
    line = w.check()
    assert line is not None and "(0 rows closed so far)" in line
    f.batches = 1
    w.check()
    f.now, f.cpu = 1400.0, 10.0  # 10 s of CPU in 299 s: above 1%, the thread works (a long step)
    assert w.check() is None
    f.in_loop, f.now = False, 1500.0
    assert w.check() is None
    f.in_loop, f.now = True, 1550.0  # back in a loop: the stall counts from here, not from 1101
    assert w.check() is None
    f.now = 1649.0
    assert w.check() is None


def test_without_the_threads_cpu_time_the_wait_alone_says_it() -> None:
    w = stall.StallWatch(lambda: 3, lambda: True, 1, 10.0, "A", cpu=lambda tid: None, clock=iter([0.0, 11.0]).__next__)
    assert w.check() is None
    line = w.check()
    assert line is not None and "CPU" not in line and "(3 rows closed so far)" in line


@pytest.mark.skipif(not Path("/proc/self/task").is_dir(), reason="reads /proc")
def test_thread_cpu_s_counts_work_and_not_waiting() -> None:
    tid = threading.get_native_id()
    before = stall.thread_cpu_s(tid)
    assert before is not None
    end, n = time.thread_time() + 0.3, 0
    while time.thread_time() < end:
        n += 1
    worked = stall.thread_cpu_s(tid)
    time.sleep(0.3)
    waited = stall.thread_cpu_s(tid)
    assert worked is not None and waited is not None
    assert worked - before >= 0.2 and waited - worked < 0.05
    assert stall.thread_cpu_s(2**31 - 1) is None  # no such thread


def test_the_advice_names_the_rows_and_the_way_out() -> None:
    with_cupti = stall.advice(Path("out/timeline.csv"), launch_times=True)
    assert f"kill -9 {os.getpid()}" in with_cupti and "out/timeline.csv" in with_cupti
    assert "without PINPROF_CUPTI_LATENCY=1" in with_cupti and "PINPROF_BACKEND=events" in with_cupti
    plain = stall.advice(None, launch_times=False)
    assert "PINPROF_CUPTI_LATENCY" not in plain and f"kill -9 {os.getpid()}" in plain


@pytest.mark.parametrize("text", ["-1", "soon", "nan", "1e9"])
def test_a_bad_stall_setting_is_a_clear_error(text: str) -> None:
    with pytest.raises(UsageError, match="PINPROF_STALL_S"):
        load({"PINPROF_STALL_S": text})
    assert load({}).stall_s == 120 and load({"PINPROF_STALL_S": "0"}).stall_s == 0


def profile(out: Path, how: str, stall_s: str) -> subprocess.CompletedProcess[str]:
    cmd = [sys.executable, "-m", "profiler", "profile", "--out", str(out), "--no-plots", "--"]
    cmd += ["python", str(HERE / "scripts" / "stops_after.py"), how, "3"]
    env = {**os.environ, "PINPROF_STALL_S": stall_s}
    return subprocess.run(cmd, capture_output=True, text=True, timeout=240, cwd=HERE.parent, env=env)


def test_pinprof_profile_says_a_blocked_loop_once(tmp_path: Path) -> None:
    run = profile(tmp_path / "r", "blocked", "1")
    assert run.returncode == 0, run.stderr[-2000:]
    said = [line for line in run.stderr.splitlines() if line.startswith("pinprof: no new batch")]
    assert len(said) == 1, run.stderr[-2000:]
    assert "it is blocked" in said[0] and str(tmp_path / "r" / "timeline.csv") in said[0]
    # batch 4's step stopped: rows 0-2 are closed (with no optimizer, a batch's row closes at the second
    # next() after it; the first is its tentative end, profiler.capture.in_flight)
    assert "(3 rows closed so far)" in said[0]


@pytest.mark.parametrize(("how", "stall_s"), [("busy", "1"), ("after", "1"), ("blocked", "0")])
def test_pinprof_profile_is_quiet_for_a_busy_loop_or_when_told(tmp_path: Path, how: str, stall_s: str) -> None:
    run = profile(tmp_path / "r", how, stall_s)
    assert run.returncode == 0, run.stderr[-2000:]
    assert "no new batch" not in run.stderr
    assert "done" in run.stdout


def test_a_watch_that_fails_stops_quietly(capsys: pytest.CaptureFixture[str]) -> None:
    def broken() -> int:
        raise RuntimeError("boom")

    w = stall.StallWatch(broken, lambda: True, 1, 0.04, "A", say=lambda line: None)
    w.start()
    w.join(timeout=5)
    assert not w.is_alive()
    assert "boom" not in capsys.readouterr().err
