"""``AutoSession.copy_noted``, the one call that adds a copy no event times (CUPTI's records time it, or
a CPU device), against ``copy_begin`` and ``copy_end``, which it stands for there: the same batch record
after the same copies, field by field, with the host clock's readings as the only difference."""

from __future__ import annotations

import copy
from collections.abc import Iterator
from time import perf_counter_ns
from typing import Any

import pytest
import torch
from torch.utils.data import DataLoader, TensorDataset

from profiler.capture import auto_hooks
from profiler.capture.auto_session import AutoSession

# Fields read from the host clock: each side reads its own.
CLOCKED = ("call_s", "call_sum", "call_e", "request", "comp_s")


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
def test_copy_noted_adds_copies_as_copy_begin_and_copy_end_do(
    cupti: bool, current: tuple[AutoSession, Any, dict[str, Any]]
) -> None:
    s, prof, rec = current
    was = copy.deepcopy(rec)  # copies of the batch in flight: the session closes it unchanged
    if cupti:
        was["_calls"] = []  # as ``arrived`` leaves a batch that CUPTI's records time
    old, new = copy.deepcopy(was), copy.deepcopy(was)
    spans = []
    for src, non_blocking, alt in COPIES:
        prof.mode = "auto"
        s.cur = (prof, old)
        began = s.copy_begin()
        s.copy_end(began, src, non_blocking, alt, perf_counter_ns())
        old_mode, prof.mode = prof.mode, "auto"
        s.cur = (prof, new)
        t1 = perf_counter_ns()
        t2 = t1 + 2_000
        s.copy_noted(prof, new, src, non_blocking, alt, t1, t2)
        spans.append((t1, t2))
        assert prof.mode == old_mode
    for key in set(old) | set(new):
        if key not in CLOCKED and key != "_calls":
            assert _same(new.get(key), old.get(key)), (key, new.get(key), old.get(key))
    assert new["copies"] == len(COPIES) and new["bytes"] == 40 + 7 + 4 + 0
    assert new["copy_sync"] and new["src_memory"] == "pageable"  # no pinned memory on a CPU machine
    first, last = spans[0], spans[-1]
    assert new["call_s"] == first[0] / 1e6 and new["call_e"] == last[1] / 1e6
    assert new["call_sum"] == pytest.approx(len(COPIES) * 2_000 / 1e6, abs=1e-6)  # ms from ns clocks near 1e13
    if cupti:
        # each copy's call for CUPTI's matching: its host span in ns, and the sizes its record may have
        assert [c[:2] for c in new["_calls"]] == spans
        assert [c[2] for c in new["_calls"]] == [c[2] for c in old["_calls"]] == [((40,),), ((7, 28),), ((4,),), ()]
        # the step may ask for the data once the last call returned; its start stays the fetch's end
        assert new["request"] == last[1] / 1e6 and _same(new["comp_s"], was["comp_s"])
    else:
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
    s.copy_noted(prof, rec, torch.ones(3), True, None, t1, t1 + 1_000)
    assert rec["copies"] == 1 and rec["_calls"] == [(t1, t1 + 1_000, ((12,),))]  # counted, and matched
    # a metric's copy after the step: the step's ask for the data and its start stay where they were
    assert _same(rec.get("request"), was.get("request")) and _same(rec["comp_s"], was["comp_s"])
