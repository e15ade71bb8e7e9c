"""Hazard detection logic on CPU: operator classification, and the race checks with a stand-in event."""

from __future__ import annotations

import warnings

import pytest
import torch

from profiler import PinprofHazardWarning, TransferProfiler
from profiler.capture.hazards import HazardWatch, nonblocking_copy, written_and_read

aten = torch.ops.aten


class FakeEvent:
    """Stands in for a CUDA event that has (done=True) or has not finished."""

    def __init__(self, done: bool) -> None:
        self.done = done

    def query(self) -> bool:
        return self.done


def test_in_place_ops_write_their_self_argument_and_read_the_rest() -> None:
    a, b = torch.ones(3), torch.zeros(3)
    written, read = written_and_read(aten.copy_.default, (a, b), {})
    assert [t is a for t in written] == [True] and [t is b for t in read] == [True]
    written, read = written_and_read(aten.add.Tensor, (a, b), {})
    assert written == [] and len(read) == 2
    out = torch.empty(3)
    written, read = written_and_read(aten.add.out, (a, b), {"out": out})
    assert len(written) == 1 and written[0] is out


def test_cpu_to_cpu_copies_are_not_transfers() -> None:
    a, b = torch.ones(3), torch.zeros(3)
    assert nonblocking_copy(aten.copy_.default, (a, b, True), {}, a) is None
    assert nonblocking_copy(aten.add.Tensor, (a, b), {}, a + b) is None


def _watch_with(kind: str, storage_owner: torch.Tensor, done: bool) -> HazardWatch:
    watch = HazardWatch(lambda: 7)
    table = watch._h2d if kind == "h2d" else watch._d2h
    table[storage_owner.untyped_storage().data_ptr()] = (FakeEvent(done), 5)  # type: ignore[assignment]
    return watch


def test_writing_a_source_with_a_copy_in_flight_warns_once_with_batch_and_fix() -> None:
    src = torch.arange(8.0)
    watch = _watch_with("h2d", src, done=False)
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        with watch:
            src[2:4].fill_(1.0)  # a view: same storage
            src.add_(1.0)
    hazards = [w for w in caught if issubclass(w.category, PinprofHazardWarning)]
    assert len(hazards) == 1
    text = str(hazards[0].message)
    assert "batch 7" in text and "issued in batch 5" in text and "synchronize" in text


def test_reading_a_finished_copy_or_another_tensor_is_quiet() -> None:
    src, other = torch.arange(8.0), torch.arange(8.0)
    with warnings.catch_warnings():
        warnings.simplefilter("error", PinprofHazardWarning)
        with _watch_with("h2d", src, done=True):
            src.add_(1.0)  # the copy has finished
        with _watch_with("h2d", src, done=False):
            other.add_(1.0)  # not the source
            (src + 1).sum()  # reading a source is fine
        with _watch_with("d2h", src, done=True):
            src.sum()


def test_reading_a_d2h_result_in_flight_warns() -> None:
    dst = torch.zeros(8)
    with pytest.warns(PinprofHazardWarning, match="before the copy finished"):
        with _watch_with("d2h", dst, done=False):
            dst.sum()


def test_hazards_without_cuda_say_they_stay_off() -> None:
    prof = TransferProfiler("pageable", "cpu", hazards=True)
    with pytest.warns(UserWarning, match="stays off"):
        for batch in prof.batches([torch.ones(2)] * 2):
            prof.to_device(batch)
    assert len(prof.timeline()) == 2
