"""A row is a batch (``profiler.capture.in_flight``): ``pinprof profile`` of unmodified loops that fetch
ahead, each step sleeping a time set by its own batch (k = b % 4 + 1 units), read back per row.

On a CPU machine a batch's ``.to(device)`` goes to the CPU and compute is timed on the host, from
the batch's handoff to the step that closes its row: so ``compute_ms`` of row b is k_b units, and a
row holding its neighbour's step would read that neighbour's k instead (one unit or three off).

Here, one subprocess run of ``pinprof profile`` on the real clock per framework (hand-written loops,
Accelerate, timm, Lightning, Hugging Face's Trainer, zipped loaders), marked ``real_clock`` so that
``scripts/test.sh`` runs them alone, and the in-process cases; the attribution of every loop variant,
on the fake clock, is ``tests/test_attribution_table.py``'s.
"""

from __future__ import annotations

import json
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

import pandas as pd
import pytest
import torch
from fake_time import FakeClock, faked

from profiler.capture import auto_hooks, auto_session
from profiler.capture.auto_session import AutoSession
from profiler.capture.in_flight import HOLD, Patterns, owner, storages
from profiler.report.files import read_timeline

HERE = Path(__file__).parent
SCRIPTS = HERE / "scripts"
UNIT_MS = 40.0  # steps a unit apart: a row off by one batch reads 40 ms or more off
BATCH_BYTES = 4 * (32 * 4 + 8)  # batch of 4: float32 features of 32, an int64 k


def profile(out: Path, *script: str) -> subprocess.CompletedProcess[str]:
    cmd = [sys.executable, "-m", "profiler", "profile", "--out", str(out), "--no-plots", "--", "python", *script]
    return subprocess.run(cmd, capture_output=True, text=True, timeout=300, cwd=HERE.parent)


def assert_own_steps(tl: pd.DataFrame, rows: int) -> None:
    """Each row's compute is its own batch's step: k units, well short of any neighbour's k (the first
    row, before any step was seen, may hold start-up work as well)."""
    for b in range(1, rows):
        k = b % 4 + 1
        got = float(tl.compute_ms.iloc[b])
        assert k * UNIT_MS - 1 <= got <= k * UNIT_MS + 0.75 * UNIT_MS, (b, k, got, list(tl.compute_ms.round(1)))
    assert float(tl.compute_ms.iloc[0]) >= UNIT_MS - 1


@pytest.mark.real_clock
@pytest.mark.parametrize(
    ("loop", "pattern", "boundary"),
    [
        ("plain", "plain", "next()"),
        ("accelerate", "fetch-ahead", "optimizer step"),
        ("fetch-ahead", "fetch-ahead", "optimizer step"),
        ("prefetcher", "device-prefetch", "optimizer step"),
        ("timm", "device-prefetch", "optimizer step"),
    ],
)
def test_each_row_holds_its_own_batch_and_step(tmp_path: Path, loop: str, pattern: str, boundary: str) -> None:
    if loop == "accelerate":
        pytest.importorskip("accelerate")
    if loop == "timm":
        pytest.importorskip("timm")
    out = tmp_path / "r"
    run = profile(out, str(SCRIPTS / "ahead_loops.py"), "--loop", loop, "--unit-ms", str(UNIT_MS))
    assert run.returncode == 0, run.stderr[-3000:]
    assert run.stdout.strip().endswith(f"{loop}: 8 steps")
    tl = read_timeline(out)
    assert len(tl) == 8 and list(tl.batch) == list(range(8))
    assert (tl.bytes == BATCH_BYTES).all() and (tl.copies == 2).all()
    assert_own_steps(tl, 8)
    seen = json.loads((out / "meta.json").read_text())["loaders"]
    (scenario,) = seen
    assert seen[scenario]["pattern"] == pattern and seen[scenario]["row_boundary"] == boundary
    if pattern != "plain":
        assert f"{scenario}: the loop fetches" in run.stderr  # the report says which loop it saw
        # A row starts where the one before ended: its fetch ran during the step before.
        assert (tl.batch_start_ms.iloc[1:].to_numpy() == tl.batch_end_ms.iloc[:-1].to_numpy()).all()
        assert (tl.fetch_start_ms.iloc[1:] < tl.batch_start_ms.iloc[1:]).all()


@pytest.mark.real_clock
@pytest.mark.parametrize("accumulate", [2])  # every window size: tests/test_attribution_table.py
def test_the_hugging_face_trainer_keeps_each_row_on_its_own_batch(tmp_path: Path, accumulate: int) -> None:
    """The real ``transformers.Trainer`` (``tests/scripts/hf_trainer.py``, a tiny model of its own):
    with ``gradient_accumulation_steps`` it fetches a window's batches before it trains on any. Before
    the backward hook, ``--accumulate 2`` read 0, 82, 0, 162, 0, 82, 0, 163 ms for 40, 80, 120, 160.
    The first window, fetched before any backward was seen, is held open (``in_flight.HOLD``): closed
    at its ``next()``, ``--accumulate 4`` read 0.2, 0.1, 0.1 ms with 3 copies for the first three
    rows and 15 copies in the fifth. Each batch has six copies (three by Accelerate's
    loader, three by the Trainer)."""
    pytest.importorskip("transformers")
    out = tmp_path / "r"
    run = profile(out, str(SCRIPTS / "hf_trainer.py"), "--accumulate", str(accumulate), "--unit-ms", str(UNIT_MS))
    assert run.returncode == 0, run.stderr[-3000:]
    tl = read_timeline(out)
    assert len(tl) == 8 and (tl.copies == 6).all(), list(tl.copies)
    for b in range(8):
        k = b % 4 + 1
        got = float(tl.compute_ms.iloc[b])
        assert k * UNIT_MS - 1 <= got <= k * UNIT_MS + 0.75 * UNIT_MS, (b, k, list(tl.compute_ms.round(1)))
    assert (tl.compute_ms >= 0).all() and (tl.batch_ms >= tl.compute_ms - 1e-6).all()


def test_the_caveat_of_rows_one_step_early_is_for_a_framework_loader_read_as_plain() -> None:
    """``pinprof diagnose`` of a folder written before evaluation loops over Accelerate's and timm's
    loaders got their own rows (meta.json: the loop plain) still says that its rows are not per batch;
    a loop read as fetching ahead, or a loader of the script's own, does not."""
    from profiler.analysis.findings import ahead_without_steps

    assert "fetches each batch before it hands out the one before" in ahead_without_steps("plain", "accelerate")
    assert ahead_without_steps("fetch-ahead", "accelerate") == ""
    assert ahead_without_steps("device-prefetch", "timm") == ""
    assert ahead_without_steps("plain", "") == ""


@pytest.mark.real_clock
def test_the_lightning_callback_gets_the_same_rows(tmp_path: Path) -> None:
    """``PinprofCallback`` in the script instead of ``pinprof profile``: the same hooks, the same rows."""
    pytest.importorskip("lightning")
    out = tmp_path / "cb"
    script = [str(SCRIPTS / "lightning_fit.py"), "--steps", "8", "--iterable", "--unit-ms", str(UNIT_MS)]
    run = subprocess.run(
        [sys.executable, *script, "--callback-out", str(out)],
        capture_output=True,
        text=True,
        timeout=300,
        cwd=HERE.parent,
    )
    assert run.returncode == 0, run.stderr[-3000:]
    tl = read_timeline(out)
    assert list(tl.copies) == [2] * 8
    assert_own_steps(tl, 8)
    seen = json.loads((out / "meta.json").read_text())["loaders"]["Stream/bs8/w0"]
    assert seen["pattern"] == "fetch-ahead" and seen["fetched_unused"] == 1


@pytest.mark.real_clock
def test_two_loaders_zipped_each_get_the_step_their_batches_share(tmp_path: Path) -> None:
    """``zip(first, second)``: both batches of a step are that step's. The second loader's rows began
    where the first's closed (at the step), so they held only the tail after it: 0.05 ms batches with a
    step's compute, read as loader bound ("raise num_workers"). Each row now holds its own batch's
    step, and a slow second loader is the one found input bound."""
    out = tmp_path / "even"
    run = profile(out, str(SCRIPTS / "zipped_loaders.py"), "--steps", "9", "--unit-ms", str(UNIT_MS))
    assert run.returncode == 0, run.stderr[-3000:]
    tl = read_timeline(out)
    first, second = (tl[tl.scenario.str.startswith(name)].reset_index(drop=True) for name in ("Items", "Labels"))
    assert len(first) == len(second) == 9
    for rows in (first, second):
        for b in range(1, 9):
            k = b % 3 + 1
            got = float(rows.compute_ms.iloc[b])
            assert k * UNIT_MS - 1 <= got <= k * UNIT_MS + 0.75 * UNIT_MS, (b, k, list(rows.compute_ms.round(1)))
        assert (rows.batch_ms >= rows.compute_ms).all(), list(zip(rows.batch_ms, rows.compute_ms))
    # the same steps: the second's rows as long as the first's, less the first's own fetch
    assert ((first.batch_ms - second.batch_ms).abs() < 0.25 * UNIT_MS).all()
    verdicts = {r["scenario"]: r["verdict"] for r in json.loads((out / "summary.json").read_text())}
    assert verdicts["Labels/bs8/w0"] != "loader_bound", verdicts

    out = tmp_path / "slow"
    run = profile(
        out,
        str(SCRIPTS / "zipped_loaders.py"),
        "--steps",
        "9",
        "--unit-ms",
        str(UNIT_MS),
        "--slow",
        "second",
        "--io-ms",
        "10",
    )
    assert run.returncode == 0, run.stderr[-3000:]
    verdicts = {r["scenario"]: r["verdict"] for r in json.loads((out / "summary.json").read_text())}
    assert verdicts["Labels/bs8/w0"] == "loader_bound", verdicts
    assert verdicts["Items/bs8/w0"] != "loader_bound", verdicts


def _loop(order: str, steps: bool) -> tuple[pd.DataFrame, dict[str, Any]]:
    """Six batches of a tiny in-process loop in ``order`` (``plain`` or ``ahead``: batch n+1 fetched
    before batch n is copied), with an optimizer step per batch or none; the session's timeline."""
    data = torch.utils.data.TensorDataset(torch.rand(24, 3), torch.arange(24))
    model = torch.nn.Linear(3, 1)
    opt = torch.optim.SGD(model.parameters(), lr=0.1)
    session = AutoSession("cpu", nvtx=False)
    auto_hooks.start(session)
    try:
        it = iter(torch.utils.data.DataLoader(data, batch_size=4))
        nxt = next(it, None)
        while nxt is not None:
            if order == "plain":  # copy, step, then the next fetch
                cur = [t.to("cpu") for t in nxt]
                if steps:
                    model(cur[0]).sum().backward()
                    opt.step()
                nxt = next(it, None)
            else:  # the next fetch before the copy
                batch, nxt = nxt, next(it, None)
                cur = [t.to("cpu") for t in batch]
                if steps:
                    model(cur[0]).sum().backward()
                    opt.step()
    finally:
        auto_hooks.stop()
    assert auto_hooks.failure is None
    return session.close(), session.patterns.summary()


def _windows(monkeypatch: pytest.MonkeyPatch, batches: int, window: int | None, unit: float) -> pd.DataFrame:
    """``batches`` batches of a loader taken for one that fetches windows (``fetches_windows``, as the
    Trainer's ``get_batch_samples``): ``window`` batches fetched, then each copied and slept on for
    k = b % 4 + 1 units of ``unit`` ms, trained (a backward), and an optimizer step after the window;
    ``window`` None: one by one, no backward, no step (an evaluation loop). The session's timeline."""
    monkeypatch.setattr(auto_session, "fetches_windows", lambda: True)  # as auto_session imported it
    data = torch.utils.data.TensorDataset(torch.rand(batches, 3))
    model = torch.nn.Linear(3, 1)
    opt = torch.optim.SGD(model.parameters(), lr=0.1)
    with faked(FakeClock()):  # time moves by the sleeps alone: each row's compute is exactly its k units
        session = AutoSession("cpu", nvtx=False)
        return _windows_run(session, data, model, opt, window, unit)


def _windows_run(
    session: AutoSession, data: Any, model: Any, opt: Any, window: int | None, unit: float
) -> pd.DataFrame:
    auto_hooks.start(session)
    b = 0
    try:
        it = iter(torch.utils.data.DataLoader(data, batch_size=1))
        while got := [w for w in (next(it, None) for _ in range(window or 1)) if w is not None]:
            for (x,) in got:
                y = x.to("cpu")
                time.sleep((b % 4 + 1) * unit / 1e3)
                if window is not None:
                    model(y).sum().backward()
                b += 1
            if window is not None:
                opt.step()
                opt.zero_grad()
    finally:
        auto_hooks.stop()
    assert auto_hooks.failure is None
    return session.close()


def _own_rows(tl: pd.DataFrame, unit: float) -> None:
    """Each row is its own batch's: one copy, k units of compute, and no overlap with the row before."""
    assert list(tl.batch) == list(range(len(tl))) and (tl.copies == 1).all(), list(tl.copies)
    for b, got in enumerate(tl.compute_ms):
        k = b % 4 + 1
        assert got == pytest.approx(k * unit, abs=1e-3), (b, k, list(tl.compute_ms.round(1)))
    starts, ends = tl.batch_start_ms.to_numpy(), tl.batch_end_ms.to_numpy()
    assert (starts[1:] >= ends[:-1] - 1e-3).all()


@pytest.mark.parametrize("window", [2, 4])
def test_the_first_window_of_a_loader_that_fetches_windows_is_held_open(
    monkeypatch: pytest.MonkeyPatch, window: int
) -> None:
    """A loader known to fetch a window before training it (the Trainer's; here any loader, taken for
    one) holds the batches a ``next()`` would end untrained before the first step: the first window's
    rows are their own batches' too. Without the hold, the first window of 4 read 0.0 ms of compute
    for its first two rows, with no copy."""
    unit = 20.0
    _own_rows(_windows(monkeypatch, 8, window, unit), unit)


def test_a_loader_that_fetches_windows_and_never_trains_lets_its_held_rows_go(monkeypatch: pytest.MonkeyPatch) -> None:
    """No backward in ``HOLD`` batches (an evaluation through the same loader): the held rows end where
    the ``next()`` after each ended them, with their own forwards and no overlap, and the loader holds
    no more."""
    unit = 10.0
    tl = _windows(monkeypatch, HOLD + 8, None, unit)
    assert len(tl) == HOLD + 8
    _own_rows(tl, unit)


class _SlowEnd(torch.utils.data.DataLoader):  # type: ignore[type-arg]
    """A loader whose last ``next()`` takes ``END_MS`` before its StopIteration, as a loader with
    workers takes to shut them down (18-26 ms with 2 workers)."""

    END_MS = 150.0

    def __iter__(self) -> Any:
        it = super().__iter__()
        real = it._next_data

        def next_data() -> Any:
            try:
                return real()
            except StopIteration:
                time.sleep(self.END_MS / 1e3)
                raise

        it._next_data = next_data  # type: ignore[method-assign]
        return it


def test_the_loaders_end_is_not_the_last_steps_time() -> None:
    """A loop that fetches ahead asks for batch n+1 before step n; after the last batch that ask ends
    the loader (its workers shut down). Each step sleeps k units: the last row's step is its own k
    units, not k units plus the loader's end (it read 1.3 times its step with 2 workers on this
    machine, and Accelerate's 2.9 times its kernels on the H200)."""
    unit = 20.0
    data = torch.utils.data.TensorDataset(torch.arange(16.0).view(8, 2))
    model = torch.nn.Linear(2, 1)
    opt = torch.optim.SGD(model.parameters(), lr=0.1)
    clock = FakeClock()  # time moves by the sleeps alone
    with faked(clock):
        session = AutoSession("cpu", nvtx=False)
        tl = _slow_end_run(session, data, model, opt, unit)
    assert len(tl) == 4
    last = float(tl.compute_ms.iloc[-1])
    assert last == pytest.approx(4 * unit, abs=1e-3), list(tl.compute_ms.round(1))
    assert float(tl.batch_ms.iloc[-1]) == pytest.approx(4 * unit + _SlowEnd.END_MS, abs=1e-3)  # the row holds the end


def _slow_end_run(session: AutoSession, data: Any, model: Any, opt: Any, unit: float) -> pd.DataFrame:
    auto_hooks.start(session)
    try:
        it = iter(_SlowEnd(data, batch_size=2))
        nxt = next(it, None)
        b = 0
        while nxt is not None:
            cur = [t.to("cpu") for t in nxt]
            nxt = next(it, None)
            time.sleep((b % 4 + 1) * unit / 1e3)
            model(cur[0]).sum().backward()
            opt.step()
            b += 1
    finally:
        auto_hooks.stop()
    assert auto_hooks.failure is None
    return session.close()


@pytest.mark.parametrize("copies", [True, False])
def test_a_batch_fetched_and_never_used_gets_no_row_where_the_loop_copies(copies: bool) -> None:
    """A loop that breaks after fetching batch 4: where batches are copied, batch 4 was never trained
    on (no copy, no step) and is left out, counted; a loop that copies nothing keeps it, as nothing
    tells its use."""
    data = torch.utils.data.TensorDataset(torch.rand(24, 3))
    session = AutoSession("cpu", nvtx=False)
    auto_hooks.start(session)
    try:
        for i, (x,) in enumerate(torch.utils.data.DataLoader(data, batch_size=2)):
            if i == 4:
                break
            y = x.to("cpu") if copies else x
            y.sum().item()
    finally:
        auto_hooks.stop()
    tl, seen = session.close(), session.patterns.summary()
    (scenario,) = seen
    assert len(tl) == (4 if copies else 5)
    assert seen[scenario]["fetched_unused"] == (1 if copies else 0)


@pytest.mark.parametrize("order", ["plain", "ahead"])
def test_copies_go_to_the_batch_they_read(order: str) -> None:
    """Batch n+1 is in flight when batch n is copied: the copy is batch n's, found by its tensors."""
    tl, seen = _loop(order, steps=True)
    assert len(tl) == 6 and (tl.copies == 2).all() and (tl.bytes == 4 * (3 * 4 + 8)).all()
    (summary,) = seen.values()
    assert summary["pattern"] == ("plain" if order == "plain" else "fetch-ahead")


def test_an_evaluation_loop_that_copies_after_fetching_ahead_gets_no_negative_time() -> None:
    """No optimizer step, and batch n copied after batch n+1's fetch (Lightning's fetcher on a dataset
    of no length, in its validation loop): batch n's row ended at that fetch, before its copies, and
    every row's compute_ms was negative, a timeline pinprof's own reader refuses. Its row ends at the
    next() after its use: each row holds its own copies, and starts where the one before ended."""
    tl, seen = _loop("ahead", steps=False)
    assert len(tl) == 6 and (tl.copies == 2).all()
    assert (tl.compute_ms >= 0).all() and (tl.compute_ms <= tl.batch_ms).all(), list(tl.compute_ms)
    assert (tl.batch_start_ms.iloc[1:].to_numpy() == tl.batch_end_ms.iloc[:-1].to_numpy()).all()
    assert (tl.h2d_call_ms > 0).all()
    (summary,) = seen.values()
    assert summary["row_boundary"] == "next()"


def test_a_loop_with_no_optimizer_keeps_next_as_its_boundary() -> None:
    """Validation or inference: no step hook fires, rows close at the next() after their batch's,
    each holding one batch's copies, and each ends where the next batch's fetch starts."""
    tl, seen = _loop("plain", steps=False)
    assert len(tl) == 6 and (tl.copies == 2).all()
    assert (tl.batch_end_ms.iloc[:-1].to_numpy() <= tl.fetch_start_ms.iloc[1:].to_numpy()).all()
    assert (tl.batch_start_ms == tl.fetch_start_ms).all()
    (summary,) = seen.values()
    assert summary["row_boundary"] == "next()" and summary["pattern"] == "plain"


def test_owner_looks_newest_first_and_by_elimination() -> None:
    a, b = torch.rand(3), torch.rand(3)
    older: dict = {}  # arrived alone: its tensors were not read
    newer = {"_ptrs": storages({"x": b})}
    assert owner([older, newer], b) == 1
    assert owner([older, newer], a) == 0  # not the newer's: the one not read
    reused = {"_ptrs": storages([a])}  # a freed batch's address taken by the next one: newest wins
    assert owner([{"_ptrs": storages([a])}, reused], a) == 1
    assert owner([{}, {}, newer], a) == 2  # two unread candidates: the newest, as a plain loop's
    assert owner([older, newer], torch.rand(3).to_sparse()) == 1  # no storage to trace


def test_patterns_take_the_most_seen() -> None:
    p = Patterns()
    for _ in range(5):
        p.saw("train", "fetch-ahead")
        p.row("train", "optimizer step")
    p.saw("train", "plain")  # the loader's last batch closes at the next next()
    p.row("train", "next()")
    assert p.summary() == {
        "train": {
            "pattern": "fetch-ahead",
            "row_boundary": "optimizer step",
            "rows_closed_at": {"optimizer step": 5, "next()": 1},
            "fetched_unused": 0,
        }
    }
    assert p.pattern("val") == "plain" and p.boundary("val") == "next()"


def test_a_batch_with_a_sparse_tensor_is_recorded_and_profiling_goes_on() -> None:
    """A sparse tensor has no plain storage to trace its batch by: it must not stop profiling."""

    class Rows(torch.utils.data.Dataset[torch.Tensor]):
        def __len__(self) -> int:
            return 16

        def __getitem__(self, i: int) -> torch.Tensor:
            return torch.rand(4, generator=torch.Generator().manual_seed(i))

    def collate(xs: list[torch.Tensor]) -> tuple[torch.Tensor, torch.Tensor]:
        x = torch.stack(xs)
        return x, x.to_sparse()

    session = AutoSession("cpu", nvtx=False)
    auto_hooks.start(session)
    try:
        for x, sparse in torch.utils.data.DataLoader(Rows(), batch_size=4, collate_fn=collate):
            x.to("cpu"), sparse.to("cpu")
    finally:
        auto_hooks.stop()
    assert auto_hooks.failure is None
    tl = session.close()
    assert len(tl) == 4 and (tl.copies == 2).all()


# Recorded on the H200 (tests/data/h200_rows): scripts/rows_check.py with PINPROF_BACKEND=cupti.
DATA = HERE / "data" / "h200_rows"


@pytest.mark.parametrize(("loop", "pattern"), [("accelerate", "fetch-ahead"), ("timm", "device-prefetch")])
def test_recorded_rows_follow_their_own_batch(loop: str, pattern: str) -> None:
    """Each step ran k x 10 matmuls, k read from its batch: per row, compute_ms / k is one unit."""
    tl = read_timeline(DATA / loop)
    assert (tl.loop == pattern).all() and (tl.framework == loop).all()
    steady = tl[tl.batch >= 4]
    per_unit = steady.compute_ms / (steady.batch % 4 + 1)
    assert ((per_unit / per_unit.median() - 1).abs() < 0.02).all(), list(per_unit.round(3))


def test_recorded_remedies_are_in_the_loops_own_words() -> None:
    """Accelerate's blocking copy held the host 6 ms behind the step before, the GPU idle 0.2 ms of
    it: the change is Accelerate's own switch, worth the idle time; timm's loop prefetches already,
    so no change says prefetch."""
    from profiler.analysis.diagnose import diagnose
    from profiler.analysis.findings import InputBound, Verdict

    (acc,) = diagnose(read_timeline(DATA / "accelerate"), None, None)
    # 3.5% of the batch over 20 batches, interval 1.9-5.03%: not settled, a hair over the boundary
    assert acc.headline.bound in (InputBound.NOT, InputBound.NOT_SETTLED) and acc.headline.share_hi < 0.06
    changes = [c for f in acc.findings for c in f.changes]
    assert changes and all("DataLoaderConfiguration(non_blocking=True)" in c.what for c in changes)
    assert all(c.gain_ms < 1.0 for c in changes)  # not the 6 ms the host was blocked
    assert Verdict.HOST_BLOCKED in [f.verdict for f in acc.findings]
    (timm,) = diagnose(read_timeline(DATA / "timm"), None, None)
    assert not [c for f in timm.findings for c in f.changes if "prefetch" in c.what]
    # The report says what loop it read: diagnosis.md under the headline.
    from profiler.render.markdown import diagnosis_text

    text = diagnosis_text([acc, timm])
    assert "Loop: the loop (accelerate) fetches each batch before the step of the one before" in text
    assert "Loop: the loop (timm) fetches and copies each batch to the device before the step" in text


def test_a_copy_after_a_plain_loops_end_is_no_batchs() -> None:
    """After the loader's last ``next()`` (StopIteration) no batch is current in a plain loop, even
    one whose batches made no copy yet: a copy the script makes then (evaluation data, say) is not
    added to the last batch."""
    data = torch.utils.data.TensorDataset(torch.rand(8, 3))
    session = AutoSession("cpu", nvtx=False)
    auto_hooks.start(session)
    try:
        for (x,) in torch.utils.data.DataLoader(data, batch_size=4):
            x.sum()  # a loop that copies nothing
        torch.rand(5).to("cpu")  # after the loop
    finally:
        auto_hooks.stop()
    tl = session.close()
    assert list(tl.copies) == [0, 0] and list(tl.bytes) == [0, 0]


def test_ctrl_c_inside_the_hooks_after_a_commit_leaves_each_batch_once(monkeypatch: pytest.MonkeyPatch) -> None:
    """A KeyboardInterrupt raised in a ``next()`` hook right after a row was committed, before the
    batches in flight were updated, left that batch in flight: the run's end committed it again, and
    the report could not be read back (batch 18 twice in a fresh-clone CI run of
    ``tests/test_profile.py``'s Ctrl-C case)."""
    from torch.utils.data import DataLoader, TensorDataset

    data = TensorDataset(torch.rand(40, 3, 4, 4, generator=torch.Generator().manual_seed(0)))
    session = AutoSession(torch.device("cpu"), run="test")
    auto_hooks.start(session)
    fired: list[int] = []
    try:
        loader = DataLoader(data, batch_size=4)
        for i, (x,) in enumerate(loader):
            x.to("cpu")
            if i == 5:
                prof = next(iter(session.profs.values()))
                real = prof._commit

                def commit_then_interrupt(rec: dict[str, Any], real: Any = real) -> None:
                    real(rec)
                    if not fired:
                        fired.append(rec["batch"])
                        raise KeyboardInterrupt  # as a SIGINT's handler raises at the next bytecode

                monkeypatch.setattr(prof, "_commit", commit_then_interrupt)
    except KeyboardInterrupt:
        pass
    finally:
        auto_hooks.stop()
    tl = session.close()
    assert fired == [4]  # the next() for batch 6 closed batch 4 (no optimizer: one next() late) and raised
    assert list(tl.batch) == list(range(6)), list(tl.batch)  # batch 6 was never fetched
