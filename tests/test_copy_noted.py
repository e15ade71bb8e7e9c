"""A copy no event times (CUPTI's records time it, or a CPU device), added to its batch record by
``AutoSession.copy_noted`` and the batch's clock (``profiler.capture.clocks``): what each field holds
after a run of copies, and that no other field moved; and what ``copy_hooks.timed_copy`` tells the
session and the clock of each kind of batch."""

from __future__ import annotations

import copy
from collections.abc import Iterator
from time import perf_counter_ns
from types import SimpleNamespace
from typing import Any

import pytest
import torch
from torch.utils.data import DataLoader, TensorDataset

from profiler.capture import auto_hooks, copy_hooks
from profiler.capture.auto_session import AutoSession
from profiler.capture.clocks.by_cupti import CuptiClock
from profiler.capture.clocks.by_events import EventsClock
from profiler.capture.clocks.by_host import HostClock
from profiler.capture.clocks.gpu_clock import GpuClock
from profiler.capture.nvtx import NvtxEmitter

# The fields a copy sets: the host clock's readings, and the copy counted.
CLOCKED = ("call_s", "call_sum", "call_e", "request", "comp_s")
COUNTED = ("copies", "bytes", "copy_sync", "src_memory", "_calls")
CUPTI = CuptiClock(None)  # type: ignore[arg-type]  # its copies never reach the recorder before the row's commit


def _same(a: Any, b: Any) -> bool:
    return bool(a == b or (a != a and b != b))  # NaN, a field not set yet, on both sides


@pytest.fixture
def current() -> Iterator[tuple[AutoSession, Any, dict[str, Any]]]:
    """A session on a CPU device with one batch fetched through the hooks and current; closed after
    (it holds the pin hook while open)."""
    s = AutoSession("cpu", nvtx=False)
    loader: DataLoader[tuple[torch.Tensor, ...]] = DataLoader(TensorDataset(torch.zeros(2, 4)), batch_size=None)
    auto_hooks.start(s)
    try:
        next(iter(loader))
    finally:
        auto_hooks.stop()
    assert s.cur is not None
    prof, rec = s.cur
    try:
        yield s, prof, rec
    finally:
        s.close()


# (source, non_blocking, the size asked for when the copy converts): a float tensor and a pageable
# byte tensor converted to float, then a scalar and an empty tensor (no bytes to expect).
COPIES = [
    (torch.arange(10, dtype=torch.float32), True, None),
    (torch.zeros(7, dtype=torch.uint8), False, 28),
    (torch.tensor(3.0), True, None),
    (torch.zeros(0), False, None),
]


@pytest.mark.parametrize("cupti", [False, True], ids=["host", "cupti"])
def test_copy_noted_adds_each_copy_to_its_batch(cupti: bool, current: tuple[AutoSession, Any, dict[str, Any]]) -> None:
    s, prof, rec = current
    assert isinstance(rec["_clock"], HostClock)  # a CPU device's batch
    was = copy.deepcopy(rec)  # copies of the batch in flight: the session closes it unchanged
    clock = CUPTI if cupti else HostClock()
    if cupti:
        was["_calls"] = []  # as ``open`` leaves a batch that CUPTI's records time
    new = copy.deepcopy(was)
    spans = []
    for (src, non_blocking, alt), mode in zip(COPIES, ("pageable_nb", "pageable", "pageable_nb", "pageable")):
        prof.mode = "auto"  # a loader's first copy names its mode (no pinned memory on a CPU machine)
        s.cur = (prof, new)
        t1 = perf_counter_ns()
        t2 = t1 + 2_000
        prof.nvtx.push("h2d")  # as the clock's copy_begin pushes it
        clock.copy_end(s, prof, new, None, src, non_blocking, alt, t1, t2, False)
        spans.append((t1, t2))
        assert prof.mode == mode
    assert set(new) == set(was)
    for key in set(was) - set(CLOCKED) - set(COUNTED):
        assert _same(new[key], was[key]), (key, new[key], was[key])
    assert new["copies"] == len(COPIES) and new["bytes"] == 40 + 7 + 4 + 0
    assert new["copy_sync"] and new["src_memory"] == "pageable"  # no pinned memory on a CPU machine
    first, last = spans[0], spans[-1]
    assert new["call_s"] == first[0] / 1e6 and new["call_e"] == last[1] / 1e6
    assert new["call_sum"] == pytest.approx(len(COPIES) * 2_000 / 1e6, abs=1e-6)  # ms from ns clocks near 1e13
    if cupti:
        # each copy's call for CUPTI's matching: its host span in ns, and the sizes its record may have
        assert [c[:2] for c in new["_calls"]] == spans
        assert [c[2] for c in new["_calls"]] == [((40,),), ((7, 28),), ((4,),), ()]
        # the step may ask for the data once the last call returned; its start stays the fetch's end
        assert new["request"] == last[1] / 1e6 and _same(new["comp_s"], was["comp_s"])
    else:
        assert "_calls" not in new
        # host clock: the step starts when the batch's last copy has returned
        assert new["comp_s"] == last[1] / 1e6 and _same(new.get("request"), was.get("request"))


def test_a_copy_after_the_batchs_step_leaves_its_step_start_alone(
    current: tuple[AutoSession, Any, dict[str, Any]],
) -> None:
    s, prof, current_rec = current
    rec = copy.deepcopy(current_rec)  # the session closes the batch in flight unchanged
    rec["_calls"] = []
    rec["_stepped"] = True
    was = copy.deepcopy(rec)
    t1 = perf_counter_ns()
    prof.nvtx.push("h2d")
    CUPTI.copy_end(s, prof, rec, None, torch.ones(3), True, None, t1, t1 + 1_000, False)
    assert rec["copies"] == 1 and rec["_calls"] == [(t1, t1 + 1_000, ((12,),))]  # counted, and matched
    # a metric's copy after the step: the step's ask for the data and its start stay where they were
    assert _same(rec.get("request"), was.get("request")) and _same(rec["comp_s"], was["comp_s"])


class _Session:
    """What ``copy_hooks.timed_copy`` reads of a session, recording what it is told: ``cuda`` and a
    batch the events time, or CUPTI's records, or (no GPU) the host's clock."""

    def __init__(self, cuda: bool, cupti: bool) -> None:
        self.cuda = cuda
        clock: GpuClock = CUPTI if cupti else EventsClock() if cuda else HostClock()
        self.cur = (
            SimpleNamespace(nvtx=NvtxEmitter(enabled=False)),
            {"own_sum": 0.0, "_clock": clock, **({"_calls": []} if cupti else {})},
        )
        self.told: list[tuple[Any, ...]] = []

    def copy_begin(self) -> tuple[Any, ...]:
        self.cur[0].nvtx.push("h2d")
        return ("stream", "start", "end", 1.0)

    def copy_end(self, began: tuple[Any, ...], copied: torch.Tensor, non_blocking: bool, t2: int) -> None:
        self.told.append(("end", began, copied))

    def copy_noted(self, prof: Any, rec: Any, copied: torch.Tensor, nb: bool, alt: Any, driver: int, t2: int) -> int:
        self.told.append(("noted", driver, copied))
        return copied.numel() * copied.element_size()

    def layout_noted(self, src: torch.Tensor, t1: int, driver: int) -> None:
        self.told.append(("layout", src, driver))


@pytest.mark.parametrize(("cuda", "cupti"), [(True, False), (True, True), (False, False)])
def test_a_timed_copy_tells_the_session_its_call_and_its_layout_copy_apart(cuda: bool, cupti: bool) -> None:
    """With the events (a CUDA batch without CUPTI's records) the call's start moves to the layout
    copy's end in the tuple ``copy_end`` gets; otherwise ``copy_noted`` gets that end as the call's
    start. A dense source makes no layout copy, and the call starts where it was made."""
    src = torch.arange(24.0).view(4, 6)[:, :3]  # a view with gaps
    s = _Session(cuda, cupti)
    relay = lambda t: ("copied", t)  # noqa: E731  # the user's call on the dense tensor
    out = copy_hooks.timed_copy(s, src, False, lambda: "user", None, perf_counter_ns(), (src.contiguous, relay))  # type: ignore[arg-type]
    assert out[0] == "copied" and out[1].is_contiguous() and torch.equal(out[1], src)
    (how, first, copied), (layout, laid, driver) = s.told
    assert copied is out[1] and layout == "layout" and laid is src
    if cuda and not cupti:
        assert how == "end" and first[:3] == ("stream", "start", "end") and first[3] == driver / 1e6
    else:
        assert how == "noted" and first == driver
    dense = _Session(cuda, cupti)
    assert copy_hooks.timed_copy(dense, out[1], False, lambda: "user", None, perf_counter_ns()) == "user"  # type: ignore[arg-type]
    ((how, first, copied),) = dense.told
    assert copied is out[1] and (first == ("stream", "start", "end", 1.0) if how == "end" else how == "noted")


class _Recorder:
    """What the clocks read of CUPTI's recorder: whether its records run and its kernel records are on;
    what each batch hands it (``add``)."""

    def __init__(self, active: bool, kernels: bool) -> None:
        self.active, self.kernels = active, kernels
        self.added: list[tuple[Any, ...]] = []

    def add(self, store: Any, row: int, calls: Any, windows: Any, end_ms: float) -> None:
        self.added.append((row, calls, windows, end_ms))


def test_the_clocks_give_a_batch_cuptis_copies_unless_its_kernel_records_are_on() -> None:
    from profiler.capture.clocks.by_cupti_copies import CuptiCopiesClock
    from profiler.capture.clocks.choice import Clocks

    for active, kernels, kind in (
        (True, False, CuptiCopiesClock),
        (True, True, CuptiClock),
        (False, False, EventsClock),
    ):
        rec = _Recorder(active, kernels)
        got = Clocks(True, rec).for_new_batch()  # type: ignore[arg-type]
        assert type(got) is kind, (active, kernels, got)
    assert type(Clocks(True, None).for_new_batch()) is EventsClock
    assert type(Clocks(False, None).for_new_batch()) is HostClock


def test_the_copies_clock_logs_each_copy_for_its_record_and_times_the_step_after_it(
    current: tuple[AutoSession, Any, dict[str, Any]], monkeypatch: pytest.MonkeyPatch
) -> None:
    """A batch of the default clock: each copy logged as CUPTI's clock logs it (its memcpy record times
    it), the step's start event recorded again after every copy before the step and not after it,
    and at its commit the step's events queued and the calls handed to the recorder with no window."""
    from profiler.capture.clocks import by_cupti_copies

    recorded: list[Any] = []
    monkeypatch.setattr(by_cupti_copies, "record", lambda ev, stream: recorded.append(ev))
    monkeypatch.setattr(by_cupti_copies, "current_stream", lambda index: "stream")
    s, prof, current_rec = current
    rec = copy.deepcopy(current_rec)
    recorder = _Recorder(True, False)
    clock = by_cupti_copies.CuptiCopiesClock(recorder)  # type: ignore[arg-type]
    rec["_calls"], rec["_comp_start"] = [], "start event"  # as ``open`` leaves it (its event at the fetch)
    t1 = perf_counter_ns()
    for i, (src, non_blocking, alt) in enumerate(COPIES[:2]):
        clock.copy_begin(s, prof)
        clock.copy_end(s, prof, rec, None, src, non_blocking, alt, t1 + 10_000 * i, t1 + 10_000 * i + 2_000, False)
    assert recorded == ["start event", "start event"]  # after each copy: the step starts after the last
    assert [c[2] for c in rec["_calls"]] == [((40,),), ((7, 28),)]  # the sizes the records may carry
    rec["_stepped"] = True
    clock.copy_begin(s, prof)
    clock.copy_end(s, prof, rec, None, torch.ones(3), True, None, t1 + 50_000, t1 + 51_000, False)
    assert len(recorded) == 2 and len(rec["_calls"]) == 3  # a metric's copy after the step: counted only
    queued: list[Any] = []
    prof._pending = SimpleNamespace(add=lambda row, copies, cs, ce: queued.append((row, copies, cs, ce)))
    rec["_comp_end"], rec["batch_e"] = "end event", 123.0
    clock.commit(prof, rec, 7)
    assert queued == [(7, [], "start event", "end event")]
    assert recorder.added == [(7, rec["_calls"], None, 123.0)]
