"""The CUPTI backend on the GPU, against torch.profiler's records of the same loop. Run: pytest -m gpu.

The two cannot hold CUPTI at once, so one process alternates blocks: the loop under ``pinprof
profile``'s hooks (CUPTI's records through pinprof), then the same loop under torch.profiler, which
takes CUPTI over; the test takes it back after each (``backend.take_back``: a profiled run does not,
``profiler.capture.clocks.choice``). Same tensors, same code, the user's own copies in both.
"""

from __future__ import annotations

import os
from collections.abc import Callable, Iterator
from typing import Any

import numpy as np
import pytest
import torch
from torch.utils.data import DataLoader

from profiler import TransferProfiler
from profiler.bench.cupti import trace_events
from profiler.capture import auto_hooks
from profiler.capture.auto_session import AutoSession
from profiler.capture.clocks import choice as backend
from profiler.capture.clocks.cupti import layout
from profiler.settings import current

pytestmark = pytest.mark.gpu
KiB, MiB = 1 << 10, 1 << 20
DEV = torch.device("cuda")


@pytest.fixture(autouse=True, scope="module")
def _records_on() -> Iterator[None]:
    """CUPTI's records for this module, and the events again after it (the other GPU modules' clock,
    conftest). Set here, not when the module is imported: pytest imports every module before the first
    test, so an import-time setting timed the other modules by CUPTI too, and their first loop, run under
    torch.profiler, left CUPTI refused for this one (21 failures on the H100, 2026-12-05). In a run of
    every GPU test, others ran CUDA work first, and the backend refuses to start by itself that late
    (``profiler.capture.clocks.choice``): started on purpose."""
    before = os.environ.get("PINPROF_BACKEND")
    os.environ["PINPROF_BACKEND"] = "cupti"
    current.cache_clear()
    backend.start(DEV, late_ok=True)
    yield
    rec = backend.recorder(DEV)
    if rec is not None and rec.active:
        rec.release("tests: the next modules time by events")
    if before is None:
        os.environ.pop("PINPROF_BACKEND", None)
    else:
        os.environ["PINPROF_BACKEND"] = before
    current.cache_clear()


@pytest.fixture
def kernel_records() -> Iterator[None]:
    """CUPTI's kernel records on for one test (``PINPROF_KERNELS=1``'s clock), off again after it: the
    module's other tests run at ``pinprof profile``'s default, the copies' records alone."""
    rec = backend.recorder(DEV)
    assert rec is not None and rec.active, backend.describe()
    rec.kernel_records(True)
    yield
    rec.kernel_records(False)


def kineto(fn: Callable[[], Any]) -> list[dict[str, Any]]:
    """The memcpy and kernel events torch.profiler records while ``fn`` runs (ns precision)."""
    events, took_back = trace_events(fn, cpu=False, cuda=True)
    assert took_back, backend.describe()  # pinprof's records for the next round, on purpose
    out = []
    for ev in events:
        if ev.get("cat") in ("gpu_memcpy", "kernel"):
            args = ev.get("args", {})
            out.append(
                {
                    "cat": ev["cat"],
                    "name": ev["name"],
                    "ts": float(ev["ts"]),
                    "dur_ms": float(ev.get("dur", 0)) / 1e3,
                    "bytes": int(args.get("bytes", 0) or 0),
                }
            )
    return sorted(out, key=lambda e: e["ts"])


def matmuls(x: torch.Tensor, k: int, w: torch.Tensor) -> None:
    y = x
    for _ in range(k):
        y = torch.tanh(y @ w)
    y.sum()


def batches_of(case: str, n: int) -> list[dict[str, torch.Tensor]]:
    """n batches (dicts) of a case; never zeros."""
    g = torch.Generator().manual_seed(1)
    kind, _, size = case.partition("-")
    out = []
    for _ in range(n):
        if kind == "view":  # an RGBA image with alpha sliced off: non-dense, torch copies it on the host first
            img = torch.randint(0, 255, (64, 4, 64, 64), dtype=torch.uint8, generator=g).pin_memory()
            out.append({"image": img[:, :3], "label": torch.randint(0, 9, (64,), generator=g).pin_memory()})
        elif kind == "accelerate":  # token ids, mask and labels of a 64 x 512 batch, pinned by the loader
            ids = torch.randint(0, 30000, (64, 512), generator=g)
            out.append(
                {
                    "input_ids": ids.pin_memory(),
                    "attention_mask": torch.ones_like(ids).pin_memory(),
                    "labels": torch.randint(0, 2, (64,), generator=g).pin_memory(),
                }
            )
        else:
            t = torch.randint(0, 255, (int(size),), dtype=torch.uint8, generator=g)
            out.append({"data": t if kind == "pageable" else t.pin_memory()})
    return out


def user_loop(loader: Any, case: str, w: torch.Tensor, k_of: Callable[[int], int]) -> None:
    """The loop as a user writes it: copies, then a step of k matmuls, then a sync (a loss read)."""
    side = torch.cuda.Stream()
    x = torch.randn(256, 1024, device=DEV)
    for i, batch in enumerate(loader):
        if case.startswith(("pinned_nb", "view")):
            with torch.cuda.stream(side):
                moved = {key: v.to(DEV, non_blocking=True) for key, v in batch.items()}
            torch.cuda.current_stream().wait_stream(side)
        else:
            moved = {key: v.to(DEV) for key, v in batch.items()}
        del moved
        matmuls(x, k_of(i), w)
        torch.cuda.synchronize()


def loader_of(batches: list[dict[str, torch.Tensor]]) -> DataLoader:
    return DataLoader(batches, batch_size=None, num_workers=0)  # type: ignore[arg-type]  # the batches as they are, still pinned


def profiled(batches: list, case: str, w: torch.Tensor, k_of: Callable[[int], int]) -> Any:
    session = AutoSession(DEV, run="test")
    auto_hooks.start(session)
    try:
        user_loop(loader_of(batches), case, w, k_of)
    finally:
        auto_hooks.stop()
    return session.close()


def alternate(case: str, n: int, rounds: int, k_of: Callable[[int], int]) -> tuple[Any, list[list[dict]]]:
    """(pinprof's rows of every round, torch.profiler's events of every round), rounds alternated."""
    import pandas as pd

    batches = batches_of(case, n)
    w = torch.randn(1024, 1024, device=DEV) / 32
    user_loop(loader_of(batches[:3]), case, w, k_of)  # warm: kernels loaded, allocator grown
    # A round of each side more, dropped: a process's first copies run slow (scripts/copy_tail.py on
    # an H100, 2026-12-06: each variant's first round of 48 1 MiB copies had a p90 of 0.0229-0.0245 ms,
    # every later one 0.0214-0.0230), and it fell on pinprof's first round alone. The sides then take
    # turns going first, so a drift within a pair weighs on both alike.
    ours: list[Any] = []
    theirs: list[Any] = []
    sides = [
        (ours, lambda: profiled(batches, case, w, k_of)),
        (theirs, lambda: kineto(lambda: user_loop(loader_of(batches), case, w, k_of))),
    ]
    for _, run in sides:
        run()
    for r in range(rounds):
        for kept, run in sides[::-1] if r % 2 else sides:
            kept.append(run())
    return pd.concat(ours, ignore_index=True), theirs


def per_batch_copies(events: list[dict], copies: int, sizes: set[int]) -> np.ndarray:
    """Summed memcpy ms of each batch (``copies`` records a batch, in order)."""
    mem = [e for e in events if e["cat"] == "gpu_memcpy" and "HtoD" in e["name"] and e["bytes"] in sizes]
    dur = np.array([e["dur_ms"] for e in mem])
    assert len(dur) % copies == 0, (len(dur), copies)
    return dur.reshape(-1, copies).sum(axis=1)


CASES = [f"{kind}-{size}" for size in (64 * KiB, 1 * MiB, 38 * MiB) for kind in ("pinned_nb", "pinned", "pageable")]
CASES += ["view-0", "accelerate-0"]


def test_cupti_is_the_backend_here() -> None:
    assert backend.recorder(DEV) is not None, backend.describe()
    print(backend.describe())


@pytest.mark.parametrize("case", CASES)
def test_h2d_gpu_ms_agrees_with_torch_profiler(case: str) -> None:
    # Rounds alternated: a small copy's duration varies by several percent from copy to copy, and a
    # p90 of 368 batches a side moved by 2.2-2.8% between the two sides for pageable 64 KiB and 1 MiB
    # on the H200 (2026-12-04), CUPTI on both: the copies' own spread, not the clock's. So 24 rounds
    # of 46 batches where a batch is small. A 38 MiB copy's speed drifts over seconds: in one call
    # torch.profiler's own first and last 4 rounds (of 8, 46 batches each) had p90s 47% apart for
    # pinned non_blocking and 6% for pageable, so those take shorter rounds, for both sides to sample
    # the same drift. 32 rounds of 22 measured batches still left pageable 38 MiB's p90s 3.9% apart on
    # an H100 (2026-12-06), torch.profiler's own halves 8.9% apart, the slow tenth spread evenly over
    # both sides' rounds: 64 rounds of 14, turn by turn, halve the time between a pair's two sides.
    # 24 rounds of 46 small batches a side left 1 MiB pinned_nb's p90s 2.02% apart on an H100
    # (2026-12-06), torch.profiler's own halves 8.9% apart: twice the rounds halve a p90's sampling
    # variance, for a few seconds more.
    batches = batches_of(case, 1)[0]
    small = sum(v.numel() * v.element_size() for v in batches.values()) < 4 * MiB
    n, rounds, skip = (48, 48, 2) if small else (16, 64, 2)
    tl, theirs = alternate(case, n, rounds, lambda i: 1)
    copies = len(batches)
    sizes = {v.numel() * v.element_size() for v in batches.values()}
    total = sum(v.numel() * v.element_size() for v in batches.values())
    ours = tl[tl.batch >= skip]
    cupti = np.concatenate([per_batch_copies(ev, copies, sizes)[skip:] for ev in theirs])
    assert set(tl.gpu_clock) == {"cupti/events"}, set(tl.gpu_clock)  # the default: the copies' records
    assert (ours.copies == copies).all() and (ours.bytes == total).all()
    mine = ours.h2d_gpu_ms.to_numpy()
    # torch.profiler against itself, its first rounds against its last: how far the copies' own spread
    # moves a p90 of this many batches
    half = len(cupti) // 2
    own_p90 = abs(np.quantile(cupti[:half], 0.9) - np.quantile(cupti[half:], 0.9)) / np.quantile(cupti, 0.9)
    rel_med = abs(np.median(mine) - np.median(cupti)) / np.median(cupti)
    rel_p90 = abs(np.quantile(mine, 0.9) - np.quantile(cupti, 0.9)) / np.quantile(cupti, 0.9)
    names = {e["name"] for ev in theirs for e in ev if e["cat"] == "gpu_memcpy" and e["bytes"] in sizes}
    kinds = {"pageable" if "Pageable" in nm else "pinned" for nm in names}
    print(
        f"{case}: pinprof h2d_gpu_ms median {np.median(mine):.4f} p90 {np.quantile(mine, 0.9):.4f} | torch.profiler "
        f"median {np.median(cupti):.4f} p90 {np.quantile(cupti, 0.9):.4f} | rel {rel_med:.4f} / {rel_p90:.4f} | "
        f"src_memory {sorted(set(ours.src_memory))} torch.profiler {sorted(names)} | torch.profiler's halves "
        f"p90 {own_p90:.4f} apart"
    )
    # Where in a round each side's slowest tenth fell (counts by sixth of the round): a side whose slow
    # copies gather in one part of its rounds is perturbed there, not timed wrong.
    per_round = n - skip
    for side, series in (("pinprof", mine), ("torch.profiler", cupti)):
        slow = np.flatnonzero(series > np.quantile(series, 0.9)) % per_round
        print(f"  {side}: slowest tenth by sixth of a round {np.bincount(slow * 6 // per_round, minlength=6).tolist()}")
    assert set(ours.src_memory) == (kinds if len(kinds) == 1 else {"mixed"})
    # The view case read pinprof's median 1.08-1.40% under torch.profiler's in every run on the H100s
    # of 2026-12-05/06 but one (0.0000, its p90 0.0017). Per copy (scripts/view_records.py) the 768 KiB image agrees to 0.35%; the 512 B
    # label reads 0.77 us in pinprof's records and 0.77 or 0.93 us in torch.profiler's, whose p90 is
    # 0.96. The hooks do not change the copies (scripts/hook_perturb.py): two CUPTI clients disagree
    # on a sub-microsecond copy, and that step takes half of this bound for the view's batch.
    assert rel_med < 0.02, rel_med
    # A p90 of this many batches moves by the copies' own spread: the bound adds what torch.profiler's
    # two halves differ by in this very run (an H100 of 2026-12-07 read 1 MiB pinned_nb's p90s 2.57%
    # apart with the reference's own halves 2.48% apart, its median 0.30%). A clock that mistimes the
    # slow tenth still fails: it moves pinprof's p90 and not the reference's halves.
    assert rel_p90 < 0.02 + own_p90, (rel_p90, own_p90)


@pytest.mark.usefixtures("kernel_records")
def test_compute_ms_holds_backward_launched_from_autograds_thread() -> None:
    """A training step: forward launched from the loop's thread, backward's kernels from autograd's own
    thread, whose records CUPTI 12.3+ would keep in buffers of their own (``CuptiRecorder._queues``).
    Every row's compute_ms is the step's kernel time as torch.profiler gives it, and none came late."""
    from torch import nn

    torch.manual_seed(0)
    model = nn.Sequential(
        nn.Conv2d(3, 32, 3, padding=1),
        nn.ReLU(),
        nn.Conv2d(32, 64, 3, stride=2),
        nn.ReLU(),
        nn.AdaptiveAvgPool2d(1),
        nn.Flatten(),
        nn.Linear(64, 10),
    ).to(DEV)
    opt = torch.optim.SGD(model.parameters(), lr=0.01)
    g = torch.Generator().manual_seed(2)
    batches = [
        {
            "image": torch.randn(64, 3, 32, 32, generator=g).pin_memory(),
            "label": torch.randint(0, 10, (64,), generator=g).pin_memory(),
        }
        for _ in range(40)
    ]

    def loop(loader: Any) -> None:
        for b in loader:
            x, y = b["image"].to(DEV, non_blocking=True), b["label"].to(DEV, non_blocking=True)
            loss = nn.functional.cross_entropy(model(x), y)
            opt.zero_grad(set_to_none=True)
            loss.backward()
            opt.step()
            loss.item()

    loop(loader_of(batches[:3]))  # warm: kernels loaded, optimizer state made
    late0 = int(backend.describe().get("late_records", 0))
    ours, per_step, launches = [], [], []
    for _ in range(3):
        session = AutoSession(DEV, run="test")
        auto_hooks.start(session)
        try:
            loop(loader_of(batches))
        finally:
            auto_hooks.stop()
        ours.append(session.close())
        ev = kineto(lambda: loop(loader_of(batches)))
        per_step.append(sum(e["dur_ms"] for e in ev if e["cat"] == "kernel") / len(batches))
        launches.append(sum(e["cat"] == "kernel" for e in ev) / len(batches))
    import pandas as pd

    tl = pd.concat(ours, ignore_index=True)
    tl = tl[tl.batch >= 2]
    truth = float(np.median(per_step))
    rel = (tl.compute_ms - truth).abs() / truth
    late = int(backend.describe().get("late_records", 0)) - late0
    print(
        f"training step: pinprof compute_ms median {tl.compute_ms.median():.4f} min {tl.compute_ms.min():.4f} "
        f"max {tl.compute_ms.max():.4f} | torch.profiler kernels a step {truth:.4f} | rel max {rel.max():.4f} | late {late}"
        f" | kernels a row {sorted(set(tl.kernels.tolist()))}, torch.profiler's a step {sorted(set(launches))}"
    )
    assert set(tl.gpu_clock) == {"cupti"}
    assert late == 0
    assert (rel < 0.05).all()
    # each row counts its step's launches, the backward's from autograd's thread included
    assert tl.kernels.median() == np.median(launches)


@pytest.mark.usefixtures("kernel_records")
def test_compute_ms_is_the_steps_kernel_time_and_follows_its_own_batch() -> None:
    k_of = [1, 4, 2, 3, 1, 3, 4, 2, 2, 1, 4, 3, 1, 2]
    tl, theirs = alternate("pinned-1024", len(k_of), 3, lambda i: k_of[i])
    kern = [e for ev in theirs for e in ev if e["cat"] == "kernel"]
    per_round = sum(e["dur_ms"] for e in kern) / len(theirs)
    ours_round = tl.compute_ms.sum() / 3
    print(f"compute per round: pinprof {ours_round:.4f} ms, torch.profiler summed kernels {per_round:.4f} ms")
    assert abs(ours_round - per_round) / per_round < 0.05
    # The time of one unit of work (a matmul and its tanh) as torch.profiler gives it: every kernel but
    # the step's closing sum, over the units launched.
    unit_cupti = sum(e["dur_ms"] for e in kern if "reduce" not in e["name"]) / (len(theirs) * sum(k_of))
    k = np.array([k_of[b] for b in tl.batch])
    a, b = np.polyfit(k, tl.compute_ms.to_numpy(), 1)
    resid = tl.compute_ms.to_numpy() - (a * k + b)
    print(
        f"per unit: pinprof fit {a:.5f} ms (+{b:.5f}), torch.profiler {unit_cupti:.5f} ms; residual max "
        f"{np.abs(resid).max():.5f} ms; medians by k {tl.assign(k=k).groupby('k').compute_ms.median().round(5).to_dict()}"
    )
    assert abs(a - unit_cupti) / unit_cupti < 0.05
    # each row holds its own step: off its own k's line by far less than one unit (a neighbour's k is
    # at least one unit away)
    assert np.abs(resid).max() < 0.25 * unit_cupti


@pytest.mark.parametrize("size_mib", [4, 8, 16, 64])
def test_per_batch_agrees_with_the_gated_events(size_mib: int) -> None:
    """Events behind the stream gate time large pinned copies batch by batch as CUPTI does, but for a
    fixed few microseconds they read high (2.6-2.7 us on the H200: 3.4% of a 4 MiB copy, 1.7% of an
    8 MiB one, where an 8 MiB batch once read 2.4% off). So: the events' offset (their median excess
    over CUPTI's record of the same copy) is under 4 us, and once it is taken away every batch
    agrees within 2%."""
    rec = backend.recorder(DEV)
    assert rec is not None and rec.active
    rec.collect(force=True)
    rec.records._mem = layout.empty(layout.KIND_MEMCPY)  # only this loop's copies from here
    g = torch.Generator().manual_seed(2)
    data = [torch.randint(0, 255, (size_mib * MiB,), dtype=torch.uint8, generator=g).pin_memory() for _ in range(16)]
    prof = TransferProfiler("pinned_nb", DEV, gpu_clock="events")
    for b in prof.batches(data):
        prof.to_device(b)
        with prof.compute():
            pass
        torch.cuda.synchronize()
    ev = prof.timeline().h2d_ms.to_numpy()
    torch.cuda.synchronize()
    rec.collect(force=True)
    mem = rec.records._mem
    mine = mem["bytes"] == size_mib * MiB
    order = np.argsort(mem["correlation"][mine])
    cu = ((mem["end"] - mem["start"])[mine][order]) / 1e6
    assert len(cu) == len(ev), (len(cu), len(ev))
    rel = np.abs(ev - cu) / cu
    offset = float(np.median((ev - cu)[2:]))
    rest = np.abs(ev - cu - offset)[2:] / cu[2:]
    print(
        f"{size_mib} MiB: events {np.median(ev):.4f} CUPTI {np.median(cu):.4f} ms; per batch rel median "
        f"{np.median(rel):.4f} max {rel[2:].max():.4f}; the events' offset {offset * 1e3:.2f} us, past it max {rest.max():.4f}"
    )
    assert 0 <= offset < 0.004
    assert rest.max() < 0.02


def test_torch_profiler_in_the_middle_of_a_profiled_run() -> None:
    """A run profiled while the script itself runs torch.profiler for some steps: it succeeds, the
    steps before it are timed with CUPTI, those under it and after it with events (CUPTI is not taken
    back), and the report says why."""
    from torch.profiler import ProfilerActivity, profile

    batches = batches_of("pinned-1048576", 12)
    w = torch.randn(1024, 1024, device=DEV) / 32
    session = AutoSession(DEV, run="test")
    auto_hooks.start(session)
    try:
        user_loop(loader_of(batches), "pinned", w, lambda i: 1)
        with profile(activities=[ProfilerActivity.CUDA]) as prof:
            user_loop(loader_of(batches), "pinned", w, lambda i: 1)
        user_loop(loader_of(batches), "pinned", w, lambda i: 1)
    finally:
        auto_hooks.stop()
    tl = session.close()
    clocks = tl.gpu_clock.tolist()
    info = backend.describe()
    print(clocks, info)
    assert len(prof.events()) > 0
    assert clocks[:12] == ["cupti/events"] * 12 and clocks[-12:] == ["events"] * 12
    assert "events" in clocks[12:24]
    assert tl.h2d_gpu_ms.notna().all()
    assert info["handed_to_torch_profiler"] >= 1 and info["why"] == backend.HANDED_OVER
    assert backend.take_back()  # for any test after this one
