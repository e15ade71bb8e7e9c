"""A loader whose workers wait against one whose workers compute, with as many workers as the machine
has cores: ``pinprof profile`` reads how busy the workers were (``profiler.capture.workers``) and
advises more workers than cores for the first, cheaper transforms for the second; ``pinprof tune``
tries the worker count profile names and finds it faster."""

from __future__ import annotations

import json
import os
import re
import subprocess
import sys
from pathlib import Path

import pandas as pd
import pytest

HERE = Path(__file__).parent
LOADER = HERE / "scripts" / "worker_loader.py"
CORES = os.cpu_count() or 1
WORKERS = max(2, CORES)


def _profile(tmp_path: Path, work: str) -> tuple[str, dict[str, float]]:
    out = tmp_path / work
    script = ["python", str(LOADER), "--work", work, "--workers", str(WORKERS)]
    res = subprocess.run(
        [sys.executable, "-m", "profiler", "profile", "--out", str(out), "--no-plots", "--", *script],
        capture_output=True,
        text=True,
        timeout=240,
        cwd=HERE.parent,
        env={**os.environ, "PINPROF_FLUSH_S": "0.5"},  # the workers read at each append
    )
    assert res.returncode == 0, res.stderr[-3000:]
    loaders = json.loads((out / "meta.json").read_text())["loaders"]
    (seen,) = loaders.values()
    change = next(ln for ln in res.stderr.splitlines() if ln.startswith("  change:"))
    return change, seen


@pytest.mark.skipif(not Path("/proc/self/schedstat").exists(), reason="needs Linux's schedstat")
def test_workers_that_wait_are_told_to_grow_past_the_cores(tmp_path: Path) -> None:
    change, seen = _profile(tmp_path, "sleep")
    print(change, seen)
    assert seen["workers_waiting"] >= 0.5 and seen["workers_busy"] < 0.5
    if WORKERS >= CORES:
        assert f"raise num_workers past the {CORES} CPU cores (now {WORKERS}" in change


@pytest.mark.skipif(not Path("/proc/self/schedstat").exists(), reason="needs Linux's schedstat")
def test_workers_that_compute_are_told_to_make_the_transforms_cheaper(tmp_path: Path) -> None:
    change, seen = _profile(tmp_path, "burn")
    print(change, seen)
    assert seen["workers_waiting"] < 0.5
    if WORKERS >= CORES:
        assert "make __getitem__/the transforms cheaper" in change and "raise num_workers" not in change


@pytest.mark.skipif(not Path("/proc/self/schedstat").exists(), reason="needs Linux's schedstat")
def test_tune_tries_the_worker_count_profile_names_and_finds_it_faster(tmp_path: Path) -> None:
    out = tmp_path / "t"
    script = ["python", str(LOADER), "--work", "sleep", "--workers", str(WORKERS), "--items", "1200"]
    res = subprocess.run(
        [
            sys.executable,
            "-m",
            "profiler",
            "tune",
            "--out",
            str(out),
            "--steps",
            "40",
            "--only",
            "num_workers",
            "--",
            *script,
        ],
        capture_output=True,
        text=True,
        timeout=600,
        cwd=HERE.parent,
        env={**os.environ, "PINPROF_FLUSH_S": "0.5"},
    )
    assert res.returncode == 0, res.stderr[-3000:]
    table = pd.read_csv(out / "tune.csv")
    more = table[table.trial == f"num_workers={max(2 * WORKERS, WORKERS + CORES)}"]
    print(table.to_string())
    assert len(more) == 1 and more.speedup.iloc[0] > 1.3 and more.verdict.iloc[0] == "faster"


def _advice(tmp_path: Path, name: str, *script: str) -> str:
    """What ``pinprof profile`` printed of its diagnosis (the lines from the first scenario's on)."""
    res = subprocess.run(
        [sys.executable, "-m", "profiler", "profile", "--out", str(tmp_path / name), "--no-plots", "--", *script],
        capture_output=True,
        text=True,
        timeout=240,
        cwd=HERE.parent,
    )
    assert res.returncode == 0, res.stderr[-3000:]
    return res.stderr


def test_an_in_memory_dataset_with_no_workers_is_not_told_to_add_workers(tmp_path: Path) -> None:
    """A TensorDataset with num_workers=0: the loader's wait is its indexing in the loop's process
    (0.07 ms a batch), under a worker's handoff (1.5 ms a batch on the 2-core machine): no finding
    advises more workers, and where the loader-bound finding fires it advises fetching whole batches
    (whether it fires depends on the machine's load: the step's share moves, the rule's own choice is
    tested on its own below). The machine's load can make even that indexing as slow as a handoff (a
    mean of 0.505 ms, its median 0.217, in a fresh-clone run of the suite): the rule then advises
    workers, as it should of what it measured, so the run is held to the rule at its own mean. A
    loader that sleeps 1 ms an item (4 ms a batch) is still told to raise num_workers, first."""
    from profiler.analysis.rules.pace import HANDOFF_MS

    plain = HERE / "scripts" / "plain_train.py"
    said = _advice(tmp_path, "tensors", "python", str(plain), "--workers", "0", "--epochs", "20")
    written = (tmp_path / "tensors" / "diagnosis.md").read_text()
    (summary,) = json.loads((tmp_path / "tensors" / "summary.json").read_text())
    if summary["fetch_ms_mean"] < HANDOFF_MS:  # as on a quiet machine: 0.34 ms
        assert "raise num_workers" not in said + written, said + written
        fired = re.search(r"(\*\*Verdict\*\*|- also|- if so): loader bound", written)  # the finding itself
        assert "fetch whole batches at once" in written if fired else "fetch whole batches" not in written, written
    else:
        assert "fetch whole batches" not in written, (summary["fetch_ms_mean"], written)
    sleepy = HERE / "scripts" / "sleepy_loader.py"
    said = _advice(
        tmp_path, "sleepy", "python", str(sleepy), "--one-loader", "--epochs", "1", "--items", "120", "--item-ms", "1"
    )
    change = next(ln for ln in said.splitlines() if ln.startswith("  change:"))
    assert "highly input bound" in said and "verdict: loader bound" in said, said
    assert "raise num_workers (now 0)" in change, said


def test_the_loader_remedy_with_no_workers_follows_the_handoff() -> None:
    """The rule alone: no workers and a wait under a worker's handoff a batch: index whole batches; a
    wait above it: raise num_workers first."""
    from profiler.analysis.rules.base import Case
    from profiler.analysis.rules.pace import HANDOFF_MS, LOADER_BOUND

    nan = float("nan")
    cfg = pd.Series({"mode": "pageable", "device": "cpu", "num_workers": 0, "pin_memory": False})
    for fetch, first in (
        (0.8 * HANDOFF_MS, "fetch whole batches at once"),
        (4 * HANDOFF_MS, "raise num_workers (now 0)"),
    ):
        m = {k: nan for k in ("pin", "stage", "layout", "h2d", "h2d_call", "h2d_gpu", "gpu_idle", "pinned_GBps")}
        m.update(batch=3 * fetch, fetch=fetch, compute=2 * fetch, cpu_work=0.0, wait=0.0, bytes=0.0)
        case = Case(m, cfg, 2)
        assert LOADER_BOUND.fires(case)
        changes = LOADER_BOUND.remedies(case)
        assert changes[0].what.startswith(first), changes[0].what
        assert not any("raise num_workers" in c.what for c in changes) or fetch > HANDOFF_MS
