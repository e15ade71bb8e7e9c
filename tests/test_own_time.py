"""pinprof's own time on the loop's thread: the ``pinprof_ms`` column, and appends that leave no gap.

``pinprof_ms`` is checked against an independent clock: a timer around each of ``pinprof profile``'s
hooks, less a timer around each original call the hook makes (``profiler.bench.hook_timers``, with
which ``scripts/bench_profile_overhead.py`` measures the hooks' cost on the GPU).
"""

from __future__ import annotations

import gc
import json
import os
import statistics
import subprocess
import sys
import threading
import time
from pathlib import Path

import pandas as pd
import pytest
import torch
from torch.utils.data import DataLoader, TensorDataset

from profiler import TransferProfiler
from profiler.bench.hook_timers import timers
from profiler.capture import auto_hooks
from profiler.capture.auto_session import AutoSession
from profiler.report.files import read_timeline

HERE = Path(__file__).parent
PLACES = {"next": (auto_hooks._Iter, "__next__"), "to": (torch.Tensor, "to")}


def _own_time_by_two_clocks() -> tuple[pd.DataFrame, float, float]:
    """A loop under the hooks with a timer around each hook and each original call: its timeline,
    ``pinprof_ms`` summed, and the timers' sum (ms), theirs less their own overhead."""
    g = torch.Generator().manual_seed(0)
    data = TensorDataset(torch.randn(60 * 8, 3, 32, 32, generator=g), torch.randint(0, 9, (60 * 8,), generator=g))
    own: dict[str, float] = {}
    outer, inner = timers(own)
    session = AutoSession(torch.device("cpu"), run="test")
    auto_hooks.start(session)
    real = dict(auto_hooks._ORIGINAL)
    try:
        for name, (owner, attr) in PLACES.items():
            setattr(owner, attr, outer(name, getattr(owner, attr)))
            auto_hooks._ORIGINAL[name] = inner(real[name])
        for x, y in DataLoader(data, batch_size=8):
            x, y = x.to("cpu"), y.to("cpu")
            (x @ x.transpose(-1, -2)).sum().item()
    finally:
        auto_hooks._ORIGINAL.update(real)
        auto_hooks.stop()
    tl = session.close()
    calls = 3 * len(tl) + 1  # two copies and a next() a batch, and the next() that ends the loader
    # The timers count their own overhead too (a few microseconds a call): measured on a hook that
    # does nothing but call its original, and taken off.
    idle: dict[str, float] = {}
    o, i = timers(idle)
    nothing = i(lambda: None)
    hook = o("idle", lambda: nothing())
    for _ in range(calls):
        hook()
    theirs = (sum(own.values()) - idle["idle"]) * 1e3
    print(
        f"pinprof_ms {tl.pinprof_ms.sum():.3f} ms in all, by the timers around the hooks {theirs:.3f} ms ({own}, timers {idle})"
    )
    return tl, float(tl.pinprof_ms.sum()), theirs


def test_pinprof_ms_is_the_hooks_own_time_by_an_independent_clock() -> None:
    # The sums are of about 200 calls of microseconds each: one interrupt or collection on a busy
    # 2-core machine moved them by more than the bound (one failure seen beside other tests). A
    # loop is measured again, up to three times; a wrong count of the hooks' time is off in every one.
    tries = []
    for _ in range(3):
        tl, ours, theirs = _own_time_by_two_clocks()
        assert len(tl) == 60 and tl.pinprof_ms.notna().all() and (tl.pinprof_ms > 0).all()
        assert (tl.pinprof_ms < tl.batch_ms).all()
        tries.append((ours, theirs))
        # pinprof's rows leave out the hooks' first tests and the last next(), which ends the loop
        # after the last row. Counting the loader's next() or the copy calls would add several times
        # as much; leaving out the copies' part, half.
        if abs(ours - theirs) <= 0.2 * theirs:
            return
    raise AssertionError(f"pinprof_ms against the timers, ms, in three loops: {tries}")


def _library_loop(mode: str, data: list[torch.Tensor], cpu_s: float = 0.0) -> pd.DataFrame:
    """``TransferProfiler``'s loop over ``data`` on a CPU device: a copy, ``cpu_s`` of sleep as the
    CPU work (none: no ``cpu_work()``), a step; its timeline."""
    prof = TransferProfiler(mode, torch.device("cpu"))  # type: ignore[arg-type]
    for b in prof.batches(data):
        x = prof.to_device(b)
        if cpu_s:
            with prof.cpu_work():
                time.sleep(cpu_s)
        with prof.compute():
            x.sum()
    return prof.timeline()


def test_pinprof_ms_of_the_library_loop_is_its_bookkeeping_not_the_copies() -> None:
    tl = _library_loop("pageable", [torch.randn(64, 3, 32, 32) for _ in range(30)], cpu_s=0.002)
    assert tl.pinprof_ms.notna().all() and (tl.pinprof_ms > 0).all()
    # The CPU work (2 ms of sleep) is the user's. Counted in pinprof_ms, it would put every row's
    # pinprof_ms at or above its cpu_work_ms; see _read_apart for why the claim is not read row by row.
    _read_apart(tl, "cpu_work_ms")


def test_appends_leave_no_gap_in_the_rows(tmp_path: Path) -> None:
    """``pinprof profile`` with an append every 0.25 s of a 1.5 s loop: no batch pays for one, and no
    time falls between rows. Before the appends left the loop's thread, the first one (74-134 ms on
    this kind of machine) lay between batch 0 and batch 1, in no row."""
    out = tmp_path / "r"
    cmd = [sys.executable, "-m", "profiler", "profile", "--out", str(out), "--no-plots", "--"]
    cmd += ["python", str(HERE / "scripts" / "waiting_steps.py"), "--batches", "36", "--step-ms", "40"]
    env = {**os.environ, "PINPROF_FLUSH_S": "0.25"}
    run = subprocess.run(cmd, capture_output=True, text=True, timeout=240, cwd=HERE.parent, env=env)
    assert run.returncode == 0, run.stderr[-3000:]
    tl = read_timeline(out / "timeline.csv")
    assert len(tl) == 36
    # Between one row's end and the next row's start lies only pinprof's own bookkeeping (0.05-0.3 ms
    # here), which the next row's pinprof_ms counts; an append there (7 ms or more) would be in no row.
    gaps = (tl.batch_start_ms.shift(-1) - tl.batch_start_ms - tl.batch_ms).iloc[:-1]
    counted = tl.pinprof_ms.shift(-1).iloc[:-1]
    steady = tl[~tl.warmup].iloc[:-1]  # the last batch ends at the loader's end, not a step
    # A full garbage collection stops the loop wherever it falls (fresh-clone CI runs had one batch
    # of 141-177 ms here: a 100-165 ms collection, which gc_ms now names); the appends are what this
    # test is about, so each batch is read without its collections.
    own = steady.batch_ms - steady.gc_ms
    median = statistics.median(own)
    print(
        f"steady batch_ms less gc_ms: first {own.iloc[0]:.2f}, median {median:.2f}, max {own.max():.2f} ms; "
        f"gaps between rows {gaps.min() * 1e3:.1f}-{gaps.max() * 1e3:.1f} us; "
        f"full collections {steady.gc_ms[steady.gc_ms > 0].round(1).tolist()} ms\n"
        + tl[["batch", "warmup", "batch_ms", "fetch_ms", "compute_ms", "pinprof_ms", "gc_ms"]].round(2).to_string()
    )
    assert ((gaps > -0.01) & (gaps < counted)).all(), pd.DataFrame({"gap": gaps, "next pinprof_ms": counted})
    # The run makes about six appends (1.5 s, one every 0.25 s): on the loop's thread each would leave a
    # gap of 7 ms or more. One gap of a few ms is the loop's thread descheduled on the 2-core machine
    # (4.57 ms once in a fresh-clone CI run, between rows 3 and 4, counted in row 4's pinprof_ms).
    assert (gaps >= 2.0).sum() <= 1, pd.DataFrame({"gap": gaps, "next pinprof_ms": counted})
    assert steady.gc_ms.notna().all()
    assert 38 < median < 60
    # The first steady batch is held to the same bound as every other. A 1.25x bound for it alone
    # failed a fresh-clone CI run with it at 60.4 ms (1.46x), while here the first append comes at
    # about batch 5 (0.27 s in): the loop's own start-up, which the warm-up rule leaves in below 2x.
    assert own.max() < 1.5 * median
    assert steady.pinprof_ms.notna().all() and steady.pinprof_ms.median() < 2.0
    # The appends' own cost is not lost either: the journal's thread's CPU time (reading the rows out,
    # handing them over) is in meta.json, and the report states it a batch beside pinprof_ms, with the
    # journal's process's (building and writing them: 7 ms or more a timeline here) and its start-up.
    info = json.loads((out / "meta.json").read_text())
    spent = info["pinprof_threads_ms"]
    wall = float(tl.batch_start_ms.iloc[-1] + tl.batch_ms.iloc[-1] - tl.batch_start_ms.iloc[0])
    assert 0.0 < spent["journal"] < wall, (spent, wall)
    assert info["pinprof_journal_process_ms"] > spent["journal"] and info["pinprof_journal_process_start_ms"] > 0
    said = f"pinprof's own threads: {sum(spent.values()) / len(tl):.3f} ms of CPU a batch over the run's 36 batches"
    assert said in (out / "summary.md").read_text() and said in (out / "diagnosis.md").read_text()
    assert said in " ".join(run.stderr.split())  # the terminal's brief, wrapped


def test_own_threads_count_cpu_time_not_waiting() -> None:
    """``own_threads.working`` adds a thread's CPU time: a thread that computes for 60 ms counts
    about that, one that sleeps 60 ms next to nothing, and two parts are kept apart."""
    from profiler.capture import own_threads

    def spin(part: str, s: float) -> None:
        with own_threads.working(part):
            end = time.thread_time() + s
            while time.thread_time() < end:
                pass

    def nap(part: str, s: float) -> None:
        with own_threads.working(part):
            time.sleep(s)

    own_threads.reset()
    threads = [threading.Thread(target=spin, args=("busy", 0.06)), threading.Thread(target=nap, args=("idle", 0.06))]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    got = own_threads.summary()
    own_threads.reset()
    assert 60.0 <= got["busy"] < 90.0 and got["idle"] < 5.0, got
    assert own_threads.summary() == {}


def test_an_append_shortens_pythons_switch_interval_and_gives_it_back() -> None:
    """While the journal's thread appends, the loop's thread waits at most ``APPEND_SWITCH_S`` for
    Python's lock (not the 5 ms default) each time it takes it back; after, the program's own
    interval holds, also one it set during the append."""
    from profiler.capture.rows import APPEND_SWITCH_S, JournalWriter

    seen: list[float] = []
    before = sys.getswitchinterval()
    try:
        sys.setswitchinterval(0.004)
        writer = JournalWriter(lambda: seen.append(sys.getswitchinterval()), every_s=0.01, say=False)
        writer.start()
        deadline = time.monotonic() + 5
        while len(seen) < 2 and time.monotonic() < deadline:
            time.sleep(0.005)
        writer.stop()
        assert seen and set(seen) == {APPEND_SWITCH_S}, seen
        assert sys.getswitchinterval() == 0.004

        def sets_its_own() -> None:
            seen.append(sys.getswitchinterval())
            sys.setswitchinterval(0.002)  # as a program's own thread might, during an append

        writer = JournalWriter(sets_its_own, every_s=0.01, say=False)
        writer.start()
        deadline = time.monotonic() + 5
        while sys.getswitchinterval() != 0.002 and time.monotonic() < deadline:
            time.sleep(0.005)
        writer.stop()
        assert sys.getswitchinterval() == 0.002  # the program's, not put back to 0.004 over it
    finally:
        sys.setswitchinterval(before)


def cpu_run(out: Path, modes: str, batches: int, cpu_work_ms: float, flush_s: float) -> None:
    """``pinprof run`` on the CPU (batches of 32, no workers, no GPU work) into ``out``, appending every
    ``flush_s``; it must succeed."""
    cmd = [sys.executable, "-m", "profiler", "run", "--out", str(out), "--force", "--device", "cpu"]
    cmd += ["--modes", modes, "--batch-size", "32", "--batches", str(batches), "--num-workers", "0"]
    cmd += ["--cpu-work-ms", str(cpu_work_ms), "--compute-ms", "0", "--no-plots"]
    env = {**os.environ, "PINPROF_FLUSH_S": str(flush_s)}
    run = subprocess.run(cmd, capture_output=True, text=True, timeout=300, cwd=HERE.parent, env=env)
    assert run.returncode == 0, run.stderr[-3000:]


def test_pinprof_run_rows_hold_pinprof_ms(tmp_path: Path) -> None:
    out = tmp_path / "run"
    cpu_run(out, "pageable", batches=12, cpu_work_ms=3, flush_s=0.05)
    tl = read_timeline(out / "timeline.csv")
    assert len(tl) >= 12 and tl.pinprof_ms.notna().all() and (tl.pinprof_ms > 0).all()
    assert (tl.pinprof_ms < tl.batch_ms).all()
    # pinprof's threads beside the loop are stated as pinprof profile states them: the journal's thread
    # handed rows over every 0.05 s, and its process (one a scenario) built and wrote them.
    info = json.loads((out / "meta.json").read_text())
    spent, child = info["pinprof_threads_ms"], info["pinprof_journal_process_ms"]
    wall = float(tl.batch_start_ms.iloc[-1] + tl.batch_ms.iloc[-1] - tl.batch_start_ms.iloc[0])
    assert 0.0 < spent["journal"] < wall, (spent, wall)
    assert child > 0 and info["pinprof_journal_process_start_ms"] > 0
    said = (
        f"pinprof's own threads: {sum(spent.values()) / len(tl):.3f} ms of CPU a batch over the run's {len(tl)} batches"
    )
    assert said in (out / "summary.md").read_text() and said in (out / "diagnosis.md").read_text()
    assert (
        f"the journal's own process, which builds and writes timeline.csv's rows, {child / len(tl):.3f} ms"
        in (out / "diagnosis.md").read_text()
    )


def test_pinprof_run_starts_no_journal_process_for_a_scenario_shorter_than_an_append(tmp_path: Path) -> None:
    """Each scenario of ``pinprof run`` had a journal process of its own from its start: 2.2 s of CPU each
    on an H100's host, 26 s for a default run of 25 s whose scenarios never appended (each shorter
    than the 2 s interval). It starts at a scenario's first append now; the rows are all kept."""
    out = tmp_path / "run"
    cpu_run(out, "pageable,pinned", batches=6, cpu_work_ms=1, flush_s=60)
    info = json.loads((out / "meta.json").read_text())
    assert info["pinprof_journal_process_ms"] is None and info["pinprof_journal_process_start_ms"] is None, info
    assert "journal" not in info["pinprof_threads_ms"]
    tl = read_timeline(out / "timeline.csv")
    assert sorted(set(tl.scenario)) == ["pageable/bs32/w0", "pinned/bs32/w0"] and len(tl) >= 2 * 6


def test_the_staged_copy_is_the_transfers_not_pinprofs() -> None:
    """In mode ``staged`` the staging copy is the transfer (``stage_ms``): pinprof_ms leaves it out."""
    tl = _library_loop("staged", [torch.randn(256, 3, 32, 32) for _ in range(12)])
    assert tl.stage_ms.notna().all() and tl.pinprof_ms.notna().all() and (tl.pinprof_ms > 0).all()
    # Counted in pinprof_ms, the staging copy would put every row's pinprof_ms at or above its stage_ms.
    _read_apart(tl, "stage_ms")


def _read_apart(tl: pd.DataFrame, phase: str) -> None:
    """Asserts that ``pinprof_ms`` leaves ``phase`` (a column of ms) out: pinprof's median is under
    half the phase's, and all but two rows read pinprof_ms under their own phase.

    One row can read high by itself: a fresh-clone CI run on the 2-core machine had one batch of 12
    at 1.17 ms against 0.05-0.09 ms for the rest (stage_ms 0.36 ms there), the scheduler's and not
    the copy's, which would have made every row high. So the claim is read on the median and on most
    rows, not on every row.
    """
    table = tl[["pinprof_ms", phase]]
    assert tl.pinprof_ms.median() < tl[phase].median() / 2, table
    assert int((tl.pinprof_ms < tl[phase]).sum()) >= len(tl) - 2, table


def test_a_full_collection_inside_the_hooks_is_gc_ms_not_pinprof_ms(monkeypatch: pytest.MonkeyPatch) -> None:
    """On the H200 one 255 ms full collection ran inside the hooks in 76 batches of resnet50 and read as
    pinprof's own time (mean pinprof_ms 3.671 ms a batch, median 0.21): it is the batch's ``gc_ms``. One
    in the user's own code stays out of pinprof_ms as before."""
    g = torch.Generator().manual_seed(0)
    data = TensorDataset(torch.randn(20 * 8, 3, 16, 16, generator=g), torch.randint(0, 9, (20 * 8,), generator=g))
    real_arrived = AutoSession.arrived
    seen = [0]

    def arrived(self: AutoSession, prof: TransferProfiler, rec: dict, batch: object) -> None:
        seen[0] += 1
        if seen[0] == 8:
            gc.collect()  # inside the next() hook's own part: batch 7
        real_arrived(self, prof, rec, batch)

    monkeypatch.setattr(AutoSession, "arrived", arrived)
    session = AutoSession(torch.device("cpu"), run="test")
    auto_hooks.start(session)
    try:
        for b, (x, _) in enumerate(DataLoader(data, batch_size=8)):
            x = x.to("cpu")
            if b == 14:
                gc.collect()  # the user's own: batch 14
            (x @ x.transpose(-1, -2)).sum().item()
    finally:
        auto_hooks.stop()
    tl = session.close().set_index("batch")
    typical = tl.pinprof_ms.drop([7, 14]).median()
    print(tl.loc[[6, 7, 14], ["gc_ms", "pinprof_ms", "batch_ms"]], typical)
    for b in (7, 14):
        assert tl.gc_ms[b] > 5.0  # a full collection of a process with torch loaded: tens of ms or more
        assert tl.pinprof_ms[b] < tl.gc_ms[b] / 5 and tl.pinprof_ms[b] < 20 * typical + 1.0
    assert (tl.gc_ms.drop([7, 14]) == 0).all()
    assert (tl.pinprof_ms >= 0).all()


def test_pinprof_profile_starts_no_journal_process_for_a_run_shorter_than_an_append(tmp_path: Path) -> None:
    """``pinprof profile`` started its journal process with the run, whatever its length; a run that
    ends before its first append now starts none, and every row is in its timeline."""
    out = tmp_path / "short"
    cmd = [sys.executable, "-m", "profiler", "profile", "--out", str(out), "--no-plots", "--"]
    cmd += ["python", str(HERE / "scripts" / "plain_train.py"), "--workers", "0", "--epochs", "2"]
    env = {**os.environ, "PINPROF_FLUSH_S": "60"}
    run = subprocess.run(cmd, capture_output=True, text=True, timeout=120, cwd=tmp_path, env=env)
    assert run.returncode == 0, run.stderr[-3000:]
    info = json.loads((out / "meta.json").read_text())
    assert info["pinprof_journal_process_ms"] is None and info["pinprof_journal_process_start_ms"] is None, info
    assert len(read_timeline(out / "timeline.csv")) == 2 * 7  # 100 items in batches of 16, two epochs
