"""The recorder through the same code on a CPU-only machine: host phases measured, GPU phases empty."""

from __future__ import annotations

import time

import numpy as np
import pytest
import torch
import torch.utils.data._utils.pin_memory as pin_module
from torch.utils.data import DataLoader, Dataset

from profiler import TransferProfiler
from profiler.capture.pin_hook import PIN_HOOK


class SlowDataset(Dataset):
    def __init__(self, n: int, delay_s: float, fail_at: int | None = None) -> None:
        self.n, self.delay_s, self.fail_at = n, delay_s, fail_at

    def __len__(self) -> int:
        return self.n

    def __getitem__(self, i: int) -> tuple[torch.Tensor, int]:
        if i == self.fail_at:
            raise RuntimeError(f"corrupt item {i}")
        time.sleep(self.delay_s)
        return torch.full((3, 4, 4), float(i)), i


def spy_nvtx(prof: TransferProfiler) -> list[tuple[str, str]]:
    calls: list[tuple[str, str]] = []
    prof.nvtx.push = lambda name: calls.append(("push", name))  # type: ignore[method-assign]
    prof.nvtx.pop = lambda: calls.append(("pop", ""))  # type: ignore[method-assign]
    return calls


def balanced_and_nested(calls: list[tuple[str, str]]) -> bool:
    depth = 0
    for kind, name in calls:
        if kind == "push":
            if (name.startswith("loop ") and depth != 0) or (name.startswith("batch ") and depth != 1):
                return False
            depth += 1
        else:
            depth -= 1
            if depth < 0:
                return False
    return depth == 0


def test_host_phases_are_measured_and_gpu_columns_left_empty() -> None:
    loader = DataLoader(SlowDataset(12, 0.002), batch_size=2)
    prof = TransferProfiler(mode="pageable", device="cpu", warmup=1, run="r1")
    for batch in prof.batches(loader):
        prof.to_device(batch)
        with prof.cpu_work():
            time.sleep(0.003)
    tl = prof.timeline()
    assert list(tl.batch) == list(range(6))
    assert list(tl.warmup) == [True] + [False] * 5
    assert (tl.fetch_ms >= 4.0).all()  # two items of 2 ms each
    assert (tl.cpu_work_ms >= 3.0).all()
    for col in ("h2d_ms", "compute_ms", "wait_ms", "overlap_ms", "pin_ms", "stage_ms", "dma_ms"):
        assert tl[col].isna().all(), col
    assert (tl.bytes == 2 * 3 * 4 * 4 * 4 + 2 * 8).all()
    assert set(tl.src_memory) == {"pageable"}
    # one timeline: each batch starts where the previous one ended, fetch sits inside its batch
    assert np.allclose(tl.batch_start_ms.iloc[1:].to_numpy(), tl.batch_end_ms.iloc[:-1].to_numpy(), atol=0.5)
    assert (tl.fetch_start_ms >= tl.batch_start_ms).all() and (tl.cpu_work_end_ms <= tl.batch_end_ms).all()
    assert (tl.batch_ms >= tl.fetch_ms + tl.cpu_work_ms).all()
    assert tl.batch_size.iloc[0] == 2 and tl.num_workers.iloc[0] == 0 and not tl.pin_memory.iloc[0]
    assert tl.prefetch_factor.isna().all() and tl.device.iloc[0] == "cpu" and tl.run.iloc[0] == "r1"


def test_nvtx_ranges_nest_per_batch_and_close() -> None:
    prof = TransferProfiler(mode="pageable", device="cpu")
    calls = spy_nvtx(prof)
    for batch in prof.batches([torch.ones(2)] * 3):
        prof.to_device(batch)
        with prof.cpu_work():
            pass
    assert balanced_and_nested(calls)
    names = [n for k, n in calls if k == "push"]
    assert names[:4] == ["loop pageable", "batch 0", "fetch", "cpu_work"] and "batch 2" in names


def test_a_loader_that_raises_keeps_earlier_batches_and_closes_every_range() -> None:
    loader = DataLoader(SlowDataset(10, 0.0, fail_at=5), batch_size=2)
    prof = TransferProfiler(mode="pageable", device="cpu")
    calls = spy_nvtx(prof)
    with pytest.raises(RuntimeError, match="corrupt item 5"):
        for batch in prof.batches(loader):
            prof.to_device(batch)
    assert balanced_and_nested(calls)
    assert list(prof.timeline().batch) == [0, 1]


def test_user_exception_and_break_close_ranges_and_keep_the_batch() -> None:
    prof = TransferProfiler(mode="pageable", device="cpu")
    calls = spy_nvtx(prof)
    with pytest.raises(ZeroDivisionError):
        for i, _batch in enumerate(prof.batches([torch.ones(2)] * 5)):
            with prof.cpu_work():
                if i == 2:
                    _ = 1 / 0
    assert balanced_and_nested(calls)
    assert list(prof.timeline().batch) == [0, 1, 2]
    for _ in prof.batches([torch.ones(2)] * 5, limit=2):
        pass
    assert list(prof.timeline().batch) == [0, 1, 2, 3, 4]  # numbering continues across loops


def test_phases_outside_the_loop_are_a_clear_error() -> None:
    prof = TransferProfiler(device="cpu")
    with pytest.raises(RuntimeError, match="inside `for batch in prof.batches"):
        prof.to_device(torch.ones(2))


@pytest.mark.parametrize(
    "device, message",
    [("cuda:7", "needs CUDA|does not exist"), ("tpu", "not a device"), ("meta", "profiles copies to 'cuda'")],
)
def test_bad_device_strings_name_the_value(device: str, message: str) -> None:
    with pytest.raises(ValueError, match=message):
        TransferProfiler(device=device)


def test_unknown_mode_lists_the_valid_ones() -> None:
    with pytest.raises(ValueError, match="unknown mode 'fast'.*pinned_nb"):
        TransferProfiler(mode="fast", device="cpu")  # type: ignore[arg-type]


def test_staged_mode_on_cpu_measures_the_staging_copy() -> None:
    prof = TransferProfiler(mode="staged", device="cpu")
    data = [torch.randn(256, 1024) for _ in range(3)]
    out = []
    for batch in prof.batches(data):
        out.append(prof.to_device(batch))
    tl = prof.timeline()
    assert (tl.stage_ms > 0).all() and tl.h2d_ms.isna().all()
    assert all(o is d for o, d in zip(out, data))


class Pinnable:
    """A batch type with its own pin_memory(), which the DataLoader's pin step calls."""

    def __init__(self, parts: int) -> None:
        self.parts = parts

    def pin_memory(self) -> Pinnable:
        time.sleep(0.002)
        return Pinnable(self.parts)


def test_pin_hook_times_the_outermost_pin_and_attributes_it_by_identity() -> None:
    from profiler.capture.nvtx import NvtxEmitter

    PIN_HOOK.install(NvtxEmitter(enabled=False))
    try:
        pinned = pin_module.pin_memory({"a": Pinnable(1), "b": [Pinnable(2)]})
        interval = PIN_HOOK.pop(pinned)
        assert interval is not None and interval[1] - interval[0] >= 4.0  # both parts, one interval
        assert PIN_HOOK.pop(pinned) is None
        assert PIN_HOOK.pop(pinned["a"]) is None  # inner calls are not separate pins
    finally:
        PIN_HOOK.uninstall()
    assert pin_module.pin_memory is not PIN_HOOK._wrapped


def test_pinned_memory_that_cannot_be_had_is_a_clear_error_and_the_profiler_falls_back() -> None:
    from profiler.capture.staging import PinnedStager
    from profiler.errors import PinnedMemoryError

    with pytest.raises(PinnedMemoryError, match="could not allocate .* bytes of pinned host memory.*ulimit -l"):
        PinnedStager(torch.device("cpu"), pin=True).copy(torch.ones(10))
    prof = TransferProfiler(mode="staged", device="cpu")
    prof._staged._stager = PinnedStager(torch.device("cpu"), pin=True)  # what a machine out of page-locked memory gives
    with pytest.warns(UserWarning, match="copied as in mode 'pageable'"):
        for batch in prof.batches([torch.ones(4)] * 3):
            assert torch.equal(prof.to_device(batch), torch.ones(4))
    tl = prof.timeline()
    assert len(tl) == 3 and set(tl["mode"]) == {"pageable"} and tl.stage_ms.isna().all()


def test_live_medians_for_the_progress_bar() -> None:
    prof = TransferProfiler(mode="pageable", device="cpu")
    assert prof.live_medians() == {}
    for batch in prof.batches(DataLoader(SlowDataset(24, 0.001), batch_size=2)):
        prof.to_device(batch)
    live = prof.live_medians()
    assert live["fetch"] >= 2.0 and live["batch"] >= live["fetch"]
    assert np.isnan(live["copy"])  # no copy on a CPU device


def test_a_row_torn_by_a_signal_is_dropped_not_fatal() -> None:
    prof = TransferProfiler(mode="pageable", device="cpu")
    for batch in prof.batches([torch.ones(2)] * 3):
        prof.to_device(batch)
    prof._store._host.extend([7.0] * 5)  # a signal struck inside append: part of a host row, nothing else
    tl = prof.timeline()
    assert list(tl.batch) == [0, 1, 2]


def test_batches_after_a_torn_row_stay_aligned() -> None:
    """A torn row that the loop survives (the user caught the KeyboardInterrupt) must not shift later rows."""
    prof = TransferProfiler(mode="pageable", device="cpu")
    data = [torch.ones(2), torch.ones(3)]
    for batch in prof.batches(data):
        prof.to_device(batch)
        prof._store._gpu.append(1.0)  # torn: one stray GPU value after the host row
    tl = prof.timeline()
    assert list(tl.batch) == [0, 1]
    assert list(tl.bytes) == [8, 12]
    assert tl.src_memory.tolist() == ["pageable", "pageable"]


def test_several_to_device_calls_in_one_batch_add_up() -> None:
    x, y = torch.ones(4, 8), torch.zeros(4, dtype=torch.int64)
    prof = TransferProfiler(device="cpu")
    for xb, yb in prof.batches([(x, y)] * 3):
        prof.to_device(xb)
        prof.to_device({"labels": yb, "extra": [yb[:2]]})
    prof2 = TransferProfiler(device="cpu")
    for _ in prof2.batches([(x, y)] * 2):
        pass  # to_device never called
    tl, none = prof.timeline(), prof2.timeline()
    assert list(tl.copies) == [2, 2, 2]
    assert list(tl.bytes) == [4 * 8 * 4 + 4 * 8 + 2 * 8] * 3  # both calls' tensors, not only the last
    assert set(tl.src_memory) == {"pageable"}
    assert list(none.copies) == [0, 0] and list(none.bytes) == [0, 0]
