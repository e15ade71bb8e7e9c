"""Nothing lost: a loop killed at a random batch leaves a readable, partial report (subprocesses)."""

from __future__ import annotations

import json
import os
import random
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest
from conftest import sigint_as_at_a_terminal

from profiler.report.files import read_timeline

HERE = Path(__file__).parent
ROOT = HERE.parent


def start(args: list[str], tmp: Path | None = None) -> subprocess.Popen[str]:
    """``python ARGS``; with ``tmp``, its temporary files there (``TMPDIR``)."""
    return subprocess.Popen(
        [sys.executable, *args],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        cwd=ROOT,
        env={**os.environ, **({"TMPDIR": str(tmp)} if tmp is not None else {})},
        preexec_fn=sigint_as_at_a_terminal,  # the SIGINT cases pass under `&` too
    )


def wait_for_batches(proc: subprocess.Popen[str], count: int, timeout: float = 60.0) -> int:
    seen = 0
    end = time.monotonic() + timeout
    assert proc.stdout is not None
    while seen < count and time.monotonic() < end:
        line = proc.stdout.readline()
        if not line:
            break
        seen += line.startswith("batch ")
    return seen


def check_partial(out: Path, at_least: int, why: str | set[str]) -> None:
    tl = read_timeline(out)
    meta = json.loads((out / "meta.json").read_text())
    assert meta["partial"] is True and meta["interrupted_by"] in ({why} if isinstance(why, str) else why), meta
    assert len(tl) >= at_least
    assert list(tl.batch) == list(range(len(tl)))  # every completed batch, none torn
    assert tl.batch_ms.notna().all() and tl.fetch_ms.notna().all()


@pytest.mark.parametrize("sig, why", [(signal.SIGINT, "KeyboardInterrupt"), (signal.SIGTERM, "SIGTERM")])
def test_signal_at_a_random_batch_leaves_a_partial_report(tmp_path: Path, sig: signal.Signals, why: str) -> None:
    k = random.Random(int(sig)).randint(3, 25)
    proc = start([str(HERE / "reliability_loop.py"), str(tmp_path), "slow"])
    assert wait_for_batches(proc, k) == k
    proc.send_signal(sig)
    proc.wait(timeout=60)
    assert proc.returncode != 0
    check_partial(tmp_path, k, why)


def test_a_loader_exception_leaves_the_batches_before_it(tmp_path: Path) -> None:
    proc = start([str(HERE / "reliability_loop.py"), str(tmp_path), "raise", "41"])
    _, err = proc.communicate(timeout=120)
    assert proc.returncode != 0 and "bad item 41" in err
    check_partial(tmp_path, 10, "ValueError")
    assert len(read_timeline(tmp_path)) == 10  # items 0..39 make batches 0..9; batch 10 holds item 41


def test_a_killed_worker_leaves_a_partial_report(tmp_path: Path, short_tmp: Path) -> None:
    proc = start([str(HERE / "reliability_loop.py"), str(tmp_path), "kill-worker", "61"], short_tmp)
    _, err = proc.communicate(timeout=120)
    assert proc.returncode != 0 and (
        "DataLoader worker" in err or "ConnectionResetError" in err or "EOFError" in err
    ), err[-2000:]
    # The death reaches the loop as torch's RuntimeError, or as the reset connection (or the EOF) of a
    # batch the worker was still handing over (file-descriptor sharing); after it, torch's SIGCHLD handler
    # raises again as the other worker exits, while the report is being written (held: see interrupt).
    check_partial(tmp_path, 3, {"RuntimeError", "ConnectionResetError", "EOFError"})


@pytest.mark.parametrize("sig, code, why", [(signal.SIGTERM, 143, "SIGTERM"), (signal.SIGINT, 130, "SIGINT")])
def test_pinprof_run_signal_exits_with_partial_report(tmp_path: Path, sig: signal.Signals, code: int, why: str) -> None:
    out = tmp_path / "rep"
    proc = start(
        [
            "-m",
            "profiler",
            "run",
            "--device",
            "cpu",
            "--modes",
            "pageable,staged",
            "--batches",
            "400",
            "--batch-size",
            "16",
            "--num-workers",
            "0",
            "--dataset-size",
            "8192",
            "--cpu-work-ms",
            "3",
            "--out",
            str(out),
        ]
    )
    assert proc.stdout is not None
    for line in proc.stdout:  # the second scenario has started: the first one's batches are on disk
        if line.startswith("pinprof: staged/"):
            break
    time.sleep(random.Random(7).uniform(0.2, 0.8))
    proc.send_signal(sig)
    _out_text, _ = proc.communicate(timeout=120)
    assert proc.returncode == code
    meta = json.loads((out / "meta.json").read_text())
    assert meta["partial"] is True and meta["interrupted_by"] == why
    tl = read_timeline(out)
    assert (tl["mode"] == "pageable").sum() == 405  # the finished scenario: 5 warm-up + 400 batches
    assert "PARTIAL" in (out / "summary.md").read_text()


def test_pinprof_run_with_a_killed_worker_writes_a_partial_report(tmp_path: Path, short_tmp: Path) -> None:
    out = tmp_path / "rep"
    proc = start([str(HERE / "run_kill_worker.py"), str(out)], short_tmp)
    _, err = proc.communicate(timeout=180)
    assert proc.returncode == 1 and f"partial report written to {out}" in err, err[-2000:]
    assert "DataLoader worker" in err or "ConnectionResetError" in err or "EOFError" in err, err[-2000:]
    check_partial(out, 5, {"RuntimeError", "ConnectionResetError", "EOFError"})  # worker 1 dies in its 10th batch
    assert "PARTIAL" in (out / "summary.md").read_text()
